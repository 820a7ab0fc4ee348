#include "cli/omp_defaults.h"

#include <unistd.h>

#include <cstdlib>
#include <initializer_list>

namespace zenith::cli {

void apply_omp_defaults(char** argv) {
  for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"})
    if (const char* v = std::getenv(name); v && *v) return;  // the user's choice wins
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);  // returns only on failure: go on with libgomp's default
}

}  // namespace zenith::cli
