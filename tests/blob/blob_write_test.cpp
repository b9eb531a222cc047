// blob_write_test.cpp — the writer rejects bad parts naming the field; every sink sees the same bytes.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <thread>

#include "blob_test_util.h"
#include "support/test_support.h"

namespace baton {
namespace {

using namespace blob_test;

void expect_rejected(const blob_parts & p, const std::string & fragment) {
    blob_size_sink sink;
    Status st = blob_write(p, sink);
    ASSERT_FALSE(st.ok()) << "accepted parts that should fail with " << fragment;
    EXPECT_EQ(st.code(), status_code::invalid_argument);
    EXPECT_CONTAINS(st.message(), fragment);
    EXPECT_EQ(sink.size(), 0u) << "nothing may be written before the parts are validated";
}

TEST(BlobWrite, RejectsBadParts) {
    {
        synthetic s;
        s.tokens[4] = 100;
        expect_rejected(s.parts, "tokens: token[4] = 100 is not in 0..n_vocab 100");
    }
    {
        synthetic s;
        s.tokens[0] = -3;
        expect_rejected(s.parts, "tokens: token[0] = -3");
    }
    {
        synthetic s;
        s.parts.tokens = {};
        expect_rejected(s.parts, "tokens: n_tokens is 0");
    }
    {
        synthetic s;
        s.parts.context.n_ctx = 4;
        expect_rejected(s.parts, "tokens: n_tokens 10 > n_ctx 4");
    }
    {
        synthetic s;
        s.parts.logits = std::span<const float>(s.logits).first(99);
        expect_rejected(s.parts, "logits: 99 values, expected n_vocab 100");
    }
    {
        synthetic s;
        std::swap(s.parts.checkpoints[0], s.parts.checkpoints[1]);
        expect_rejected(s.parts, "checkpoints[1]: n_tokens 4 <= previous 8");
    }
    {
        synthetic s;
        s.parts.checkpoints[1].n_tokens = 11;
        expect_rejected(s.parts, "checkpoints[1]: n_tokens 11 is not in 1..n_tokens 10");
    }
    {
        synthetic s;
        s.parts.checkpoints[0].pos_max = 4;
        expect_rejected(s.parts, "checkpoints[0]: pos_max 4 >= n_tokens");
    }
    {
        synthetic s;
        s.parts.checkpoints[0].data = {};
        expect_rejected(s.parts, "checkpoints[0]: data is empty");
    }
    {
        synthetic s;
        s.parts.state = {};
        expect_rejected(s.parts, "state: empty");
    }
    {
        synthetic s;
        s.parts.identity.arch = "";
        expect_rejected(s.parts, "identity: arch length 0");
    }
    {
        synthetic s;
        s.parts.identity.llama_version = std::string(65, 'x');
        expect_rejected(s.parts, "identity: llama_version length 65");
    }
    {
        synthetic s;
        s.parts.identity.arch = "lla\nma";
        expect_rejected(s.parts, "identity: arch is not printable");
    }
    {
        synthetic s;
        s.parts.identity.n_vocab = 0;
        expect_rejected(s.parts, "identity: n_vocab is 0");
    }
    {
        synthetic s;
        s.parts.context.n_seq_max = 0;
        expect_rejected(s.parts, "context: n_seq_max is 0");
    }
    {
        synthetic s;
        s.parts.context.type_v = -1;
        expect_rejected(s.parts, "context: type_v -1");
    }
}

// ---- a generation in progress (format 1.4): the generation section ----

TEST(BlobWriteGeneration, RefusesAGenerationWithoutAPromptToken) {
    for (uint32_t n : {10u, 11u, 0xFFFFFFFFu}) {
        synthetic s;
        s.parts.generation = blob_generation{n, 0};
        expect_rejected(s.parts, "generation: n_generated " + std::to_string(n) + " is not below n_tokens 10");
    }
}

TEST(BlobWriteGeneration, RefusesMoreCachedTokensThanThePromptHas) {
    synthetic s;
    s.parts.generation = blob_generation{4, 7};
    expect_rejected(s.parts, "generation: n_cached 7 exceeds the prompt's 6 tokens");
    s.parts.generation = blob_generation{0, 11};
    expect_rejected(s.parts, "generation: n_cached 11 exceeds the prompt's 10 tokens");
    // The whole prompt cached is fine.
    s.parts.generation = blob_generation{4, 6};
    blob_size_sink sink;
    EXPECT_TRUE(blob_write(s.parts, sink).ok());
}

TEST(BlobWriteGeneration, RefusesAGenerationWithoutLogits) {
    synthetic s(false);
    s.parts.generation = blob_generation{3, 2};
    expect_rejected(s.parts, "generation: a generation in progress needs the logits");
    s.parts.request = s.request;  // a request is no substitute
    expect_rejected(s.parts, "generation: a generation in progress needs the logits");
}

TEST(BlobWriteGeneration, SizeSinkCountsTheGenerationSection) {
    synthetic s;
    s.parts.generation = blob_generation{3, 2};
    blob_size_sink with;
    ASSERT_TRUE(blob_write(s.parts, with).ok());
    EXPECT_EQ(with.size(), write_blob(s.parts).size());
    EXPECT_EQ(with.size(), write_blob(synthetic().parts).size() + bf::k_frame_bytes + bf::k_generation_payload_bytes);
}

TEST(BlobWrite, SizeSinkCountsWhatTheBufferSinkHolds) {
    synthetic s;
    blob_size_sink size;
    blob_buffer_sink buf;
    ASSERT_TRUE(blob_write(s.parts, size).ok());
    ASSERT_TRUE(blob_write(s.parts, buf).ok());
    EXPECT_EQ(size.size(), buf.bytes().size());
    auto r = blob_parse(buf.bytes());
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->total_bytes, size.size());
}

TEST(BlobWrite, FdSinkWritesTheSameBytesToAFile) {
    synthetic s;
    const std::string path = test::temp_dir() + "/b.blob";
    int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    blob_fd_sink sink(fd);
    ASSERT_TRUE(blob_write(s.parts, sink).ok());
    ::close(fd);
    std::vector<uint8_t> got;
    fd = ::open(path.c_str(), O_RDONLY);
    uint8_t b[4096];
    ssize_t n;
    while ((n = ::read(fd, b, sizeof b)) > 0) got.insert(got.end(), b, b + n);
    ::close(fd);
    EXPECT_EQ(got, write_blob(s.parts));
}

TEST(BlobWrite, FdSinkWritesTheSameBytesToAPipe) {
    // A state larger than a pipe buffer forces short writes that the sink must continue.
    synthetic s;
    std::vector<uint8_t> big(1 << 20);
    for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 13);
    s.parts.state = big;
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    std::vector<uint8_t> got;
    std::thread reader([&] {
        uint8_t b[65536];
        ssize_t n;
        while ((n = ::read(fds[0], b, sizeof b)) > 0) got.insert(got.end(), b, b + n);
    });
    blob_fd_sink sink(fds[1]);
    Status st = blob_write(s.parts, sink);
    ::close(fds[1]);
    reader.join();
    ::close(fds[0]);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(got, write_blob(s.parts));
}

TEST(BlobWrite, FdSinkReportsIoError) {
    synthetic s;
    blob_fd_sink sink(-1);
    Status st = blob_write(s.parts, sink);
    EXPECT_EQ(st.code(), status_code::io_error);
    EXPECT_CONTAINS(st.message(), ("write to fd -1"));
}

}  // namespace
}  // namespace baton
