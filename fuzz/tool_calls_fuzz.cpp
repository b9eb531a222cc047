// tool_calls_fuzz.cpp — libFuzzer target for the tool-call parser and its streaming form
// (src/openai/tool_calls.cpp).
//
// Input layout: byte 0 selects the format (bits 0..1: generic, hermes, llama3, mistral) and the split
// (bits 2..7: a seed for the piece lengths, see below); the rest is the model's output.
//
// For any input: tool_calls_parse must return (never crash, hang or touch memory it does not own, which
// ASan/UBSan check), every call must have a non-empty name and arguments that parse as a JSON object, and
// the streaming invariant must hold for a split derived from the input: the output is cut into pieces of
// 0..15 bytes whose lengths come from a small generator seeded by byte 0 and the output's own bytes, and
//   the concatenated content of all pushes plus finish() == tool_calls_parse(output).content, and
//   the deltas grouped by index (name and id from the first, arguments concatenated) == its calls.
// A violation aborts (a finding).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/openai/tool_calls.h"

namespace {

using namespace baton;

[[noreturn]] void fail(const char * what, std::string_view a = {}, std::string_view b = {}) {
    std::fprintf(stderr, "tool_calls_fuzz: %s\n", what);
    if (!a.empty()) std::fprintf(stderr, "  whole:    %.*s\n", int(a.size()), a.data());
    if (!b.empty()) std::fprintf(stderr, "  streamed: %.*s\n", int(b.size()), b.data());
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size == 0) return 0;
    const auto f = static_cast<tool_call_format>(data[0] & 3);
    const std::string_view out(reinterpret_cast<const char *>(data + 1), size - 1);

    const tool_output whole = tool_calls_parse(f, out);
    for (const auto & c : whole.calls) {
        if (c.name.empty()) fail("a call without a name", out);
        if (!nlohmann::json::parse(c.arguments, nullptr, false).is_object())
            fail("arguments not an object", c.arguments);
    }

    tool_call_stream st(f);
    std::string content;
    std::vector<tool_call> calls;
    const auto take = [&](const tool_stream_piece & p) {
        content += p.content;
        for (const auto & d : p.calls) {
            if (d.index == calls.size()) {
                calls.push_back({d.id, d.name, d.arguments});
            } else if (d.index + 1 == calls.size() && d.name.empty() && d.id.empty()) {
                calls.back().arguments += d.arguments;
            } else {
                fail("delta out of order", out);
            }
        }
    };
    uint32_t x = (data[0] >> 2) * 2654435761u + 1;
    size_t at = 0;
    while (at < out.size()) {
        x ^= static_cast<uint8_t>(out[at]);
        x = x * 1103515245u + 12345u;
        const size_t len = std::min<size_t>(out.size() - at, (x >> 16) & 15);
        take(st.push(out.substr(at, len)));
        at += len;
    }
    take(st.finish());

    if (content != whole.content) fail("streamed content differs", whole.content, content);
    if (calls != whole.calls) fail("streamed calls differ", out);
    return 0;
}
