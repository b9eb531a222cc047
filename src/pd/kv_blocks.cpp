// kv_blocks.cpp — the chain key and the chained block hashes (see kv_blocks.h, docs/kv-events.md).
#include "baton/pd/kv_blocks.h"

#include <bit>
#include <string>

#include <xxhash.h>

namespace baton {

namespace {

void kv_blocks_put_u32le(std::string & out, uint32_t v) {
    for (int i = 0; i < 4; i++) out.push_back(char((v >> (8 * i)) & 0xff));
}

}  // namespace

uint64_t kv_block_seed(std::string_view model_fingerprint, std::string_view kv_layout, uint32_t block_tokens) {
    static constexpr std::string_view k_tag{"baton-kv-blocks/1\0", 18};
    std::string buf;
    buf.reserve(k_tag.size() + 12 + model_fingerprint.size() + kv_layout.size());
    buf.append(k_tag);
    kv_blocks_put_u32le(buf, uint32_t(model_fingerprint.size()));
    buf.append(model_fingerprint);
    kv_blocks_put_u32le(buf, uint32_t(kv_layout.size()));
    buf.append(kv_layout);
    kv_blocks_put_u32le(buf, block_tokens);
    return XXH3_64bits(buf.data(), buf.size());
}

std::vector<uint64_t> kv_block_hashes(std::span<const int32_t> tokens, uint64_t seed, uint32_t block_tokens) {
    std::vector<uint64_t> out;
    if (block_tokens == 0) return out;
    const size_t n_blocks = tokens.size() / block_tokens;
    out.reserve(n_blocks);
    std::string le;  // the block's tokens as little-endian bytes (used only on a big-endian host)
    uint64_t h = seed;
    for (size_t b = 0; b < n_blocks; b++) {
        const auto block = tokens.subspan(b * block_tokens, block_tokens);
        if constexpr (std::endian::native == std::endian::little) {
            h = XXH3_64bits_withSeed(block.data(), block.size_bytes(), h);
        } else {
            le.clear();
            for (int32_t t : block) kv_blocks_put_u32le(le, uint32_t(t));
            h = XXH3_64bits_withSeed(le.data(), le.size(), h);
        }
        out.push_back(h);
    }
    return out;
}

}  // namespace baton
