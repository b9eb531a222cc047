// blob_parse_test.cpp — the parser over synthetic blobs: round trip, and one case per corruption mode, each
// asserting the status code and that the message names the field.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "blob_test_util.h"

namespace baton {
namespace {

using namespace blob_test;

// expect_error checks that bytes fail to parse with code and a message containing every fragment.
void expect_error(const std::vector<uint8_t> & bytes, status_code code, std::vector<std::string> fragments,
                  const blob_limits & limits = {}) {
    auto r = blob_parse(bytes, limits);
    ASSERT_FALSE(r.ok()) << "parsed although it should have failed with " << fragments[0];
    EXPECT_EQ(r.status().code(), code) << r.status().to_string();
    for (const auto & f : fragments) EXPECT_CONTAINS(r.status().message(), f);
}

TEST(BlobParse, RoundTripSynthetic) {
    synthetic s;
    auto bytes = write_blob(s.parts);
    ASSERT_FALSE(bytes.empty());
    auto r = blob_parse(bytes);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const blob_view & v = r.value();
    EXPECT_EQ(v.version_major, bf::k_version_major);
    EXPECT_EQ(v.version_minor, 0);  // 1.0: a blob without a mac section is written as it always was
    EXPECT_EQ(v.total_bytes, bytes.size());
    EXPECT_EQ(v.identity.fingerprint, s.parts.identity.fingerprint);
    EXPECT_EQ(v.identity.arch, "llama");
    EXPECT_EQ(v.identity.llama_version, "0.7.0");
    EXPECT_EQ(v.identity.n_layer, 4u);
    EXPECT_EQ(v.identity.n_embd, 64u);
    EXPECT_EQ(v.identity.n_vocab, 100u);
    EXPECT_EQ(v.context.type_k, 1);
    EXPECT_EQ(v.context.n_ctx, 256u);
    EXPECT_TRUE(v.context.kv_unified);
    EXPECT_EQ(v.tokens, s.tokens);
    ASSERT_EQ(v.state.size(), s.state.size());
    EXPECT_TRUE(std::equal(v.state.begin(), v.state.end(), s.state.begin()));
    // The state is a view into the input, not a copy.
    EXPECT_GE(v.state.data(), bytes.data());
    EXPECT_LE(v.state.data() + v.state.size(), bytes.data() + bytes.size());
    ASSERT_EQ(v.checkpoints.size(), 2u);
    EXPECT_EQ(v.checkpoints[1].pos_min, 7);
    EXPECT_EQ(v.checkpoints[1].n_tokens, 8u);
    EXPECT_TRUE(std::equal(v.checkpoints[1].data.begin(), v.checkpoints[1].data.end(), s.cp1.begin(), s.cp1.end()));
    ASSERT_TRUE(v.logits.has_value());
    EXPECT_EQ(0, std::memcmp(v.logits->data(), s.logits.data(), s.logits.size() * 4));
    ASSERT_TRUE(v.request.has_value());
    EXPECT_EQ(*v.request, s.request);
}

TEST(BlobParse, RoundTripWithoutOptionalParts) {
    synthetic s(false);
    s.parts.checkpoints.clear();
    auto r = blob_parse(write_blob(s.parts));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_FALSE(r->logits.has_value());
    EXPECT_FALSE(r->request.has_value());
    EXPECT_TRUE(r->checkpoints.empty());
    EXPECT_EQ(r->flags, 0u);
}

TEST(BlobParse, RewriteOfParsedBlobIsIdentical) {
    synthetic s;
    auto bytes = write_blob(s.parts);
    auto r = blob_parse(bytes);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(write_blob(blob_view_parts(r.value())), bytes);
}

TEST(BlobParse, TruncatedAtEverySectionBoundary) {
    synthetic s;
    auto bytes = write_blob(s.parts);
    std::set<size_t> cuts = {0, 4, 8, 10, 12, bf::k_header_bytes - 1, bf::k_header_bytes};
    for (const auto & sec : blob_walk(bytes).sections) {
        cuts.insert(sec.offset);
        cuts.insert(sec.offset + bf::k_frame_head_bytes);
        cuts.insert(sec.offset + bf::k_frame_head_bytes + sec.length);
    }
    for (size_t cut : cuts) {
        SCOPED_TRACE("cut at " + std::to_string(cut));
        std::vector<uint8_t> t(bytes.begin(), bytes.begin() + cut);
        const char * field = cut < 8 ? "magic" : cut < bf::k_header_bytes ? (cut < 12 ? "version" : "header") : "total_bytes";
        expect_error(t, status_code::corrupt, {field, "truncated"});
        // The same cut with total_bytes made consistent: the frame walk must catch it by itself.
        if (cut > bf::k_header_bytes) {
            le_store_u64(t.data() + bf::k_off_total_bytes, t.size());
            reseal_header(t);
            auto r = blob_parse(t);
            ASSERT_FALSE(r.ok());
            EXPECT_EQ(r.status().code(), status_code::corrupt);
            const std::string m = r.status().message();
            EXPECT_TRUE(m.find("n_sections") != m.npos || m.find("length") != m.npos ||
                        m.find("frame head truncated") != m.npos)
                << m;
        }
    }
}

TEST(BlobParse, TruncatedAtRandomOffsets) {
    synthetic s;
    auto bytes = write_blob(s.parts);
    std::mt19937 rng(42);
    for (int i = 0; i < 500; ++i) {
        const size_t cut = rng() % bytes.size();
        std::vector<uint8_t> t(bytes.begin(), bytes.begin() + cut);
        auto r = blob_parse(t);
        ASSERT_FALSE(r.ok()) << "cut at " << cut;
        EXPECT_EQ(r.status().code(), status_code::corrupt) << r.status().to_string();
        SCOPED_TRACE("cut at " + std::to_string(cut));
        EXPECT_CONTAINS(r.status().message(), "truncated");
    }
}

TEST(BlobParse, FlippedByteInsideEachSectionIsCaughtByItsChecksum) {
    synthetic s;
    auto bytes = write_blob(s.parts);
    auto layout = blob_walk(bytes);
    ASSERT_EQ(layout.sections.size(), 7u);
    for (const auto & sec : layout.sections) {
        for (uint64_t where : {uint64_t(0), sec.length / 2, sec.length - 1}) {
            auto t = bytes;
            t[sec.offset + bf::k_frame_head_bytes + where] ^= 0x40;
            expect_error(t, status_code::corrupt,
                         {sec.name + ": checksum mismatch at +" + std::to_string(sec.offset), "stored 0x", "computed 0x"});
        }
        auto t = bytes;  // the stored checksum itself
        t[sec.offset + bf::k_frame_head_bytes + sec.length + 3] ^= 1;
        expect_error(t, status_code::corrupt, {sec.name + ": checksum mismatch"});
    }
}

TEST(BlobParse, HeaderChecksum) {
    auto bytes = write_blob(synthetic().parts);
    for (size_t off : {size_t(12), size_t(16), size_t(20), size_t(24), size_t(33)}) {
        auto t = bytes;
        t[off] ^= 0x01;
        expect_error(t, status_code::corrupt, {"header: checksum mismatch at +32"});
    }
}

TEST(BlobParse, BadMagic) {
    auto bytes = write_blob(synthetic().parts);
    bytes[3] = 'X';
    expect_error(bytes, status_code::corrupt, {"magic: expected \"BATNBLOB\"", "at +0"});
    expect_error(std::vector<uint8_t>{'G', 'G', 'U', 'F'}, status_code::corrupt, {"magic", "truncated"});
}

TEST(BlobParse, NewerMajorVersionNamesBothVersions) {
    auto bytes = write_blob(synthetic().parts);
    le_store_u16(bytes.data() + bf::k_off_version_major, 2);
    le_store_u16(bytes.data() + bf::k_off_version_minor, 3);
    expect_error(bytes, status_code::unsupported, {"version_major", "format 2.3", "reads format 1.4"});
    le_store_u16(bytes.data() + bf::k_off_version_major, 0);
    expect_error(bytes, status_code::unsupported, {"version_major", "format 0.3"});
}

TEST(BlobParse, NewerMinorVersionIsAccepted) {
    synthetic s;
    auto bytes = assemble(header_flags(write_blob(s.parts)), split(write_blob(s.parts)), 1, 7);
    auto r = blob_parse(bytes);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->version_minor, 7);
}

TEST(BlobParse, SectionLengthThatOverflows64BitArithmetic) {
    auto bytes = write_blob(synthetic().parts);
    auto layout = blob_walk(bytes);
    for (uint64_t len : {UINT64_MAX, UINT64_MAX - 8, UINT64_MAX - 23, uint64_t(1) << 63}) {
        auto t = bytes;
        const auto & tokens = layout.sections[2];
        ASSERT_EQ(tokens.name, "tokens");
        le_store_u64(t.data() + tokens.offset + 8, len);
        expect_error(t, status_code::corrupt, {"tokens: length " + std::to_string(len) + " exceeds"});
    }
}

TEST(BlobParse, CheckpointLengthThatOverflows64BitArithmetic) {
    synthetic s;
    auto secs = split(write_blob(s.parts));
    auto * cps = find(secs, bf::section_type_checkpoints);
    for (uint64_t len : {UINT64_MAX, UINT64_MAX - 23}) {
        le_store_u64(cps->payload.data() + 8 + 16, len);
        expect_error(assemble(3, secs), status_code::corrupt, {"checkpoints[0]: n_bytes " + std::to_string(len), "exceeds"});
    }
}

TEST(BlobParse, TokenCountOverTheLimit) {
    auto bytes = write_blob(synthetic().parts);
    blob_limits lim;
    lim.max_tokens = 5;
    expect_error(bytes, status_code::too_large, {"tokens: n_tokens 10 > max_tokens 5 at +"}, lim);
}

TEST(BlobParse, CheckpointCountOverTheLimit) {
    auto bytes = write_blob(synthetic().parts);
    blob_limits lim;
    lim.max_checkpoints = 1;
    expect_error(bytes, status_code::too_large, {"checkpoints: n_checkpoints 2 > max_checkpoints 1"}, lim);
}

TEST(BlobParse, TotalBytesOverTheLimit) {
    auto bytes = write_blob(synthetic().parts);
    blob_limits lim;
    lim.max_bytes = bytes.size() - 1;
    expect_error(bytes, status_code::too_large, {"max_bytes " + std::to_string(bytes.size() - 1)}, lim);
    // A header announcing more than the limit is rejected on the header alone (before the body arrives).
    std::vector<uint8_t> head(bytes.begin(), bytes.begin() + bf::k_header_bytes);
    le_store_u64(head.data() + bf::k_off_total_bytes, uint64_t(1) << 40);
    reseal_header(head);
    expect_error(head, status_code::too_large, {"total_bytes: 1099511627776 > max_bytes"});
}

TEST(BlobParse, TokenIdNotBelowNVocab) {
    synthetic s;
    auto secs = split(write_blob(s.parts));
    auto * tok = find(secs, bf::section_type_tokens);
    le_store_u32(tok->payload.data() + 4 + 4 * 3, 100);
    expect_error(assemble(3, secs), status_code::corrupt, {"tokens: token[3] = 100 is not in 0..n_vocab 100"});
    le_store_u32(tok->payload.data() + 4 + 4 * 3, uint32_t(-1));
    expect_error(assemble(3, secs), status_code::corrupt, {"tokens: token[3] = -1"});
    expect_error(assemble(3, secs, 1, 3), status_code::corrupt, {"tokens: token[3] = -1", "nor a media token"});
}

// ---- media tokens (format 1.3): an image's embeddings in the token list ----

TEST(BlobParse, MediaTokensMakeTheBlobFormat13AndRoundTrip) {
    synthetic s;
    s.tokens[2] = media_token_min + 5;
    s.tokens[3] = media_token_min + int32_t(media_token_count) - 1;
    s.parts.tokens = s.tokens;
    const auto bytes = write_blob(s.parts);
    auto v = blob_parse(bytes);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    EXPECT_EQ(v->version_minor, 3);
    EXPECT_EQ(std::vector<int32_t>(v->tokens.begin(), v->tokens.end()), s.tokens);
    EXPECT_EQ(write_blob(synthetic().parts)[bf::k_off_version_minor], 0);  // (without them: 1.0 as before)
}

TEST(BlobParse, MediaTokenInABlobBelowFormat13IsRejected) {
    synthetic s;
    auto secs = split(write_blob(s.parts));
    le_store_u32(find(secs, bf::section_type_tokens)->payload.data() + 4 + 4 * 3, uint32_t(media_token_min + 9));
    expect_error(assemble(3, secs, 1, 2), status_code::corrupt,
                 {"token[3]", "is a media token", "format 1.2", "(1.3)"});
    EXPECT_TRUE(blob_parse(assemble(3, secs, 1, 3)).ok());
}

TEST(BlobParse, IdJustPastTheMediaRangeIsRejected) {
    synthetic s;
    auto secs = split(write_blob(s.parts));
    le_store_u32(find(secs, bf::section_type_tokens)->payload.data() + 4,
                 uint32_t(media_token_min + int32_t(media_token_count)));
    expect_error(assemble(3, secs, 1, 3), status_code::corrupt, {"token[0]", "nor a media token"});
}

TEST(BlobParse, CheckpointOutOfRange) {
    synthetic s;
    auto secs = split(write_blob(s.parts));
    auto * cps = find(secs, bf::section_type_checkpoints);
    const size_t e1 = 8 + 24 + s.cp0.size();  // second entry
    auto t = secs;
    le_store_u32(find(t, bf::section_type_checkpoints)->payload.data() + e1 + 8, 11);
    expect_error(assemble(3, t), status_code::corrupt, {"checkpoints[1]: n_tokens 11 is not in 1..n_tokens 10"});
    t = secs;
    le_store_u32(find(t, bf::section_type_checkpoints)->payload.data() + 8 + 4, 4);  // pos_max 4, n_tokens 4
    expect_error(assemble(3, t), status_code::corrupt, {"checkpoints[0]: pos_max 4 >= n_tokens 4"});
    t = secs;
    le_store_u32(find(t, bf::section_type_checkpoints)->payload.data() + 8, uint32_t(-2));
    expect_error(assemble(3, t), status_code::corrupt, {"checkpoints[0]: pos_min -2"});
    (void)cps;
}

TEST(BlobParse, CheckpointsUnordered) {
    synthetic s;
    auto secs = split(write_blob(s.parts));
    const size_t e1 = 8 + 24 + s.cp0.size();
    le_store_u32(find(secs, bf::section_type_checkpoints)->payload.data() + e1 + 8, 4);
    expect_error(assemble(3, secs), status_code::corrupt, {"checkpoints[1]: n_tokens 4 <= previous 4", "ordered"});
}

TEST(BlobParse, LogitsSizeNotNVocabTimes4) {
    synthetic s;
    for (int delta : {-4, -1, 4}) {
        auto secs = split(write_blob(s.parts));
        auto * lg = find(secs, bf::section_type_logits);
        lg->payload.resize(size_t(400 + delta));
        expect_error(assemble(3, secs), status_code::corrupt,
                     {"logits: length " + std::to_string(400 + delta) + " bytes != n_vocab 100 * 4 = 400"});
    }
}

TEST(BlobParse, TrailingBytes) {
    auto bytes = write_blob(synthetic().parts);
    auto t = bytes;
    t.push_back(0);
    expect_error(t, status_code::corrupt, {"trailing bytes: 1 after total_bytes"});
    // Counted in total_bytes but not in any section.
    expect_error(assemble(3, split(bytes), 1, 0, -1, 5), status_code::corrupt, {"trailing bytes: 5 after the last of n_sections 7"});
}

TEST(BlobParse, DuplicateSection) {
    auto secs = split(write_blob(synthetic().parts));
    secs.push_back(*find(secs, bf::section_type_tokens));
    expect_error(assemble(3, secs), status_code::corrupt, {"duplicate section tokens at +", "first at +"});
}

TEST(BlobParse, MissingMandatorySection) {
    const auto all = split(write_blob(synthetic().parts));
    for (uint32_t type : {bf::section_type_identity, bf::section_type_context, bf::section_type_tokens,
                          bf::section_type_state, bf::section_type_checkpoints}) {
        auto secs = all;
        std::erase_if(secs, [&](const raw_section & s) { return s.type == type; });
        expect_error(assemble(3, secs), status_code::corrupt,
                     {std::string("missing mandatory section ") + bf::section_type_name(type)});
    }
}

TEST(BlobParse, UnknownOptionalSectionIsSkipped) {
    synthetic s;
    auto secs = split(write_blob(s.parts));
    secs.insert(secs.begin() + 2, raw_section{99, bf::k_section_flag_optional, {1, 2, 3}});
    auto r = blob_parse(assemble(3, secs, 1, 2));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->tokens, s.tokens);
}

