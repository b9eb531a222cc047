// state_stream_test.cpp — streamed states (state_stream.h): the writer and the reader round trip, one test per
// way a stream can be wrong (head, frame heads, part, end and error frames, the end frame's count and chain,
// bytes after the end, a cut anywhere), feeding in any slices gives the same frames; the assembler joins real part
// blobs (a whole state of the first tokens, then deltas cut with state_cut; bytes that name their positions, on
// plain attention, sliding-window, hybrid and recurrent layouts) into exactly the blob of the whole state, and
// refuses every part that does not continue the parts before it.
#include "baton/state_stream.h"

#include <gtest/gtest.h>

#include <random>

#include "baton/state_splice.h"
#include "blob_test_util.h"
#include "state_payload_builder.h"

// A namespace of its own: the blob tests build as unity batches, and state_splice_test.cpp has helpers of these names.
namespace baton::state_stream_test {
namespace {

using namespace baton::state_payload_builder;
using k = state_part_kind;
using bytes = std::vector<uint8_t>;

// ---- streams of opaque parts (the reader never parses a part) ----

constexpr size_t k_frame0 = state_stream_head_bytes;  // offset of the first frame

bytes text(std::string_view s) { return bytes(s.begin(), s.end()); }

void append(bytes & to, const bytes & b) { to.insert(to.end(), b.begin(), b.end()); }

// A stream of these parts and the end frame a writer makes for them.
bytes stream_of(const std::vector<bytes> & parts, uint32_t n_tokens = 20, uint32_t n_checkpoints = 1) {
    state_stream_writer w;
    bytes s = state_stream_writer::head();
    for (const bytes & p : parts) {
        append(s, w.part_head(p));
        append(s, p);
    }
    append(s, w.end(n_tokens, n_checkpoints));
    return s;
}

const std::vector<bytes> & two_parts() {
    static const std::vector<bytes> p = {text("first part"), text("the second")};
    return p;
}

// The offset of the end frame in stream_of(two_parts()).
size_t end_frame_offset() {
    return k_frame0 + 2 * state_stream_frame_head_bytes + two_parts()[0].size() + two_parts()[1].size();
}

// What a reader made of some bytes: the frames it returned, then the first failure (of feed or next) or finish().
struct read_result {
    std::vector<stream_frame> frames;
    Status status;
};

// read_in feeds bytes in slices (0: all at once), draining the frames after every slice.
read_result read_in(const bytes & b, size_t slice = 0, uint64_t max_part_bytes = 1 << 20) {
    state_stream_reader r(max_part_bytes);
    read_result out;
    if (slice == 0) slice = std::max<size_t>(b.size(), 1);
    for (size_t at = 0; at < b.size(); at += slice) {
        const size_t n = std::min(slice, b.size() - at);
        if (Status st = r.feed(std::span<const uint8_t>(b.data() + at, n)); !st.ok()) {
            out.status = st;
            return out;
        }
        for (;;) {
            auto f = r.next();
            if (!f.ok()) {
                out.status = f.status();
                return out;
            }
            if (!f->has_value()) break;
            out.frames.push_back(std::move(**f));
        }
    }
    out.status = r.finish();
    return out;
}

// describe renders a frame for comparisons and messages.
std::string describe(const stream_frame & f) {
    if (auto * p = std::get_if<stream_part>(&f)) return "part:" + std::string(p->blob.begin(), p->blob.end());
    if (auto * e = std::get_if<stream_end>(&f))
        return "end:" + std::to_string(e->n_parts) + "/" + std::to_string(e->n_tokens) + "/" +
               std::to_string(e->n_checkpoints) + "/" + std::to_string(e->chain);
    return "error:" + std::get<stream_error>(f).message;
}

std::vector<std::string> describe(const std::vector<stream_frame> & fs) {
    std::vector<std::string> out;
    for (const auto & f : fs) out.push_back(describe(f));
    return out;
}

// expect_refused: the bytes read to a failure of this code whose message names `what`.
void expect_refused(const bytes & b, status_code code, const std::string & what, uint64_t max_part_bytes = 1 << 20) {
    const read_result r = read_in(b, 0, max_part_bytes);
    ASSERT_FALSE(r.status.ok()) << "accepted";
    EXPECT_EQ(r.status.code(), code) << r.status.to_string();
    EXPECT_CONTAINS(r.status.message(), what);
    EXPECT_CONTAINS(r.status.message(), "state stream");
    // The same bytes a byte at a time fail the same way.
    EXPECT_EQ(read_in(b, 1, max_part_bytes).status.code(), code);
}

// A frame head written by hand: kind, reserved, length.
bytes frame(uint8_t kind, uint64_t length, uint8_t fill = 'x') {
    bytes f(state_stream_frame_head_bytes, 0);
    f[0] = kind;
    for (int i = 0; i < 8; ++i) f[size_t(4 + i)] = uint8_t(length >> (8 * i));
    f.resize(f.size() + size_t(length), fill);
    return f;
}

TEST(StateStreamReader, WriterAndReaderRoundTrip) {
    const bytes s = stream_of(two_parts(), 1234, 3);
    const read_result r = read_in(s);
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    ASSERT_EQ(r.frames.size(), 3u);
    EXPECT_EQ(std::get<stream_part>(r.frames[0]).blob, two_parts()[0]);
    EXPECT_EQ(std::get<stream_part>(r.frames[1]).blob, two_parts()[1]);
    const stream_end & e = std::get<stream_end>(r.frames[2]);
    EXPECT_EQ(e.n_parts, 2u);
    EXPECT_EQ(e.n_tokens, 1234u);
    EXPECT_EQ(e.n_checkpoints, 3u);
    const bytes joined = text("first partthe second");
    EXPECT_EQ(e.chain, XXH3_64bits(joined.data(), joined.size())) << "the chain is XXH3-64 of the parts in order";
    // The layout the header documents.
    EXPECT_EQ(bytes(s.begin(), s.begin() + 8), bytes({'B', 'T', 'N', 'S', 1, 0, 0, 0}));
    EXPECT_EQ(s.size(), end_frame_offset() + state_stream_frame_head_bytes + state_stream_end_bytes);
    EXPECT_EQ(s[end_frame_offset()], uint8_t(stream_frame_kind::end));

    state_stream_reader reader(1 << 20);
    ASSERT_TRUE(reader.feed(s).ok());
    while (true) {
        auto f = reader.next();
        ASSERT_TRUE(f.ok());
        if (!f->has_value()) break;
    }
    EXPECT_TRUE(reader.ended());
    EXPECT_EQ(reader.n_parts(), 2u);
    EXPECT_TRUE(reader.finish().ok());
}

TEST(StateStreamReader, AnErrorFrameEndsTheStream) {
    state_stream_writer w;
    bytes s = state_stream_writer::head();
    append(s, w.part_head(two_parts()[0]));
    append(s, two_parts()[0]);
    append(s, state_stream_writer::error("the prefill node ran out of memory"));
    const read_result r = read_in(s);
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_EQ(describe(r.frames),
              std::vector<std::string>({"part:first part", "error:the prefill node ran out of memory"}));
    // An error frame may come first, right after the head.
    bytes first = state_stream_writer::head();
    append(first, state_stream_writer::error("no"));
    EXPECT_EQ(describe(read_in(first).frames), std::vector<std::string>({"error:no"}));
    // The writer never writes an empty or oversized message: the reader would refuse it.
    bytes empty = state_stream_writer::head();
    append(empty, state_stream_writer::error(""));
    EXPECT_EQ(describe(read_in(empty).frames), std::vector<std::string>({"error:the prefill failed"}));
    bytes big = state_stream_writer::head();
    append(big, state_stream_writer::error(std::string(5000, 'e')));
    const read_result rb = read_in(big);
    ASSERT_TRUE(rb.status.ok()) << rb.status.to_string();
    EXPECT_EQ(std::get<stream_error>(rb.frames.at(0)).message, std::string(state_stream_error_max, 'e'));
}

TEST(StateStreamReader, BadMagicIsRefused) {
    bytes s = stream_of(two_parts());
    s[3] = 'X';
    expect_refused(s, status_code::corrupt, "bad magic");
    expect_refused(bytes({'B', 'T', 'N', 'B', 1, 0, 0, 0}), status_code::corrupt, "bad magic");
}

TEST(StateStreamReader, AnotherVersionIsUnsupported) {
    for (uint8_t v : {uint8_t(0), uint8_t(2), uint8_t(255)}) {
        bytes s = stream_of(two_parts());
        s[4] = v;
        expect_refused(s, status_code::unsupported, "version " + std::to_string(v));
    }
}

TEST(StateStreamReader, NonzeroReservedHeadBytesAreRefused) {
    for (size_t i : {5u, 6u, 7u}) {
        bytes s = stream_of(two_parts());
        s[i] = 1;
        expect_refused(s, status_code::corrupt, "reserved head bytes");
    }
}

TEST(StateStreamReader, NonzeroReservedFrameBytesAreRefused) {
    for (size_t frame_at : {k_frame0, end_frame_offset()})
        for (size_t i : {1u, 2u, 3u}) {
            bytes s = stream_of(two_parts());
            s[frame_at + i] = 0x80;
            expect_refused(s, status_code::corrupt, "reserved frame bytes");
        }
}

TEST(StateStreamReader, AnUnknownKindIsRefused) {
    for (uint8_t kind : {uint8_t(0), uint8_t(4), uint8_t(255)}) {
        bytes s = stream_of(two_parts());
        s[k_frame0] = kind;
        expect_refused(s, status_code::corrupt, "unknown frame kind " + std::to_string(kind));
    }
}

TEST(StateStreamReader, AnEmptyPartIsRefused) {
    bytes s = state_stream_writer::head();
    append(s, frame(uint8_t(stream_frame_kind::part), 0));
    expect_refused(s, status_code::corrupt, "an empty part");
}

TEST(StateStreamReader, APartOverTheLimitIsTooLargeBeforeItsBytesCome) {
    // Only the frame head of a part of 101 bytes has come: the reader refuses it without waiting for them.
    bytes s = state_stream_writer::head();
    bytes f = frame(uint8_t(stream_frame_kind::part), 101);
    s.insert(s.end(), f.begin(), f.begin() + state_stream_frame_head_bytes);
    state_stream_reader r(100);
    ASSERT_TRUE(r.feed(s).ok());
    auto got = r.next();
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), status_code::too_large);
    EXPECT_CONTAINS(got.status().message(), "a part of 101 bytes, over the limit of 100");
    // A length of 2^64-1 (no overflow in the check).
    bytes huge = state_stream_writer::head();
    append(huge, frame(uint8_t(stream_frame_kind::part), 0));
    for (size_t i = 4; i < 12; ++i) huge[k_frame0 + i] = 0xFF;
    expect_refused(huge, status_code::too_large, "over the limit");
    // At the limit, the reader waits for the bytes.
    bytes at_limit = state_stream_writer::head();
    append(at_limit, frame(uint8_t(stream_frame_kind::part), 100));
    at_limit.pop_back();
    state_stream_reader r2(100);
    ASSERT_TRUE(r2.feed(at_limit).ok());
    auto waiting = r2.next();
    ASSERT_TRUE(waiting.ok()) << waiting.status().to_string();
    EXPECT_FALSE(waiting->has_value());
}

