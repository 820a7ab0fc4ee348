// The global random generator: seeded, with a state that checkpoints save and restore.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace zenith {

class Generator {
 public:
  explicit Generator(uint64_t seed = 5489u) : engine_(seed) {}
  void manual_seed(uint64_t seed) { engine_.seed(seed); }
  std::mt19937_64& engine() { return engine_; }
  std::string state() const;                 // text form, restorable
  void set_state(const std::string& state);  // throws on malformed state

 private:
  std::mt19937_64 engine_;
};

Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace zenith
