// Graceful stop on SIGINT / SIGTERM for the long-running commands (`zenith server`, `serve`).
#pragma once

#include <functional>
#include <thread>

namespace zenith::cli {

// Installs SIGINT and SIGTERM handlers (and ignores SIGPIPE) for as long as it lives: the
// first signal runs `on_stop` on a thread of its own, which prints "[who] signal N: stopping"
// and the note; a second signal then ends the process as usual. Handlers rather than a
// blocked mask, because threads that libraries start before main() (OpenBLAS, OpenMP) do not
// inherit a mask and would take the default action: exit without stopping.
class StopSignal {
 public:
  StopSignal(const char* who, const char* note, std::function<void()> on_stop);
  ~StopSignal();  // joins the waiting thread (waking it when no signal came)
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

 private:
  std::thread waiter_;
};

}  // namespace zenith::cli