TEST(StateStreamReader, MoreThanTheMostPartsAreRefused) {
    std::vector<bytes> parts(state_stream_parts_max, bytes{7});
    const read_result ok = read_in(stream_of(parts));
    ASSERT_TRUE(ok.status.ok()) << ok.status.to_string();
    EXPECT_EQ(ok.frames.size(), size_t(state_stream_parts_max) + 1);
    parts.push_back(bytes{7});
    expect_refused(stream_of(parts), status_code::corrupt, "more than 4096 parts");
}

TEST(StateStreamReader, AnEndFrameOfAnotherLengthIsRefused) {
    for (uint64_t length : {0u, 23u, 25u, 4096u}) {
        bytes s = state_stream_writer::head();
        append(s, frame(uint8_t(stream_frame_kind::end), length, 0));
        expect_refused(s, status_code::corrupt, "an end frame of " + std::to_string(length) + " bytes");
    }
}

TEST(StateStreamReader, AnErrorFrameOfNoOrTooManyBytesIsRefused) {
    for (uint64_t length : {uint64_t(0), uint64_t(state_stream_error_max + 1), uint64_t(1) << 40}) {
        bytes s = state_stream_writer::head();
        bytes f = frame(uint8_t(stream_frame_kind::error), std::min<uint64_t>(length, 5000));
        for (int i = 0; i < 8; ++i) f[size_t(4 + i)] = uint8_t(length >> (8 * i));
        append(s, f);
        expect_refused(s, status_code::corrupt, "an error frame of " + std::to_string(length) + " bytes");
    }
    for (uint64_t length : {uint64_t(1), uint64_t(state_stream_error_max)}) {
        bytes s = state_stream_writer::head();
        append(s, frame(uint8_t(stream_frame_kind::error), length));
        EXPECT_TRUE(read_in(s).status.ok()) << length;
    }
}

