// text_stream.h — turns a stream of token pieces into text that is safe to emit.
//
// Holds back bytes that end inside a UTF-8 character or could be the beginning of a stop string, and
// reports a stop string as soon as it appears (the stop string and anything after it are never emitted).
// Thread-safety: one instance per request.
#pragma once

#include <string>
#include <vector>

namespace baton {

class text_stream {
  public:
    explicit text_stream(std::vector<std::string> stops) : stops_(std::move(stops)) {}

    // push appends a piece; returns the bytes that can be emitted now. Sets stopped() when a stop string
    // has appeared.
    std::string push(const std::string & piece);
    // flush returns whatever is held back (at the end of generation, when no stop string matched).
    std::string flush();
    bool stopped() const { return stopped_; }
    // stop_word: the stop string that matched (the earliest in the text), or "".
    const std::string & stop_word() const { return stop_word_; }

  private:
    std::vector<std::string> stops_;
    std::string all_;
    size_t emitted_ = 0;
    bool stopped_ = false;
    std::string stop_word_;
};

}  // namespace baton
