// test_image.h — image files for the image tests: a BMP (24-bit, uncompressed) whose pixels follow from a seed,
// which libmtmd's image loader reads as any client's PNG or JPEG.
#pragma once

#include <cstdint>
#include <string>

namespace baton::test {

inline std::string test_bmp(uint32_t w, uint32_t h, uint32_t seed) {
    const uint32_t row = (w * 3 + 3) & ~3u;  // rows are padded to 4 bytes
    const uint32_t data = row * h, size = 54 + data;
    std::string f(size, '\0');
    auto put = [&](size_t at, uint32_t v, int n) {
        for (int i = 0; i < n; ++i) f[at + i] = char((v >> (8 * i)) & 0xff);
    };
    f[0] = 'B', f[1] = 'M';
    put(2, size, 4);
    put(10, 54, 4);  // pixel data offset
    put(14, 40, 4);  // BITMAPINFOHEADER
    put(18, w, 4);
    put(22, h, 4);   // positive: rows bottom-up
    put(26, 1, 2);   // planes
    put(28, 24, 2);  // bits per pixel
    put(34, data, 4);
    uint32_t x = seed * 2654435761u + 17;
    for (uint32_t y = 0; y < h; ++y)
        for (uint32_t c = 0; c < w * 3; ++c) {
            x = x * 1664525u + 1013904223u;
            f[54 + size_t(y) * row + c] = char(x >> 24);
        }
    return f;
}

}  // namespace baton::test