TEST(StateStreamReader, AnEndFrameCountingOtherPartsIsRefused) {
    const size_t n_parts_at = end_frame_offset() + state_stream_frame_head_bytes;
    for (uint8_t n : {uint8_t(0), uint8_t(1), uint8_t(3)}) {
        bytes s = stream_of(two_parts());
        s[n_parts_at] = n;
        expect_refused(s, status_code::corrupt, "the end frame counts " + std::to_string(n) + " parts, 2 came");
    }
    // A stream of no part at all, even with an end frame that says so.
    expect_refused(stream_of({}), status_code::corrupt, "counts 0 parts, 0 came");
    // A part dropped: the end frame was written for three.
    state_stream_writer w;
    bytes s = state_stream_writer::head();
    for (const bytes & p : {text("a"), text("b"), text("c")}) {
        bytes h = w.part_head(p);
        if (p == text("b")) continue;
        append(s, h);
        append(s, p);
    }
    append(s, w.end(3, 0));
    expect_refused(s, status_code::corrupt, "counts 3 parts, 2 came");
}

TEST(StateStreamReader, AnEndFrameWhoseChainDisagreesIsRefused) {
    const std::string chain = "chain checksum does not match";
    // A part changed in flight.
    bytes changed = stream_of(two_parts());
    changed[k_frame0 + state_stream_frame_head_bytes + 3] ^= 1;
    expect_refused(changed, status_code::corrupt, chain);
    // Parts reordered: sent b, a under the end frame of a, b.
    const bytes a = text("part a"), b = text("part b");
    bytes reordered = stream_of({b, a});
    const bytes in_order = stream_of({a, b});
    std::copy(in_order.end() - ptrdiff_t(state_stream_end_bytes), in_order.end(),
              reordered.end() - ptrdiff_t(state_stream_end_bytes));
    expect_refused(reordered, status_code::corrupt, chain);
    // A part repeated in place of the next: sent a, a under the end frame of a, b.
    bytes repeated = stream_of({a, a});
    std::copy(in_order.end() - ptrdiff_t(state_stream_end_bytes), in_order.end(),
              repeated.end() - ptrdiff_t(state_stream_end_bytes));
    expect_refused(repeated, status_code::corrupt, chain);
    // The chain field itself changed.
    bytes field = stream_of(two_parts());
    field[field.size() - 1] ^= 0x40;
    expect_refused(field, status_code::corrupt, chain);
}

TEST(StateStreamReader, ANonzeroReservedEndFieldIsRefused) {
    for (size_t i = 0; i < 4; ++i) {
        bytes s = stream_of(two_parts());
        s[end_frame_offset() + state_stream_frame_head_bytes + 12 + i] = 1;
        expect_refused(s, status_code::corrupt, "the end frame's reserved field is not zero");
    }
}

