// blob.h — the state blob: what moves a sequence from a prefill node to a decode node.
//
// A blob carries a sequence's memory (exactly the bytes of llama_state_seq_get_data), the tokens it covers,
// recurrent/SWA checkpoints, the last position's logits and the request to continue, plus the model
// identity and context configuration it can be restored into. The wire format (field table, versioning,
// checksums) is specified in docs/state-blob.md and blob_format.h.
//
// Parsing is total over untrusted bytes: blob_parse either returns a fully validated view or a Status
// (code corrupt / too_large / unsupported) whose message names the field, the offset and the values.
// Compatibility with a node is checked separately by blob_check_compatible (code incompatible).
// Thread-safety: plain values; a blob_view borrows the parsed buffer and is valid while it lives.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/base/identity.h"
#include "baton/base/status.h"

namespace baton {

// Media tokens (format 1.3): the ids that stand for the embeddings of an image in a prompt (media.h says how
// they are made). A media token is an id in [media_token_min, media_token_min + media_token_count), far from any
// vocabulary; a blob's tokens section may hold them from format 1.3 on.
inline constexpr int32_t media_token_min = INT32_MIN;
inline constexpr uint32_t media_token_count = uint32_t(1) << 30;
inline constexpr bool media_token_is(int32_t t) {
    return t >= media_token_min && t < media_token_min + int32_t(media_token_count);
}

// A partial (recurrent/SWA) state snapshot taken when the sequence covered tokens [0, n_tokens).
// pos_min/pos_max are the memory's positions for the sequence at that moment.
struct blob_checkpoint_view {
    int32_t pos_min = 0;
    int32_t pos_max = 0;
    uint32_t n_tokens = 0;
    std::span<const uint8_t> data;  // llama_state_seq_get_data_ext(..., PARTIAL_ONLY) bytes
};

// A generation in progress (format 1.4, the generation section): the state continues a generation that paused
// where it was written (live migration, docs/cluster.md). The last n_generated tokens of the token list were
// generated, the ones before them are the prompt; the logits are the last token's, so the next token is
// sampled from them. Nothing else of the generation is carried: the sampler's state (its RNG included), the
// grammar's and the held-back text are functions of the generated tokens, rebuilt from them by the receiver
// (sampling_replay).
struct blob_generation {
    uint32_t n_generated = 0;  // 0 .. n_tokens - 1 (at least one prompt token)
    uint32_t n_cached = 0;     // of the prompt's tokens, reused from memory when the generation began (its usage)
    bool operator==(const blob_generation &) const = default;
};

// Everything a writer needs; spans are borrowed for the duration of blob_write.
struct blob_parts {
    model_identity identity;
    kv_layout context;
    std::span<const int32_t> tokens;                  // token ids the state covers: the one token count
    std::span<const uint8_t> state;                   // llama_state_seq_get_data bytes
    std::vector<blob_checkpoint_view> checkpoints;    // ordered by n_tokens, each within the token range
    std::span<const float> logits;                    // empty, or exactly n_vocab f32 for the last token
    std::string_view request;                         // empty, or the JSON of the request to continue
    // 0: a full state. Else a delta (format 1.2): the receiver holds tokens[0, base_tokens) already; state holds
    // only the cells past them in its first attention part (every other part whole) and checkpoints are only
    // those past base_tokens. 1 <= base_tokens < tokens.size(); blob_write computes the base hash.
    uint32_t base_tokens = 0;
    std::optional<blob_generation> generation;  // a generation in progress (needs logits), format 1.4
};

// The hash that names a delta's base: XXH3-128 (seed 0) of the token ids as i32 LE, canonical big-endian.
using blob_base_hash = std::array<uint8_t, 16>;
blob_base_hash blob_tokens_hash(std::span<const int32_t> tokens);

// A parsed, fully validated blob. Spans point into the buffer given to blob_parse.
struct blob_view {
    uint16_t version_major = 0;
    uint16_t version_minor = 0;
    uint32_t flags = 0;
    model_identity identity;
    kv_layout context;
    std::vector<int32_t> tokens;
    std::span<const uint8_t> state;
    std::vector<blob_checkpoint_view> checkpoints;
    std::optional<std::vector<float>> logits;  // [n_vocab] f32 of the last position, when the blob has them
    std::optional<std::string> request;        // the embedded request (JSON, non-empty), when the blob has one
    uint32_t base_tokens = 0;                  // a delta's base (blob_parts::base_tokens), 0 for a full state
    blob_base_hash base_hash{};                // of tokens[0, base_tokens) (checked by blob_parse), when a delta
    std::optional<blob_generation> generation;  // a generation in progress (blob_parts::generation)
    size_t total_bytes = 0;
};

// A cluster secret that authenticates blobs (docs/state-blob.md, "Authentication"): a blob written with it
// carries an HMAC-SHA256 over its bytes (the mac section), and a reader given it refuses any blob without a
// valid MAC before it parses a single section, so a node accepts only states that a holder of the secret
// made. Several secrets may be held at once for rotation: the first signs, every one verifies.
// Thread-safety: immutable after make; share it freely.
class blob_key {
  public:
    static constexpr size_t secret_bytes_min = 16;
    static constexpr size_t n_secrets_max = 8;
    using key_id = std::array<uint8_t, 8>;

