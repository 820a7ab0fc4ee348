#include "platform/deployments/service_metrics.h"

#include <cstdlib>
#include <sstream>

namespace zenith::platform {

std::int64_t model_requests(const std::string& metrics) {
  std::istringstream lines(metrics);
  std::int64_t total = 0;
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("zenith_serve_requests_total{", 0) != 0) continue;
    if (l.find("endpoint=\"infer\"") == std::string::npos &&
        l.find("endpoint=\"classify\"") == std::string::npos &&
        l.find("completions\"") == std::string::npos)
      continue;
    total += std::atoll(l.substr(l.rfind(' ') + 1).c_str());
  }
  return total;
}

double metric_value(const std::string& metrics, const std::string& name) {
  std::istringstream lines(metrics);
  for (std::string l; std::getline(lines, l);)
    if (l.rfind(name + "{", 0) == 0 || l.rfind(name + " ", 0) == 0)
      return std::atof(l.substr(l.rfind(' ') + 1).c_str());
  return 0;
}

}  // namespace zenith::platform
