#include "platform/exec/process_tree.h"

#include <signal.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace zenith::platform {

long long process_start_time(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return 0;
  // The command name may hold spaces and parentheses: fields start after the last ')'.
  auto close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return 0;
  std::istringstream rest(text.substr(close_paren + 2));
  std::string field;
  long long start = 0;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3 && field == "Z") return 0;  // a zombie has ended
    if (i == 22) start = std::atoll(field.c_str());
  }
  return start;
}

bool process_alive(pid_t pid, long long start_time) {
  if (pid <= 0) return false;
  long long now = process_start_time(pid);
  return now != 0 && (start_time == 0 || now == start_time);
}

std::vector<pid_t> session_processes(pid_t sid) {
  std::vector<pid_t> out;
  if (sid <= 0) return out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream in(e.path() / "stat");
    std::string text;
    if (!std::getline(in, text)) continue;
    auto close_paren = text.rfind(')');
    if (close_paren == std::string::npos) continue;
    std::istringstream rest(text.substr(close_paren + 2));
    std::string state;
    long ppid = 0, pgrp = 0, session = 0;
    if (!(rest >> state >> ppid >> pgrp >> session)) continue;
    if (session == sid && state != "Z") out.push_back(static_cast<pid_t>(std::atol(name.c_str())));
  }
  return out;
}

std::vector<pid_t> descendants(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> children;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream in(e.path() / "stat");
    std::string text;
    if (!std::getline(in, text)) continue;
    auto close_paren = text.rfind(')');
    if (close_paren == std::string::npos) continue;
    std::istringstream rest(text.substr(close_paren + 2));
    std::string state;
    long ppid = 0;
    if (!(rest >> state >> ppid) || state == "Z") continue;
    children[static_cast<pid_t>(ppid)].push_back(static_cast<pid_t>(std::atol(name.c_str())));
  }
  std::vector<pid_t> out, todo = {root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    for (pid_t c : children[p]) {
      out.push_back(c);
      todo.push_back(c);
    }
  }
  return out;
}

void kill_rank_tree(pid_t shim) {
  if (shim <= 0) return;
  // Descendants first, while the shim still holds the orphans; repeat for ones forked meanwhile.
  for (int round = 0; round < 5; ++round) {
    std::vector<pid_t> victims = descendants(shim);
    for (pid_t p : session_processes(shim))
      if (p != shim) victims.push_back(p);
    if (victims.empty()) break;
    for (pid_t p : victims) kill(p, SIGKILL);
  }
}

void signal_session(pid_t sid, int sig) {
  for (pid_t p : session_processes(sid)) kill(p, sig);
}

}  // namespace zenith::platform
