#include "platform/jobs/backoff.h"

#include <algorithm>
#include <cmath>

namespace zenith::platform {

double backoff_delay(int attempt, double base_s, double cap_s) {
  return std::min(cap_s, base_s * std::pow(2.0, std::clamp(attempt - 1, 0, 60)));
}

}  // namespace zenith::platform
