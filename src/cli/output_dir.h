// Hugging Face's rule for a run's output directory (TrainingArguments.overwrite_output_dir):
// `zenith train` and `zenith finetune` refuse a --out that already holds files, so two runs
// never mix their metrics, eval logs and checkpoints, unless --overwrite-output-dir (the run
// files there are deleted first) or --resume (the run continues there) says what to do.
#pragma once

#include <string>
#include <vector>

namespace zenith::cli {

struct OutputDirRule {
  std::string command;  // train, finetune: the [prefix] of errors
  // The entries a run of the command writes, as names or patterns with one '*'
  // ("checkpoint-*", "*.safetensors"): what --overwrite-output-dir deletes; other files stay.
  std::vector<std::string> run_files;
};

// Fails, naming `dir` and what it holds, when `dir` has entries and neither `overwrite` nor
// `resuming`; with `overwrite` deletes its run files. A restarted platform job
// (ZENITH_RESTART_COUNT > 0) continues in its own directory: nothing is checked or deleted.
void prepare_output_dir(const OutputDirRule& rule, const std::string& dir, bool overwrite,
                        bool resuming);

// A command line that still uses --eval-every (renamed --eval-epochs in train, --eval-steps in
// finetune) fails, saying the new name.
void refuse_renamed_eval_flag(int argc, char** argv, const std::string& command,
                              const std::string& new_flag);

}  // namespace zenith::cli
