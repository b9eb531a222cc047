// blob_writer.cpp — blob_write: validate the parts, then stream the blob to a sink in one pass.
//
// All sizes are computed from the parts before the first byte is written (the header states total_bytes and
// n_sections), then every section is framed and hashed as it streams: the frame checksum follows the
// payload, so nothing is buffered except small fixed fields. Large payloads (state, checkpoint data, and on
// little-endian hosts tokens and logits) go to the sink straight from the caller's memory.
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <memory>
#include <optional>

#include "baton/base/byte_cursor.h"
#include "baton/blob.h"
#include "blob_format.h"
#include "blob_mac.h"
#include "blob_rules.h"

namespace baton {
namespace {

namespace bf = blob_format;

Status rule(std::string_view section, const std::string & violation) {
    return violation.empty() ? Status() : invalid_input(std::string(section) + ": " + violation);
}

// check_parts applies blob_rules (the rules blob_parse enforces on content), so a written blob always parses.
Status check_parts(const blob_parts & p) {
    BATON_RETURN_IF_ERROR(rule("identity", blob_rules::identity_string("arch length", "arch", p.identity.arch)));
    BATON_RETURN_IF_ERROR(rule(
        "identity", blob_rules::identity_string("llama_version length", "llama_version", p.identity.llama_version)));
    const uint32_t n_vocab = p.identity.n_vocab;
    BATON_RETURN_IF_ERROR(rule("identity", blob_rules::n_vocab(n_vocab)));
    BATON_RETURN_IF_ERROR(rule("context", blob_rules::kv_type("type_k", p.context.type_k)));
    BATON_RETURN_IF_ERROR(rule("context", blob_rules::kv_type("type_v", p.context.type_v)));
    BATON_RETURN_IF_ERROR(rule("context", blob_rules::n_seq_max(p.context.n_seq_max)));
    if (p.tokens.size() > UINT32_MAX)
        return invalid_input("tokens: " + std::to_string(p.tokens.size()) + " tokens > 2^32-1");
    const uint32_t n_tokens = uint32_t(p.tokens.size());
    BATON_RETURN_IF_ERROR(rule("tokens", blob_rules::n_tokens(n_tokens, p.context.n_ctx)));
    for (uint32_t i = 0; i < n_tokens; ++i)
        BATON_RETURN_IF_ERROR(rule("tokens", blob_rules::token(i, p.tokens[i], n_vocab, bf::k_version_minor)));
    if (p.state.empty()) return invalid_input("state: empty");
    if (p.checkpoints.size() > UINT32_MAX) return invalid_input("checkpoints: too many");
    uint32_t prev = 0;
    for (size_t i = 0; i < p.checkpoints.size(); ++i) {
        const auto & c = p.checkpoints[i];
        const std::string at = "checkpoints[" + std::to_string(i) + "]";
        BATON_RETURN_IF_ERROR(rule(at, blob_rules::checkpoint_n_tokens(c.n_tokens, prev, n_tokens)));
        prev = c.n_tokens;
        BATON_RETURN_IF_ERROR(rule(at, blob_rules::checkpoint_positions(c.pos_min, c.pos_max, c.n_tokens)));
        if (c.data.empty()) return invalid_input(at + ": data is empty");
    }
    if (p.base_tokens != 0) {
        BATON_RETURN_IF_ERROR(rule("base", blob_rules::base_tokens(p.base_tokens, n_tokens)));
        for (size_t i = 0; i < p.checkpoints.size(); ++i)
            BATON_RETURN_IF_ERROR(rule("checkpoints[" + std::to_string(i) + "]",
                                       blob_rules::delta_checkpoint(p.checkpoints[i].n_tokens, p.base_tokens)));
    }
    if (!p.logits.empty() && p.logits.size() != n_vocab)
        return invalid_input("logits: " + std::to_string(p.logits.size()) + " values, expected n_vocab " +
                             std::to_string(n_vocab));
    if (p.generation)
        BATON_RETURN_IF_ERROR(
            rule("generation", blob_rules::generation(p.generation->n_generated, p.generation->n_cached, n_tokens,
                                                      !p.logits.empty())));
    return {};
}

// section_out frames one section: head, payload pieces (hashed as they pass), checksum.
class section_out {
  public:
    explicit section_out(blob_sink & sink) : sink_(sink), st_(XXH3_createState(), XXH3_freeState) {}

