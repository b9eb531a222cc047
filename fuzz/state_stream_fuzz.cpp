// state_stream_fuzz.cpp — libFuzzer target for streamed states (state_stream.h): the stream reader over
// untrusted bytes as they arrive, and the assembler that joins the parts it hands out.
//
// Input: byte 0 bits 0-1 pick the decode node's memory layout (attention; sliding window; hybrid; recurrent),
// bit 2 reseals the stream before it is read (every part's blob checksums, the end frame's part count and chain
// recomputed), so mutations reach the blobs' contents and the assembler instead of stopping at a checksum; byte 1
// is the slicing (bits 0-5 seed the slice sizes, bits 6-7 the largest slice: 1, 16, 512 bytes or the rest at
// once) and where a cut falls; the rest is the stream.
// Properties: the reader returns (ASan/UBSan watch the bytes) with a message on any failure, after which finish()
// fails too; fed in slices it returns the same frames and the same outcome as fed all at once; a stream it accepts
// is canonical (the writer re-makes it byte for byte) and any proper prefix of it is refused at finish(). Every
// part goes to an assembler with the layout's shape until one is refused (with a message); when the end frame comes and every
// part joined, a whole state that finish() returns parses as a blob with the end frame's token and checkpoint
// counts and, when two or more parts were joined, its state checks as this node's full state of those tokens.
// BATON_FUZZ_WRITE_SEEDS=DIR writes valid streams of every layout to DIR and exits (scripts/fuzz's seeds).
#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "baton/base/byte_cursor.h"
#include "baton/blob.h"
#include "baton/state_payload.h"
#include "baton/state_splice.h"
#include "baton/state_stream.h"
#include "blob/state_payload_builder.h"
#include "blob_format.h"
#include "fuzz_seed_writer.h"

