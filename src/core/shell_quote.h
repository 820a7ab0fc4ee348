// Quotes a string as one /bin/sh word: 'it'\''s'. For the command lines zenith writes for a
// shell (Slurm batch scripts, the ranks' launch command).
#pragma once

#include <string>

namespace zenith {

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

}  // namespace zenith
