// position_map.h — where a sequence's tokens sit in the model's positions when they are not 0..n-1.
//
// On most models token k of a sequence has position k. An M-RoPE model (Qwen2-VL and kin) gives the embeddings
// of an image grid positions: an image of n = w x h embeddings (index i at column i % w, row i / w) decoded at
// position p puts all n cells at position p, each with the 2-D position (x, y) = (p + column, p + row) that
// libllama keeps beside it, and advances the sequence by max(w, h) positions, fewer than n. A position_map lists
// such images; every other token takes the next position. The map is derived, never trusted: the prefill side
// makes it from the images it encodes, a restore from the state's own cells (state_payload_check), so the blob
// format carries nothing new.
// Thread-safety: a value type.
#pragma once

#include <cstdint>
#include <vector>

namespace baton {

// grid_image: an image whose n embeddings (tokens [begin, begin + n)) lie on a w x h grid (n == w * h).
struct grid_image {
    uint32_t begin = 0, n = 0, w = 0, h = 0;
    uint32_t n_pos() const { return w > h ? w : h; }  // positions it advances the sequence by
    bool operator==(const grid_image &) const = default;
};

class position_map {
  public:
    // add appends an image (one of a single embedding sits where a token would, and is not kept). REQUIRES: it
    // begins at or after the end of the last one, n == w * h >= 1.
    void add(const grid_image & g) {
        if (g.n > 1) images_.push_back(g);
    }
    // pos_of: the position of token k's cell (inside an image: the image's position); k == the sequence's
    // length: the position the next token takes.
    int32_t pos_of(uint64_t k) const;
    // splits_image: k lies strictly inside an image (a cut there would keep part of its cells).
    bool splits_image(uint64_t k) const;
    // keep: the map of the first n tokens. REQUIRES !splits_image(n).
    void keep(uint64_t n);
    void clear() { images_.clear(); }
    bool empty() const { return images_.empty(); }
    const std::vector<grid_image> & images() const { return images_; }
    bool operator==(const position_map &) const = default;

  private:
    std::vector<grid_image> images_;  // in order, not overlapping
};

}  // namespace baton