TEST(BlobParse, UnknownMandatorySectionIsRejected) {
    auto secs = split(write_blob(synthetic().parts));
    secs.push_back(raw_section{99, 0, {1, 2, 3}});
    expect_error(assemble(3, secs, 1, 5), status_code::unsupported,
                 {"type 99", "not flagged optional", "blob format 1.5", "reads 1.4"});
}

TEST(BlobParse, UnknownSectionFlagBitsAreRejected) {
    auto secs = split(write_blob(synthetic().parts));
    find(secs, bf::section_type_state)->flags = 4;
    expect_error(assemble(3, secs), status_code::corrupt, {"state: flags unknown bits"});
}

TEST(BlobParse, StateRestatedTokenCountDisagrees) {
    auto secs = split(write_blob(synthetic().parts));
    le_store_u32(find(secs, bf::section_type_state)->payload.data(), 9);
    expect_error(assemble(3, secs), status_code::corrupt, {"state: n_tokens 9 disagrees with the tokens section's n_tokens 10"});
}

TEST(BlobParse, TokenCountDisagreesWithSectionLength) {
    auto secs = split(write_blob(synthetic().parts));
    le_store_u32(find(secs, bf::section_type_tokens)->payload.data(), 11);
    expect_error(assemble(3, secs), status_code::corrupt, {"tokens: n_tokens 11 needs 44 bytes", "holds 40"});
}

