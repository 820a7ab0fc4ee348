#include "platform/exec/isolation.h"

#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace zenith::platform {

namespace fs = std::filesystem;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) return false;
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

// Runs `fn` in a child made with `flags`; true when clone succeeded and fn returned 0.
bool try_clone(int flags, int (*fn)(void*)) {
  std::vector<char> stack(64 * 1024);
  pid_t pid = clone(fn, stack.data() + stack.size(), flags | SIGCHLD, nullptr);
  if (pid < 0) return false;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int probe_pid_ns(void*) { return getpid() == 1 ? 0 : 1; }
int probe_mount_ns(void*) {
  return mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 ? 0 : 1;
}

// This process's cgroup path for a v1 controller (or "" for the v2 hierarchy).
std::string own_cgroup(const std::string& controller) {
  std::istringstream in(read_file("/proc/self/cgroup"));
  std::string line;
  while (std::getline(in, line)) {
    auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string ctrls = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controller.empty() ? ctrls.empty()
                           : ("," + ctrls + ",").find("," + controller + ",") != std::string::npos)
      return path;
  }
  return "";
}

// The folder under which job cgroups are made, and whether it is v2. Empty when none works.
struct CgroupBase {
  std::string dir;
  bool v2 = false;
};

CgroupBase find_cgroup_base() {
  // Pure v2: /sys/fs/cgroup is the unified hierarchy with a memory controller.
  if (fs::exists("/sys/fs/cgroup/cgroup.controllers")) {
    std::string dir = "/sys/fs/cgroup" + own_cgroup("");
    // A v2 cgroup with processes cannot delegate controllers to children ("no internal
    // processes"), so job cgroups go beside this process's cgroup, in a zenith folder.
    std::string parent = fs::path(dir).parent_path().string();
    std::string base = parent + "/zenith";
    std::error_code ec;
    fs::create_directories(base, ec);
    write_file(parent + "/cgroup.subtree_control", "+memory");
    write_file(base + "/cgroup.subtree_control", "+memory");
    if (read_file(base + "/cgroup.subtree_control").find("memory") != std::string::npos)
      return {base, true};
    fs::remove(base, ec);
  }
  // v1 (or hybrid) memory controller.
  if (fs::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes")) {
    std::string base = "/sys/fs/cgroup/memory" + own_cgroup("memory") + "/zenith";
    std::error_code ec;
    fs::create_directories(base, ec);
    if (!ec && fs::exists(base + "/memory.limit_in_bytes")) return {base, false};
  }
  return {};
}

// The rank cgroups below a job's (rank_procs_file).
std::vector<std::string> rank_dirs(const std::string& job) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(job, ec))
    if (e.is_directory(ec) && e.path().filename().string().rfind("rank-", 0) == 0)
      out.push_back(e.path().string());
  return out;
}

int oom_kill_count(const std::string& file) {
  std::istringstream in(read_file(file));
  std::string key;
  long long value = 0;
  while (in >> key >> value)
    if (key == "oom_kill") return static_cast<int>(value);
  return 0;
}

// memory.max (v2) or memory.limit_in_bytes (v1) of cgroup `dir`, with no swap; 0 = none.
bool set_memory_limit(const std::string& dir, std::int64_t memory_limit, bool v2) {
  if (memory_limit <= 0) return true;
  const std::string limit = std::to_string(memory_limit);
  bool ok = v2 ? write_file(dir + "/memory.max", limit) &&
                     (write_file(dir + "/memory.swap.max", "0"), true)
               : write_file(dir + "/memory.limit_in_bytes", limit);
  // Without swap accounting the limit still holds for resident memory.
  if (!v2) write_file(dir + "/memory.memsw.limit_in_bytes", limit);
  return ok;
}

const CgroupBase& cgroup_base() {
  static const CgroupBase base = find_cgroup_base();
  return base;
}

}  // namespace

