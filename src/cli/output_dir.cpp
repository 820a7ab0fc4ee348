#include "cli/output_dir.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "zenith/error.h"

namespace zenith::cli {
namespace {

namespace fs = std::filesystem;

bool matches(const std::string& name, const std::string& pattern) {
  const size_t star = pattern.find('*');
  if (star == std::string::npos) return name == pattern;
  const std::string head = pattern.substr(0, star), tail = pattern.substr(star + 1);
  return name.size() >= head.size() + tail.size() && name.compare(0, head.size(), head) == 0 &&
         name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}

bool restarted_job() {
  const char* restarts = std::getenv("ZENITH_RESTART_COUNT");
  return restarts && std::atoi(restarts) > 0;
}

}  // namespace

void prepare_output_dir(const OutputDirRule& rule, const std::string& dir, bool overwrite,
                        bool resuming) {
  ZENITH_CHECK(!(overwrite && resuming), "[", rule.command,
               "] --overwrite-output-dir and --resume disagree: overwriting deletes what "
               "resuming continues; give one");
  std::error_code ec;
  if (restarted_job() || resuming || !fs::is_directory(dir, ec)) return;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename());
  if (names.empty()) return;
  std::sort(names.begin(), names.end());  // the message names the same files on every run
  if (!overwrite) {
    std::string shown;
    for (size_t i = 0; i < names.size() && i < 4; ++i) shown += (i ? ", " : "") + names[i];
    if (names.size() > 4) shown += ", ...";
    ZENITH_FAIL("[", rule.command, "] the output directory ", dir, " is not empty (", shown,
                "): pass --overwrite-output-dir to replace the run there, --resume to continue "
                "it, or choose another --out");
  }
  // Every rank of a job may clear at once before they join: an entry gone already is fine.
  for (const std::string& name : names)
    for (const std::string& pattern : rule.run_files)
      if (matches(name, pattern)) {
        fs::remove_all(fs::path(dir) / name, ec);
        break;
      }
}

void refuse_renamed_eval_flag(int argc, char** argv, const std::string& command,
                              const std::string& new_flag) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    ZENITH_CHECK(a != "--eval-every" && a.rfind("--eval-every=", 0) != 0, "[", command,
                 "] --eval-every was renamed: use ", new_flag,
                 " N (--eval-epochs counts epochs in zenith train, --eval-steps steps in zenith "
                 "finetune)");
  }
}

}  // namespace zenith::cli