    // make takes the secrets (each at least secret_bytes_min bytes, at most n_secrets_max of them; the first
    // signs). invalid_argument otherwise.
    static Result<std::shared_ptr<const blob_key>> make(std::vector<std::string> secrets);
    // load_file reads one secret per line (blank lines and a trailing newline ignored; the first line signs).
    // The file should be readable by the node only (a Kubernetes Secret mounted as a file).
    static Result<std::shared_ptr<const blob_key>> load_file(const std::string & path);
    ~blob_key();  // wipes the secrets' bytes
    blob_key(const blob_key &) = delete;
    blob_key & operator=(const blob_key &) = delete;

    // The key id of the signing secret: the first 8 bytes of SHA-256("baton state key id" || secret).
    const key_id & signing_id() const { return ids_.front(); }
    // find returns the index of the secret whose id is id, or -1.
    int find(const key_id & id) const;
    const std::string & secret(size_t i) const { return secrets_[i]; }
    const key_id & id(size_t i) const { return ids_[i]; }
    size_t size() const { return secrets_.size(); }

  private:
    blob_key() = default;
    std::vector<std::string> secrets_;
    std::vector<key_id> ids_;
};
using blob_key_ptr = std::shared_ptr<const blob_key>;

// blob_key_id_hex renders a key id as 16 lowercase hex digits (for logs, /health and error messages).
std::string blob_key_id_hex(const blob_key::key_id & id);

struct blob_limits {
    uint64_t max_bytes = uint64_t(4) << 30;  // whole blob
    uint32_t max_tokens = 1u << 20;          // token section entries
    uint32_t max_checkpoints = 64;
    // key: when set, a blob must carry a MAC made with one of its secrets (unauthenticated otherwise), checked
    // right after the header, before any section is parsed. When null, a MAC present is checked for form only.
    blob_key_ptr key;
};

// A destination for blob bytes: memory, a file descriptor or socket, or a byte counter.
class blob_sink {
  public:
    virtual ~blob_sink() = default;
    // write appends n bytes; returns io_error on failure.
    virtual Status write(const void * data, size_t n) = 0;
    // size_hint: blob_write announces the blob's total size before its first write.
    virtual void size_hint(uint64_t /*total_bytes*/) {}
};

class blob_buffer_sink : public blob_sink {
  public:
    Status write(const void * data, size_t n) override;
    void size_hint(uint64_t total_bytes) override;  // reserves once (from buffer_pool::shared() when empty)
    std::vector<uint8_t> & bytes() { return bytes_; }
  private:
    std::vector<uint8_t> bytes_;
};

class blob_fd_sink : public blob_sink {
  public:
    explicit blob_fd_sink(int fd) : fd_(fd) {}
    Status write(const void * data, size_t n) override;
  private:
    int fd_;
};

class blob_size_sink : public blob_sink {
  public:
    Status write(const void *, size_t n) override { size_ += n; return {}; }
    uint64_t size() const { return size_; }
  private:
    uint64_t size_ = 0;
};

// blob_write validates parts (token ids < n_vocab, logits size, checkpoint order/range, a delta's base) and
// streams the blob to sink in one pass. The version is the lowest that holds what the blob carries: 1.4 with a
// generation section, 1.3 with media tokens, 1.2 for a delta, 1.1 with a mac section (made with the key's signing secret), 1.0 otherwise. invalid_argument for bad parts, io_error from the sink.
Status blob_write(const blob_parts & parts, blob_sink & sink, const blob_key * key = nullptr);

// blob_parse validates bytes completely (structure, lengths, checksums, counts, ranges). The result
// borrows bytes.
Result<blob_view> blob_parse(std::span<const uint8_t> bytes, const blob_limits & limits = {});

// blob_view_parts returns parts that write view back (spans borrow view, which must outlive them). Unknown
// optional sections are not carried over.
blob_parts blob_view_parts(const blob_view & view);

// One section frame as found by blob_walk.
struct blob_section_info {
    uint64_t offset = 0;              // of the frame within the blob (bytes)
    uint64_t payload_offset = 0;      // of the payload: offset + the frame head (bytes)
    uint32_t type = 0;
    uint32_t flags = 0;
    uint64_t length = 0;              // payload bytes as stated by the frame
    bool complete = false;            // the whole frame (head, payload, checksum) lies within the buffer
    uint64_t checksum_stored = 0;     // valid when complete
    uint64_t checksum_computed = 0;   // valid when complete
    std::string name;                 // "tokens", ... or "unknown#<type>"
};

// What a lenient walk over possibly corrupt bytes found (for `baton blob inspect`): header fields as stored
// and every frame that could be delimited, with its checksum status. Nothing here is validated.
struct blob_layout {
    size_t size = 0;                  // bytes given
    bool magic_ok = false;
    bool header_complete = false;     // at least k_header_bytes present; the fields below are valid
    uint16_t version_major = 0;
    uint16_t version_minor = 0;
    uint32_t flags = 0;
    uint32_t n_sections = 0;
    uint64_t total_bytes = 0;
    uint64_t header_checksum_stored = 0;
    uint64_t header_checksum_computed = 0;
    std::vector<blob_section_info> sections;
    std::string stopped;              // why the walk stopped before the end of the buffer, or empty
};

// blob_walk never fails: it reports what it can delimit. Use blob_parse to decide validity.
blob_layout blob_walk(std::span<const uint8_t> bytes);

// blob_check_compatible says whether a parsed blob can be restored into a node with this identity and
// context; the message names the first differing field and, for context fields, the flag to change.
Status blob_check_compatible(const blob_view & blob, const model_identity & node_identity,
                             const kv_layout & node_context);

}  // namespace baton
