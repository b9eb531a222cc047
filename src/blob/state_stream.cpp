// state_stream.cpp — streamed states: frames, their reader and the parts' join (include/baton/state_stream.h).
#include "baton/state_stream.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "baton/state_splice.h"

namespace baton {

namespace {

constexpr uint8_t k_stream_magic[4] = {'B', 'T', 'N', 'S'};

void put_u32(uint8_t * p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
void put_u64(uint8_t * p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint32_t get_u32(const uint8_t * p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(p[i]) << (8 * i);
    return v;
}
uint64_t get_u64(const uint8_t * p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
    return v;
}

std::vector<uint8_t> frame_head(stream_frame_kind kind, uint64_t length) {
    std::vector<uint8_t> h(state_stream_frame_head_bytes, 0);
    h[0] = uint8_t(kind);
    put_u64(h.data() + 4, length);
    return h;
}

XXH3_state_t * chain_new() {
    XXH3_state_t * s = XXH3_createState();
    if (s) XXH3_64bits_reset(s);
    return s;
}

Status stream_corrupt(const std::string & why) { return Status(status_code::corrupt, "state stream: " + why); }

}  // namespace

// ---- writer ----

state_stream_writer::state_stream_writer() : chain_(chain_new()) {}
state_stream_writer::~state_stream_writer() { XXH3_freeState(static_cast<XXH3_state_t *>(chain_)); }

std::vector<uint8_t> state_stream_writer::head() {
    std::vector<uint8_t> h(state_stream_head_bytes, 0);
    std::memcpy(h.data(), k_stream_magic, 4);
    h[4] = state_stream_version;
    return h;
}

std::vector<uint8_t> state_stream_writer::part_head(std::span<const uint8_t> blob) {
    XXH3_64bits_update(static_cast<XXH3_state_t *>(chain_), blob.data(), blob.size());
    ++n_parts_;
    return frame_head(stream_frame_kind::part, blob.size());
}

std::vector<uint8_t> state_stream_writer::end(uint32_t n_tokens, uint32_t n_checkpoints) const {
    std::vector<uint8_t> f = frame_head(stream_frame_kind::end, state_stream_end_bytes);
    f.resize(state_stream_frame_head_bytes + state_stream_end_bytes, 0);
    uint8_t * p = f.data() + state_stream_frame_head_bytes;
    put_u32(p, n_parts_);
    put_u32(p + 4, n_tokens);
    put_u32(p + 8, n_checkpoints);
    put_u64(p + 16, XXH3_64bits_digest(static_cast<XXH3_state_t *>(chain_)));
    return f;
}

std::vector<uint8_t> state_stream_writer::error(std::string_view message) {
    std::string m(message.substr(0, state_stream_error_max));
    if (m.empty()) m = "the prefill failed";
    std::vector<uint8_t> f = frame_head(stream_frame_kind::error, m.size());
    f.insert(f.end(), m.begin(), m.end());
    return f;
}

// ---- reader ----

state_stream_reader::state_stream_reader(uint64_t max_part_bytes)
    : max_part_bytes_(max_part_bytes), chain_(chain_new()) {}
state_stream_reader::~state_stream_reader() { XXH3_freeState(static_cast<XXH3_state_t *>(chain_)); }

Status state_stream_reader::feed(std::span<const uint8_t> bytes) {
    if (bytes.empty()) return {};
    if (ended_) return stream_corrupt(std::to_string(bytes.size()) + " bytes after the stream's last frame");
    if (at_ > 0 && at_ == buf_.size()) {
        buf_.clear();
        at_ = 0;
    } else if (at_ > (1u << 20) && at_ * 2 > buf_.size()) {
        buf_.erase(buf_.begin(), buf_.begin() + ptrdiff_t(at_));
        at_ = 0;
    }
    buf_.insert(buf_.end(), bytes.begin(), bytes.end());
    return {};
}

Result<std::optional<stream_frame>> state_stream_reader::next() {
    const size_t have = buf_.size() - at_;
    const uint8_t * p = buf_.data() + at_;
    if (!head_read_) {
        if (have < state_stream_head_bytes) return std::optional<stream_frame>{};
        if (std::memcmp(p, k_stream_magic, 4) != 0) return stream_corrupt("bad magic (not a state stream)");
        if (p[4] != state_stream_version)
            return Status(status_code::unsupported,
                          "state stream: version " + std::to_string(p[4]) + " (this node reads version 1)");
        if (p[5] || p[6] || p[7]) return stream_corrupt("reserved head bytes are not zero");
        head_read_ = true;
        at_ += state_stream_head_bytes;
        return next();
    }
    if (ended_) return std::optional<stream_frame>{};
    if (have < state_stream_frame_head_bytes) return std::optional<stream_frame>{};
    const uint8_t kind = p[0];
    if (p[1] || p[2] || p[3]) return stream_corrupt("reserved frame bytes are not zero");
    const uint64_t length = get_u64(p + 4);
    switch (kind) {
        case uint8_t(stream_frame_kind::part):
            if (length == 0) return stream_corrupt("an empty part");
            if (length > max_part_bytes_)
                return Status(status_code::too_large, "state stream: a part of " + std::to_string(length) +
                                                          " bytes, over the limit of " +
                                                          std::to_string(max_part_bytes_));
            if (n_parts_ >= state_stream_parts_max)
                return stream_corrupt("more than " + std::to_string(state_stream_parts_max) + " parts");
            break;
        case uint8_t(stream_frame_kind::end):
            if (length != state_stream_end_bytes)
                return stream_corrupt("an end frame of " + std::to_string(length) + " bytes (24 expected)");
            break;
        case uint8_t(stream_frame_kind::error):
            if (length == 0 || length > state_stream_error_max)
                return stream_corrupt("an error frame of " + std::to_string(length) + " bytes (1..4096)");
            break;
        default: return stream_corrupt("unknown frame kind " + std::to_string(kind));
    }
    if (have - state_stream_frame_head_bytes < length) return std::optional<stream_frame>{};
    const uint8_t * body = p + state_stream_frame_head_bytes;
    const size_t n = size_t(length);
    if (kind == uint8_t(stream_frame_kind::part)) {
        at_ += state_stream_frame_head_bytes + n;
        XXH3_64bits_update(static_cast<XXH3_state_t *>(chain_), body, n);
        ++n_parts_;
        return std::optional<stream_frame>(stream_part{std::vector<uint8_t>(body, body + n)});
    }
    if (kind == uint8_t(stream_frame_kind::error)) {
        at_ += state_stream_frame_head_bytes + n;
        ended_ = true;
        return std::optional<stream_frame>(stream_error{std::string(reinterpret_cast<const char *>(body), n)});
    }
    // The end frame is checked before it is consumed: a refused one stays refused (next and finish keep failing).
    stream_end e;
    e.n_parts = get_u32(body);
    e.n_tokens = get_u32(body + 4);
    e.n_checkpoints = get_u32(body + 8);
    if (get_u32(body + 12) != 0) return stream_corrupt("the end frame's reserved field is not zero");
    e.chain = get_u64(body + 16);
    if (e.n_parts == 0 || e.n_parts != n_parts_)
        return stream_corrupt("the end frame counts " + std::to_string(e.n_parts) + " parts, " +
                              std::to_string(n_parts_) + " came");
    if (e.chain != XXH3_64bits_digest(static_cast<XXH3_state_t *>(chain_)))
        return stream_corrupt("the parts' chain checksum does not match the end frame (a part lost, repeated, "
                              "reordered or changed)");
    at_ += state_stream_frame_head_bytes + n;
    ended_ = true;
    return std::optional<stream_frame>(e);
}

Status state_stream_reader::finish() const {
    if (!ended_)
        return stream_corrupt("the stream ended after " + std::to_string(n_parts_) + " parts without its end frame");
    if (at_ != buf_.size())
        return stream_corrupt(std::to_string(buf_.size() - at_) + " bytes after the stream's last frame");
    return {};
}

// ---- assembler ----

state_stream_assembler::state_stream_assembler(state_shape shape, uint32_t n_cells_max, blob_limits limits)
    : shape_(std::move(shape)), n_cells_max_(n_cells_max), limits_(std::move(limits)) {}

Status state_stream_assembler::add(std::vector<uint8_t> part) {
    const std::string which = "state stream: part " + std::to_string(n_parts_ + 1);
    auto v = blob_parse(part, limits_);
    if (!v.ok()) return Status(v.status().code(), which + ": " + v.status().message());
    const blob_view & b = v.value();
    if (last_seen_)
        return Status(status_code::corrupt, which + " follows the part that carried the logits and request");
    if (b.generation)
        return Status(status_code::corrupt,
                      which + ": carries a generation in progress (a streamed state is a prompt's)");
    const uint32_t n = uint32_t(b.tokens.size());
    if (n_parts_ == 0) {
        if (b.base_tokens != 0)
            return Status(status_code::corrupt, which + ": the first part must be a whole state, not a delta");
        identity_ = b.identity;
        context_ = b.context;
        state_.assign(b.state.begin(), b.state.end());
    } else {
        if (!(b.identity == identity_) || !(b.context == context_))
            return Status(status_code::corrupt, which + ": another model or context than the first part's");
        if (b.base_tokens != tokens_.size())
            return Status(status_code::corrupt, which + ": a delta over " + std::to_string(b.base_tokens) +
                                                    " tokens where the parts before it covered " +
                                                    std::to_string(tokens_.size()));
        if (!std::equal(tokens_.begin(), tokens_.end(), b.tokens.begin()))
            return Status(status_code::corrupt,
                          which + ": its base tokens are not the tokens the parts before it covered");
        auto joined = state_join(state_, uint32_t(tokens_.size()), b.state, shape_, n, b.base_tokens, n_cells_max_);
        if (!joined.ok()) return Status(status_code::corrupt, which + ": " + joined.status().message());
        state_ = std::move(joined.value());
    }
    for (const blob_checkpoint_view & c : b.checkpoints) {
        if (!checkpoints_.empty() && c.n_tokens <= checkpoints_.back().n_tokens)
            return Status(status_code::corrupt, which + ": a checkpoint at " + std::to_string(c.n_tokens) +
                                                    " tokens, not past the parts' last one");
        checkpoints_.push_back({c.pos_min, c.pos_max, c.n_tokens, std::vector<uint8_t>(c.data.begin(), c.data.end())});
    }
    tokens_ = b.tokens;
    if (b.logits || b.request) {
        last_seen_ = true;
        logits_ = b.logits;
        request_ = b.request;
    }
    if (checkpoints_.size() > limits_.max_checkpoints)
        checkpoints_.erase(checkpoints_.begin(),
                           checkpoints_.begin() + ptrdiff_t(checkpoints_.size() - limits_.max_checkpoints));
    ++n_parts_;
    return {};
}

Result<std::vector<uint8_t>> state_stream_assembler::finish(const stream_end & end, const blob_key * key) {
    if (n_parts_ == 0 || end.n_parts != n_parts_)
        return Status(status_code::corrupt, "state stream: the end frame counts " + std::to_string(end.n_parts) +
                                                " parts, " + std::to_string(n_parts_) + " were joined");
    if (end.n_tokens != tokens_.size())
        return Status(status_code::corrupt, "state stream: the end frame says " + std::to_string(end.n_tokens) +
                                                " tokens, the parts cover " + std::to_string(tokens_.size()));
    if (end.n_checkpoints > checkpoints_.size())
        return Status(status_code::corrupt, "state stream: the end frame keeps " + std::to_string(end.n_checkpoints) +
                                                " checkpoints, the parts carried " +
                                                std::to_string(checkpoints_.size()));
    blob_parts parts;
    parts.identity = identity_;
    parts.context = context_;
    parts.tokens = tokens_;
    parts.state = state_;
    for (size_t i = checkpoints_.size() - end.n_checkpoints; i < checkpoints_.size(); ++i) {
        const checkpoint & c = checkpoints_[i];
        parts.checkpoints.push_back({c.pos_min, c.pos_max, c.n_tokens, c.data});
    }
    if (logits_) parts.logits = *logits_;
    if (request_) parts.request = *request_;
    blob_buffer_sink sink;
    Status st = blob_write(parts, sink, key);
    if (!st.ok()) return Status(status_code::corrupt, "state stream: the joined state: " + st.message());
    return std::move(sink.bytes());
}

}  // namespace baton
