// server_impl.h — the node's private state and the handler declarations shared by server*.cpp.
//
// server.cpp: lifecycle, routing, authentication, body caps; server_generate.cpp: completions, chat,
// prefill and decode; server_slots.cpp: health, models, metrics, slots and slot state.
// Thread-safety: cfg, model, eng and model_name are written before `ready` is set (release) and only read
// after it was seen (acquire); metrics and the atomics are safe from any thread.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "baton/engine.h"
#include "baton/model.h"
#include "metrics.h"
#include "openai.h"
#include "server.h"

namespace baton {

using steady_clock = std::chrono::steady_clock;

// A place among the requests that hold or wait for a slot; released on destruction.
class admission_ticket {
  public:
    explicit admission_ticket(std::atomic<uint32_t> & counter) : counter_(counter) {}
    ~admission_ticket() { counter_.fetch_sub(1); }
    admission_ticket(const admission_ticket &) = delete;
    admission_ticket & operator=(const admission_ticket &) = delete;

  private:
    std::atomic<uint32_t> & counter_;
};
using admission_ptr = std::shared_ptr<admission_ticket>;

class server_impl {
  public:
    explicit server_impl(server_config c) : cfg(std::move(c)) {}

    server_config cfg;
    httplib::Server http;
    std::thread listener;
    std::atomic<bool> ready{false};
    std::atomic<bool> stopping{false};
    std::atomic<bool> listening{false};
    std::shared_ptr<const loaded_model> model;
    std::unique_ptr<engine> eng;
    std::string model_name;  // file name of the model, reported by /v1/models and in responses
    server_metrics metrics;
    std::atomic<uint32_t> n_admitted{0};

    // ---- server.cpp ----
    void install_routes();
    Status check_auth(const httplib::Request & req) const;
    // check_serving: unavailable while loading or stopping.
    Status check_serving() const;
    Status check_role(bool allowed, const char * endpoint) const;
    // admit takes a place for a generation request, or unavailable when every slot and queue place is taken.
    Result<admission_ptr> admit();
    // deadline of a request that arrived now.
    steady_clock::time_point deadline_from_now() const;
    // wait_event reads the next event of h, cancelling h on the deadline or when the client went away.
    Status wait_event(const request_ptr & h, engine_event & ev, steady_clock::time_point deadline,
                      const httplib::Request & req) const;
    // run_to_done waits for the terminal event of a task without tokens (prefill, slot operations).
    Result<engine_event> run_to_done(engine_task task, const httplib::Request & req);
    // blob_parse_edge parses a blob body; failures are counted by reason.
    Result<blob_ptr> blob_parse_edge(std::vector<uint8_t> bytes);
    // send_blob answers with blob bytes (after the --test-corrupt-state and --test-truncate-blob hooks).
    void send_blob(httplib::Response & res, std::vector<uint8_t> blob) const;

    // ---- server_generate.cpp ----
    void on_completions(const httplib::Request & req, httplib::Response & res, std::string body);
    void on_chat(const httplib::Request & req, httplib::Response & res, std::string body);
    void on_openai(const httplib::Request & req, httplib::Response & res, std::string body, openai_endpoint endpoint);
    void on_prefill(const httplib::Request & req, httplib::Response & res, std::string body);
    void on_decode(const httplib::Request & req, httplib::Response & res, std::vector<uint8_t> body);
    // respond_generation submits task and answers in the OpenAI shape of oreq (streamed if it asks).
    void respond_generation(const httplib::Request & req, httplib::Response & res, engine_task task,
                            const openai_request & oreq);

    // ---- server_slots.cpp ----
    void on_health(const httplib::Request & req, httplib::Response & res);
    void on_models(const httplib::Request & req, httplib::Response & res);
    void on_metrics(const httplib::Request & req, httplib::Response & res);
    void on_slots(const httplib::Request & req, httplib::Response & res);
    void on_state_get(const httplib::Request & req, httplib::Response & res);
    void on_state_put(const httplib::Request & req, httplib::Response & res, std::vector<uint8_t> body);
    void on_state_delete(const httplib::Request & req, httplib::Response & res);
};

}  // namespace baton