    bool ok() const { return st_ != nullptr; }

    Status begin(uint32_t type, uint64_t length, uint32_t flags = 0) {
        XXH3_64bits_reset(st_.get());
        uint8_t head[bf::k_frame_head_bytes];
        le_store_u32(head, type);
        le_store_u32(head + 4, flags);
        le_store_u64(head + 8, length);
        return put(head, sizeof head);
    }
    Status put(const void * data, size_t n) {
        if (n == 0) return {};
        XXH3_64bits_update(st_.get(), data, n);
        return sink_.write(data, n);
    }
    Status put_u32(uint32_t v) {
        uint8_t b[4];
        le_store_u32(b, v);
        return put(b, 4);
    }
    // put_words writes 32-bit words little-endian: straight from memory on LE hosts, via a bounce buffer
    // otherwise (so the sink sees large writes either way).
    template <typename T>
    Status put_words(std::span<const T> words) {
        static_assert(sizeof(T) == 4);
        if constexpr (std::endian::native == std::endian::little) {
            return put(words.data(), words.size_bytes());
        } else {
            std::array<uint8_t, 4096> buf;
            size_t i = 0;
            while (i < words.size()) {
                size_t k = 0;
                for (; k < buf.size() / 4 && i < words.size(); ++k, ++i)
                    le_store_u32(buf.data() + 4 * k, std::bit_cast<uint32_t>(words[i]));
                BATON_RETURN_IF_ERROR(put(buf.data(), 4 * k));
            }
            return {};
        }
    }
    Status end() {
        uint8_t tail[bf::k_frame_tail_bytes];
        le_store_u64(tail, XXH3_64bits_digest(st_.get()));
        return sink_.write(tail, sizeof tail);
    }