namespace {

using namespace baton;
using namespace baton::state_payload_builder;
using k = state_part_kind;
using bytes = std::vector<uint8_t>;

constexpr uint32_t k_cells_max = 1024;
constexpr uint64_t k_max_part_bytes = 1u << 20;
constexpr uint32_t k_n_vocab = 16;

[[noreturn]] void fail(const char * what, const Status & st = {}) {
    std::fprintf(stderr, "state_stream_fuzz: %s %s\n", what, st.to_string().c_str());
    std::abort();
}

// ---- the node's layouts and states of them (small rows: the fuzzer mutates what matters, the cells) ----

constexpr int k_n_layouts = 4;  // attention, sliding window, hybrid, recurrent

bytes full_state(int which, uint32_t n) {
    builder w;
    attention_spec a;
    a.positions = iota(0, int32_t(n));
    a.k_row = a.v_row = 8;
    recurrent_spec r;
    r.positions = {int32_t(n) - 1};
    r.r_row = 8;
    r.s_row = 16;
    if (which != 3) attention(w, a);
    if (which == 2 || which == 3) recurrent(w, r);
    if (which == 1) {
        attention_spec win = a;
        win.positions = iota(int32_t(n > 4 ? n - 4 : 0), int32_t(n));
        attention(w, win);
    }
    return w.b;
}

const state_shape & shape(int which) {
    static const std::vector<state_shape> all = [] {
        const std::vector<std::vector<k>> kinds = {
            {k::attention}, {k::attention, k::attention}, {k::attention, k::recurrent}, {k::recurrent}};
        std::vector<state_shape> out;
        for (int i = 0; i < k_n_layouts; ++i) {
            auto f = state_shape_learn(full_state(i, 2), kinds[size_t(i)]);
            if (!f.ok()) fail("the built-in probe does not learn", f.status());
            state_shape s;
            s.full = f.value();
            s.partial.known = true;
            s.partial.magic = k_magic;
            out.push_back(std::move(s));
        }
        return out;
    }();
    return all[size_t(which)];
}

blob_limits limits() {
    blob_limits l;
    l.max_bytes = k_max_part_bytes;
    l.max_tokens = 4096;
    l.max_checkpoints = 4;  // small, so the assembler's trimming is reached
    return l;
}

// ---- the stream itself ----

// reseal_blob rewrites a blob's header checksum and the checksum of every frame that can be delimited.
void reseal_blob(uint8_t * b, size_t n) {
    const blob_layout l = blob_walk({b, n});
    if (!l.header_complete) return;
    le_store_u64(b + blob_format::k_off_header_xxh3, XXH3_64bits(b, blob_format::k_off_header_xxh3));
    for (const auto & s : l.sections)
        if (s.complete) le_store_u64(b + s.offset + blob_format::k_frame_head_bytes + s.length, s.checksum_computed);
}

// reseal_stream reseals every part frame that can be delimited and makes every end frame count and chain them.
bytes reseal_stream(std::span<const uint8_t> in) {
    bytes s(in.begin(), in.end());
    if (s.size() < state_stream_head_bytes) return s;
    bytes chained;
    uint32_t n_parts = 0;
    size_t at = state_stream_head_bytes;
    while (s.size() - at >= state_stream_frame_head_bytes) {
        const uint8_t kind = s[at];
        const uint64_t length = byte_cursor::load_u64(s.data() + at + 4);
        if (length > s.size() - at - state_stream_frame_head_bytes) break;
        uint8_t * body = s.data() + at + state_stream_frame_head_bytes;
        if (kind == uint8_t(stream_frame_kind::part)) {
            reseal_blob(body, size_t(length));
            chained.insert(chained.end(), body, body + length);
            ++n_parts;
        } else if (kind == uint8_t(stream_frame_kind::end) && length == state_stream_end_bytes) {
            le_store_u32(body, n_parts);
            le_store_u64(body + 16, XXH3_64bits(chained.data(), chained.size()));
        }
        at += state_stream_frame_head_bytes + size_t(length);
    }
    return s;
}

// The slices' sizes: a small generator seeded from the input.
struct slicer {
    uint32_t state;
    size_t largest;
    explicit slicer(uint8_t b) : state(0x9E3779B9u ^ (b & 0x3Fu)) {
        static constexpr size_t sizes[] = {1, 16, 512, SIZE_MAX};
        largest = sizes[b >> 6];
    }
    size_t next() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        return largest == SIZE_MAX ? SIZE_MAX : 1 + state % largest;
    }
};

struct read_result {
    std::vector<stream_frame> frames;
    Status status;  // the first failure of feed or next, else finish()
};

// read feeds the stream in slices (or all at once), handing every frame to on_frame as it comes.
template <class on_frame_fn>
read_result read(std::span<const uint8_t> s, slicer * slices, on_frame_fn && on_frame) {
    state_stream_reader r(k_max_part_bytes);
    read_result out;
    size_t at = 0;
    do {
        const size_t n = std::min(slices ? slices->next() : SIZE_MAX, s.size() - at);
        if (Status st = r.feed(s.subspan(at, n)); !st.ok()) {
            out.status = st;
            return out;
        }
        at += n;
        for (;;) {
            auto f = r.next();
            if (!f.ok()) {
                out.status = f.status();
                if (r.finish().ok()) fail("finish() is ok after a refused frame:", out.status);
                return out;
            }
            if (!f->has_value()) break;
            on_frame(**f);
            out.frames.push_back(std::move(**f));
        }
    } while (at < s.size());
    out.status = r.finish();
    if (out.status.ok() && !r.ended()) fail("finish() is ok before the stream ended");
    return out;
}

bool same_frame(const stream_frame & a, const stream_frame & b) {
    if (a.index() != b.index()) return false;
    if (auto * p = std::get_if<stream_part>(&a)) return p->blob == std::get<stream_part>(b).blob;
    if (auto * e = std::get_if<stream_end>(&a)) return *e == std::get<stream_end>(b);
    return std::get<stream_error>(a).message == std::get<stream_error>(b).message;
}

