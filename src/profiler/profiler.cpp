#include <filesystem>

#include "core/atomic_file.h"
#include "profiler/recorder.h"
#include "zenith/error.h"

namespace zenith::profiler {

Profiler::Profiler(Options options) : options_(options) {
  detail::start_session(options_);
  running_ = true;
}

Profiler::~Profiler() {
  if (running_) recording_ = detail::stop_session();
}

void Profiler::stop() {
  if (!running_) return;
  recording_ = detail::stop_session();
  running_ = false;
}

const Recording& Profiler::recording() const {
  ZENITH_CHECK(!running_, "[profiler] stop() the profiler before reading its recording");
  return recording_;
}

void Profiler::write(const std::string& dir, const std::string& suffix) const {
  std::filesystem::create_directories(dir);
  const Summary s = summary();
  core::write_file_atomic(dir + "/trace" + suffix + ".json", chrome_trace(recording()).dump());
  core::write_file_atomic(dir + "/summary" + suffix + ".json", s.to_json().dump(2) + "\n");
  core::write_file_atomic(dir + "/summary" + suffix + ".txt", s.table(40));
}

bool active() { return detail::session_live(); }

}  // namespace zenith::profiler