// Regression: a refused end frame used to be consumed, so the reader then reported nothing more and finish()
// said ok, as if the stream had ended well. A refused frame stays refused: next() and finish() keep failing.
TEST(StateStreamReader, ARefusedEndFrameStaysRefused) {
    bytes s = stream_of(two_parts());
    s[s.size() - 1] ^= 1;  // the chain
    state_stream_reader r(1 << 20);
    ASSERT_TRUE(r.feed(s).ok());
    ASSERT_TRUE(r.next().ok());
    ASSERT_TRUE(r.next().ok());
    EXPECT_EQ(r.next().status().code(), status_code::corrupt);
    EXPECT_EQ(r.next().status().code(), status_code::corrupt) << "the bad end frame is refused again";
    EXPECT_FALSE(r.ended());
    EXPECT_EQ(r.finish().code(), status_code::corrupt);
}

TEST(StateStreamReader, BytesAfterTheLastFrameAreRefused) {
    for (bool error_frame : {false, true}) {
        bytes s = error_frame ? state_stream_writer::head() : stream_of(two_parts());
        if (error_frame) append(s, state_stream_writer::error("gave up"));
        // Fed after the last frame was read: feed refuses them.
        state_stream_reader r(1 << 20);
        ASSERT_TRUE(r.feed(s).ok());
        while (true) {
            auto f = r.next();
            ASSERT_TRUE(f.ok()) << f.status().to_string();
            if (!f->has_value()) break;
        }
        ASSERT_TRUE(r.ended());
        const Status fed = r.feed(bytes{0});
        EXPECT_EQ(fed.code(), status_code::corrupt);
        EXPECT_CONTAINS(fed.message(), "1 bytes after the stream's last frame");
        EXPECT_TRUE(r.feed(bytes{}).ok()) << "nothing is nothing";
        // Fed with the last frame: next() returns no more frames, and finish() refuses the leftover.
        bytes more = s;
        append(more, stream_of(two_parts()));
        const read_result got = read_in(more);
        EXPECT_EQ(got.status.code(), status_code::corrupt);
        EXPECT_CONTAINS(got.status.message(),
                        std::to_string(stream_of(two_parts()).size()) + " bytes after the stream's last frame");
        EXPECT_EQ(got.frames.size(), error_frame ? 1u : 3u);
    }
}

TEST(StateStreamReader, EveryCutOfAValidStreamIsRefusedAtFinish) {
    state_stream_writer w;
    bytes with_error = state_stream_writer::head();
    append(with_error, w.part_head(two_parts()[0]));
    append(with_error, two_parts()[0]);
    append(with_error, state_stream_writer::error("stopped"));
    for (const bytes & s : {stream_of(two_parts()), with_error}) {
        ASSERT_TRUE(read_in(s).status.ok());
        for (size_t cut = 0; cut < s.size(); ++cut) {
            const bytes prefix(s.begin(), s.begin() + ptrdiff_t(cut));
            for (size_t slice : {size_t(0), size_t(1), size_t(5)}) {
                const read_result r = read_in(prefix, slice);
                EXPECT_EQ(r.status.code(), status_code::corrupt) << "cut at " << cut << ", slices of " << slice;
                EXPECT_CONTAINS(r.status.message(), "without its end frame");
                for (const stream_frame & f : r.frames)
                    EXPECT_TRUE(std::holds_alternative<stream_part>(f)) << "cut at " << cut << ": " << describe(f);
            }
        }
    }
}

TEST(StateStreamReader, AnySlicingGivesTheSameFrames) {
    std::vector<bytes> parts;
    for (int i = 0; i < 7; ++i) parts.push_back(bytes(size_t(1 + i * 37), uint8_t('a' + i)));
    const bytes s = stream_of(parts, 77, 2);
    const read_result whole = read_in(s);
    ASSERT_TRUE(whole.status.ok()) << whole.status.to_string();
    ASSERT_EQ(whole.frames.size(), 8u);
    for (size_t slice : {1u, 2u, 11u, 12u, 13u, 64u}) {
        const read_result r = read_in(s, slice);
        EXPECT_TRUE(r.status.ok()) << "slices of " << slice << ": " << r.status.to_string();
        EXPECT_EQ(describe(r.frames), describe(whole.frames)) << "slices of " << slice;
    }
    // Random slice sizes, and a next() before any byte came.
    std::mt19937 g(7);
    for (int round = 0; round < 20; ++round) {
        state_stream_reader r(1 << 20);
        std::vector<stream_frame> frames;
        size_t at = 0;
        while (true) {
            auto f = r.next();
            ASSERT_TRUE(f.ok()) << f.status().to_string();
            if (f->has_value()) {
                frames.push_back(std::move(**f));
                continue;
            }
            if (at == s.size()) break;
            const size_t n = std::min(s.size() - at, size_t(g() % 100));
            ASSERT_TRUE(r.feed(std::span<const uint8_t>(s.data() + at, n)).ok());
            at += n;
        }
        EXPECT_TRUE(r.finish().ok());
        EXPECT_EQ(describe(frames), describe(whole.frames)) << "round " << round;
    }
}

// ---- the assembler, over real part blobs ----

constexpr uint64_t k_row = 8;  // K/V bytes per cell
constexpr uint32_t k_layers = 2;
constexpr uint32_t k_cells_max = 64;