TEST(BlobParse, SectionCountDisagrees) {
    const auto secs = split(write_blob(synthetic().parts));
    expect_error(assemble(3, secs, 1, 0, 8), status_code::corrupt, {"n_sections: header says 8 but the blob ends after 7"});
    expect_error(assemble(3, secs, 1, 0, 6), status_code::corrupt, {"trailing bytes", "n_sections 6"});
}

TEST(BlobParse, PresenceFlagsDisagreeWithSections) {
    const auto secs = split(write_blob(synthetic().parts));
    expect_error(assemble(2, secs), status_code::corrupt, {"flags: has_logits is clear but the logits section is present"});
    expect_error(assemble(1, secs), status_code::corrupt, {"flags: has_request is clear"});
    auto no_logits = secs;
    std::erase_if(no_logits, [](const raw_section & s) { return s.type == bf::section_type_logits; });
    expect_error(assemble(3, no_logits), status_code::corrupt, {"flags: has_logits is set but the logits section is absent"});
    expect_error(assemble(3 | 16, secs), status_code::corrupt, {"flags: unknown bits 0x0000000000000010"});
    expect_error(assemble(3 | 4, secs, 1, 2), status_code::corrupt,
                 {"flags: delta is set but the base section is absent"});
}

// ---- deltas (format 1.2): the base section ----

