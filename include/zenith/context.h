// Process-wide settings, named as in MindSpore's context.set_context.
#pragma once

#include <string>

namespace zenith::context {

enum Mode { PYNATIVE_MODE = 1, GRAPH_MODE = 0 };

struct Options {
  Mode mode = PYNATIVE_MODE;
  std::string device_target = "CPU";
  int num_threads = 0;  // 0: ZENITH_NUM_THREADS, else the machine's cores
};

void set_context(const Options& options);
const Options& get_context();

// One OpenMP pool for every kernel.
void set_num_threads(int n);
int get_num_threads();

}  // namespace zenith::context