// A first attention part whose every K/V byte names its cell's position (as in state_splice_test.cpp).
void tagged_attention(builder & w, const std::vector<int32_t> & cells) {
    w.u32(1);
    w.u32(uint32_t(cells.size()));
    if (cells.empty()) return;
    for (int32_t p : cells) cell_meta(w, p, 1, 0, false);
    tagged_rows(w, cells, k_layers, k_row);
}

enum class family { attention, sliding, hybrid, recurrent };

std::string family_name(const ::testing::TestParamInfo<family> & i) {
    switch (i.param) {
        case family::attention: return "attention";
        case family::sliding: return "sliding";
        case family::hybrid: return "hybrid";
        case family::recurrent: return "recurrent";
    }
    return "?";
}

// The full state of n tokens, its cells in position order.
bytes state_of(family f, uint32_t n) {
    builder w;
    if (f != family::recurrent) tagged_attention(w, iota(0, int32_t(n)));
    if (f == family::sliding) {
        attention_spec win;
        win.positions = iota(int32_t(n > 4 ? n - 4 : 0), int32_t(n));
        win.k_row = win.v_row = k_row;
        win.n_layer = k_layers;
        attention(w, win);
    }
    if (f == family::hybrid || f == family::recurrent) {
        recurrent_spec r;
        r.positions = {int32_t(n) - 1};
        r.r_row = 8;
        r.s_row = 16;
        recurrent(w, r);
        w.b.back() = uint8_t(n);  // the recurrent state names the length it ends at
    }
    return w.b;
}

state_shape shape_of(family f) {
    std::vector<k> kinds = {k::attention};
    if (f == family::sliding) kinds = {k::attention, k::attention};
    if (f == family::hybrid) kinds = {k::attention, k::recurrent};
    if (f == family::recurrent) kinds = {k::recurrent};
    return shape_learned(state_of(f, 2), kinds);
}

constexpr uint32_t k_n = 20;  // the whole state's tokens

std::vector<int32_t> all_tokens() {
    std::vector<int32_t> t;
    for (uint32_t i = 0; i < k_n; ++i) t.push_back(int32_t((i * 37 + 5) % 100));
    return t;
}

bytes checkpoint_data(uint32_t n_tokens) { return bytes(16 + n_tokens, uint8_t(n_tokens)); }

// One part to write: the tokens [0, to), as a whole state (from 0) or a delta over from; the tests change fields.
struct part_spec {
    family f = family::attention;
    uint32_t from = 0, to = k_n;
    std::vector<uint32_t> checkpoints;  // each checkpoint's n_tokens
    bool logits = false, request = false;
    std::optional<blob_generation> generation;   // (needs logits)
    std::vector<int32_t> tokens = all_tokens();  // cut to `to`
    blob_test::synthetic ids{false};             // identity and context
    const blob_key * key = nullptr;
};

bytes write_part(const part_spec & s) {
    const bytes full = state_of(s.f, s.to);
    bytes state = full;
    if (s.from > 0) {
        auto cut = state_cut(full, shape_of(s.f), s.to, s.from, k_cells_max);
        if (!cut.ok()) ADD_FAILURE() << cut.status().to_string();
        state = cut.ok() ? cut.value() : bytes{};
    }
    const std::vector<int32_t> tokens(s.tokens.begin(), s.tokens.begin() + s.to);
    std::vector<bytes> cp_data;
    for (uint32_t c : s.checkpoints) cp_data.push_back(checkpoint_data(c));
    const std::vector<float> logits = s.ids.logits;
    const std::string request = s.ids.request;
    blob_parts p;
    p.identity = s.ids.parts.identity;
    p.context = s.ids.parts.context;
    p.tokens = tokens;
    p.state = state;
    for (size_t i = 0; i < s.checkpoints.size(); ++i)
        p.checkpoints.push_back(
            {int32_t(s.checkpoints[i]) - 1, int32_t(s.checkpoints[i]) - 1, s.checkpoints[i], cp_data[i]});
    if (s.logits) p.logits = logits;
    if (s.request) p.request = request;
    p.base_tokens = s.from;
    p.generation = s.generation;
    blob_buffer_sink sink;
    const Status st = blob_write(p, sink, s.key);
    if (!st.ok()) ADD_FAILURE() << st.to_string();
    return sink.bytes();
}

// The parts of the whole state of k_n tokens cut at `ends` (ascending, the last k_n), with checkpoints at `cps`:
// each part carries those past the part before; the last part carries the logits and the request.
std::vector<bytes> parts_of(family f, const std::vector<uint32_t> & ends, const std::vector<uint32_t> & cps,
                            const blob_key * key = nullptr) {
    std::vector<bytes> out;
    uint32_t from = 0;
    for (uint32_t to : ends) {
        part_spec s;
        s.f = f;
        s.from = from;
        s.to = to;
        for (uint32_t c : cps)
            if (c > from && c <= to) s.checkpoints.push_back(c);
        s.logits = s.request = to == k_n;
        s.key = key;
        out.push_back(write_part(s));
        from = to;
    }
    return out;
}

