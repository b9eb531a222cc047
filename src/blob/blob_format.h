// blob_format.h — the wire layout of a state blob, shared by the writer and the reader.
//
// Everything here is the on-disk/on-wire contract of docs/state-blob.md; change it only with a version bump.
// All integers are little-endian and written/read byte by byte (never a memcpy of a struct).
//
// Header (40 bytes, at +0)
// | off | width | field          | meaning                                             | since | why                                        |
// |-----|-------|----------------|-----------------------------------------------------|-------|--------------------------------------------|
// |   0 |     8 | magic          | "BATNBLOB"                                          | 1.0   | reject non-blobs before reading any length |
// |   8 |     2 | version_major  | u16 LE, 1: incompatible layout changes bump it      | 1.0   | older readers refuse what they can't read  |
// |  10 |     2 | version_minor  | u16 LE, 0: compatible additions (optional sections) | 1.0   | newer minor still parses                   |
// |  12 |     4 | flags          | u32 LE, bit0 has_logits, bit1 has_request,          | 1.0   | presence of optional content, restated     |
// |     |       |                | bit2 delta (since 1.2: the base section is present) |       |                                            |
// |     |       |                | bit3 generation (since 1.4: the generation section) |       |                                            |
// |  16 |     4 | n_sections     | u32 LE, number of section frames that follow        | 1.0   | detects lost/extra frames                  |
// |  20 |     4 | reserved       | u32 LE, 0                                           | 1.0   | keeps total_bytes 8-aligned                |
// |  24 |     8 | total_bytes    | u64 LE, the whole blob including this header        | 1.0   | truncation/trailing bytes caught up front  |
// |  32 |     8 | header_xxh3    | u64 LE, XXH3-64 (seed 0) of bytes [0, 32)           | 1.0   | the lengths above are trusted only after it|
//
// Section frame (repeated n_sections times, from +40)
// | off | width | field    | meaning                                                      | since | why                              |
// |-----|-------|----------|--------------------------------------------------------------|-------|----------------------------------|
// |   0 |     4 | type     | u32 LE, a section_type below                                 | 1.0   | sections may come in any order   |
// |   4 |     4 | flags    | u32 LE, bit0 optional: a reader that doesn't know type skips | 1.0   | forward-compatible minor additions|
// |   8 |     8 | length   | u64 LE, payload bytes                                        | 1.0   | skip/bounds-check without parsing|
// |  16 |   len | payload  | per type, see below                                          | 1.0   |                                  |
// |16+len|    8 | xxh3     | u64 LE, XXH3-64 (seed 0) of frame bytes [0, 16+len)          | 1.0   | after the payload: one-pass write|
//
// Payloads (offsets relative to the payload start)
//   identity    (1): +0 fingerprint[16] (XXH3-128 of the GGUF file, canonical big-endian), +16 u32 n_layer,
//                    +20 u32 n_embd, +24 u32 n_vocab, +28 u16 arch_len, arch bytes, u16 version_len, version bytes
//   context     (2): +0 i32 type_k, +4 i32 type_v, +8 u8 flash_attn, +9 u8 kv_unified, +10 u16 reserved 0,
//                    +12 u32 n_seq_max, +16 u32 n_ctx                                     (20 bytes)
//   tokens      (3): +0 u32 n_tokens, +4 i32[n_tokens] token ids  (the one source of truth for the count)
//   state       (4): +0 u32 n_tokens (restates tokens; must agree), +4 u32 reserved 0, +8 llama_state_seq bytes
//   checkpoints (5): +0 u32 n_checkpoints, +4 u32 reserved 0, then per checkpoint: i32 pos_min, i32 pos_max,
//                    u32 n_tokens, u32 reserved 0, u64 n_bytes, n_bytes of partial state
//   logits      (6): f32[n_vocab] (IEEE-754 bits, LE), present iff flags bit0
//   request     (7): UTF-8 JSON bytes of the request to continue (opaque here), present iff flags bit1
//   mac         (8, since 1.1, frame flagged optional, always the last frame when present):
//                    +0 u32 algorithm (1 = HMAC-SHA256), +4 u32 reserved 0, +8 key_id[8], +16 mac[32]
//                    (48 bytes). mac = HMAC-SHA256(secret, blob bytes [0, offset of this frame)): the header
//                    and every frame before it, checksums included. key_id = the first 8 bytes of
//                    SHA-256("baton state key id" || secret): names the secret without revealing it.
//   base        (9, since 1.2, required: a reader that does not know it refuses the blob; present iff flags bit2):
//                    +0 u32 n_base, +4 u32 reserved 0, +8 base_hash[16] (24 bytes). The blob is a delta: the
//                    receiver already holds the first n_base tokens (1 <= n_base < n_tokens) and the state
//                    section's first attention part holds only the cells at positions n_base..n_tokens-1 (every
//                    other part, sliding-window and recurrent, whole); checkpoints are only those past n_base.
//                    base_hash = XXH3-128 (seed 0) of tokens[0, n_base) as i32 LE, canonical big-endian: it must
//                    match the token section (the token section lists every token, base included).
//   generation (10, since 1.4, required: a reader that does not know it refuses the blob; present iff flags bit3,
//                    and only with logits): +0 u32 n_generated, +4 u32 n_cached, +8 u32 reserved 0, +12 u32 reserved 0
//                    (16 bytes). The state continues a generation that paused (live migration): the last
//                    n_generated tokens of the token section were generated (0 <= n_generated < n_tokens: at least
//                    one prompt token), the logits are the last one's, and of the prompt's n_tokens - n_generated
//                    tokens n_cached were reused from memory when the generation began (0 <= n_cached <= prompt).
#pragma once

