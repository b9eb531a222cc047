// text_stream.cpp — stop strings and UTF-8 boundaries for streamed output.
#include "text_stream.h"

#include <algorithm>

#include "baton/text.h"

namespace baton {

std::string text_stream::push(const std::string & piece) {
    if (stopped_) return {};
    all_ += piece;
    // Earliest stop string occurrence in the not-yet-emitted region (a stop may begin in held-back bytes).
    size_t cut = std::string::npos;
    const std::string * word = nullptr;
    for (const auto & s : stops_) {
        if (s.empty()) continue;
        const size_t from = emitted_ >= s.size() ? emitted_ - s.size() + 1 : 0;
        const size_t at = all_.find(s, from);
        if (at != std::string::npos && at < cut) {
            cut = at;
            word = &s;
        }
    }
    if (cut != std::string::npos) {
        stopped_ = true;
        stop_word_ = *word;
        std::string out = cut > emitted_ ? all_.substr(emitted_, cut - emitted_) : std::string();
        emitted_ = all_.size();
        return out;
    }
    // Hold back the longest suffix that is a proper prefix of a stop string, and incomplete UTF-8.
    size_t hold = 0;
    for (const auto & s : stops_)
        for (size_t k = std::min(s.size() - (s.empty() ? 0 : 1), all_.size() - emitted_); k > hold; --k)
            if (all_.compare(all_.size() - k, k, s, 0, k) == 0) {
                hold = k;
                break;
            }
    const size_t safe = std::min(all_.size() - hold, emitted_ + utf8_complete_prefix(std::string_view(all_).substr(emitted_)));
    if (safe <= emitted_) return {};
    std::string out = all_.substr(emitted_, safe - emitted_);
    emitted_ = safe;
    return out;
}

std::string text_stream::flush() {
    if (stopped_ || emitted_ >= all_.size()) return {};
    std::string out = all_.substr(emitted_);
    emitted_ = all_.size();
    return out;
}

}  // namespace baton
