#include "platform/exec/rank_shim.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "platform/exec/process_tree.h"

namespace zenith::platform {

namespace {

// Everything the shim needs, prepared before clone(): after it the child may not allocate
// (the server is multi-threaded and another thread may hold the allocator's lock).
struct ShimArgs {
  const RankLaunch* launch = nullptr;
  std::vector<std::string> env_strings;
  std::vector<char*> envp;
  const char* argv[4] = {nullptr, nullptr, nullptr, nullptr};
  cpu_set_t cores;
  bool has_cores = false;
  int sync_fd = -1;  // the shim waits for one byte before starting the entry
  int sync_write_fd = -1;
  std::string exit_tmp;
  std::string ended_tmp;
  // The server's argv area (from /proc/self/stat), which the shim overwrites with `title` so
  // that ps does not show it as the server.
  char* argv_area = nullptr;
  std::size_t argv_area_size = 0;
  std::string title;
};

// Where this process's argv strings lie (/proc/self/stat's arg_start and arg_end).
void find_argv_area(ShimArgs& a) {
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos) return;
  std::istringstream fields(stat.substr(paren + 2));  // from field 3, the state
  std::string field;
  unsigned long long start = 0, end = 0;
  for (int i = 3; i <= 49 && fields >> field; ++i) {
    if (i == 48) start = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 49) end = std::strtoull(field.c_str(), nullptr, 10);
  }
  if (start == 0 || end <= start) return;
  a.argv_area = reinterpret_cast<char*>(start);
  a.argv_area_size = end - start;
}

// Shows `title` (words separated by NULs) as this process's command line, cut to the area.
void set_title(const ShimArgs& a) {
  if (!a.argv_area || a.argv_area_size < 2 || a.title.empty()) return;
  const std::size_t n = std::min(a.title.size(), a.argv_area_size - 1);
  memset(a.argv_area, 0, a.argv_area_size);
  memcpy(a.argv_area, a.title.data(), n);
}

volatile sig_atomic_t g_entry_pid = 0;
volatile sig_atomic_t g_pending_signal = 0;

void forward_signal(int sig) {
  if (g_entry_pid > 0)
    kill(-g_entry_pid, sig);
  else
    g_pending_signal = sig;
}

// Formats the current UTC time into buf (at least 32 bytes) without locks or allocation.
int format_utc(char* buf) {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  long long days = ts.tv_sec / 86400, secs = ts.tv_sec % 86400;
  // Howard Hinnant's civil_from_days.
  long long z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
  long long doe = z - era * 146097;
  long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  long long y = yoe + era * 400, doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  long long mp = (5 * doy + 2) / 153, d = doy - (153 * mp + 2) / 5 + 1;
  long long m = mp < 10 ? mp + 3 : mp - 9;
  y += m <= 2;
  long long fields[] = {y, m, d, secs / 3600, secs / 60 % 60, secs % 60, ts.tv_nsec / 1000000};
  const int widths[] = {4, 2, 2, 2, 2, 2, 3};
  const char seps[] = {'-', '-', 'T', ':', ':', '.', 'Z'};
  int pos = 0;
  for (int i = 0; i < 7; ++i) {
    long long v = fields[i];
    for (int w = widths[i] - 1; w >= 0; --w) {
      buf[pos + w] = static_cast<char>('0' + v % 10);
      v /= 10;
    }
    pos += widths[i];
    buf[pos++] = seps[i];
  }
  return pos;
}

void write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
}

// Copies pipe output to the log, stamping each line; `at_line_start` carries across reads.
void stamp_and_write(int log_fd, const char* data, size_t n, bool* at_line_start) {
  char stamp[40];
  size_t start = 0;
  for (size_t i = 0; i < n; ++i) {
    if (*at_line_start) {
      int len = format_utc(stamp);
      stamp[len++] = ' ';
      write_all(log_fd, stamp, len);
      *at_line_start = false;
    }
    if (data[i] == '\n') {
      write_all(log_fd, data + start, i + 1 - start);
      start = i + 1;
      *at_line_start = true;
    }
  }
  if (start < n) write_all(log_fd, data + start, n - start);
}

