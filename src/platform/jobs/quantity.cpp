#include "platform/jobs/quantity.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace zenith::platform {

namespace {

// Splits "1.5Gi" into 1.5 and "Gi"; false when there is no leading number.
bool split_number(const std::string& text, double* value, std::string* suffix) {
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return false;
  std::string number = text.substr(0, i);
  if (number.find('.') != number.rfind('.') || number == ".") return false;
  char* end = nullptr;
  *value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size()) return false;
  *suffix = text.substr(i);
  return true;
}

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  std::size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

}  // namespace

std::optional<std::int64_t> parse_size(const std::string& raw) {
  std::string text = trim(raw);
  double value = 0;
  std::string suffix;
  if (!split_number(text, &value, &suffix)) return std::nullopt;
  if (!suffix.empty() && suffix.back() == 'B' && suffix != "B") suffix.pop_back();
  struct Unit {
    const char* name;
    double factor;
  };
  static const Unit units[] = {{"", 1},
                               {"B", 1},
                               {"k", 1e3},
                               {"K", 1e3},
                               {"M", 1e6},
                               {"G", 1e9},
                               {"T", 1e12},
                               {"P", 1e15},
                               {"Ki", 1024.0},
                               {"Mi", 1048576.0},
                               {"Gi", 1073741824.0},
                               {"Ti", 1099511627776.0},
                               {"Pi", 1125899906842624.0}};
  for (const auto& u : units) {
    if (suffix == u.name) {
      double bytes = value * u.factor;
      if (!std::isfinite(bytes) || bytes > 9.0e18) return std::nullopt;
      return static_cast<std::int64_t>(std::llround(bytes));
    }
  }
  return std::nullopt;
}

std::optional<double> parse_duration(const std::string& raw) {
  std::string text = trim(raw);
  if (text.empty()) return std::nullopt;
  double total = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t i = pos;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
      ++i;
    if (i == pos) return std::nullopt;
    double value = std::strtod(text.substr(pos, i - pos).c_str(), nullptr);
    std::size_t j = i;
    while (j < text.size() && std::isalpha(static_cast<unsigned char>(text[j]))) ++j;
    std::string unit = text.substr(i, j - i);
    double factor;
    if (unit.empty() || unit == "s")
      factor = 1;
    else if (unit == "ms")
      factor = 1e-3;
    else if (unit == "m" || unit == "min")
      factor = 60;
    else if (unit == "h")
      factor = 3600;
    else if (unit == "d")
      factor = 86400;
    else
      return std::nullopt;
    // A bare number is only allowed alone ("90"), not inside "1h30".
    if (unit.empty() && pos != 0) return std::nullopt;
    total += value * factor;
    pos = j;
  }
  return total;
}

std::string format_size(std::int64_t bytes) {
  static const char* units[] = {"B", "Ki", "Mi", "Gi", "Ti", "Pi"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%lldB", static_cast<long long>(bytes));
  else if (v == std::floor(v))
    std::snprintf(buf, sizeof buf, "%.0f%s", v, units[u]);
  else
    std::snprintf(buf, sizeof buf, "%.1f%s", v, units[u]);
  return buf;
}

std::string format_duration(double seconds) {
  long s = static_cast<long>(seconds + 0.5);
  char buf[64];
  if (seconds < 9.5 && std::abs(seconds - double(s)) >= 0.005)
    std::snprintf(buf, sizeof buf, "%.3gs", seconds);  // 0.25s, 1.5s: short waits exactly
  else if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", s / 3600, s / 60 % 60, s % 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

}  // namespace zenith::platform