std::string IsolationSupport::describe() const {
  std::string s = "pid namespace: ";
  s += pid_namespace ? "yes" : "no";
  s += ", mount namespace: ";
  s += mount_namespace ? "yes" : "no";
  s += ", memory cgroup: " + cgroup + (cgroup == "none" ? " (RLIMIT_AS fallback)" : "");
  return s;
}

const IsolationSupport& isolation_support() {
  static const IsolationSupport support = [] {
    IsolationSupport s;
    s.pid_namespace = try_clone(CLONE_NEWPID, probe_pid_ns);
    s.mount_namespace = try_clone(CLONE_NEWNS, probe_mount_ns);
    const CgroupBase& base = cgroup_base();
    s.cgroup = base.dir.empty() ? "none" : (base.v2 ? "v2" : "v1");
    if (getenv("ZENITH_NO_NAMESPACES")) s.pid_namespace = s.mount_namespace = false;
    if (getenv("ZENITH_NO_CGROUPS")) s.cgroup = "none";
    return s;
  }();
  return support;
}

std::unique_ptr<JobCgroup> JobCgroup::create(const std::string& name, std::int64_t memory_limit) {
  if (isolation_support().cgroup == "none") return nullptr;
  const CgroupBase& base = cgroup_base();
  std::string path = base.dir + "/" + name;
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return nullptr;
  auto cg = std::make_unique<JobCgroup>(path, base.v2);
  if (!set_memory_limit(path, memory_limit, base.v2)) return nullptr;
  // Rank cgroups go below: a v2 cgroup delegates its memory controller to children.
  if (base.v2) write_file(path + "/cgroup.subtree_control", "+memory");
  return cg;
}

std::string JobCgroup::rank_procs_file(int rank, std::int64_t memory_limit) {
  const std::string child = path_ + "/rank-" + std::to_string(rank);
  std::error_code ec;
  fs::create_directories(child, ec);
  if (ec || !fs::exists(child + "/cgroup.procs")) return procs_file();
  if (!set_memory_limit(child, memory_limit, v2_)) {
    rmdir(child.c_str());
    return procs_file();
  }
  return child + "/cgroup.procs";
}

std::unique_ptr<JobCgroup> JobCgroup::open(const std::string& path) {
  if (path.empty() || !fs::exists(path + "/cgroup.procs")) return nullptr;
  return std::make_unique<JobCgroup>(path, fs::exists(path + "/cgroup.events"));
}

JobCgroup::~JobCgroup() {
  if (keep_) return;
  // rmdir fails while a process is still inside, or a rank's cgroup; kill and retry briefly.
  for (int i = 0; i < 50; ++i) {
    for (const auto& dir : rank_dirs(path_)) rmdir(dir.c_str());
    if (rmdir(path_.c_str()) == 0 || errno == ENOENT) return;
    kill_all();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int JobCgroup::oom_kills() const {
  // v2's memory.events counts the whole subtree; v1's counter is each cgroup's own.
  if (v2_) return oom_kill_count(path_ + "/memory.events");
  int kills = oom_kill_count(path_ + "/memory.oom_control");
  for (const auto& dir : rank_dirs(path_)) kills += oom_kill_count(dir + "/memory.oom_control");
  return kills;
}

std::int64_t JobCgroup::memory_usage() const {
  std::string s = read_file(path_ + (v2_ ? "/memory.current" : "/memory.usage_in_bytes"));
  return s.empty() ? 0 : std::atoll(s.c_str());
}

std::vector<pid_t> JobCgroup::pids() const {
  std::vector<pid_t> out;
  std::vector<std::string> dirs = rank_dirs(path_);
  dirs.push_back(path_);
  for (const auto& dir : dirs) {
    std::istringstream in(read_file(dir + "/cgroup.procs"));
    pid_t p;
    while (in >> p) out.push_back(p);
  }
  return out;
}

void JobCgroup::kill_all() {
  if (v2_ && write_file(path_ + "/cgroup.kill", "1")) return;
  for (pid_t p : pids()) kill(p, SIGKILL);
}

}  // namespace zenith::platform
