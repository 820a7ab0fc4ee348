#include "platform/exec/process_tree.h"

#include <signal.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

namespace zenith::platform {

namespace {

// The fields of /proc/<pid>/stat the functions below need.
struct ProcStat {
  pid_t pid = 0;
  std::string state;  // "Z": a zombie, which has ended
  pid_t ppid = 0;
  pid_t session = 0;
  long long start_time = 0;  // field 22, in clock ticks since boot
};

std::optional<ProcStat> read_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return std::nullopt;
  // The command name may hold spaces and parentheses: fields start after the last ')'.
  const auto close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return std::nullopt;
  std::istringstream rest(text.substr(close_paren + 1));
  ProcStat s;
  s.pid = pid;
  long ppid = 0, pgrp = 0, session = 0;
  if (!(rest >> s.state >> ppid >> pgrp >> session)) return std::nullopt;  // fields 3 to 6
  s.ppid = static_cast<pid_t>(ppid);
  s.session = static_cast<pid_t>(session);
  std::string skipped;
  for (int field = 7; field < 22 && rest >> skipped; ++field) {
  }
  if (!(rest >> s.start_time)) s.start_time = 0;
  return s;
}

// Every process that has not ended, from /proc.
std::vector<ProcStat> live_processes() {
  std::vector<ProcStat> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    auto s = read_stat(static_cast<pid_t>(std::atol(name.c_str())));
    if (s && s->state != "Z") out.push_back(*s);
  }
  return out;
}

}  // namespace

long long process_start_time(pid_t pid) {
  auto s = read_stat(pid);
  return s && s->state != "Z" ? s->start_time : 0;
}

bool process_alive(pid_t pid, long long start_time) {
  if (pid <= 0) return false;
  long long now = process_start_time(pid);
  return now != 0 && (start_time == 0 || now == start_time);
}

std::vector<pid_t> session_processes(pid_t sid) {
  std::vector<pid_t> out;
  if (sid <= 0) return out;
  for (const ProcStat& s : live_processes())
    if (s.session == sid) out.push_back(s.pid);
  return out;
}

std::vector<pid_t> descendants(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> children;
  for (const ProcStat& s : live_processes()) children[s.ppid].push_back(s.pid);
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
