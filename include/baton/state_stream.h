// state_stream.h — a state that moves while the prompt is still computing (docs/state-blob.md "Streamed
// states"): a prefill node sends the cells of each part of the prompt as soon as they are computed, the
// decode node checks and joins every part as it arrives, and the whole state goes through the one restore
// routine once the stream's end frame has been checked.
//
// A stream is a head and frames (little-endian, version 1):
//   head   u8[4] magic "BTNS", u8 version (1), u8[3] reserved 0                                  (8 bytes)
//   frame  u8 kind, u8[3] reserved 0, u64 payload length, then the payload                   (12 + length)
//     part  (kind 1): a state blob (docs/state-blob.md) — the first a whole state of the prompt's first tokens
//           without logits or request, every later one a delta (format 1.2) over exactly the tokens the parts
//           before it covered; only the last carries the logits and the embedded request
//     end   (kind 2): 24 bytes: u32 n_parts, u32 n_tokens (the whole state's), u32 n_checkpoints (how many the
//           whole state keeps: the last n of the parts' checkpoints), u32 reserved 0, u64 chain: XXH3-64 (seed 0)
//           of every part's payload in order
//     error (kind 3): 1..4096 bytes of UTF-8: why the prefill node gave up; the stream ends with it
// Nothing may follow an end or error frame. Every part is a blob with its own checksums (and MAC), and the end
// frame checks the whole: how many parts, their order (the chain) and the token count — a stream cut after
// any part, a part dropped, repeated or reordered is refused, never restored.
//
// Why parts are blobs and not raw cells: a blob already carries the model identity, the context, the tokens
// and checksums and is parsed totally; a delta (state_splice.h) is exactly "the cells past what the receiver
// holds". The receiver's join (state_stream_assembler) is the delta join done once per part.
// Thread-safety: the writer, reader and assembler are plain values, one thread at a time each.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "baton/base/status.h"
#include "baton/blob.h"
#include "baton/state_payload.h"

namespace baton {

// The media type of a streamed state (GET /v1/states/{id} of a state that is still being computed).
inline constexpr std::string_view state_stream_media_type = "application/vnd.baton.state-stream";
inline constexpr uint8_t state_stream_version = 1;
inline constexpr size_t state_stream_head_bytes = 8;
inline constexpr size_t state_stream_frame_head_bytes = 12;
inline constexpr size_t state_stream_end_bytes = 24;
inline constexpr size_t state_stream_error_max = 4096;
inline constexpr uint32_t state_stream_parts_max = 4096;

enum class stream_frame_kind : uint8_t { part = 1, end = 2, error = 3 };

struct stream_part {
    std::vector<uint8_t> blob;
};
struct stream_end {
    uint32_t n_parts = 0, n_tokens = 0, n_checkpoints = 0;
    uint64_t chain = 0;
    bool operator==(const stream_end &) const = default;
};
struct stream_error {
    std::string message;
};
using stream_frame = std::variant<stream_part, stream_end, stream_error>;

// state_stream_writer makes a stream's bytes: head() once, then part_head(n) before each part's n blob bytes
// (the blob itself is sent as it is, not copied), then end(...) or error(...).
class state_stream_writer {
  public:
    state_stream_writer();
    ~state_stream_writer();
    state_stream_writer(const state_stream_writer &) = delete;
    state_stream_writer & operator=(const state_stream_writer &) = delete;

    static std::vector<uint8_t> head();
    // part_head returns the frame head of the next part and adds the part to the chain.
    std::vector<uint8_t> part_head(std::span<const uint8_t> blob);
    std::vector<uint8_t> end(uint32_t n_tokens, uint32_t n_checkpoints) const;
    static std::vector<uint8_t> error(std::string_view message);  // cut to state_stream_error_max bytes
    uint32_t n_parts() const { return n_parts_; }

  private:
    void * chain_;  // XXH3_state_t
    uint32_t n_parts_ = 0;
};

// state_stream_reader takes a stream's bytes as they come (feed) and hands out its frames (next), checking the
// head, every frame head and the end frame's part count and chain. Total over untrusted bytes: corrupt for any
// malformed or out-of-place byte, unsupported for another version, too_large for a part over max_part_bytes
// (before anything is allocated for it).
class state_stream_reader {
  public:
    explicit state_stream_reader(uint64_t max_part_bytes);
    ~state_stream_reader();
    state_stream_reader(const state_stream_reader &) = delete;
    state_stream_reader & operator=(const state_stream_reader &) = delete;

    // feed appends bytes; corrupt when they come after the end (or error) frame.
    Status feed(std::span<const uint8_t> bytes);
    // next returns the next whole frame, or nullopt when more bytes are needed. An error frame is returned
    // as a frame (its text is the sender's); the caller decides what it means. A frame it refuses is not
    // consumed: next refuses it again and finish fails.
    Result<std::optional<stream_frame>> next();
    // finish: the input ended. corrupt unless an end or error frame was read and nothing is left over.
    Status finish() const;
    bool ended() const { return ended_; }
    uint32_t n_parts() const { return n_parts_; }

  private:
    Status take(size_t n);
    const uint64_t max_part_bytes_;
    std::vector<uint8_t> buf_;
    size_t at_ = 0;  // buf_[at_..] not yet consumed
    bool head_read_ = false, ended_ = false;
    uint32_t n_parts_ = 0;
    void * chain_;  // XXH3_state_t
};

// state_stream_assembler joins a stream's parts into one whole state blob as they arrive. Each part is parsed
// as any blob (blob_parse with the node's limits, so its checksums and MAC are checked) and must continue the
// parts before it: the first a whole state, each later one a delta whose base is exactly the tokens so far
// (token for token), of the same model identity and context; no part may follow one that carries logits or
// a request. The first attention part's cells are joined (state_join against the node's shape); checkpoints
// collect. finish checks the end frame against what was joined and writes the whole state (sealed with key
// when given), which the caller then parses and restores like any other blob.
class state_stream_assembler {
  public:
    state_stream_assembler(state_shape shape, uint32_t n_cells_max, blob_limits limits);
    Status add(std::vector<uint8_t> part);
    Result<std::vector<uint8_t>> finish(const stream_end & end, const blob_key * key);
    uint32_t n_tokens() const { return uint32_t(tokens_.size()); }

  private:
    struct checkpoint {
        int32_t pos_min = 0, pos_max = 0;
        uint32_t n_tokens = 0;
        std::vector<uint8_t> data;
    };
    state_shape shape_;
    uint32_t n_cells_max_;
    blob_limits limits_;
    uint32_t n_parts_ = 0;
    bool last_seen_ = false;  // a part with logits or a request came: it must be the last
    model_identity identity_;
    kv_layout context_;
    std::vector<int32_t> tokens_;
    std::vector<uint8_t> state_;
    std::vector<checkpoint> checkpoints_;
    std::optional<std::vector<float>> logits_;
    std::optional<std::string> request_;
};

}  // namespace baton
