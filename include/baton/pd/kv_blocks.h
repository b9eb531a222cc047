// kv_blocks.h — chained block hashes: how a node names what its KV cache holds, and how a router names a
// prompt's prefixes, with the same function (docs/kv-events.md, "Block hashes").
//
// A token sequence is cut into fixed blocks of block_tokens tokens; only full blocks are hashed (a partial
// last block is not reusable as a unit). Each block's hash is XXH3-64 of its tokens, seeded with the hash of
// the block before it, so a hash names its whole prefix: two sequences share hash i exactly when they share
// their first (i+1) * block_tokens tokens (up to XXH3 collisions). The first block is seeded with the chain
// key (kv_block_seed) of the model, the KV layout and the block size, so states that could not be reused
// across those never share a hash.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace baton {

// kv_block_seed returns the chain key of a model (its fingerprint, e.g. identity_fingerprint_hex), a KV
// layout (a stable name such as "f16/unified") and a block size in tokens: XXH3-64 (seed 0) of
//   "baton-kv-blocks/1" 0x00, u32le(len(fp)) fp, u32le(len(layout)) layout, u32le(block_tokens)
// (length-prefixed, so no two different triples encode to the same bytes).
uint64_t kv_block_seed(std::string_view model_fingerprint, std::string_view kv_layout, uint32_t block_tokens);

// kv_block_hashes returns one hash per full block of tokens (tokens.size() / block_tokens of them):
//   h[0] = XXH3_64bits_withSeed(block 0's tokens as little-endian int32, seed)
//   h[i] = XXH3_64bits_withSeed(block i's tokens as little-endian int32, h[i-1])
// block_tokens == 0 returns no hashes. REQUIRES (not checked): seed is kv_block_seed(..., block_tokens) of
// the same block_tokens, or hashes of different block sizes may be compared by mistake.
std::vector<uint64_t> kv_block_hashes(std::span<const int32_t> tokens, uint64_t seed, uint32_t block_tokens);

}  // namespace baton
