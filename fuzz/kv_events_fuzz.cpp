// kv_events_fuzz.cpp — libFuzzer target for the KV-event decoders (src/pd/kv_events.cpp): arbitrary bytes
// as a batch (kv_event_batch_decode) and as a snapshot (kv_snapshot_decode).
//
// Properties besides "no crash, no sanitizer report, no exception": whatever decodes encodes to text that
// decodes to an equal value, and that text is a fixed point of encode (the encoding is canonical). Limits
// are lowered so the too_large refusals are reached by small inputs too.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "baton/pd/kv_events.h"

using namespace baton;

namespace {

template <class Decode, class Encode>
void kv_events_fuzz_round_trip(std::string_view in, const kv_event_limits & limits, Decode decode, Encode encode,
                               const char * what) {
    auto r = decode(in, limits);
    if (!r.ok()) return;
    const std::string text = encode(r.value());
    auto again = decode(text, kv_event_limits{});
    if (!again.ok() || !(again.value() == r.value())) {
        std::fprintf(stderr, "kv_events_fuzz: a decoded %s does not survive encode -> decode: %s\n", what,
                     again.ok() ? "a different value" : again.status().to_string().c_str());
        std::abort();
    }
    if (encode(again.value()) != text) {
        std::fprintf(stderr, "kv_events_fuzz: a %s's encoding is not canonical\n", what);
        std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string_view in(reinterpret_cast<const char *>(data), size);
    kv_event_limits limits;
    limits.max_events = 16;
    limits.max_event_blocks = 64;
    limits.max_snapshot_blocks = 128;
    limits.max_id_bytes = 32;
    kv_events_fuzz_round_trip(
        in, limits, [](std::string_view t, const kv_event_limits & l) { return kv_event_batch_decode(t, l); },
        [](const kv_event_batch & b) { return kv_event_batch_encode(b); }, "batch");
    kv_events_fuzz_round_trip(
        in, limits, [](std::string_view t, const kv_event_limits & l) { return kv_snapshot_decode(t, l); },
        [](const kv_snapshot & s) { return kv_snapshot_encode(s); }, "snapshot");
    return 0;
}
