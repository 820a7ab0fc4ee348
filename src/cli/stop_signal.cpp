#include "cli/stop_signal.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace zenith::cli {
namespace {

int g_pipe[2] = {-1, -1};  // the handler writes the signal number; the waiter reads it

void on_signal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(g_pipe[1], &byte, 1);  // async-signal-safe
  errno = saved;
}

void set_handler(int sig, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(sig, &action, nullptr);
}

}  // namespace

StopSignal::StopSignal(const char* who, const char* note, std::function<void()> on_stop) {
  if (g_pipe[0] < 0 && pipe2(g_pipe, O_CLOEXEC) != 0)  // not inherited by jobs and services
    throw std::runtime_error(std::string("[") + who + "] cannot create the signal pipe");
  signal(SIGPIPE, SIG_IGN);
  set_handler(SIGINT, on_signal);
  set_handler(SIGTERM, on_signal);
  waiter_ =
      std::thread([who = std::string(who), note = std::string(note), on_stop = std::move(on_stop)] {
        unsigned char sig = 0;
        ssize_t n;
        do n = read(g_pipe[0], &sig, 1);
        while (n < 0 && errno == EINTR);
        if (n != 1 || sig == 0) return;  // woken by the destructor
        set_handler(SIGINT, SIG_DFL);    // a second signal ends the process
        set_handler(SIGTERM, SIG_DFL);
        std::fprintf(stderr, "[%s] signal %d: stopping%s\n", who.c_str(), int(sig), note.c_str());
        on_stop();
      });
}

StopSignal::~StopSignal() {
  const unsigned char wake = 0;
  [[maybe_unused]] ssize_t n = write(g_pipe[1], &wake, 1);
  waiter_.join();
  set_handler(SIGINT, SIG_DFL);
  set_handler(SIGTERM, SIG_DFL);
}

}  // namespace zenith::cli
