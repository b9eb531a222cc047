// admission.cpp — whether a node takes a request now: serving (loaded, not draining; a draining node says so
// with X-Baton-Draining so the router sends the request elsewhere at once), role (prefill-only, decode-only),
// a place among the slots and the queue (admission_ticket, else 503), and the request's deadline (--timeout).
#include <algorithm>

#include "baton/pd/pd_protocol.h"
#include "node_impl.h"

namespace baton {

Status node_impl::check_serving() const {
    if (stopping.load()) return {status_code::unavailable, "the node is draining: send the request to another node"};
    if (!ready.load(std::memory_order_acquire)) return {status_code::unavailable, "the model is still loading"};
    return {};
}

Status node_impl::check_role(bool allowed, const char * endpoint) const {
    if (allowed) return {};
    return {status_code::busy,
            std::string(endpoint) + " is not served by a node with role " + node_role_name(cfg.role)};
}

Result<admission_ptr> node_impl::admit() {
    const uint32_t cap = cfg.engine.ctx.n_seq_max + cfg.engine.queue_max;
    if (n_admitted.fetch_add(1) >= cap) {
        n_admitted.fetch_sub(1);
        metrics.count_admission_reject();
        return Status(status_code::unavailable, "no free slot: " + std::to_string(cfg.engine.ctx.n_seq_max) +
                                                    " slots busy and " + std::to_string(cfg.engine.queue_max) +
                                                    " requests queued");
    }
    return std::make_unique<admission_ticket>(n_admitted);
}

steady_clock::time_point node_impl::deadline_from_now() const {
    if (cfg.timeout_s <= 0) return steady_clock::time_point::max();
    return steady_clock::now() +
           std::chrono::duration_cast<steady_clock::duration>(std::chrono::duration<double>(cfg.timeout_s));
}

event_wait_limits node_impl::wait_limits(steady_clock::time_point deadline) const {
    event_wait_limits lim;
    lim.deadline = deadline;
    lim.timeout_s = cfg.timeout_s;
    return lim;
}

net::awaitable<void> node_impl::respond_not_serving(http_exchange & ex, const Status & st) {
    http_response r = http_error_response(st);
    if (stopping.load()) r.headers.emplace_back(std::string(pd_header_draining), "1");
    co_await ex.respond(std::move(r));
}

}  // namespace baton
