// metrics_text.cpp — see metrics_text.h.
#include "baton/http/metrics_text.h"

#include <charconv>

namespace baton {

std::string metric_label_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

std::string metric_num(double v) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

void metric_head(std::string & out, const char * name, const char * type, const char * help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void metric_scalar(std::string & out, const char * name, const char * type, const char * help, double v) {
    metric_head(out, name, type, help);
    out += std::string(name) + " " + metric_num(v) + "\n";
}

void latency_histogram::observe(double seconds) {
    size_t i = 0;
    while (i < k_bounds.size() && seconds > k_bounds[i]) ++i;
    ++counts[i];
    sum += seconds;
    ++n;
}

void render_histogram(std::string & out, const char * name, const char * help, const latency_histogram & h) {
    metric_head(out, name, "histogram", help);
    uint64_t cum = 0;
    for (size_t i = 0; i < latency_histogram::k_bounds.size(); ++i) {
        cum += h.counts[i];
        out += std::string(name) + "_bucket{le=\"" + metric_num(latency_histogram::k_bounds[i]) + "\"} " + std::to_string(cum) + "\n";
    }
    cum += h.counts.back();
    out += std::string(name) + "_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
    out += std::string(name) + "_sum " + metric_num(h.sum) + "\n";
    out += std::string(name) + "_count " + std::to_string(h.n) + "\n";
}

const char * http_method_label(std::string_view m) {
    for (const char * k : {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"})
        if (m == k) return k;
    return "other";
}

void http_request_counter::count(std::string_view route, std::string_view method, int status) {
    lock_guard lk(mu_);
    ++n_[{std::string(route.empty() ? "unmatched" : route), http_method_label(method), status}];
}

void http_request_counter::render(std::string & out) const {
    metric_head(out, "baton_http_requests_total", "counter", "HTTP requests by route template, method and status");
    lock_guard lk(mu_);
    for (const auto & [k, n] : n_)
        out += "baton_http_requests_total{route=\"" + metric_label_escape(std::get<0>(k)) + "\",method=\"" +
               metric_label_escape(std::get<1>(k)) + "\",status=\"" + std::to_string(std::get<2>(k)) + "\"} " + std::to_string(n) + "\n";
}

}  // namespace baton
