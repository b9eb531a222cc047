// cluster_fuzz.cpp — libFuzzer target for what a router reads from etcd: node records (node_record_parse)
// and etcd's base64 (base64_decode).
//
// The first byte selects the parser. Properties besides "no crash, no sanitizer report": a record that
// parses renders (node_record_json) to JSON that parses back to the same record, and its group is a
// function of it; a string base64 decodes re-encodes to exactly that string.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "baton/base/base64.h"
#include "baton/cluster/node_record.h"

using namespace baton;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size == 0) return 0;
    const std::string_view in(reinterpret_cast<const char *>(data) + 1, size - 1);
    if ((data[0] & 1) == 0) {
        auto r = node_record_parse(in);
        if (!r.ok()) return 0;
        auto again = node_record_parse(node_record_json(r.value()));
        if (!again.ok() || !(again.value() == r.value())) {
            std::fprintf(stderr, "cluster_fuzz: a parsed record does not survive json -> parse\n");
            std::abort();
        }
        if (node_record_group(again.value()) != node_record_group(r.value())) std::abort();
        (void)node_record_serves(r.value(), r->model_alias);
    } else {
        auto d = base64_decode(in);
        if (d && base64_encode(*d) != in) {
            std::fprintf(stderr, "cluster_fuzz: base64 decode -> encode changed the text\n");
            std::abort();
        }
    }
    return 0;
}
