// metrics_text.h — Prometheus text exposition shared by node and router: escaped labels, counters,
// gauges, latency histograms, and the HTTP edge's request counter.
//
// Labels never carry raw client input: the request counter is keyed by the route *template* the edge
// matched ("unmatched" for anything else) and a method from a closed set, so no client can add series or
// inject lines; every label value still goes through metric_label_escape.
// Thread-safety: the free functions are pure; http_request_counter and latency_histogram_guarded are safe
// from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>

#include "baton/base/thread_annotations.h"

namespace baton {

// metric_label_escape: backslash, double quote and newline escaped as the exposition format requires.
std::string metric_label_escape(std::string_view s);
// metric_num renders the shortest text that reads back as v.
std::string metric_num(double v);
// metric_head appends "# HELP" and "# TYPE" lines.
void metric_head(std::string & out, const char * name, const char * type, const char * help);
// metric_scalar appends a metric with one unlabelled sample.
void metric_scalar(std::string & out, const char * name, const char * type, const char * help, double v);

// A fixed-bucket latency histogram (seconds). Not synchronized: its owner guards it.
struct latency_histogram {
    static constexpr std::array<double, 12> k_bounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                        0.1,   0.25,   0.5,   1.0,  2.5,   10.0};
    std::array<uint64_t, k_bounds.size() + 1> counts{};  // last: +Inf
    double sum = 0;
    uint64_t n = 0;
    void observe(double seconds);
};

// render_histogram appends h as a Prometheus histogram (HELP, TYPE, cumulative buckets, sum, count).
void render_histogram(std::string & out, const char * name, const char * help, const latency_histogram & h);

// http_method_label: the method if it is one Baton knows (GET HEAD POST PUT DELETE OPTIONS), else "other".
const char * http_method_label(std::string_view method);

// http_request_counter: requests finished by the edge, by route template, method and status, rendered as
// baton_http_requests_total{route,method,status}. route is a template or "unmatched".
class http_request_counter {
  public:
    void count(std::string_view route, std::string_view method, int status);
    void render(std::string & out) const;

  private:
    mutable mutex mu_;
    std::map<std::tuple<std::string, std::string, int>, uint64_t> n_ BATON_GUARDED_BY(mu_);
};

}  // namespace baton
