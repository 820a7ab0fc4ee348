// The job spec: the seed's YAML (job.name, job.framework, job.resources, job.entry) plus
// zenith's extensions. Parsing reports every problem at once with its line and column.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace zenith::platform {

struct JobSpec {
  std::string name = "job";
  std::string framework;           // informational: mindspore, pytorch, ...
  int devices = 1;                 // resources.npu (alias gpu, devices): devices per node
  std::string device_kind;         // "cpu" | "cuda"; empty = what the host has
  std::int64_t memory_bytes = 0;   // resources.memory; 0 = no limit
  std::int64_t storage_bytes = 0;  // resources.storage; 0 = no quota
  int nodes = 1;                   // resources.nodes
  std::map<std::string, std::string> env;
  std::string working_dir;  // empty = the job's own directory
  std::string entry;        // run through /bin/sh -c
  int max_restarts = 0;
  double timeout_s = 0;       // 0 = none
  double hang_timeout_s = 0;  // 0 = the server's default
  int priority = 0;           // higher runs first
  std::string backend;        // "local" | "slurm"; empty = the server's default

  // One rank per device on every node: `nodes: 2, npu: 4` is 8 ranks.
  int ranks() const { return devices * nodes; }
};

// One problem in a spec, positions 1-based (0 when unknown).
struct SpecIssue {
  int line = 0;
  int column = 0;
  std::string message;
};

// Thrown with every issue found; what() is one "[job_spec] file:line:col: message" per line.
class SpecError : public std::runtime_error {
 public:
  SpecError(std::string source, std::vector<SpecIssue> issues);
  const std::vector<SpecIssue>& issues() const { return issues_; }

 private:
  std::vector<SpecIssue> issues_;
};

// Parses and validates YAML text; `source` names it in messages (a file name or "<request>").
JobSpec parse_job_spec(const std::string& yaml_text, const std::string& source);

// Reads a file and parses it; a relative working_dir is taken relative to the file's folder,
// and a missing one defaults to that folder (where the seed's train.py sits).
JobSpec load_job_spec_file(const std::string& path);

nlohmann::json spec_to_json(const JobSpec& spec);
JobSpec spec_from_json(const nlohmann::json& j);

// Levenshtein distance, used for "did you mean" hints.
int edit_distance(const std::string& a, const std::string& b);

}  // namespace zenith::platform