synthetic delta_parts(uint32_t base) {
    synthetic s;
    s.parts.base_tokens = base;
    s.parts.checkpoints.erase(s.parts.checkpoints.begin());  // the one at 4 tokens is not past a base of 4+
    return s;
}

TEST(BlobParseDelta, RoundTripCarriesTheBaseAndItsHash) {
    synthetic s = delta_parts(6);
    const auto bytes = write_blob(s.parts);
    ASSERT_FALSE(bytes.empty());
    auto v = blob_parse(bytes);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    EXPECT_EQ(v->version_minor, 2);
    EXPECT_EQ(v->flags & bf::k_flag_delta, bf::k_flag_delta);
    EXPECT_EQ(v->base_tokens, 6u);
    EXPECT_EQ(v->base_hash, blob_tokens_hash(std::span<const int32_t>(s.tokens).first(6)));
    EXPECT_NE(v->base_hash, blob_tokens_hash(std::span<const int32_t>(s.tokens).first(5)));
    EXPECT_EQ(v->tokens, s.tokens);  // the token section lists every token, the base's too
    // Rewritten from the view: identical bytes (the base survives blob_view_parts).
    blob_buffer_sink again;
    ASSERT_TRUE(blob_write(blob_view_parts(v.value()), again).ok());
    EXPECT_EQ(again.bytes(), bytes);
}

