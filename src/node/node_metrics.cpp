// metrics.cpp — Prometheus text for the node (see metrics.h).
#include "node_metrics.h"

namespace baton {

namespace {

void scalar(std::string & out, const char * name, const char * type, const char * help, double v) {
    metric_scalar(out, name, type, help, v);
}
void head(std::string & out, const char * name, const char * type, const char * help) {
    metric_head(out, name, type, help);
}

}  // namespace

void node_metrics::observe_ttft(double seconds) {
    lock_guard lk(mu_);
    ttft_.observe(seconds);
}

void node_metrics::observe_itl(double seconds) {
    lock_guard lk(mu_);
    itl_.observe(seconds);
}

void node_metrics::count_blob_reject(status_code reason) {
    lock_guard lk(mu_);
    ++blob_rejects_[status_code_name(reason)];
}

void node_metrics::count_admission_reject() {
    lock_guard lk(mu_);
    ++admission_rejects_;
}

void node_metrics::count_state_fetched(uint64_t bytes, double seconds) {
    lock_guard lk(mu_);
    ++states_fetched_;
    state_fetch_bytes_ += bytes;
    state_fetch_seconds_ += seconds;
}

void node_metrics::count_state_packed(uint64_t state_bytes, uint64_t packed_bytes, double seconds) {
    lock_guard lk(mu_);
    ++states_packed_;
    packed_state_bytes_ += state_bytes;
    packed_bytes_ += packed_bytes;
    pack_seconds_ += seconds;
}

void node_metrics::count_state_unpacked(double seconds) {
    lock_guard lk(mu_);
    ++states_unpacked_;
    unpack_seconds_ += seconds;
}

void node_metrics::count_state_stream(uint32_t parts) {
    lock_guard lk(mu_);
    ++streams_fetched_;
    stream_parts_in_ += parts;
}

void node_metrics::fetch_begun() {
    lock_guard lk(mu_);
    ++fetches_in_flight_;
}

void node_metrics::fetch_ended() {
    lock_guard lk(mu_);
    --fetches_in_flight_;
}

std::string node_metrics::render(const std::optional<engine_metrics> & engine, uint32_t requests_in_flight,
                                 const state_hold_stats & held) const {
    std::string out;
    lock_guard lk(mu_);
    render_histogram(out, "baton_time_to_first_token_seconds", "Time from request arrival to the first generated token",
                     ttft_);
    render_histogram(out, "baton_inter_token_latency_seconds", "Time between consecutive generated tokens of a request",
                     itl_);
    scalar(out, "baton_requests_in_flight", "gauge", "Generation requests holding or waiting for a slot",
           requests_in_flight);
    scalar(out, "baton_admission_rejects_total", "counter",
           "Requests refused with 503 because every slot and queue place was taken", double(admission_rejects_));
    // Direct transfer (docs/router.md): the prefill side's leases, the decode side's fetches.
    scalar(out, "baton_state_hold_states", "gauge", "States held under a lease for decode nodes to fetch",
           double(held.held));
    scalar(out, "baton_state_hold_bytes", "gauge", "Bytes of the states held for decode nodes",
           double(held.held_bytes));
    scalar(out, "baton_state_hold_leases_total", "counter", "Leases started (prefills held for a decode node)",
           double(held.put));
    scalar(out, "baton_state_hold_refused_total", "counter", "Held prefills refused for want of room (--state-hold-mb)",
           double(held.refused));
    scalar(out, "baton_state_hold_released_total", "counter", "Leases ended by the router's release",
           double(held.released));
    scalar(out, "baton_state_hold_expired_total", "counter", "Leases ended by their TTL (--state-lease-ms)",
           double(held.expired));
    scalar(out, "baton_state_hold_served_total", "counter", "Held states served to decode nodes", double(held.fetched));
    scalar(out, "baton_state_hold_served_bytes_total", "counter", "Bytes of held states served to decode nodes",
           double(held.fetched_bytes));
    scalar(out, "baton_state_fetches_total", "counter", "Held states this node fetched from prefill nodes",
           double(states_fetched_));
    scalar(out, "baton_state_fetch_bytes_total", "counter", "Bytes of held states this node fetched",
           double(state_fetch_bytes_));
    scalar(out, "baton_state_fetches_in_flight", "gauge", "Fetches of held states from prefill nodes in progress",
           double(fetches_in_flight_));
    scalar(out, "baton_state_fetch_seconds_total", "counter", "Time fetching held states (connect to last byte)",
           state_fetch_seconds_);
    scalar(out, "baton_state_packs_total", "counter",
           "Held states packed for a fetch (--state-compress-level; the served bytes are the packed ones)",
           double(states_packed_));
    scalar(out, "baton_state_pack_input_bytes_total", "counter", "Bytes of the states packed, before packing",
           double(packed_state_bytes_));
    scalar(out, "baton_state_pack_output_bytes_total", "counter", "Bytes of the states packed, after packing",
           double(packed_bytes_));
    scalar(out, "baton_state_pack_seconds_total", "counter", "Time packing held states", pack_seconds_);
    scalar(out, "baton_state_unpacks_total", "counter", "Packed states this node fetched and unpacked",
           double(states_unpacked_));
    scalar(out, "baton_state_unpack_seconds_total", "counter", "Time unpacking fetched states", unpack_seconds_);
    scalar(out, "baton_state_streams_fetched_total", "counter",
           "States this node fetched as a stream of parts while their prompts computed", double(streams_fetched_));
    scalar(out, "baton_state_stream_parts_total", "counter", "Parts of the streamed states this node joined",
           double(stream_parts_in_));

    std::map<std::string, uint64_t> failures = blob_rejects_;
    if (engine) {
        const engine_metrics & e = *engine;
        for (const auto & [reason, n] : e.restore_failures) failures[reason] += n;
        scalar(out, "baton_prompt_tokens_total", "counter", "Prompt tokens of admitted requests",
               double(e.prompt_tokens));
        scalar(out, "baton_cached_tokens_total", "counter", "Prompt tokens reused from a slot's memory (prefix cache)",
               double(e.cached_tokens));
        scalar(out, "baton_generated_tokens_total", "counter", "Generated tokens", double(e.generated_tokens));
        scalar(out, "baton_prefix_reuse_hits_total", "counter", "Requests that reused part of a slot's memory",
               double(e.prefix_reuse_hits));
        scalar(out, "baton_prefix_shares_total", "counter",
               "Requests that took their prompt's prefix from another slot's memory (unified KV)",
               double(e.prefix_shares));
        scalar(out, "baton_prefix_shared_tokens_total", "counter", "Prompt tokens taken from another slot's memory",
               double(e.prefix_shared_tokens));
        scalar(out, "baton_checkpoint_restores_total", "counter", "Rollbacks through a recurrent/SWA checkpoint",
               double(e.checkpoint_restores));
        scalar(out, "baton_reprefills_total", "counter", "Prompts recomputed because no checkpoint allowed a rollback",
               double(e.reprefills));
        scalar(out, "baton_blob_bytes_in_total", "counter", "Blob bytes given to the restore routine",
               double(e.blob_bytes_in));
        scalar(out, "baton_blob_bytes_out_total", "counter", "Blob bytes serialized", double(e.blob_bytes_out));
        scalar(out, "baton_serialize_seconds_total", "counter", "Seconds spent serializing slots", e.serialize_seconds);
        scalar(out, "baton_restore_seconds_total", "counter", "Seconds spent in the restore routine",
               e.restore_seconds);
        scalar(out, "baton_restores_total", "counter", "Blobs restored into a slot", double(e.restores_ok));
        scalar(out, "baton_deltas_out_total", "counter",
               "Delta blobs written (only the cells past a base the receiver holds)", double(e.deltas_out));
        scalar(out, "baton_state_parts_out_total", "counter",
               "Parts of streamed states handed on while their prompts computed", double(e.state_parts_out));
        scalar(out, "baton_migrations_out_total", "counter",
               "Generations paused here and handed on as states (live migration)", double(e.migrations_out));
        scalar(out, "baton_migrations_in_total", "counter", "Generations resumed here from a paused state",
               double(e.migrations_in));
        scalar(out, "baton_migrated_tokens_in_total", "counter",
               "Tokens the generations resumed here had generated before they came", double(e.migrated_tokens_in));
        scalar(out, "baton_deltas_in_total", "counter", "Delta blobs restored onto a base a slot held",
               double(e.deltas_in));
        scalar(out, "baton_delta_base_tokens_total", "counter",
               "Tokens restored deltas did not carry (their bases, already held here)", double(e.delta_base_tokens_in));
        scalar(out, "baton_invariant_repairs_total", "counter",
               "Slots whose memory disagreed with their tokens and were repaired", double(e.invariant_repairs));
        scalar(out, "baton_decode_calls_total", "counter", "llama_decode calls", double(e.decode_calls));
        scalar(out, "baton_slot_parks_total", "counter",
               "Idle slots whose state moved from the unified KV cache to host memory", double(e.parks));
        scalar(out, "baton_slot_unparks_total", "counter", "Parked slots restored for a prompt that reuses them",
               double(e.unparks));
        scalar(out, "baton_park_seconds_total", "counter", "Seconds spent parking and unparking slots", e.park_seconds);
        scalar(out, "baton_parked_bytes", "gauge", "Host memory held by parked slots", double(e.parked_bytes));
        scalar(out, "baton_idle_snapshots_total", "counter",
               "Idle slots' states serialized while the engine had nothing else to do", double(e.idle_snapshots));
        scalar(out, "baton_idle_snapshots_used_total", "counter",
               "Idle snapshots later kept in the host prompt cache or parked without serializing again",
               double(e.idle_snapshots_used));
        scalar(out, "baton_idle_snapshot_seconds_total", "counter", "Seconds spent making idle snapshots",
               e.idle_snapshot_seconds);
        scalar(out, "baton_idle_snapshot_bytes", "gauge", "Host memory held by idle slots' snapshots",
               double(e.idle_snapshot_bytes));
        scalar(out, "baton_cache_ram_bytes", "gauge", "Host prompt cache (--cache-ram): bytes of the states kept",
               double(e.cache_ram_bytes));
        scalar(out, "baton_cache_ram_entries", "gauge", "Host prompt cache: states kept", double(e.cache_ram_entries));
        scalar(out, "baton_cache_ram_stores_total", "counter", "Host prompt cache: states stored",
               double(e.cache_ram_stores));
        scalar(out, "baton_cache_ram_store_seconds_total", "counter",
               "Host prompt cache: seconds spent serializing slots' states on requests' paths (no idle snapshot "
               "ready)",
               e.cache_ram_store_seconds);
        scalar(out, "baton_cache_ram_hits_total", "counter", "Host prompt cache: states restored into a slot",
               double(e.cache_ram_hits));
        scalar(out, "baton_cache_ram_hit_tokens_total", "counter",
               "Host prompt cache: prompt tokens the restored states gave", double(e.cache_ram_hit_tokens));
        scalar(out, "baton_cache_ram_evictions_total", "counter",
               "Host prompt cache: states dropped for the budget or made redundant by a longer one",
               double(e.cache_ram_evictions));
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