// blob_write of the whole state directly, with the last n_checkpoints of cps.
bytes whole_blob(family f, const std::vector<uint32_t> & cps, size_t n_checkpoints, const blob_key * key = nullptr) {
    part_spec s;
    s.f = f;
    s.checkpoints.assign(cps.end() - ptrdiff_t(n_checkpoints), cps.end());
    s.logits = s.request = true;
    s.key = key;
    return write_part(s);
}

blob_limits limits_with(blob_key_ptr key = nullptr, uint32_t max_checkpoints = 64) {
    blob_limits l;
    l.key = std::move(key);
    l.max_checkpoints = max_checkpoints;
    return l;
}

state_stream_assembler assembler_of(family f, blob_limits limits = {}) {
    return state_stream_assembler(shape_of(f), k_cells_max, std::move(limits));
}

stream_end end_of(uint32_t n_parts, uint32_t n_tokens = k_n, uint32_t n_checkpoints = 0) {
    stream_end e;
    e.n_parts = n_parts;
    e.n_tokens = n_tokens;
    e.n_checkpoints = n_checkpoints;
    return e;
}

class StateStreamJoin : public ::testing::TestWithParam<family> {};

TEST_P(StateStreamJoin, PartsJoinIntoExactlyTheBlobOfTheWholeState) {
    const family f = GetParam();
    const std::vector<uint32_t> cps = {3, 5, 9, 15, 20};
    for (const std::vector<uint32_t> & ends :
         std::vector<std::vector<uint32_t>>{{20}, {5, 20}, {5, 12, 20}, {1, 2, 3, 19, 20}}) {
        const std::vector<bytes> parts = parts_of(f, ends, cps);
        for (uint32_t n_cp : {0u, 2u, 5u}) {
            state_stream_assembler a = assembler_of(f);
            for (const bytes & p : parts) {
                const Status st = a.add(p);
                ASSERT_TRUE(st.ok()) << st.to_string();
            }
            EXPECT_EQ(a.n_tokens(), k_n);
            auto whole = a.finish(end_of(uint32_t(parts.size()), k_n, n_cp), nullptr);
            ASSERT_TRUE(whole.ok()) << whole.status().to_string();
            EXPECT_EQ(whole.value(), whole_blob(f, cps, n_cp)) << ends.size() << " parts, " << n_cp << " checkpoints";
            // And it is a blob like any other, whose state is the node's full state of k_n tokens.
            auto v = blob_parse(whole.value());
            ASSERT_TRUE(v.ok()) << v.status().to_string();
            EXPECT_EQ(v->tokens, all_tokens());
            EXPECT_EQ(bytes(v->state.begin(), v->state.end()), state_of(f, k_n));
            EXPECT_EQ(v->base_tokens, 0u);
            EXPECT_TRUE(v->logits.has_value());
            EXPECT_EQ(v->request, blob_test::synthetic().request);
            ASSERT_EQ(v->checkpoints.size(), n_cp);
            state_expect e;
            e.n_tokens = k_n;
            e.n_cells_max = k_cells_max;
            EXPECT_TRUE(state_payload_check(v->state, shape_of(f), e).ok());
        }
    }
}

TEST_P(StateStreamJoin, SignedPartsJoinIntoTheSignedWholeState) {
    const family f = GetParam();
    auto key = blob_key::make({"0123456789abcdef0123456789abcdef"});
    ASSERT_TRUE(key.ok());
    const std::vector<uint32_t> cps = {4, 16};
    const std::vector<bytes> parts = parts_of(f, {6, 13, 20}, cps, key.value().get());
    state_stream_assembler a = assembler_of(f, limits_with(key.value()));
    for (const bytes & p : parts) ASSERT_TRUE(a.add(p).ok());
    auto whole = a.finish(end_of(3, k_n, 2), key.value().get());
    ASSERT_TRUE(whole.ok()) << whole.status().to_string();
    EXPECT_EQ(whole.value(), whole_blob(f, cps, 2, key.value().get()));
    EXPECT_TRUE(blob_parse(whole.value(), limits_with(key.value())).ok());
    // A part without the MAC is refused with blob_parse's code.
    state_stream_assembler b = assembler_of(f, limits_with(key.value()));
    const Status st = b.add(parts_of(f, {6, 20}, {})[0]);
    EXPECT_EQ(st.code(), status_code::unauthenticated) << st.to_string();
    EXPECT_CONTAINS(st.message(), "state stream: part 1: ");
}

TEST_P(StateStreamJoin, TheWriterReaderAndAssemblerCarryAStateEndToEnd) {
    const family f = GetParam();
    const std::vector<uint32_t> cps = {2, 8, 17};
    const std::vector<bytes> parts = parts_of(f, {4, 8, 16, 20}, cps);
    const bytes s = stream_of(parts, k_n, 3);
    for (size_t slice : {size_t(0), size_t(1), size_t(1000)}) {
        const read_result r = read_in(s, slice);
        ASSERT_TRUE(r.status.ok()) << r.status.to_string();
        state_stream_assembler a = assembler_of(f);
        for (const stream_frame & fr : r.frames)
            if (auto * p = std::get_if<stream_part>(&fr)) ASSERT_TRUE(a.add(p->blob).ok());
        auto whole = a.finish(std::get<stream_end>(r.frames.back()), nullptr);
        ASSERT_TRUE(whole.ok()) << whole.status().to_string();
        EXPECT_EQ(whole.value(), whole_blob(f, cps, 3));
    }
}

