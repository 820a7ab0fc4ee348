// Running the `zenith` binary under test (ZENITH_BINARY), or any command line, and collecting
// what it prints. Needs nothing of the framework.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace zenith::testing {

struct CliResult {
  int code = -1;
  std::string output;  // stdout and stderr
};

// Runs a command line through /bin/sh and collects its output (stdout and stderr) and exit code.
inline CliResult run_shell(const std::string& command_line) {
  std::string cmd = command_line + " 2>&1";
  CliResult r;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs `zenith ARGS` (the binary under test) and collects its output and exit code.
inline CliResult run_zenith(const std::string& args) {
  return run_shell(std::string(ZENITH_BINARY) + " " + args);
}

}  // namespace zenith::testing