// Appends the decimal digits of `v` (at least `width` of them, zero-padded) to buf at pos.
int put_digits(char* buf, int pos, unsigned long v, int width) {
  char digits[24];
  int nd = 0;
  do {
    digits[nd++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v || nd < width);
  while (nd) buf[pos++] = digits[--nd];
  return pos;
}

// Writes "<prefix><value> <seconds>.<nanoseconds>\n" (`at`, CLOCK_REALTIME: when the entry
// ended) atomically, without allocating.
void write_number_file(const char* path, const char* tmp, const char* prefix, long value,
                       const timespec& at) {
  char buf[96];
  int pos = 0;
  for (const char* p = prefix; *p; ++p) buf[pos++] = *p;
  if (value < 0) buf[pos++] = '-';
  pos = put_digits(buf, pos, value < 0 ? -value : value, 1);
  buf[pos++] = ' ';
  pos = put_digits(buf, pos, static_cast<unsigned long>(at.tv_sec), 1);
  buf[pos++] = '.';
  pos = put_digits(buf, pos, static_cast<unsigned long>(at.tv_nsec), 9);
  buf[pos++] = '\n';
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  write_all(fd, buf, pos);
  fsync(fd);
  close(fd);
  rename(tmp, path);
}

// How the entry ended, as the exit file states it: {"signaled " or "exited ", number}.
void write_status_file(const char* path, const char* tmp, int status, const timespec& at) {
  if (WIFSIGNALED(status))
    write_number_file(path, tmp, "signaled ", WTERMSIG(status), at);
  else
    write_number_file(path, tmp, "exited ", WIFEXITED(status) ? WEXITSTATUS(status) : 1, at);
}

[[noreturn]] void exec_entry(const ShimArgs& a, int out_fd) {
  const RankLaunch& l = *a.launch;
  setpgid(0, 0);
  dup2(out_fd, 1);
  dup2(out_fd, 2);
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, 0);
  for (int fd = 3; fd < 1024; ++fd) close(fd);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGQUIT}) signal(sig, SIG_DFL);
  // A root entry keeps no way to undo its mounts (the read-only cgroup filesystems, the tmpfs
  // over DATA); fails harmlessly without CAP_SETPCAP.
  prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0);
  umask(022);  // the server's 077 is for DATA, not for what jobs write
  if (chdir(l.working_dir.c_str()) != 0) {
    const char* msg = "[executor] cannot enter working_dir ";
    write_all(2, msg, strlen(msg));
    write_all(2, l.working_dir.c_str(), l.working_dir.size());
    write_all(2, "\n", 1);
    _exit(127);
  }
  if (l.rlimit_as > 0) {
    rlimit rl{static_cast<rlim_t>(l.rlimit_as), static_cast<rlim_t>(l.rlimit_as)};
    setrlimit(RLIMIT_AS, &rl);
  }
  execve("/bin/sh", const_cast<char* const*>(a.argv), a.envp.data());
  _exit(127);
}

