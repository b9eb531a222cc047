// metrics.cpp — Prometheus text for the node (see metrics.h).
#include "metrics.h"

#include <charconv>

namespace baton {

namespace {

// num renders the shortest text that reads back as v.
std::string num(double v) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

std::string label_escape(const std::string & s) {
    std::string out;
    for (char c : s) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') { out += "\\n"; continue; }
        out += c;
    }
    return out;
}

void head(std::string & out, const char * name, const char * type, const char * help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void scalar(std::string & out, const char * name, const char * type, const char * help, double v) {
    head(out, name, type, help);
    out += std::string(name) + " " + num(v) + "\n";
}

}  // namespace

void render_histogram(std::string & out, const char * name, const char * help, const latency_histogram & h) {
    head(out, name, "histogram", help);
    uint64_t cum = 0;
    for (size_t i = 0; i < latency_histogram::k_bounds.size(); ++i) {
        cum += h.counts[i];
        out += std::string(name) + "_bucket{le=\"" + num(latency_histogram::k_bounds[i]) + "\"} " + std::to_string(cum) + "\n";
    }
    cum += h.counts.back();
    out += std::string(name) + "_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
    out += std::string(name) + "_sum " + num(h.sum) + "\n";
    out += std::string(name) + "_count " + std::to_string(h.n) + "\n";
}

void latency_histogram::observe(double seconds) {
    size_t i = 0;
    while (i < k_bounds.size() && seconds > k_bounds[i]) ++i;
    ++counts[i];
    sum += seconds;
    ++n;
}

void server_metrics::count_request(const std::string & endpoint, int http_status) {
    std::lock_guard<std::mutex> lk(mu_);
    ++requests_[{endpoint, http_status}];
}

void server_metrics::observe_ttft(double seconds) {
    std::lock_guard<std::mutex> lk(mu_);
    ttft_.observe(seconds);
}

void server_metrics::observe_itl(double seconds) {
    std::lock_guard<std::mutex> lk(mu_);
    itl_.observe(seconds);
}

void server_metrics::count_blob_reject(status_code reason) {
    std::lock_guard<std::mutex> lk(mu_);
    ++blob_rejects_[status_code_name(reason)];
}

void server_metrics::count_admission_reject() {
    std::lock_guard<std::mutex> lk(mu_);
    ++admission_rejects_;
}

std::string server_metrics::render(const std::optional<engine_metrics> & engine, uint32_t requests_in_flight) const {
    std::string out;
    std::lock_guard<std::mutex> lk(mu_);
    head(out, "baton_http_requests_total", "counter", "HTTP requests by endpoint (route) and status");
    for (const auto & [key, n] : requests_)
        out += "baton_http_requests_total{endpoint=\"" + label_escape(key.first) + "\",status=\"" +
               std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
    render_histogram(out, "baton_time_to_first_token_seconds", "Time from request arrival to the first generated token", ttft_);
    render_histogram(out, "baton_inter_token_latency_seconds", "Time between consecutive generated tokens of a request", itl_);
    scalar(out, "baton_requests_in_flight", "gauge", "Generation requests holding or waiting for a slot", requests_in_flight);
    scalar(out, "baton_admission_rejects_total", "counter", "Requests refused with 503 because every slot and queue place was taken",
           double(admission_rejects_));

    std::map<std::string, uint64_t> failures = blob_rejects_;
    if (engine) {
        const engine_metrics & e = *engine;
        for (const auto & [reason, n] : e.restore_failures) failures[reason] += n;
        scalar(out, "baton_prompt_tokens_total", "counter", "Prompt tokens of admitted requests", double(e.prompt_tokens));
        scalar(out, "baton_cached_tokens_total", "counter", "Prompt tokens reused from a slot's memory (prefix cache)", double(e.cached_tokens));
        scalar(out, "baton_generated_tokens_total", "counter", "Generated tokens", double(e.generated_tokens));
        scalar(out, "baton_prefix_reuse_hits_total", "counter", "Requests that reused part of a slot's memory", double(e.prefix_reuse_hits));
        scalar(out, "baton_checkpoint_restores_total", "counter", "Rollbacks through a recurrent/SWA checkpoint", double(e.checkpoint_restores));
        scalar(out, "baton_reprefills_total", "counter", "Prompts recomputed because no checkpoint allowed a rollback", double(e.reprefills));
        scalar(out, "baton_blob_bytes_in_total", "counter", "Blob bytes given to the restore routine", double(e.blob_bytes_in));
        scalar(out, "baton_blob_bytes_out_total", "counter", "Blob bytes serialized", double(e.blob_bytes_out));
        scalar(out, "baton_serialize_seconds_total", "counter", "Seconds spent serializing slots", e.serialize_seconds);
        scalar(out, "baton_restore_seconds_total", "counter", "Seconds spent in the restore routine", e.restore_seconds);
        scalar(out, "baton_restores_total", "counter", "Blobs restored into a slot", double(e.restores_ok));
        scalar(out, "baton_invariant_repairs_total", "counter", "Slots whose memory disagreed with their tokens and were repaired",
               double(e.invariant_repairs));
        scalar(out, "baton_decode_calls_total", "counter", "llama_decode calls", double(e.decode_calls));
        scalar(out, "baton_slot_parks_total", "counter", "Idle slots whose state moved from the unified KV cache to host memory",
               double(e.parks));
        scalar(out, "baton_slot_unparks_total", "counter", "Parked slots restored for a prompt that reuses them", double(e.unparks));
        scalar(out, "baton_park_seconds_total", "counter", "Seconds spent parking and unparking slots", e.park_seconds);
        scalar(out, "baton_parked_bytes", "gauge", "Host memory held by parked slots", double(e.parked_bytes));
        head(out, "baton_slots", "gauge", "Slots by state");
        out += "baton_slots{state=\"busy\"} " + std::to_string(e.slots_busy) + "\n";
        out += "baton_slots{state=\"idle\"} " + std::to_string(e.slots_total - e.slots_busy) + "\n";
    }
    head(out, "baton_restore_failures_total", "counter",
         "Blobs refused, by reason: at the edge (parse, size) or by the restore routine (slot left empty)");
    for (const auto & [reason, n] : failures)
        out += "baton_restore_failures_total{reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
    return out;
}

}  // namespace baton