// canonical re-makes an accepted stream with the writer.
bytes canonical(const std::vector<stream_frame> & frames) {
    state_stream_writer w;
    bytes s = state_stream_writer::head();
    for (const stream_frame & f : frames) {
        bytes add;
        if (auto * p = std::get_if<stream_part>(&f)) {
            add = w.part_head(p->blob);
            add.insert(add.end(), p->blob.begin(), p->blob.end());
        } else if (auto * e = std::get_if<stream_end>(&f)) {
            add = w.end(e->n_tokens, e->n_checkpoints);
        } else {
            add = state_stream_writer::error(std::get<stream_error>(f).message);
        }
        s.insert(s.end(), add.begin(), add.end());
    }
    return s;
}

// ---- the assembler ----

struct joining {
    int which;
    state_stream_assembler a;
    bool refused = false;
    uint32_t n_joined = 0;

    explicit joining(int w) : which(w), a(shape(w), k_cells_max, limits()) {}

    void on_frame(const stream_frame & f) {
        if (refused) return;
        if (auto * p = std::get_if<stream_part>(&f)) {
            const Status st = a.add(p->blob);
            if (!st.ok()) {
                if (st.message().empty()) fail("a refused part without a message");
                refused = true;
                return;
            }
            ++n_joined;
        } else if (auto * e = std::get_if<stream_end>(&f)) {
            finish(*e);
        }
    }

    void finish(const stream_end & e) {
        auto whole = a.finish(e, nullptr);
        if (!whole.ok()) {
            if (whole.status().message().empty()) fail("a refused end without a message");
            return;
        }
        auto v = blob_parse(whole.value(), limits());
        if (!v.ok()) fail("a joined state does not parse as a blob:", v.status());
        if (v->tokens.size() != e.n_tokens || v->checkpoints.size() != e.n_checkpoints || v->base_tokens != 0)
            fail("a joined state does not hold what the end frame says");
        if (n_joined < 2) return;  // a single part is passed on as it came: the restore routine checks its state
        state_expect x;
        x.n_tokens = e.n_tokens;
        x.n_cells_max = k_cells_max;
        if (Status st = state_payload_check(v->state, shape(which), x); !st.ok())
            fail("a joined state is not a full state of its tokens:", st);
    }
};

// ---- seeds ----

// A stream of the whole state of n tokens of a layout, cut at `ends` (the last n), checkpoints at `cps`.
bytes seed_stream(int which, const std::vector<uint32_t> & ends, const std::vector<uint32_t> & cps, bool error_end) {
    const uint32_t n = ends.back();
    std::vector<int32_t> tokens;
    for (uint32_t i = 0; i < n; ++i) tokens.push_back(int32_t((i * 7 + 3) % k_n_vocab));
    std::vector<float> logits(k_n_vocab, 0.5f);
    const std::string request = R"({"n_predict":4})";
    state_stream_writer w;
    bytes s = state_stream_writer::head();
    uint32_t from = 0;
    size_t n_cps = 0;
    for (uint32_t to : ends) {
        const bytes full = full_state(which, to);
        bytes state = full;
        if (from > 0) {
            auto cut = state_cut(full, shape(which), to, from, k_cells_max);
            if (!cut.ok()) fail("a seed does not cut", cut.status());
            state = cut.value();
        }
        std::vector<bytes> cp_data;
        std::vector<uint32_t> cp_at;
        for (uint32_t c : cps)
            if (c > from && c <= to) cp_data.push_back(bytes(4 + c, uint8_t(c))), cp_at.push_back(c);
        blob_parts p;
        for (int i = 0; i < 16; ++i) p.identity.fingerprint[size_t(i)] = uint8_t(i * 3);
        p.identity.llama_version = "0.7.0";
        p.identity.arch = "llama";
        p.identity.n_layer = 2;
        p.identity.n_embd = 32;
        p.identity.n_vocab = k_n_vocab;
        p.context.n_ctx = 1024;
        const std::vector<int32_t> t(tokens.begin(), tokens.begin() + to);
        p.tokens = t;
        p.state = state;
        for (size_t i = 0; i < cp_at.size(); ++i)
            p.checkpoints.push_back({int32_t(cp_at[i]) - 1, int32_t(cp_at[i]) - 1, cp_at[i], cp_data[i]});
        n_cps += cp_at.size();
        if (to == n) {
            p.logits = logits;
            p.request = request;
        }
        p.base_tokens = from;
        blob_buffer_sink sink;
        if (Status st = blob_write(p, sink); !st.ok()) fail("a seed part does not write", st);
        const bytes h = w.part_head(sink.bytes());
        s.insert(s.end(), h.begin(), h.end());
        s.insert(s.end(), sink.bytes().begin(), sink.bytes().end());
        from = to;
        if (error_end) break;  // the prefill gave up after the first part
    }
    const bytes e = error_end ? state_stream_writer::error("the prefill failed: out of memory")
                              : w.end(n, uint32_t(std::min<size_t>(n_cps, limits().max_checkpoints)));
    s.insert(s.end(), e.begin(), e.end());
    return s;
}

