// position_map.cpp — see position_map.h. A prompt holds few images, so every query walks the list.
#include "baton/position_map.h"

namespace baton {

int32_t position_map::pos_of(uint64_t k) const {
    int64_t shrink = 0;  // positions the images before k did not take
    for (const grid_image & g : images_) {
        if (k < g.begin) break;
        if (k < uint64_t(g.begin) + g.n) return int32_t(int64_t(g.begin) - shrink);
        shrink += int64_t(g.n) - g.n_pos();
    }
    return int32_t(int64_t(k) - shrink);
}

bool position_map::splits_image(uint64_t k) const {
    for (const grid_image & g : images_)
        if (k > g.begin && k < uint64_t(g.begin) + g.n) return true;
    return false;
}

void position_map::keep(uint64_t n) {
    while (!images_.empty() && images_.back().begin >= n) images_.pop_back();
}

}  // namespace baton