  private:
    blob_sink & sink_;
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> st_;
};

std::vector<uint8_t> identity_payload(const model_identity & id) {
    std::vector<uint8_t> b(bf::k_identity_fixed_bytes + id.arch.size() + id.llama_version.size());
    uint8_t * p = b.data();
    std::memcpy(p, id.fingerprint.data(), 16);
    le_store_u32(p + 16, id.n_layer);
    le_store_u32(p + 20, id.n_embd);
    le_store_u32(p + 24, id.n_vocab);
    p += 28;
    le_store_u16(p, uint16_t(id.arch.size()));
    std::memcpy(p + 2, id.arch.data(), id.arch.size());
    p += 2 + id.arch.size();
    le_store_u16(p, uint16_t(id.llama_version.size()));
    std::memcpy(p + 2, id.llama_version.data(), id.llama_version.size());
    return b;
}

std::array<uint8_t, bf::k_context_bytes> context_payload(const kv_layout & c) {
    std::array<uint8_t, bf::k_context_bytes> b{};
    le_store_u32(b.data(), uint32_t(c.type_k));
    le_store_u32(b.data() + 4, uint32_t(c.type_v));
    b[8] = c.flash_attn ? 1 : 0;
    b[9] = c.kv_unified ? 1 : 0;
    le_store_u32(b.data() + 12, c.n_seq_max);
    le_store_u32(b.data() + 16, c.n_ctx);
    return b;
}

}  // namespace

blob_base_hash blob_tokens_hash(std::span<const int32_t> tokens) {
    XXH128_hash_t h;
    if constexpr (std::endian::native == std::endian::little) {
        h = XXH3_128bits(tokens.data(), tokens.size_bytes());
    } else {
        std::vector<uint8_t> le(tokens.size_bytes());
        for (size_t i = 0; i < tokens.size(); ++i) le_store_u32(le.data() + 4 * i, uint32_t(tokens[i]));
        h = XXH3_128bits(le.data(), le.size());
    }
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    blob_base_hash out;
    std::memcpy(out.data(), c.digest, out.size());
    return out;
}

Status blob_write(const blob_parts & p, blob_sink & final_sink, const blob_key * key) {
    BATON_RETURN_IF_ERROR(check_parts(p));
    // With a key every byte before the mac section also passes through the MAC on its way to final_sink.
    std::unique_ptr<blob_mac_stream> mac;
    if (key) {
        auto m = blob_mac_stream::open(key->secret(0));
        if (!m.ok()) return m.status();
        mac = std::move(m.value());
    }
    std::optional<blob_mac_sink> mac_sink;
    if (mac) mac_sink.emplace(final_sink, *mac);
    blob_sink & sink = mac_sink ? static_cast<blob_sink &>(*mac_sink) : final_sink;
    section_out out(sink);
    if (!out.ok()) return Status(status_code::internal, "blob_write: cannot allocate a hash state");

    const std::vector<uint8_t> identity = identity_payload(p.identity);
    const auto context = context_payload(p.context);
    const uint32_t n_tokens = uint32_t(p.tokens.size());
    const uint64_t tokens_len = bf::k_tokens_head_bytes + uint64_t(4) * n_tokens;
    const uint64_t state_len = bf::k_state_head_bytes + uint64_t(p.state.size());
    uint64_t checkpoints_len = bf::k_checkpoints_head_bytes;
    for (const auto & c : p.checkpoints) checkpoints_len += bf::k_checkpoint_head_bytes + c.data.size();
    const bool has_logits = !p.logits.empty();
    const bool has_request = !p.request.empty();
    const uint64_t logits_len = uint64_t(4) * p.logits.size();

    uint32_t n_sections = 5;
    uint64_t total = bf::k_header_bytes + 5 * bf::k_frame_bytes + identity.size() + context.size() + tokens_len +
                     state_len + checkpoints_len;
    if (has_logits) ++n_sections, total += bf::k_frame_bytes + logits_len;
    if (has_request) ++n_sections, total += bf::k_frame_bytes + p.request.size();
    const bool delta = p.base_tokens != 0;
    if (delta) ++n_sections, total += bf::k_frame_bytes + bf::k_base_payload_bytes;
    const bool generation = p.generation.has_value();
    if (generation) ++n_sections, total += bf::k_frame_bytes + bf::k_generation_payload_bytes;
    if (mac) ++n_sections, total += bf::k_frame_bytes + bf::k_mac_payload_bytes;

    uint8_t header[bf::k_header_bytes] = {};
    std::memcpy(header + bf::k_off_magic, bf::k_magic, sizeof bf::k_magic);
    le_store_u16(header + bf::k_off_version_major, bf::k_version_major);
    // The lowest version that holds what the blob carries: a full unauthenticated blob stays 1.0 byte for byte,
    // so readers of an older minor go on reading every blob that does not need the newer one.
    const bool media = std::any_of(p.tokens.begin(), p.tokens.end(), media_token_is);
    le_store_u16(header + bf::k_off_version_minor, uint16_t(generation ? 4 : media ? 3 : delta ? 2 : mac ? 1 : 0));
    le_store_u32(header + bf::k_off_flags,
                 (has_logits ? bf::k_flag_has_logits : 0) | (has_request ? bf::k_flag_has_request : 0) |
                     (delta ? bf::k_flag_delta : 0) | (generation ? bf::k_flag_generation : 0));
    le_store_u32(header + bf::k_off_n_sections, n_sections);
    le_store_u64(header + bf::k_off_total_bytes, total);
    le_store_u64(header + bf::k_off_header_xxh3, XXH3_64bits(header, bf::k_off_header_xxh3));
    sink.size_hint(total);
    BATON_RETURN_IF_ERROR(sink.write(header, sizeof header));

    BATON_RETURN_IF_ERROR(out.begin(bf::section_type_identity, identity.size()));
    BATON_RETURN_IF_ERROR(out.put(identity.data(), identity.size()));
    BATON_RETURN_IF_ERROR(out.end());

    BATON_RETURN_IF_ERROR(out.begin(bf::section_type_context, context.size()));
    BATON_RETURN_IF_ERROR(out.put(context.data(), context.size()));
    BATON_RETURN_IF_ERROR(out.end());

    if (delta) {
        uint8_t base[bf::k_base_payload_bytes] = {};
        le_store_u32(base, p.base_tokens);
        const blob_base_hash h = blob_tokens_hash(p.tokens.first(p.base_tokens));
        std::memcpy(base + 8, h.data(), h.size());
        BATON_RETURN_IF_ERROR(out.begin(bf::section_type_base, sizeof base));
        BATON_RETURN_IF_ERROR(out.put(base, sizeof base));
        BATON_RETURN_IF_ERROR(out.end());
    }

    if (generation) {
        uint8_t g[bf::k_generation_payload_bytes] = {};
        le_store_u32(g, p.generation->n_generated);
        le_store_u32(g + 4, p.generation->n_cached);
        BATON_RETURN_IF_ERROR(out.begin(bf::section_type_generation, sizeof g));
        BATON_RETURN_IF_ERROR(out.put(g, sizeof g));
        BATON_RETURN_IF_ERROR(out.end());
    }

    BATON_RETURN_IF_ERROR(out.begin(bf::section_type_tokens, tokens_len));
    BATON_RETURN_IF_ERROR(out.put_u32(n_tokens));
    BATON_RETURN_IF_ERROR(out.put_words(p.tokens));
    BATON_RETURN_IF_ERROR(out.end());

    BATON_RETURN_IF_ERROR(out.begin(bf::section_type_state, state_len));
    BATON_RETURN_IF_ERROR(out.put_u32(n_tokens));
    BATON_RETURN_IF_ERROR(out.put_u32(0));
    BATON_RETURN_IF_ERROR(out.put(p.state.data(), p.state.size()));
    BATON_RETURN_IF_ERROR(out.end());

    BATON_RETURN_IF_ERROR(out.begin(bf::section_type_checkpoints, checkpoints_len));
    BATON_RETURN_IF_ERROR(out.put_u32(uint32_t(p.checkpoints.size())));
    BATON_RETURN_IF_ERROR(out.put_u32(0));
    for (const auto & c : p.checkpoints) {
        uint8_t head[bf::k_checkpoint_head_bytes] = {};
        le_store_u32(head, uint32_t(c.pos_min));
        le_store_u32(head + 4, uint32_t(c.pos_max));
        le_store_u32(head + 8, c.n_tokens);
        le_store_u64(head + 16, c.data.size());
        BATON_RETURN_IF_ERROR(out.put(head, sizeof head));
        BATON_RETURN_IF_ERROR(out.put(c.data.data(), c.data.size()));
    }
    BATON_RETURN_IF_ERROR(out.end());

    if (has_logits) {
        BATON_RETURN_IF_ERROR(out.begin(bf::section_type_logits, logits_len));
        BATON_RETURN_IF_ERROR(out.put_words(p.logits));
        BATON_RETURN_IF_ERROR(out.end());
    }
    if (has_request) {
        BATON_RETURN_IF_ERROR(out.begin(bf::section_type_request, p.request.size()));
        BATON_RETURN_IF_ERROR(out.put(p.request.data(), p.request.size()));
        BATON_RETURN_IF_ERROR(out.end());
    }
    if (mac) {
        // The last frame, outside what it authenticates: straight to final_sink.
        uint8_t payload[bf::k_mac_payload_bytes] = {};
        le_store_u32(payload, bf::k_mac_algorithm_hmac_sha256);
        std::memcpy(payload + 8, key->signing_id().data(), bf::k_mac_key_id_bytes);
        const auto d = mac->final();
        std::memcpy(payload + 16, d.data(), d.size());
        section_out tail(final_sink);
        if (!tail.ok()) return Status(status_code::internal, "blob_write: cannot allocate a hash state");
        BATON_RETURN_IF_ERROR(tail.begin(bf::section_type_mac, sizeof payload, bf::k_section_flag_optional));
        BATON_RETURN_IF_ERROR(tail.put(payload, sizeof payload));
        BATON_RETURN_IF_ERROR(tail.end());
    }
    return {};
}

blob_parts blob_view_parts(const blob_view & v) {
    blob_parts p;
    p.identity = v.identity;
    p.context = v.context;
    p.tokens = v.tokens;
    p.state = v.state;
    p.checkpoints = v.checkpoints;
    if (v.logits) p.logits = *v.logits;
    if (v.request) p.request = *v.request;
    p.base_tokens = v.base_tokens;
    p.generation = v.generation;
    return p;
}

}  // namespace baton