TEST(BlobParseDelta, BaseHashThatDoesNotMatchTheTokensIsRefused) {
    auto secs = split(write_blob(delta_parts(6).parts));
    find(secs, bf::section_type_base)->payload[8] ^= 1;
    expect_error(assemble(7, secs, 1, 2), status_code::corrupt,
                 {"base: base_hash does not match the first 6 tokens", "at +"});
    // A token of the base changed, hash kept: the same refusal.
    auto secs2 = split(write_blob(delta_parts(6).parts));
    le_store_u32(find(secs2, bf::section_type_tokens)->payload.data() + 4 + 4 * 2, 55);
    expect_error(assemble(7, secs2, 1, 2), status_code::corrupt, {"base_hash does not match"});
}

TEST(BlobParseDelta, BaseOutsideTheTokensIsRefused) {
    for (uint32_t n : {0u, 10u, 11u, 0xFFFFFFFFu}) {
        auto secs = split(write_blob(delta_parts(6).parts));
        le_store_u32(find(secs, bf::section_type_base)->payload.data(), n);
        expect_error(assemble(7, secs, 1, 2), status_code::corrupt,
                     {"base: n_base " + std::to_string(n), "1..n_tokens-1"});
    }
}

TEST(BlobParseDelta, MalformedBaseSectionIsRefused) {
    auto secs = split(write_blob(delta_parts(6).parts));
    le_store_u32(find(secs, bf::section_type_base)->payload.data() + 4, 1);
    expect_error(assemble(7, secs, 1, 2), status_code::corrupt, {"base: reserved"});
    auto shorter = split(write_blob(delta_parts(6).parts));
    find(shorter, bf::section_type_base)->payload.resize(20);
    expect_error(assemble(7, shorter, 1, 2), status_code::corrupt, {"base: base_hash length 16 exceeds"});
    auto longer = split(write_blob(delta_parts(6).parts));
    find(longer, bf::section_type_base)->payload.push_back(0);
    expect_error(assemble(7, longer, 1, 2), status_code::corrupt, {"base: 1 trailing bytes"});
}

TEST(BlobParseDelta, BaseSectionWithoutItsFlagOrInAnOlderMinorIsRefused) {
    const auto secs = split(write_blob(delta_parts(6).parts));
    expect_error(assemble(3, secs, 1, 2), status_code::corrupt,
                 {"flags: delta is clear but the base section is present"});
    expect_error(assemble(7, secs, 1, 1), status_code::corrupt, {"base: a delta in a format 1.1 blob"});
}

TEST(BlobParseDelta, CheckpointAtOrBelowTheBaseIsRefused) {
    synthetic s;  // checkpoints at 4 and 8 tokens
    auto secs = split(write_blob(s.parts));
    // Insert a base of 4 tokens behind the writer's back: the checkpoint at 4 is not past it.
    raw_section base{bf::section_type_base, 0, std::vector<uint8_t>(bf::k_base_payload_bytes)};
    le_store_u32(base.payload.data(), 4);
    const auto h = blob_tokens_hash(std::span<const int32_t>(s.tokens).first(4));
    std::memcpy(base.payload.data() + 8, h.data(), h.size());
    secs.push_back(base);
    expect_error(assemble(7, secs, 1, 2), status_code::corrupt,
                 {"checkpoints[0]: n_tokens 4 is not past the delta's base of 4 tokens"});
}

