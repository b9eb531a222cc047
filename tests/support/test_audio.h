// test_audio.h — audio files for the audio tests: a WAV (RIFF, PCM 16-bit mono) whose samples follow from a seed
// (a tone whose pitch depends on it, plus noise), which libmtmd's audio loader reads as any client's WAV or MP3.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace baton::test {

inline std::string test_wav(uint32_t n_ms, uint32_t seed, uint32_t rate = 16000) {
    const uint32_t n = rate / 1000 * n_ms, data = n * 2, size = 44 + data;
    std::string f(size, '\0');
    auto put = [&](size_t at, uint32_t v, int k) {
        for (int i = 0; i < k; ++i) f[at + i] = char((v >> (8 * i)) & 0xff);
    };
    f.replace(0, 4, "RIFF");
    put(4, size - 8, 4);
    f.replace(8, 8, "WAVEfmt ");
    put(16, 16, 4);        // fmt chunk size
    put(20, 1, 2);         // PCM
    put(22, 1, 2);         // mono
    put(24, rate, 4);      // sample rate
    put(28, rate * 2, 4);  // bytes per second
    put(32, 2, 2);         // block align
    put(34, 16, 2);        // bits per sample
    f.replace(36, 4, "data");
    put(40, data, 4);
    const double hz = 220.0 + 55.0 * (seed % 8);
    uint32_t x = seed * 2654435761u + 17;
    for (uint32_t i = 0; i < n; ++i) {
        x = x * 1664525u + 1013904223u;
        const double noise = (double(x >> 16) / 65536.0 - 0.5) * 0.2;
        const double v = 0.6 * std::sin(2.0 * M_PI * hz * double(i) / double(rate)) + noise;
        put(44 + size_t(i) * 2, uint32_t(uint16_t(int16_t(std::lround(v * 32767.0)))), 2);
    }
    return f;
}

}  // namespace baton::test