int shim_main(void* arg) {
  ShimArgs& a = *static_cast<ShimArgs*>(arg);
  const RankLaunch& l = *a.launch;
  // Hold nothing of the server's (its listening socket above all) but the sync pipe.
  close_range(3, a.sync_fd - 1, 0);
  close_range(a.sync_fd + 1, ~0U, 0);
  // The shim outlives the server: it must not write to the server's terminal or pipes.
  int null_fd = open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
    if (null_fd > 2) close(null_fd);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  setsid();
  prctl(PR_SET_NAME, "zenith-rank", 0, 0, 0);
  set_title(a);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  if (!l.cgroup_procs.empty()) {
    int fd = open(l.cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      write_all(fd, "0", 1);
      close(fd);
    }
  }
  if (a.has_cores) sched_setaffinity(0, sizeof a.cores, &a.cores);
  // The rank's view of the file system: its own /proc (it sees only its PID namespace), DATA
  // hidden but for its job dir, cgroup filesystems read-only. Errors are reported in the log.
  const char* isolation_error = nullptr;
  int isolation_errno = 0;
  auto failed = [&](const char* what) {
    if (!isolation_error) isolation_error = what, isolation_errno = errno;
  };
  if (l.mount_namespace) {
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      failed("cannot make the mount namespace private");
    } else {
      if (l.pid_namespace)
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NOEXEC | MS_NODEV, nullptr);
      if (!l.hide_dir.empty()) {
        // The job dir stays reachable as the working directory while the tmpfs covers it.
        if (chdir(l.keep_dir.c_str()) != 0)
          failed("cannot enter the job dir");
        else if (mount("zenith-data", l.hide_dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
                       "mode=0711,size=64k") != 0)
          failed("cannot mount a tmpfs over the data dir");
        for (const auto& dir : l.keep_parents)
          if (!isolation_error && mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST)
            failed("cannot recreate the job dir's parents");
        if (!isolation_error &&
            mount(".", l.keep_dir.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
          failed("cannot bind the job dir back");
        if (chdir("/") != 0) failed("cannot leave the job dir");
      }
      for (const auto& m : l.readonly_mounts)
        if (mount(nullptr, m.c_str(), nullptr,
                  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  nullptr) != 0)
          failed("cannot make the cgroup filesystem read-only");
    }
  }

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = forward_signal;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // The server writes the "Rank N started" line first, then releases us.
  char go = 0;
  while (read(a.sync_fd, &go, 1) < 0 && errno == EINTR) {
  }
  close(a.sync_fd);
  if (go != 'g') _exit(126);

  int log_fd = open(l.log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  int p[2];
  if (log_fd < 0 || pipe2(p, O_CLOEXEC) != 0) _exit(125);
  if (isolation_error) {
    // The rank must not run with the server's secrets in view.
    bool at_line_start = true;
    const char* msg = "[executor] isolation failed: ";
    stamp_and_write(log_fd, msg, strlen(msg), &at_line_start);
    stamp_and_write(log_fd, isolation_error, strlen(isolation_error), &at_line_start);
    const char* why = strerror(isolation_errno);  // no allocation for a known errno
    stamp_and_write(log_fd, ": ", 2, &at_line_start);
    stamp_and_write(log_fd, why, strlen(why), &at_line_start);
    stamp_and_write(log_fd, "\n", 1, &at_line_start);
    timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    write_number_file(l.exit_path.c_str(), a.exit_tmp.c_str(), "exited ", 121, now);
    _exit(121);
  }
  // The raw syscall, not glibc's fork(): that one takes allocator and stdio locks for its
  // atfork handlers, and a lock another server thread held at clone() time never unlocks here.
  pid_t entry = static_cast<pid_t>(syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, 0));
  if (entry < 0) _exit(124);
  if (entry == 0) {
    close(p[0]);
    int out = dup(p[1]);  // without O_CLOEXEC, for dup2 in exec_entry
    exec_entry(a, out);
  }
  g_entry_pid = entry;
  if (g_pending_signal) kill(-entry, g_pending_signal);
  close(p[1]);

  char buf[16384];
  bool at_line_start = true;
  bool pipe_open = true;
  int entry_status = 0;
  bool entry_done = false;
  timespec done_at{}, ended_at{};
  for (;;) {
    if (pipe_open) {
      pollfd pfd{p[0], POLLIN, 0};
      if (poll(&pfd, 1, 100) > 0) {
        ssize_t n = read(p[0], buf, sizeof buf);
        if (n > 0) stamp_and_write(log_fd, buf, static_cast<size_t>(n), &at_line_start);
        if (n == 0) {
          pipe_open = false;
          close(p[0]);
        }
      }
    } else {
      timespec nap{0, 100 * 1000 * 1000};
      nanosleep(&nap, nullptr);
    }
    int status = 0;
    pid_t w;
    // Reap every child (we are the subreaper, or PID 1), noting the entry's status.
    while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
      if (w == entry) {
        entry_status = status;
        entry_done = true;
        clock_gettime(CLOCK_MONOTONIC, &done_at);
        // Said at once: the log may drain for a while yet, and the executor needs to know
        // when each rank ended to name the one that failed first (root_cause.h).
        clock_gettime(CLOCK_REALTIME, &ended_at);
        if (!l.ended_path.empty())
          write_status_file(l.ended_path.c_str(), a.ended_tmp.c_str(), status, ended_at);
      }
    }
    if (entry_done) {
      if (!pipe_open) break;
      // Daemonised leftovers may keep the pipe open: drain for a moment, then stop.
      timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec - done_at.tv_sec >= 2) break;
    }
  }
  if (!at_line_start) write_all(log_fd, "\n", 1);
  // No process of the rank outlives it.
  kill(-entry, SIGKILL);
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  write_status_file(l.exit_path.c_str(), a.exit_tmp.c_str(), entry_status, ended_at);
  if (!l.ended_path.empty()) unlink(l.ended_path.c_str());
  if (WIFSIGNALED(entry_status)) _exit(128 + WTERMSIG(entry_status));
  _exit(WIFEXITED(entry_status) ? WEXITSTATUS(entry_status) : 1);
}

}  // namespace