#include <cstddef>
#include <cstdint>

namespace baton::blob_format {

inline constexpr uint8_t k_magic[8] = {'B', 'A', 'T', 'N', 'B', 'L', 'O', 'B'};
inline constexpr uint16_t k_version_major = 1;
inline constexpr uint16_t k_version_minor = 4;  // 1.1: the optional mac section; 1.2: the base section (deltas);
                                                // 1.3: media tokens in the tokens section; 1.4: the generation section

// Header field offsets and size.
inline constexpr size_t k_off_magic = 0;
inline constexpr size_t k_off_version_major = 8;
inline constexpr size_t k_off_version_minor = 10;
inline constexpr size_t k_off_flags = 12;
inline constexpr size_t k_off_n_sections = 16;
inline constexpr size_t k_off_reserved = 20;
inline constexpr size_t k_off_total_bytes = 24;
inline constexpr size_t k_off_header_xxh3 = 32;
inline constexpr size_t k_header_bytes = 40;

// Header flag bits.
inline constexpr uint32_t k_flag_has_logits = 1u << 0;
inline constexpr uint32_t k_flag_has_request = 1u << 1;
inline constexpr uint32_t k_flag_delta = 1u << 2;
inline constexpr uint32_t k_flag_generation = 1u << 3;
inline constexpr uint32_t k_flags_known = k_flag_has_logits | k_flag_has_request | k_flag_delta | k_flag_generation;

// Section frame layout.
inline constexpr size_t k_frame_head_bytes = 16;  // type, flags, length
inline constexpr size_t k_frame_tail_bytes = 8;   // xxh3
inline constexpr size_t k_frame_bytes = k_frame_head_bytes + k_frame_tail_bytes;
inline constexpr uint32_t k_section_flag_optional = 1u << 0;
inline constexpr uint32_t k_section_flags_known = k_section_flag_optional;

enum section_type : uint32_t {
    section_type_identity = 1,
    section_type_context = 2,
    section_type_tokens = 3,
    section_type_state = 4,
    section_type_checkpoints = 5,
    section_type_logits = 6,
    section_type_request = 7,
    section_type_mac = 8,
    section_type_base = 9,
    section_type_generation = 10,
};
inline constexpr uint32_t k_section_type_max_known = section_type_generation;

// Fixed payload sizes and bounds.
inline constexpr size_t k_identity_fixed_bytes = 16 + 4 + 4 + 4 + 2 + 2;  // without the two strings
inline constexpr size_t k_identity_string_max = 64;                       // arch, llama_version
inline constexpr size_t k_context_bytes = 20;
inline constexpr size_t k_tokens_head_bytes = 4;
inline constexpr size_t k_state_head_bytes = 8;
inline constexpr size_t k_checkpoints_head_bytes = 8;
inline constexpr size_t k_checkpoint_head_bytes = 24;
inline constexpr uint32_t k_sections_max = 64;  // frames per blob, known + unknown
inline constexpr uint32_t k_mac_algorithm_hmac_sha256 = 1;
inline constexpr size_t k_mac_key_id_bytes = 8;
inline constexpr size_t k_mac_bytes = 32;
inline constexpr size_t k_mac_payload_bytes = 4 + 4 + k_mac_key_id_bytes + k_mac_bytes;  // 48
inline constexpr size_t k_base_hash_bytes = 16;
inline constexpr size_t k_base_payload_bytes = 4 + 4 + k_base_hash_bytes;  // 24
inline constexpr size_t k_generation_payload_bytes = 16;

// section_type_name: "identity", ..., or nullptr for an unknown type.
inline const char * section_type_name(uint32_t type) {
    switch (type) {
        case section_type_identity: return "identity";
        case section_type_context: return "context";
        case section_type_tokens: return "tokens";
        case section_type_state: return "state";
        case section_type_checkpoints: return "checkpoints";
        case section_type_logits: return "logits";
        case section_type_request: return "request";
        case section_type_mac: return "mac";
        case section_type_base: return "base";
        case section_type_generation: return "generation";
        default: return nullptr;
    }
}

}  // namespace baton::blob_format