TEST(BlobWriteDelta, WriterRefusesWhatTheParserWouldRefuse) {
    for (uint32_t n : {10u, 11u}) {
        synthetic s = delta_parts(n);
        blob_buffer_sink sink;
        Status st = blob_write(s.parts, sink);
        EXPECT_EQ(st.code(), status_code::invalid_argument);
        EXPECT_CONTAINS(st.message(), "base: n_base " + std::to_string(n));
    }
    synthetic s;  // a checkpoint at 4 tokens, base 4
    s.parts.base_tokens = 4;
    blob_buffer_sink sink;
    Status st = blob_write(s.parts, sink);
    EXPECT_EQ(st.code(), status_code::invalid_argument);
    EXPECT_CONTAINS(st.message(), "checkpoints[0]: n_tokens 4 is not past");
}

// ---- a generation in progress (format 1.4): the generation section ----

// generation_parts: the synthetic parts (10 tokens, logits, request) whose last n_generated tokens were generated.
synthetic generation_parts(uint32_t n_generated = 4, uint32_t n_cached = 3) {
    synthetic s;
    s.parts.generation = blob_generation{n_generated, n_cached};
    return s;
}

// generation_flags: the header flags of a blob with logits, request and a generation.
constexpr uint32_t generation_flags = bf::k_flag_has_logits | bf::k_flag_has_request | bf::k_flag_generation;

// The absolute offset of the generation section's payload in a blob written from generation_parts.
uint64_t generation_payload_offset(const std::vector<uint8_t> & bytes) {
    for (const auto & sec : blob_walk(bytes).sections)
        if (sec.type == bf::section_type_generation) return sec.offset + bf::k_frame_head_bytes;
    ADD_FAILURE() << "no generation section";
    return 0;
}

TEST(BlobParseGeneration, RoundTripCarriesTheGenerationAsFormat14) {
    synthetic s = generation_parts(4, 3);
    const auto bytes = write_blob(s.parts);
    ASSERT_FALSE(bytes.empty());
    auto v = blob_parse(bytes);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    EXPECT_EQ(v->version_minor, 4);
    EXPECT_EQ(v->flags & bf::k_flag_generation, bf::k_flag_generation);
    EXPECT_EQ(v->flags, generation_flags);
    ASSERT_TRUE(v->generation.has_value());
    EXPECT_EQ(v->generation->n_generated, 4u);
    EXPECT_EQ(v->generation->n_cached, 3u);
    EXPECT_EQ(*v->generation, *s.parts.generation);
    EXPECT_EQ(v->tokens, s.tokens);
    ASSERT_TRUE(v->logits.has_value());
    // The section is on the wire as the format says: type 10, mandatory (flags 0), 16 bytes, reserved zero.
    const auto secs = split(bytes);
    ASSERT_EQ(secs.size(), 8u);
    const raw_section * g = nullptr;
    for (const auto & sec : secs)
        if (sec.type == bf::section_type_generation) g = &sec;
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->flags, 0u) << "a reader that does not know the section must refuse the blob";
    ASSERT_EQ(g->payload.size(), bf::k_generation_payload_bytes);
    EXPECT_EQ(byte_cursor::load_u32(g->payload.data()), 4u);
    EXPECT_EQ(byte_cursor::load_u32(g->payload.data() + 4), 3u);
    EXPECT_EQ(byte_cursor::load_u32(g->payload.data() + 8), 0u);
    EXPECT_EQ(byte_cursor::load_u32(g->payload.data() + 12), 0u);
    // Rewritten from the view: identical bytes (the generation survives blob_view_parts).
    const blob_parts again = blob_view_parts(v.value());
    ASSERT_TRUE(again.generation.has_value());
    EXPECT_EQ(*again.generation, *s.parts.generation);
    EXPECT_EQ(write_blob(again), bytes);
    // Without a generation the same parts stay format 1.0 and carry no generation.
    auto plain = blob_parse(write_blob(synthetic().parts));
    ASSERT_TRUE(plain.ok()) << plain.status().to_string();
    EXPECT_EQ(plain->version_minor, 0);
    EXPECT_FALSE(plain->generation.has_value());
    EXPECT_EQ(plain->flags & bf::k_flag_generation, 0u);
}

TEST(BlobParseGeneration, TheBoundsOfTheRulesParse) {
    // No token generated yet (the first token is next), and all but one token generated with the whole
    // one-token prompt cached.
    for (auto [n_generated, n_cached] : {std::pair{0u, 0u}, std::pair{0u, 10u}, std::pair{9u, 1u}, std::pair{9u, 0u}}) {
        auto v = blob_parse(write_blob(generation_parts(n_generated, n_cached).parts));
        ASSERT_TRUE(v.ok()) << n_generated << "/" << n_cached << ": " << v.status().to_string();
        EXPECT_EQ(*v->generation, (blob_generation{n_generated, n_cached}));
    }
}

