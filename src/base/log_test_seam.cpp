// log_test_seam.cpp — log_set_sink_for_test, compiled only into baton_base_test_seam (tests link it).
#include "log_test_seam.h"

#include <spdlog/sinks/base_sink.h>

#include <mutex>

#include "log_backend.h"

namespace baton {

namespace {

// A sink that hands each formatted line to a function (base_sink<std::mutex>: one line at a time).
class function_sink final : public spdlog::sinks::base_sink<std::mutex> {
  public:
    explicit function_sink(std::function<void(std::string_view)> f) : f_(std::move(f)) {}

  protected:
    void sink_it_(const spdlog::details::log_msg & msg) override {
        spdlog::memory_buf_t line;
        formatter_->format(msg, line);
        std::string_view s(line.data(), line.size());
        if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
        f_(s);
    }
    void flush_() override {}

  private:
    std::function<void(std::string_view)> f_;
};

}  // namespace

void log_set_sink_for_test(std::function<void(std::string_view line)> line) {
    log_sink_replace(line ? std::make_shared<function_sink>(std::move(line)) : nullptr);
}

}  // namespace baton