INSTANTIATE_TEST_SUITE_P(StateStreamFamilies, StateStreamJoin,
                         ::testing::Values(family::attention, family::sliding, family::hybrid, family::recurrent),
                         family_name);

// expect_part_refused: the assembler, given `good` first, refuses `bad` (corrupt, naming the part and `what`), and
// the refusal leaves it as it was: the right part still joins and the whole state still comes out.
void expect_part_refused(const std::vector<bytes> & good, size_t at, const bytes & bad, const std::string & what) {
    state_stream_assembler a = assembler_of(family::attention);
    for (size_t i = 0; i < at; ++i) ASSERT_TRUE(a.add(good[i]).ok());
    const Status st = a.add(bad);
    ASSERT_FALSE(st.ok()) << "accepted";
    EXPECT_EQ(st.code(), status_code::corrupt) << st.to_string();
    EXPECT_CONTAINS(st.message(), "state stream: part " + std::to_string(at + 1));
    EXPECT_CONTAINS(st.message(), what);
    for (size_t i = at; i < good.size(); ++i) ASSERT_TRUE(a.add(good[i]).ok()) << "part " << i + 1;
    EXPECT_TRUE(a.finish(end_of(uint32_t(good.size())), nullptr).ok());
}

std::vector<bytes> three_parts() { return parts_of(family::attention, {8, 14, 20}, {}); }

part_spec delta_8_14() {
    part_spec s;
    s.from = 8;
    s.to = 14;
    return s;
}

TEST(StateStreamAssembler, AFirstPartThatIsADeltaIsRefused) {
    expect_part_refused(three_parts(), 0, three_parts()[1], "the first part must be a whole state, not a delta");
}

TEST(StateStreamAssembler, ADeltaOverOtherThanTheTokensSoFarIsRefused) {
    part_spec over6 = delta_8_14();
    over6.from = 6;
    expect_part_refused(three_parts(), 1, write_part(over6),
                        "a delta over 6 tokens where the parts before it covered 8");
    // The third part where the second should be.
    expect_part_refused(three_parts(), 1, three_parts()[2],
                        "a delta over 14 tokens where the parts before it covered 8");
    // The first part again: a whole state after the first.
    expect_part_refused(three_parts(), 1, three_parts()[0], "a delta over 0 tokens");
}

TEST(StateStreamAssembler, ADeltaOverOtherTokensIsRefused) {
    part_spec other = delta_8_14();
    other.tokens[3] = 99;  // the delta's base hash is of its own (other) tokens: the blob parses
    ASSERT_TRUE(blob_parse(write_part(other)).ok());
    expect_part_refused(three_parts(), 1, write_part(other), "its base tokens are not the tokens the parts before it");
}

TEST(StateStreamAssembler, AnotherModelOrContextIsRefused) {
    part_spec model = delta_8_14();
    model.ids.parts.identity.fingerprint[0] ^= 1;
    expect_part_refused(three_parts(), 1, write_part(model), "another model or context than the first part's");
    part_spec arch = delta_8_14();
    arch.ids.parts.identity.n_embd = 128;
    expect_part_refused(three_parts(), 1, write_part(arch), "another model or context");
    part_spec context = delta_8_14();
    context.ids.parts.context.n_ctx = 512;
    expect_part_refused(three_parts(), 1, write_part(context), "another model or context");
}

TEST(StateStreamAssembler, APartAfterTheOneWithLogitsOrRequestIsRefused) {
    for (int which = 0; which < 3; ++which) {
        part_spec first;
        first.to = 8;
        first.logits = which != 1;
        first.request = which != 0;
        state_stream_assembler a = assembler_of(family::attention);
        ASSERT_TRUE(a.add(write_part(first)).ok());
        const Status st = a.add(three_parts()[1]);
        EXPECT_EQ(st.code(), status_code::corrupt) << st.to_string();
        EXPECT_CONTAINS(st.message(), "state stream: part 2 follows the part that carried the logits and request");
    }
    // The last part repeated after itself.
    std::vector<bytes> parts = three_parts();
    state_stream_assembler a = assembler_of(family::attention);
    for (const bytes & p : parts) ASSERT_TRUE(a.add(p).ok());
    EXPECT_EQ(a.add(parts[2]).code(), status_code::corrupt);
}

// A streamed state is a prompt's: a part that continues a generation in progress (format 1.4: a paused generation
// moves as one blob) is refused, as the last part or as a whole state.
TEST(StateStreamAssembler, APartCarryingAGenerationIsRefused) {
    part_spec last;  // three_parts()[2] with a generation
    last.from = 14;
    last.logits = last.request = true;
    last.generation = blob_generation{3, 2};
    const bytes bad = write_part(last);
    auto v = blob_parse(bad);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    ASSERT_TRUE(v->generation.has_value());
    expect_part_refused(three_parts(), 2, bad, "carries a generation in progress");
    part_spec whole;
    whole.logits = whole.request = true;
    whole.generation = blob_generation{5, 15};
    expect_part_refused(three_parts(), 0, write_part(whole), "carries a generation in progress");
}