void write_seeds(const std::string & dir) {
    int n_written = 0;
    auto put = [&](uint8_t b0, uint8_t b1, const bytes & s) {
        bytes in = {b0, b1};
        in.insert(in.end(), s.begin(), s.end());
        std::ofstream(dir + "/seed-" + std::to_string(n_written++), std::ios::binary)
            .write(reinterpret_cast<const char *>(in.data()), std::streamsize(in.size()));
    };
    for (int i = 0; i < k_n_layouts; ++i) {
        const std::vector<std::vector<uint32_t>> splits = {{1}, {12}, {1, 2}, {5, 12}, {3, 8, 12}, {4, 10, 20, 40}};
        for (size_t j = 0; j < splits.size(); ++j) {
            const bool with_cps = j % 2 == 1;
            const std::vector<uint32_t> cps =
                with_cps ? std::vector<uint32_t>{1, 6, 9, 12, 30} : std::vector<uint32_t>{};
            const uint8_t slicing = uint8_t((j << 6) | (j * 11 % 64));
            put(uint8_t(i | (j % 3 == 0 ? 4 : 0)), slicing, seed_stream(i, splits[j], cps, false));
        }
        put(uint8_t(i), 0x80, seed_stream(i, {5, 12}, {}, true));
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) { return baton::fuzz_seed_writer_init(write_seeds); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size < 2) return 0;
    const int which = data[0] & 3;
    const bytes s = (data[0] & 4) ? reseal_stream({data + 2, size - 2}) : bytes(data + 2, data + size);

    joining j(which);
    slicer slices(data[1]);
    const read_result sliced = read(s, &slices, [&](const stream_frame & f) { j.on_frame(f); });
    const read_result whole = read(s, nullptr, [](const stream_frame &) {});
    for (const read_result * r : {&sliced, &whole})
        if (!r->status.ok() && r->status.message().empty()) fail("a refused stream without a message");
    if (sliced.status.code() != whole.status.code() || sliced.frames.size() != whole.frames.size())
        fail("the stream read in slices differs from the stream read at once:", sliced.status);
    for (size_t i = 0; i < sliced.frames.size(); ++i)
        if (!same_frame(sliced.frames[i], whole.frames[i])) fail("a frame read in slices differs");
    if (!whole.status.ok()) return 0;

    // Accepted: canonical, and no proper prefix of it ends well.
    if (canonical(whole.frames) != s) fail("an accepted stream is not the one the writer makes of its frames");
    const size_t cut = s.size() * data[1] / 256;
    slicer again(data[1]);
    const read_result prefix = read(std::span<const uint8_t>(s).first(cut), &again, [](const stream_frame &) {});
    if (prefix.status.ok()) fail("a proper prefix of an accepted stream finished well");
    return 0;
}