TEST(BlobParseGeneration, GenerationOutranksTheOtherVersions) {
    // A delta (1.2) with media tokens (1.3) and a generation: 1.4, all three carried.
    synthetic s = generation_parts(2, 1);
    s.parts.base_tokens = 6;
    s.parts.checkpoints.erase(s.parts.checkpoints.begin());  // the one at 4 tokens is not past a base of 6
    s.tokens[7] = media_token_min + 1;
    s.parts.tokens = s.tokens;
    auto v = blob_parse(write_blob(s.parts));
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    EXPECT_EQ(v->version_minor, 4);
    EXPECT_EQ(v->base_tokens, 6u);
    EXPECT_EQ(v->flags, generation_flags | bf::k_flag_delta);
    EXPECT_EQ(*v->generation, (blob_generation{2, 1}));
}

TEST(BlobParseGeneration, FlagSetWithoutTheSectionIsRefused) {
    auto secs = split(write_blob(generation_parts().parts));
    std::erase_if(secs, [](const raw_section & s) { return s.type == bf::section_type_generation; });
    expect_error(assemble(generation_flags, secs, 1, 4), status_code::corrupt,
                 {"flags: generation is set but the generation section is absent", "at +12"});
}

TEST(BlobParseGeneration, SectionWithoutTheFlagIsRefused) {
    const auto secs = split(write_blob(generation_parts().parts));
    expect_error(assemble(generation_flags & ~bf::k_flag_generation, secs, 1, 4), status_code::corrupt,
                 {"flags: generation is clear but the generation section is present", "at +12"});
}

TEST(BlobParseGeneration, SectionInABlobBelowFormat14IsRefused) {
    // The version patched down in the header itself, its checksum resealed.
    auto bytes = write_blob(generation_parts().parts);
    ASSERT_EQ(bytes[bf::k_off_version_minor], 4);
    le_store_u16(bytes.data() + bf::k_off_version_minor, 3);
    reseal_header(bytes);
    const uint64_t frame = generation_payload_offset(bytes) - bf::k_frame_head_bytes;
    expect_error(bytes, status_code::corrupt,
                 {"generation: a generation section in a format 1.3 blob (it is 1.4)", "at +" + std::to_string(frame)});
    // And in a 1.0 blob.
    expect_error(assemble(generation_flags, split(bytes), 1, 0), status_code::corrupt,
                 {"generation: a generation section in a format 1.0 blob"});
}

TEST(BlobParseGeneration, NonzeroReservedFieldIsRefused) {
    const auto bytes = write_blob(generation_parts().parts);
    const uint64_t payload = generation_payload_offset(bytes);
    for (size_t field : {size_t(8), size_t(12)}) {
        auto secs = split(bytes);
        le_store_u32(find(secs, bf::section_type_generation)->payload.data() + field, 1);
        expect_error(assemble(generation_flags, secs, 1, 4), status_code::corrupt,
                     {"generation: reserved 0x0000000000000001 is not 0", "at +" + std::to_string(payload + field)});
    }
}

TEST(BlobParseGeneration, AGenerationWithoutAPromptTokenIsRefused) {
    const auto bytes = write_blob(generation_parts().parts);
    const uint64_t payload = generation_payload_offset(bytes);
    for (uint32_t n : {10u, 11u, 0xFFFFFFFFu}) {
        auto secs = split(bytes);
        le_store_u32(find(secs, bf::section_type_generation)->payload.data(), n);
        le_store_u32(find(secs, bf::section_type_generation)->payload.data() + 4, 0);
        expect_error(assemble(generation_flags, secs, 1, 4), status_code::corrupt,
                     {"generation: n_generated " + std::to_string(n) + " is not below n_tokens 10",
                      "at +" + std::to_string(payload)});
    }
}

TEST(BlobParseGeneration, MoreCachedTokensThanThePromptHasAreRefused) {
    const auto bytes = write_blob(generation_parts(4, 3).parts);
    const uint64_t payload = generation_payload_offset(bytes);
    auto secs = split(bytes);
    le_store_u32(find(secs, bf::section_type_generation)->payload.data() + 4, 7);
    expect_error(assemble(generation_flags, secs, 1, 4), status_code::corrupt,
                 {"generation: n_cached 7 exceeds the prompt's 6 tokens", "at +" + std::to_string(payload + 4)});
    le_store_u32(find(secs, bf::section_type_generation)->payload.data() + 4, 0xFFFFFFFFu);
    expect_error(assemble(generation_flags, secs, 1, 4), status_code::corrupt,
                 {"generation: n_cached 4294967295 exceeds the prompt's 6 tokens"});
    le_store_u32(find(secs, bf::section_type_generation)->payload.data() + 4, 6);  // the whole prompt: fine
    EXPECT_TRUE(blob_parse(assemble(generation_flags, secs, 1, 4)).ok());
}

