// serve_test_util.h — helpers shared by the `baton serve` end-to-end tests: node arguments, JSON and SSE
// requests, and response normalization (ids and timestamps are the only fields allowed to differ).
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "baton/pd/pd_protocol.h"
#include "support/node_process.h"
#include "support/test_support.h"

namespace baton::test {

using json = nlohmann::json;

// seconds_since: wall time since t0.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// completion_path: the OpenAI endpoint a request body belongs to (a chat when it has messages).
inline std::string completion_path(const json & b) {
    return b.contains("messages") ? "/v1/chat/completions" : "/v1/completions";
}

// serve_args: `serve -m MODEL -c 2048 -t 2` plus extra.
inline std::vector<std::string> serve_args(const std::string & arch, std::vector<std::string> extra = {},
                                           unsigned seed = 1) {
    std::vector<std::string> a = {"serve", "-m", test_model_path(arch, seed), "-c", "2048", "-t", "2"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

struct http_reply {
    int status = 0;  // 0: transport error
    std::string body;
    std::string content_type;
    std::string retry_after;
    std::string route;  // X-Baton-Route (router replies)
    std::string decode_node;  // X-Baton-Decode-Node (router replies)
    json j() const { return json::parse(body, nullptr, false); }
};

inline http_reply to_reply(const httplib::Result & r) {
    http_reply out;
    if (!r) return out;
    out.status = r->status;
    out.body = r->body;
    out.content_type = r->get_header_value("Content-Type");
    out.retry_after = r->get_header_value("Retry-After");
    out.route = r->get_header_value("X-Baton-Route");
    out.decode_node = r->get_header_value("X-Baton-Decode-Node");
    return out;
}

inline httplib::Headers auth_headers(const std::string & key) {
    if (key.empty()) return {};
    return {{"Authorization", "Bearer " + key}};
}

inline http_reply post(const node_process & n, const std::string & path, const std::string & body,
                       const std::string & type = "application/json", const std::string & key = "",
                       double timeout_s = 120) {
    auto c = n.client(timeout_s);
    return to_reply(c->Post(path, auth_headers(key), body, type));
}

// post_prefill: POST /v1/prefill as a router does, the client's body unchanged and its endpoint
// ("completions", "chat", "completion") in the PD protocol's header.
inline http_reply post_prefill(const node_process & n, const std::string & endpoint, const std::string & body,
                               const std::string & key = "") {
    auto c = n.client(120);
    httplib::Headers h = auth_headers(key);
    h.emplace(std::string(pd_header_endpoint), endpoint);
    return to_reply(c->Post(std::string(pd_path_prefill), h, body, "application/json"));
}

// via_pd: body prefilled on pre (endpoint: the X-Baton-Endpoint name) and its blob decoded on dec — the decode
// node's reply, or the prefill node's when it did not answer 200.
inline http_reply via_pd(const node_process & pre, const node_process & dec, const std::string & endpoint,
                         const std::string & body) {
    const http_reply blob = post_prefill(pre, endpoint, body);
    if (blob.status != 200) return blob;
    return post(dec, "/v1/decode", blob.body, "application/octet-stream");
}

// prefill_held: a held prefill (direct transfer): the node keeps the state and answers {"state", "bytes"}.
inline http_reply prefill_held(const node_process & n, const std::string & endpoint, const std::string & body,
                               const std::string & key = "") {
    auto c = n.client(120);
    httplib::Headers h = auth_headers(key);
    h.emplace(std::string(pd_header_endpoint), endpoint);
    h.emplace(std::string(pd_header_state_hold), "1");
    return to_reply(c->Post(std::string(pd_path_prefill), h, body, "application/json"));
}

// decode_held: POST /v1/decode naming where the state is (the prefill node's origin and the state's id).
inline http_reply decode_held(const node_process & n, const std::string & source, const std::string & id,
                              const std::string & key = "", const std::string & body = "") {
    auto c = n.client(120);
    httplib::Headers h = auth_headers(key);
    h.emplace(std::string(pd_header_state_source), source);
    h.emplace(std::string(pd_header_state_id), id);
    return to_reply(c->Post(std::string(pd_path_decode), h, body, "application/octet-stream"));
}

inline http_reply get(const node_process & n, const std::string & path, const std::string & key = "",
                      double timeout_s = 60) {
    auto c = n.client(timeout_s);
    return to_reply(c->Get(path, auth_headers(key)));
}

// sse_payloads splits an SSE body into its data payloads ("[DONE]" included as a string).
inline std::vector<std::string> sse_payloads(const std::string & body) {
    std::vector<std::string> out;
    size_t pos = 0;
    while ((pos = body.find("data: ", pos)) != std::string::npos) {
        const size_t end = body.find("\n\n", pos);
        out.push_back(body.substr(pos + 6, (end == std::string::npos ? body.size() : end) - pos - 6));
        pos = end == std::string::npos ? body.size() : end + 2;
    }
    return out;
}

// normalized drops the per-response fields ("id", "created") and the serving node's own measurements
// ("timings"; usage.prompt_tokens_details.cached_tokens, which a decode node counts differently: the blob's
// tokens are cached there) so two responses can be compared whole.
// Tool calls' ids are random (as OpenAI's and llama-server's): dropped too.
inline json normalized(json j) {
    if (j.is_object()) {
        j.erase("id");
        j.erase("created");
        j.erase("timings");
        if (j.contains("usage") && j["usage"].is_object()) j["usage"].erase("prompt_tokens_details");
        if (j.contains("choices") && j["choices"].is_array())
            for (auto & c : j["choices"])
                for (const char * key : {"message", "delta"})
                    if (c.is_object() && c.contains(key) && c[key].is_object() && c[key].contains("tool_calls") &&
                        c[key]["tool_calls"].is_array())
                        for (auto & call : c[key]["tool_calls"])
                            if (call.is_object()) call.erase("id");
    }
    return j;
}

// normalized_stream: every chunk normalized, [DONE] kept as a string.
inline std::vector<json> normalized_stream(const std::string & body) {
    std::vector<json> out;
    for (const auto & p : sse_payloads(body))
        out.push_back(p == "[DONE]" ? json("[DONE]") : normalized(json::parse(p, nullptr, false)));
    return out;
}

// stream_text concatenates the generated text of a stream (completions "text" or chat "delta.content").
inline std::string stream_text(const std::vector<json> & chunks) {
    std::string s;
    for (const auto & c : chunks) {
        if (!c.is_object() || !c.contains("choices") || c["choices"].empty()) continue;
        const json & ch = c["choices"][0];
        if (ch.contains("text")) s += ch["text"].get<std::string>();
        // The first chat chunk carries the role with content null (as OpenAI sends it).
        if (ch.contains("delta") && ch["delta"].contains("content") && ch["delta"]["content"].is_string())
            s += ch["delta"]["content"].get<std::string>();
    }
    return s;
}

// metric_value reads one sample ("name" or "name{labels}") from Prometheus text; -1 if absent.
inline double metric_value(const std::string & text, const std::string & sample) {
    size_t pos = 0;
    while ((pos = text.find(sample + " ", pos)) != std::string::npos) {
        if (pos == 0 || text[pos - 1] == '\n') return std::stod(text.substr(pos + sample.size() + 1));
        pos += sample.size();
    }
    return -1;
}

// metric_settled: sample of n's /metrics once it equals want, polled for up to timeout_s (a counter a process
// updates just after the response it belongs to went out); else its last value.
inline double metric_settled(const node_process & n, const std::string & sample, double want, double timeout_s = 5) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    double v = metric_value(get(n, "/metrics").body, sample);
    while (v != want && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        v = metric_value(get(n, "/metrics").body, sample);
    }
    return v;
}

// held_stream: a streaming request read on a background thread, held open until release() (which makes
// the client hang up, like a user closing the tab) or until the server ends the stream.
class held_stream {
  public:
    held_stream(const node_process & n, const json & body, const std::string & path = "/v1/completions",
                double timeout_s = 60)
        : client_(n.client(timeout_s)) {
        thread_ = std::thread([this, body, path] {
            auto r = client_->Post(path, {}, body.dump(), "application/json", [this](const char * d, size_t len) {
                std::lock_guard<std::mutex> lk(mu_);
                received_.append(d, len);
                cv_.notify_all();
                return !released_.load();
            });
            std::lock_guard<std::mutex> lk(mu_);
            status_ = r ? r->status : 0;
            ended_ = true;
            cv_.notify_all();
        });
    }
    ~held_stream() {
        release();
        if (thread_.joinable()) thread_.join();
    }
    // wait_for waits until the received bytes contain needle (or the request ended); true if found.
    bool wait_for(const std::string & needle, double timeout_s = 60) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait_for(lk, std::chrono::duration<double>(timeout_s),
                     [&] { return ended_ || received_.find(needle) != std::string::npos; });
        return received_.find(needle) != std::string::npos;
    }
    // wait_end waits until the request ended; true if it did within timeout_s.
    bool wait_end(double timeout_s = 60) {
        std::unique_lock<std::mutex> lk(mu_);
        return cv_.wait_for(lk, std::chrono::duration<double>(timeout_s), [&] { return ended_; });
    }
    void release() { released_ = true; }
    std::string received() {
        std::lock_guard<std::mutex> lk(mu_);
        return received_;
    }

  private:
    std::unique_ptr<httplib::Client> client_;
    std::thread thread_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::string received_;
    bool ended_ = false;
    int status_ = 0;
    std::atomic<bool> released_{false};
};

// long_stream_body: a streaming completion that runs until cancelled (thousands of tokens, EOS ignored).
inline json long_stream_body() {
    return {{"prompt", "Tell me a very long story"},
            {"max_tokens", 1800},
            {"ignore_eos", true},
            {"temperature", 0},
            {"stream", true}};
}

// wait_slot_idle polls /v1/slots until slot id is not busy; true if it freed within timeout_s.
inline bool wait_slot_idle(const node_process & n, int id, double timeout_s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
        const json s = json::parse(get(n, "/v1/slots").body, nullptr, false);
        if (s.is_array() && size_t(id) < s.size() && !s[size_t(id)]["busy"].get<bool>()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

}  // namespace baton::test
