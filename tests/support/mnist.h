// Small MNIST-format data sets (IDX files) for tests. Needs nothing of the framework.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace zenith::testing {

// A big-endian 32-bit integer, as IDX headers store them.
inline std::string be32(uint32_t v) {
  return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}

struct MnistStyle {
  uint32_t magic = 0x803;  // of the images file (0x803 is MNIST's; others test the error)
  uint32_t seed = 12345;   // of the pixel noise
  int band = 200;          // brightness of the class band
  int noise_shift = 27;    // noise in [0, 2^(32 - noise_shift))
  int label_step = 1;      // item i has class (i * label_step) % 10
};

// MNIST-format files DIR/PREFIX-{images,labels}-idx?-ubyte of `n` items whose class c is a
// bright horizontal band at rows 2c..2c+3, with noise.
inline void write_mnist(const std::filesystem::path& dir, const std::string& prefix, int n,
                        const MnistStyle& style = {}) {
  std::filesystem::create_directories(dir);
  std::string images = be32(style.magic) + be32(n) + be32(28) + be32(28);
  std::string labels = be32(0x801) + be32(n);
  uint32_t noise = style.seed;
  for (int i = 0; i < n; ++i) {
    int c = (i * style.label_step) % 10;
    labels.push_back(char(c));
    for (int y = 0; y < 28; ++y)
      for (int x = 0; x < 28; ++x) {
        noise = noise * 1103515245u + 12345u;
        int v = (y >= 2 * c && y < 2 * c + 4) ? style.band : 0;
        images.push_back(char(v + int(noise >> style.noise_shift)));
      }
  }
  std::ofstream(dir / (prefix + "-images-idx3-ubyte"), std::ios::binary) << images;
  std::ofstream(dir / (prefix + "-labels-idx1-ubyte"), std::ios::binary) << labels;
}

}  // namespace zenith::testing
