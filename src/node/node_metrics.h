// metrics.h — the node's Prometheus metrics: latency histograms and refusal counters kept by the
// server (request counts are the HTTP edge's), rendered together with the engine's counters (engine_metrics) as Prometheus text.
//
// Thread-safety: every member function is safe from any thread (one mutex; the hot path takes it once
// per token for the inter-token histogram, which is cheap next to a decode step).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "baton/base/thread_annotations.h"
#include "baton/engine.h"
#include "baton/http/metrics_text.h"
#include "state_hold.h"

namespace baton {

class node_metrics {
  public:
    void observe_ttft(double seconds);
    void observe_itl(double seconds);
    // count_blob_reject records a blob refused before it reached a slot (parse/size), by reason.
    void count_blob_reject(status_code reason);
    void count_admission_reject();
    // count_state_fetched: a decode fetched a held state of this many bytes from a prefill node.
    void count_state_fetched(uint64_t bytes, double seconds);
    // count_state_packed: a held state of state_bytes was packed to packed_bytes for a fetch (blob_pack.h);
    // count_state_unpacked: a fetched packed state was unpacked.
    void count_state_packed(uint64_t state_bytes, uint64_t packed_bytes, double seconds);
    void count_state_unpacked(double seconds);
    // count_state_stream: a fetched state came as a stream of this many parts (state_stream.h).
    void count_state_stream(uint32_t parts);
    // fetch_begun / fetch_ended: a fetch of a held state in progress (however it ends).
    void fetch_begun();
    void fetch_ended();

    // render returns the Prometheus exposition text; engine is empty while the model loads.
    // held: the states this node holds for decode nodes (state_hold.h).
    std::string render(const std::optional<engine_metrics> & engine, uint32_t requests_in_flight,
                       const state_hold_stats & held) const;

  private:
    mutable mutex mu_;
    latency_histogram ttft_ BATON_GUARDED_BY(mu_);
    latency_histogram itl_ BATON_GUARDED_BY(mu_);
    std::map<std::string, uint64_t> blob_rejects_ BATON_GUARDED_BY(mu_);  // by status_code_name
    uint64_t admission_rejects_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t states_fetched_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t fetches_in_flight_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t state_fetch_bytes_ BATON_GUARDED_BY(mu_) = 0;
    double state_fetch_seconds_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t states_packed_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t packed_state_bytes_ BATON_GUARDED_BY(mu_) = 0;  // the states' bytes before packing
    uint64_t packed_bytes_ BATON_GUARDED_BY(mu_) = 0;        // and after
    double pack_seconds_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t states_unpacked_ BATON_GUARDED_BY(mu_) = 0;
    double unpack_seconds_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t streams_fetched_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t stream_parts_in_ BATON_GUARDED_BY(mu_) = 0;
};

}  // namespace baton
