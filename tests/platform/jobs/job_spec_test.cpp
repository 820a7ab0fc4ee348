#include "platform/jobs/job_spec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/temp_dir.h"

namespace zp = zenith::platform;

namespace {

const char* kSeed = R"(job:
  name: cifar10-training
  framework: mindspore
  resources: { npu: 8, memory: 64Gi, storage: 100Gi }
  entry: python train.py
)";

std::vector<zp::SpecIssue> issues_of(const std::string& yaml) {
  try {
    zp::parse_job_spec(yaml, "job.yaml");
  } catch (const zp::SpecError& e) {
    return e.issues();
  }
  return {};
}

}  // namespace

TEST(PlatformJobSpec, SeedYamlParsesAsWritten) {
  zp::JobSpec s = zp::parse_job_spec(kSeed, "job.yaml");
  EXPECT_EQ(s.name, "cifar10-training");
  EXPECT_EQ(s.framework, "mindspore");
  EXPECT_EQ(s.devices, 8);
  EXPECT_EQ(s.memory_bytes, 64LL << 30);
  EXPECT_EQ(s.storage_bytes, 100LL << 30);
  EXPECT_EQ(s.entry, "python train.py");
  EXPECT_EQ(s.nodes, 1);
  EXPECT_EQ(s.max_restarts, 0);
}

TEST(PlatformJobSpec, ExtensionsParse) {
  zp::JobSpec s = zp::parse_job_spec(R"(job:
  name: big
  resources: { gpu: 2, nodes: 3 }
  device: cuda
  env: { LR: "0.1", EPOCHS: 10 }
  working_dir: /srv/train
  max_restarts: 3
  timeout: 2h
  hang_timeout: 10m
  priority: 5
  backend: slurm
  entry: ./train --resume
)",
                                     "job.yaml");
  EXPECT_EQ(s.devices, 2);
  EXPECT_EQ(s.device_kind, "cuda");
  EXPECT_EQ(s.nodes, 3);
  EXPECT_EQ(s.ranks(), 6);  // gpu counts the devices of each node
  EXPECT_EQ(s.env.at("LR"), "0.1");
  EXPECT_EQ(s.env.at("EPOCHS"), "10");
  EXPECT_EQ(s.working_dir, "/srv/train");
  EXPECT_EQ(s.max_restarts, 3);
  EXPECT_DOUBLE_EQ(s.timeout_s, 7200);
  EXPECT_DOUBLE_EQ(s.hang_timeout_s, 600);
  EXPECT_EQ(s.priority, 5);
  EXPECT_EQ(s.backend, "slurm");
}

TEST(PlatformJobSpec, ReportsEveryProblemAtOnceWithLineAndColumn) {
  const std::string yaml = R"(job:
  name: broken
  resorces: { npu: 8 }
  resources: { npu: 0, memory: 64Gx }
  max_restarts: -1
  device: tpu
)";
  auto issues = issues_of(yaml);
  ASSERT_EQ(issues.size(), 6u);
  EXPECT_EQ(issues[0].line, 1);  // missing entry, reported at the job mapping
  EXPECT_NE(issues[0].message.find("missing 'job.entry'"), std::string::npos);
  EXPECT_EQ(issues[1].line, 3);
  EXPECT_EQ(issues[1].column, 3);
  EXPECT_EQ(issues[1].message, "unknown key 'resorces' in job (did you mean 'resources'?)");
  EXPECT_EQ(issues[2].line, 4);
  EXPECT_EQ(issues[2].column, 21);
  EXPECT_NE(issues[2].message.find("'resources.npu' must be positive"), std::string::npos);
  EXPECT_EQ(issues[3].line, 4);
  EXPECT_EQ(issues[3].column, 32);
  EXPECT_NE(issues[3].message.find("bad quantity '64Gx'"), std::string::npos);
  EXPECT_EQ(issues[4].line, 5);
  EXPECT_NE(issues[4].message.find("'job.max_restarts' must be >= 0"), std::string::npos);
  EXPECT_EQ(issues[5].line, 6);
  EXPECT_NE(issues[5].message.find("must be one of cpu, cuda, auto"), std::string::npos);
  try {
    zp::parse_job_spec(yaml, "job.yaml");
    FAIL();
  } catch (const zp::SpecError& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            "[job_spec] job.yaml:3:3: unknown key 'resorces' in job (did you mean 'resources'?)"),
        std::string::npos)
        << e.what();
  }
}

TEST(PlatformJobSpec, NodesBelongToTheResources) {
  auto issues = issues_of("job:\n  nodes: 2\n  resources: { npu: 4, nodes: 0 }\n  entry: x\n");
  ASSERT_EQ(issues.size(), 2u);
  EXPECT_EQ(issues[0].line, 2);
  EXPECT_NE(issues[0].message.find("'nodes' belongs in job.resources"), std::string::npos)
      << issues[0].message;
  EXPECT_EQ(issues[1].message, "'resources.nodes' must be positive, got 0");
}

TEST(PlatformJobSpec, NegativeCountsAndMissingEntry) {
  auto issues = issues_of("job:\n  resources: { npu: -4 }\n");
  ASSERT_EQ(issues.size(), 2u);
  EXPECT_NE(issues[1].message.find("must be positive, got -4"), std::string::npos);
  auto empty_entry = issues_of("job:\n  entry: \"  \"\n");
  ASSERT_EQ(empty_entry.size(), 1u);
  EXPECT_EQ(empty_entry[0].line, 2);
  EXPECT_NE(empty_entry[0].message.find("'job.entry' is empty"), std::string::npos);
}

TEST(PlatformJobSpec, SyntaxErrorsHavePositions) {
  auto issues = issues_of("job:\n  name: [unclosed\n  entry: x\n");
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_GT(issues[0].line, 0);
  EXPECT_NE(issues[0].message.find("invalid YAML"), std::string::npos);
  EXPECT_FALSE(issues_of("just a string").empty());
  EXPECT_FALSE(issues_of("").empty());
  EXPECT_FALSE(issues_of("jobs:\n  entry: x\n").empty());
}

TEST(PlatformJobSpec, JsonRoundTrip) {
  zp::JobSpec s = zp::parse_job_spec(kSeed, "job.yaml");
  s.env["A"] = "b";
  zp::JobSpec back = zp::spec_from_json(zp::spec_to_json(s));
  EXPECT_EQ(zp::spec_to_json(back), zp::spec_to_json(s));
}

TEST(PlatformJobSpec, FileWorkingDirDefaultsToTheYamlFolder) {
  zenith::testing::TempDir tmp("job_spec");
  const std::filesystem::path dir = tmp.path();
  std::ofstream(dir / "job.yaml") << kSeed;
  std::ofstream(dir / "rel.yaml") << "job:\n  working_dir: sub\n  entry: x\n";
  EXPECT_EQ(zp::load_job_spec_file((dir / "job.yaml").string()).working_dir, dir.string());
  EXPECT_EQ(zp::load_job_spec_file((dir / "rel.yaml").string()).working_dir,
            (dir / "sub").string());
}

TEST(PlatformJobSpec, EditDistance) {
  EXPECT_EQ(zp::edit_distance("resorces", "resources"), 1);
  EXPECT_EQ(zp::edit_distance("", "abc"), 3);
}