std::string utc_timestamp() {
  char buf[40];
  int n = format_utc(buf);
  return std::string(buf, n);
}

void append_log_line(const std::string& path, const std::string& line) {
  std::string text = utc_timestamp() + " " + line + "\n";
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  write_all(fd, text.data(), text.size());
  close(fd);
}

std::optional<RankExit> read_rank_exit(const std::string& exit_path) {
  std::ifstream in(exit_path);
  std::string kind;
  int value = 0;
  if (!(in >> kind >> value)) return std::nullopt;
  double ended_at = 0;  // "exited N T"; files of older versions carry no T
  if (!(in >> ended_at)) ended_at = 0;
  return RankExit{kind == "signaled", value, ended_at};
}

RankProcess launch_rank(const RankLaunch& launch) {
  ShimArgs a;
  a.launch = &launch;
  for (const auto& [k, v] : launch.env) a.env_strings.push_back(k + "=" + v);
  for (auto& s : a.env_strings) a.envp.push_back(s.data());
  a.envp.push_back(nullptr);
  a.argv[0] = "sh";
  a.argv[1] = "-c";
  a.argv[2] = launch.command.c_str();
  CPU_ZERO(&a.cores);
  for (int c : launch.cores) {
    CPU_SET(c, &a.cores);
    a.has_cores = true;
  }
  a.exit_tmp = launch.exit_path + ".tmp";
  a.title = launch.title;
  std::replace(a.title.begin(), a.title.end(), ' ', '\0');
  find_argv_area(a);
  a.ended_tmp = launch.ended_path + ".tmp";
  unlink(launch.exit_path.c_str());
  if (!launch.ended_path.empty()) unlink(launch.ended_path.c_str());
  int sync[2];
  if (pipe2(sync, O_CLOEXEC) != 0) throw std::runtime_error("[executor] pipe failed");
  a.sync_fd = sync[0];
  a.sync_write_fd = sync[1];

  std::vector<char> stack(256 * 1024);
  int flags = SIGCHLD;
  if (launch.pid_namespace) flags |= CLONE_NEWPID;
  if (launch.mount_namespace) flags |= CLONE_NEWNS;
  pid_t pid = clone(shim_main, stack.data() + stack.size(), flags, &a);
  if (pid < 0 && flags != SIGCHLD) {
    // The kernel refused the namespaces after all: run without them.
    RankLaunch plain = launch;
    plain.pid_namespace = plain.mount_namespace = false;
    a.launch = &plain;
    pid = clone(shim_main, stack.data() + stack.size(), SIGCHLD, &a);
    if (pid >= 0) flags = SIGCHLD;
  }
  int err = errno;
  close(sync[0]);
  if (pid < 0) {
    close(sync[1]);
    throw std::runtime_error(std::string("[executor] cannot start rank ") +
                             std::to_string(launch.rank) + ": " + std::strerror(err));
  }
  append_log_line(launch.log_path, "[INFO] Rank " + std::to_string(launch.rank) + " started (pid " +
                                       std::to_string(pid) + ", device " + launch.device_name +
                                       ")");
  (void)!write(sync[1], "g", 1);
  close(sync[1]);
  RankProcess rp;
  rp.pid = pid;
  rp.start_time = process_start_time(pid);
  rp.pid_namespace = (flags & CLONE_NEWPID) != 0;
  return rp;
}

}  // namespace zenith::platform