TEST(StateStreamAssembler, APartThatIsNoBlobOrDoesNotJoinIsRefused) {
    bytes broken = three_parts()[1];
    broken[broken.size() / 2] ^= 1;
    const std::vector<bytes> good = three_parts();
    expect_part_refused(good, 1, broken, "checksum");
    expect_part_refused(good, 1, text("not a blob at all"), "state stream: part 2: ");
    // A delta whose cells are not the ones past its base (its state is the whole state of 14 tokens).
    std::vector<int32_t> t = all_tokens();
    t.resize(14);
    const bytes state = state_of(family::attention, 14);
    blob_test::synthetic ids(false);
    blob_parts p;
    p.identity = ids.parts.identity;
    p.context = ids.parts.context;
    p.tokens = t;
    p.state = state;
    p.base_tokens = 8;
    blob_buffer_sink sink;
    ASSERT_TRUE(blob_write(p, sink).ok());
    expect_part_refused(good, 1, sink.bytes(), "state stream: part 2: ");
}

TEST(StateStreamAssembler, AnEndFrameThatDisagreesWithThePartsIsRefused) {
    const std::vector<uint32_t> cps = {4, 10, 18};
    state_stream_assembler a = assembler_of(family::attention);
    EXPECT_EQ(a.finish(end_of(0), nullptr).status().code(), status_code::corrupt) << "no part at all";
    for (const bytes & p : parts_of(family::attention, {8, 14, 20}, cps)) ASSERT_TRUE(a.add(p).ok());
    struct refusal {
        stream_end end;
        std::string what;
    };
    for (const refusal & r : std::vector<refusal>{
             {end_of(2, k_n, 0), "the end frame counts 2 parts, 3 were joined"},
             {end_of(4, k_n, 0), "the end frame counts 4 parts, 3 were joined"},
             {end_of(3, 19, 0), "the end frame says 19 tokens, the parts cover 20"},
             {end_of(3, 21, 0), "the end frame says 21 tokens, the parts cover 20"},
             {end_of(3, k_n, 4), "the end frame keeps 4 checkpoints, the parts carried 3"},
         }) {
        auto got = a.finish(r.end, nullptr);
        ASSERT_FALSE(got.ok()) << r.what;
        EXPECT_EQ(got.status().code(), status_code::corrupt);
        EXPECT_CONTAINS(got.status().message(), r.what);
    }
    auto ok = a.finish(end_of(3, k_n, 3), nullptr);
    ASSERT_TRUE(ok.ok()) << ok.status().to_string();
    EXPECT_EQ(ok.value(), whole_blob(family::attention, cps, 3));
}

TEST(StateStreamAssembler, OnlyTheLastMaxCheckpointsAreKept) {
    const std::vector<uint32_t> cps = {2, 4, 10, 18};
    state_stream_assembler a = assembler_of(family::attention, limits_with(nullptr, 2));
    for (const bytes & p : parts_of(family::attention, {5, 14, 20}, {10, 18})) ASSERT_TRUE(a.add(p).ok());
    EXPECT_EQ(a.finish(end_of(3, k_n, 3), nullptr).status().code(), status_code::corrupt);
    // The first part carries two, the second one, the third one: four carried, two kept.
    state_stream_assembler b = assembler_of(family::attention, limits_with(nullptr, 2));
    for (const bytes & p : parts_of(family::attention, {5, 14, 20}, cps)) ASSERT_TRUE(b.add(p).ok());
    auto got = b.finish(end_of(3, k_n, 3), nullptr);
    EXPECT_EQ(got.status().code(), status_code::corrupt);
    EXPECT_CONTAINS(got.status().message(), "keeps 3 checkpoints, the parts carried 2");
    auto two = b.finish(end_of(3, k_n, 2), nullptr);
    ASSERT_TRUE(two.ok()) << two.status().to_string();
    EXPECT_EQ(two.value(), whole_blob(family::attention, cps, 2));
}

// A later part's checkpoint must be past the parts' last one. blob_parse already refuses a delta's checkpoint at
// or below its base (and the base is the tokens so far), so such a part is refused before the assembler's own
// order check: made here behind resealed checksums, as no writer makes it.
TEST(StateStreamAssembler, ACheckpointNotPastThePartsLastIsRefused) {
    part_spec first;
    first.to = 8;
    first.checkpoints = {8};
    part_spec second = delta_8_14();
    second.checkpoints = {10};
    const bytes written = write_part(second);
    auto secs = blob_test::split(written);
    blob_test::raw_section * cps = blob_test::find(secs, blob_format::section_type_checkpoints);
    ASSERT_NE(cps, nullptr);
    // The first checkpoint's pos_min, pos_max, n_tokens: 7, 7, 8 (the first part's last checkpoint).
    uint8_t * c = cps->payload.data() + blob_format::k_checkpoints_head_bytes;
    le_store_u32(c, 7);
    le_store_u32(c + 4, 7);
    le_store_u32(c + 8, 8);
    const uint16_t minor = uint16_t(written[10] | written[11] << 8);
    ASSERT_EQ(minor, 2) << "a delta is format 1.2";
    const bytes crafted = blob_test::assemble(blob_test::header_flags(written), secs, 1, minor);
    state_stream_assembler a = assembler_of(family::attention);
    ASSERT_TRUE(a.add(write_part(first)).ok());
    const Status st = a.add(crafted);
    EXPECT_EQ(st.code(), status_code::corrupt) << st.to_string();
    EXPECT_CONTAINS(st.message(), "state stream: part 2: ");
    EXPECT_CONTAINS(st.message(), "checkpoints[0]");
}

}  // namespace
}  // namespace baton::state_stream_test
