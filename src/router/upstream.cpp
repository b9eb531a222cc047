// upstream.cpp — streamed router -> node requests on a worker thread.
#include "upstream.h"

#include <httplib.h>

namespace baton {

std::unique_ptr<upstream_call> upstream_call::start(upstream_request req) {
    std::unique_ptr<upstream_call> c(new upstream_call());
    c->deadline_ = req.deadline;
    c->client_ = std::make_shared<httplib::Client>(req.base_url);
    upstream_call * raw = c.get();
    c->worker_ = std::thread([raw, r = std::move(req)]() mutable { raw->run(std::move(r)); });
    return c;
}

upstream_call::~upstream_call() {
    cancel();
    if (worker_.joinable()) worker_.join();
}

void upstream_call::cancel() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        cancelled_ = true;
    }
    cv_.notify_all();
    if (client_) client_->stop();
}

void upstream_call::run(upstream_request r) {
    using namespace std::chrono;
    const auto left = duration_cast<milliseconds>(r.deadline - steady_clock::now());
    const auto budget = std::max(left, milliseconds(1));
    client_->set_connection_timeout(std::min(budget, milliseconds(5000)));
    client_->set_read_timeout(budget);
    client_->set_tcp_nodelay(true);  // headers and body go out at once, no delayed-ACK wait
    client_->set_write_timeout(budget);
    httplib::Request req;
    req.method = "POST";
    req.path = r.path;
    req.body = std::move(r.body);
    req.set_header("Content-Type", r.content_type);
    if (!r.bearer.empty()) req.set_header("Authorization", "Bearer " + r.bearer);
    if (r.body_from) send_relayed_body(req, r.body_from);
    const bool relay_response = r.relay_response;
    const uint64_t relay_max = r.relay_max_bytes;
    req.response_handler = [this, relay_response, relay_max](const httplib::Response & res) {
        std::lock_guard<std::mutex> lk(mu_);
        headers_ = true;
        status_ = res.status;
        content_type_ = res.get_header_value("Content-Type");
        bool keep = !cancelled_;
        if (relay_response && res.status == 200) {
            const uint64_t n = res.has_header("Content-Length") ? res.get_header_value_u64("Content-Length") : UINT64_MAX;
            try {
                if (n <= relay_max) relay_ = std::make_shared<body_relay>(n);
            } catch (const std::bad_alloc &) {
            }
            if (!relay_) keep = false;  // no length, too long, or no memory: refused before a byte is buffered
        }
        cv_.notify_all();
        return keep;
    };
    // The deadline covers the whole body, not one read: a stream whose chunks keep coming still ends on it.
    req.content_receiver = [this](const char * data, size_t n, uint64_t, uint64_t) {
        if (steady_clock::now() >= deadline_) return false;
        if (relay_) {  // set before the first body byte, never changed after
            relay_->append(data, n);
            return !cancelled_.load();
        }
        std::lock_guard<std::mutex> lk(mu_);
        chunks_.emplace_back(data, n);
        cv_.notify_all();
        return !cancelled_;
    };
    auto res = client_->send(req);
    std::lock_guard<std::mutex> lk(mu_);
    if (relay_) relay_->finish(res && !cancelled_ ? Status() : Status(status_code::upstream_error, r.base_url + r.path + ": the body was cut off"));
    if (!res && !cancelled_) {
        const bool timed_out = steady_clock::now() >= r.deadline || res.error() == httplib::Error::Timeout;
        error_ = Status(timed_out ? status_code::deadline_exceeded : status_code::upstream_error,
                        r.base_url + r.path + ": " + httplib::to_string(res.error()));
    } else if (cancelled_) {
        error_ = Status(status_code::cancelled, r.base_url + r.path + ": cancelled");
    }
    ended_ = true;
    cv_.notify_all();
}

// send_relayed_body makes req send `from` as its body, each byte as soon as it has arrived. (cpp-httplib
// has no public way to give a send() request a streamed body; these are the fields its own
// content-provider Post overloads fill in.)
void upstream_call::send_relayed_body(httplib::Request & req, std::shared_ptr<body_relay> from) {
    req.content_length_ = size_t(from->length());
    req.is_chunked_content_provider_ = false;
    req.content_provider_ = [this, from](size_t offset, size_t length, httplib::DataSink & sink) {
        for (;;) {
            if (cancelled_.load() || std::chrono::steady_clock::now() >= deadline_) return false;
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
            const auto r = from->read(offset, length, until, [&](const uint8_t * p, size_t n) {
                return sink.write(reinterpret_cast<const char *>(p), n);
            });
            if (r == body_relay::read_result::data) return true;
            if (r == body_relay::read_result::failed) return false;
        }
    };
}

Result<int> upstream_call::wait_headers() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return headers_ || ended_; });
    if (headers_) return status_;
    return error_.ok() ? Status(status_code::upstream_error, "node closed the connection without a response") : error_;
}

bool upstream_call::next_chunk(std::string & out) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !chunks_.empty() || ended_; });
    if (chunks_.empty()) return false;
    out = std::move(chunks_.front());
    chunks_.pop_front();
    return true;
}

Status upstream_call::end_status() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return ended_; });
    return error_;
}

Result<std::string> upstream_call::read_all() {
    std::string body, chunk;
    while (next_chunk(chunk)) body += chunk;
    Status st = end_status();
    if (!st.ok()) return st;
    return body;
}

}  // namespace baton
