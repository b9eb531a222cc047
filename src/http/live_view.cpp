// live_view.cpp — the live view's request log, its series, and its routes (see live_view.h; the page itself
// is live_view_page.cpp).
#include "baton/http/live_view.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "baton/http/http_server.h"
#include "baton/http/http_static.h"

namespace baton {

live_log::live_log(size_t keep, uint32_t window_s, uint32_t step_s)
    : keep_(std::max<size_t>(keep, 1)), window_s_(std::max<uint32_t>(window_s, 1)),
      step_s_(std::clamp<uint32_t>(step_s, 1, std::max<uint32_t>(window_s, 1))), buckets_(window_s_) {}

int64_t live_log::now_unix_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

live_log::bucket & live_log::at(int64_t sec) {
    bucket & b = buckets_[size_t(((sec % window_s_) + window_s_) % window_s_)];
    if (b.sec != sec) b = bucket{.sec = sec};
    return b;
}

void live_log::record(live_request r) {
    const int64_t end_ms = r.unix_ms + int64_t(r.total_s * 1000);
    lock_guard lk(mu_);
    bucket & b = at(end_ms / 1000);
    ++b.n;
    if (r.status == 0 || r.status >= 400) ++b.errors;
    if (r.ttft_s >= 0) {
        b.ttft_sum += r.ttft_s;
        b.ttft_max = std::max(b.ttft_max, r.ttft_s);
        ++b.ttft_n;
    }
    if (r.tpot_s >= 0) {
        b.tpot_sum += r.tpot_s;
        ++b.tpot_n;
    }
    recent_.push_front(std::move(r));
    while (recent_.size() > keep_) recent_.pop_back();
}

void live_log::gauge(int64_t now_ms, double queued, double busy) {
    lock_guard lk(mu_);
    bucket & b = at(now_ms / 1000);
    b.queue_max = std::max(b.queue_max, queued);
    b.busy_max = std::max(b.busy_max, busy);
}

nlohmann::json live_request_json(const live_request & r) {
    nlohmann::json steps = nlohmann::json::array();
    for (const live_step & s : r.steps) {
        nlohmann::json j = {{"name", s.name}, {"start_ms", s.start_s * 1000}, {"end_ms", s.end_s * 1000}};
        if (!s.node.empty()) j["node"] = s.node;
        if (s.bytes) j["bytes"] = s.bytes;
        steps.push_back(std::move(j));
    }
    nlohmann::json j = {{"id", r.id},
                        {"path", r.path},
                        {"route", r.route},
                        {"unix_ms", r.unix_ms},
                        {"status", r.status},
                        {"stream", r.stream},
                        {"total_ms", r.total_s * 1000},
                        {"steps", std::move(steps)}};
    j["ttft_ms"] = r.ttft_s >= 0 ? nlohmann::json(r.ttft_s * 1000) : nlohmann::json(nullptr);
    j["tpot_ms"] = r.tpot_s >= 0 ? nlohmann::json(r.tpot_s * 1000) : nlohmann::json(nullptr);
    if (r.prompt_tokens) j["prompt_tokens"] = r.prompt_tokens;
    if (r.generated_tokens) j["generated_tokens"] = r.generated_tokens;
    return j;
}

nlohmann::json live_log::json(int64_t now_ms) const {
    lock_guard lk(mu_);
    nlohmann::json requests = nlohmann::json::array();
    for (const live_request & r : recent_) requests.push_back(live_request_json(r));
    const int64_t now_s = now_ms / 1000;
    const int64_t points = window_s_ / step_s_;
    // The last point ends with the current second; points are step_s seconds each.
    const int64_t first = now_s - points * step_s_ + 1;
    nlohmann::json t = nlohmann::json::array(), n = nlohmann::json::array(), err = nlohmann::json::array(),
                   ttft_avg = nlohmann::json::array(), ttft_max = nlohmann::json::array(),
                   tpot_avg = nlohmann::json::array(), queue = nlohmann::json::array(), busy = nlohmann::json::array();
    auto or_null = [](double v, bool have) { return have ? nlohmann::json(v) : nlohmann::json(nullptr); };
    for (int64_t p = 0; p < points; ++p) {
        bucket sum;
        for (int64_t s = first + p * step_s_; s < first + (p + 1) * step_s_; ++s) {
            const bucket & b = buckets_[size_t(((s % window_s_) + window_s_) % window_s_)];
            if (b.sec != s) continue;
            sum.n += b.n;
            sum.errors += b.errors;
            sum.ttft_sum += b.ttft_sum;
            sum.ttft_n += b.ttft_n;
            sum.ttft_max = std::max(sum.ttft_max, b.ttft_max);
            sum.tpot_sum += b.tpot_sum;
            sum.tpot_n += b.tpot_n;
            sum.queue_max = std::max(sum.queue_max, b.queue_max);
            sum.busy_max = std::max(sum.busy_max, b.busy_max);
        }
        t.push_back((first + p * step_s_) * 1000);
        n.push_back(sum.n);
        err.push_back(sum.errors);
        ttft_avg.push_back(or_null(sum.ttft_n ? sum.ttft_sum / sum.ttft_n * 1000 : 0, sum.ttft_n > 0));
        ttft_max.push_back(or_null(sum.ttft_max * 1000, sum.ttft_n > 0));
        tpot_avg.push_back(or_null(sum.tpot_n ? sum.tpot_sum / sum.tpot_n * 1000 : 0, sum.tpot_n > 0));
        queue.push_back(or_null(sum.queue_max, sum.queue_max >= 0));
        busy.push_back(or_null(sum.busy_max, sum.busy_max >= 0));
    }
    return {{"requests", std::move(requests)},
            {"series",
             {{"step_s", step_s_},
              {"t", std::move(t)},
              {"requests", std::move(n)},
              {"errors", std::move(err)},
              {"ttft_avg_ms", std::move(ttft_avg)},
              {"ttft_max_ms", std::move(ttft_max)},
              {"tpot_avg_ms", std::move(tpot_avg)},
              {"queue_max", std::move(queue)},
              {"busy_max", std::move(busy)}}}};
}

void live_view_routes(http_server & server, std::function<nlohmann::json()> state) {
    http_route_options open, keyed;
    open.open = true;
    server.route("GET", "/view", open, [](http_exchange & ex) -> net::awaitable<void> {
        http_response r;
        r.content_type = "text/html; charset=utf-8";
        r.body = std::string(live_view_page());
        r.headers.emplace_back("Cache-Control", "no-cache");
        co_await ex.respond(std::move(r));
    });
    server.route("GET", "/view/chart.js", open, [](http_exchange & ex) -> net::awaitable<void> {
        const std::string_view path = live_view_chart_js;
        const size_t slash = path.rfind('/');
        auto file = http_static_file(http_static_root(std::string(path.substr(0, slash))), path.substr(slash));
        if (!file)
            co_return (void) co_await ex.respond_error(
                Status(status_code::not_found, std::string(path) + " is not installed (Debian's libjs-chart.js)"));
        file->headers.emplace_back("Cache-Control", "max-age=3600");
        co_await ex.respond(std::move(*file));
    });
    server.route("GET", "/view/state", keyed, [state = std::move(state)](http_exchange & ex) -> net::awaitable<void> {
        nlohmann::json j = state();
        http_response r = http_response::json(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        r.headers.emplace_back("Cache-Control", "no-store");
        co_await ex.respond(std::move(r));
    });
}

}  // namespace baton
