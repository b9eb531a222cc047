// tier_manifest_fuzz.cpp — libFuzzer target for the tier manifest parser (src/tier/tier_manifest.cpp).
//
// For any input: tier_manifest_parse returns (never crashes, hangs or reads outside the input, which
// ASan/UBSan check), and a refusal carries a message. For an input that parses: its parts are 1..512 MiB and
// add up to total_bytes within the limit, and writing it back gives the input byte for byte (the format has
// one encoding), which parses to an equal manifest. Each input is also run with its trailer checksum
// recomputed ("resealed"), so mutations reach the field checks behind the checksum. The first input byte
// picks the entry_bytes_max limit, so the limit's refusal is reached by small inputs too.
// BATON_FUZZ_WRITE_SEEDS=DIR writes valid manifests to DIR and exits (the committed seeds in
// fuzz/seeds/tier_manifest/ were written this way).
#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "baton/base/byte_cursor.h"
#include "fuzz_seed_writer.h"
#include "tier_format.h"
#include "tier_manifest.h"

namespace {

using namespace baton;

[[noreturn]] void fail(const char * what, const Status & st = {}) {
    std::fprintf(stderr, "tier_manifest_fuzz: %s %s\n", what, st.to_string().c_str());
    std::abort();
}

void check(std::span<const uint8_t> bytes, uint64_t entry_bytes_max) {
    auto r = tier_manifest_parse(bytes, entry_bytes_max);
    if (!r.ok()) {
        if (r.status().message().empty()) fail("a refusal without a message");
        return;
    }
    const tier_manifest & m = r.value();
    if (m.total_bytes > entry_bytes_max) fail("total_bytes over the limit accepted");
    uint64_t sum = 0;
    for (const tier_manifest_part & p : m.parts) {
        if (p.size == 0 || p.size > tier_format::k_part_bytes_max) fail("a part size out of range accepted");
        sum += p.size;
    }
    if (sum != m.total_bytes) fail("parts that do not add up to total_bytes accepted");
    const std::vector<uint8_t> again = tier_manifest_write(m);
    if (again.size() != bytes.size() || std::memcmp(again.data(), bytes.data(), bytes.size()) != 0)
        fail("a parsed manifest does not write back byte for byte");
    auto r2 = tier_manifest_parse(again, entry_bytes_max);
    if (!r2.ok()) fail("a written manifest does not parse:", r2.status());
    if (!(r2.value() == m)) fail("a written manifest parses to another value");
}

void write_seeds(const std::string & dir) {
    const auto write = [&](const std::string & name, const std::vector<uint8_t> & bytes) {
        std::ofstream f(dir + "/" + name, std::ios::binary);
        f.put(char(0xff));  // the limit selector: the largest limit
        f.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
    };
    std::vector<uint8_t> entry(10000);
    for (size_t i = 0; i < entry.size(); ++i) entry[i] = uint8_t(i * 31 + 3);
    write("empty.bin", tier_manifest_write(tier_manifest_describe({}, 4096)));
    write("one-part.bin", tier_manifest_write(tier_manifest_describe(entry, 1 << 20)));
    write("three-parts.bin", tier_manifest_write(tier_manifest_describe(entry, 4096)));
    write("many-parts.bin", tier_manifest_write(tier_manifest_describe(entry, 500)));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) { return baton::fuzz_seed_writer_init(write_seeds); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size < 1) return 0;
    // Limits from 0 to 2^63 in powers of two (and none: the largest).
    const uint64_t entry_bytes_max = data[0] == 0xff ? UINT64_MAX : (uint64_t(1) << (data[0] % 64)) - 1;
    const std::span<const uint8_t> bytes(data + 1, size - 1);
    check(bytes, entry_bytes_max);
    if (bytes.size() >= tier_format::k_trailer_bytes) {
        std::vector<uint8_t> resealed(bytes.begin(), bytes.end());
        const size_t covered = resealed.size() - tier_format::k_trailer_bytes;
        le_store_u64(resealed.data() + covered, XXH3_64bits(resealed.data(), covered));
        check(resealed, entry_bytes_max);
    }
    return 0;
}