TEST(BlobParseGeneration, AGenerationWithoutLogitsIsRefused) {
    auto secs = split(write_blob(generation_parts().parts));
    std::erase_if(secs, [](const raw_section & s) { return s.type == bf::section_type_logits; });
    expect_error(assemble(generation_flags & ~bf::k_flag_has_logits, secs, 1, 4), status_code::corrupt,
                 {"generation: a generation in progress needs the logits it continues from",
                  "at +" + std::to_string(bf::k_off_flags)});
}

TEST(BlobParseGeneration, PayloadOfAnotherLengthIsRefused) {
    const auto bytes = write_blob(generation_parts().parts);
    struct length_case {
        size_t size;
        std::string what;
    };
    // (the length is checked before any field: a short payload's fields are never read)
    for (const length_case & c : std::vector<length_case>{{0, "generation: length 0 bytes != 16"},
                                                          {4, "generation: length 4 bytes != 16"},
                                                          {12, "generation: length 12 bytes != 16"},
                                                          {15, "generation: length 15 bytes != 16"},
                                                          {17, "generation: length 17 bytes != 16"},
                                                          {20, "generation: length 20 bytes != 16"}}) {
        SCOPED_TRACE("length " + std::to_string(c.size));
        auto secs = split(bytes);
        find(secs, bf::section_type_generation)->payload.resize(c.size);  // (grown with zeros)
        expect_error(assemble(generation_flags, secs, 1, 4), status_code::corrupt, {c.what});
    }
}

TEST(BlobParseGeneration, DuplicateSectionIsRefused) {
    auto secs = split(write_blob(generation_parts().parts));
    secs.push_back(*find(secs, bf::section_type_generation));
    expect_error(assemble(generation_flags, secs, 1, 4), status_code::corrupt, {"duplicate section generation"});
}

TEST(BlobParse, TokensOverContextSize) {
    auto secs = split(write_blob(synthetic().parts));
    le_store_u32(find(secs, bf::section_type_context)->payload.data() + 16, 5);
    expect_error(assemble(3, secs), status_code::corrupt, {"tokens: n_tokens 10 > n_ctx 5 at +"});
}

TEST(BlobParse, BadContextFields) {
    const auto secs = split(write_blob(synthetic().parts));
    auto t = secs;
    find(t, bf::section_type_context)->payload[8] = 2;
    expect_error(assemble(3, t), status_code::corrupt, {"context: flash_attn 2 is not 0 or 1"});
    t = secs;
    find(t, bf::section_type_context)->payload[9] = 9;
    expect_error(assemble(3, t), status_code::corrupt, {"context: kv_unified 9"});
    t = secs;
    le_store_u32(find(t, bf::section_type_context)->payload.data() + 12, 0);
    expect_error(assemble(3, t), status_code::corrupt, {"context: n_seq_max is 0"});
    t = secs;
    find(t, bf::section_type_context)->payload.push_back(0);
    expect_error(assemble(3, t), status_code::corrupt, {"context: 1 trailing bytes"});
}

TEST(BlobParse, BadIdentityFields) {
    const auto secs = split(write_blob(synthetic().parts));
    auto t = secs;
    find(t, bf::section_type_identity)->payload[30] = 0x01;  // first byte of arch
    expect_error(assemble(3, t), status_code::corrupt, {"identity: arch is not printable ASCII"});
    t = secs;
    le_store_u16(find(t, bf::section_type_identity)->payload.data() + 28, 200);
    expect_error(assemble(3, t), status_code::corrupt, {"identity: arch_len 200 is not in 1..64"});
    t = secs;
    find(t, bf::section_type_identity)->payload.resize(20);
    expect_error(assemble(3, t), status_code::corrupt, {"identity: n_embd truncated"});
}

TEST(BlobWalk, ReportsChecksumStatusOfACorruptBlob) {
    auto bytes = write_blob(synthetic().parts);
    auto layout = blob_walk(bytes);
    ASSERT_EQ(layout.sections.size(), 7u);
    const auto & st = layout.sections[3];
    ASSERT_EQ(st.name, "state");
    bytes[st.offset + 100] ^= 1;
    bytes.resize(bytes.size() - 10);
    layout = blob_walk(bytes);
    EXPECT_TRUE(layout.magic_ok);
    EXPECT_EQ(layout.header_checksum_stored, layout.header_checksum_computed);
    ASSERT_EQ(layout.sections.size(), 7u);
    EXPECT_TRUE(layout.sections[2].complete);
    EXPECT_EQ(layout.sections[2].checksum_stored, layout.sections[2].checksum_computed);
    EXPECT_NE(layout.sections[3].checksum_stored, layout.sections[3].checksum_computed);
    EXPECT_FALSE(layout.sections[6].complete);
    EXPECT_CONTAINS(layout.stopped, "request");
}

}  // namespace
}  // namespace baton
