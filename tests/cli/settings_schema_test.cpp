// SettingsSchema on a settings struct of its own (as a second subcommand would declare one):
// flags, a --config YAML file (top level or under the command's section), JSON round trips and
// the errors that name the bad key.
#include "cli/settings_schema.h"

#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "support/op_check.h"
#include "support/temp_dir.h"

namespace {

using zenith::cli::prescan_flag;
using zenith::cli::SettingsSchema;
namespace zt = zenith::testing;

struct ToySettings {
  std::string base = "llama";
  int64_t rank = 8;
  double alpha = 16.0;
  bool merge = false;
};

SettingsSchema toy_schema(ToySettings& s) {
  return SettingsSchema("finetune")
      .add("base", s.base, "base model")
      .add("lora-rank", s.rank, "LoRA rank")
      .add("alpha", s.alpha, "LoRA alpha")
      .add("merge", s.merge, "merge the adapter");
}

int parse(SettingsSchema& schema, std::vector<std::string> args) {
  CLI::App app{"toy"};
  schema.add_flags(app);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  try {
    app.parse(int(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code();
  }
  return 0;
}

TEST(SettingsSchema, FlagsSetMembersAndTheLastOneWins) {
  ToySettings s;
  SettingsSchema schema = toy_schema(s);
  ASSERT_EQ(parse(schema, {"finetune", "--lora-rank", "4", "--lora-rank=32", "--merge", "--alpha",
                           "0.5", "--base", "tiny"}),
            0);
  EXPECT_EQ(s.rank, 32);
  EXPECT_TRUE(s.merge);
  EXPECT_EQ(s.alpha, 0.5);
  EXPECT_EQ(s.base, "tiny");
  ToySettings t;
  SettingsSchema bad = toy_schema(t);
  EXPECT_NE(parse(bad, {"finetune", "--lora-rank", "four"}), 0);
}

TEST(SettingsSchema, JsonRoundTripIgnoresUnknownKeys) {
  ToySettings s{.base = "x", .rank = 2, .alpha = 1.5, .merge = true};
  nlohmann::json j = toy_schema(s).to_json();
  EXPECT_EQ(j,
            nlohmann::json::parse(R"({"base": "x", "lora-rank": 2, "alpha": 1.5, "merge": true})"));
  j["from-a-newer-version"] = 1;
  ToySettings t;
  toy_schema(t).apply_json(j);
  EXPECT_EQ(t.base, "x");
  EXPECT_EQ(t.rank, 2);
  EXPECT_EQ(t.alpha, 1.5);
  EXPECT_TRUE(t.merge);
}

TEST(SettingsSchema, YamlAtTopLevelOrUnderTheCommandsSection) {
  zt::TempDir dir("settings_schema");
  const std::string top = (dir.path() / "top.yaml").string();
  std::ofstream(top) << "lora_rank: 16\nmerge: true\n";
  ToySettings s;
  toy_schema(s).apply_yaml_file(top);
  EXPECT_EQ(s.rank, 16);
  EXPECT_TRUE(s.merge);
  EXPECT_EQ(s.base, "llama");  // untouched

  const std::string section = (dir.path() / "section.yaml").string();
  std::ofstream(section) << "train:\n  lora-rank: 1\nfinetune:\n  alpha: 2.5\n";
  ToySettings t;
  toy_schema(t).apply_yaml_file(section);
  EXPECT_EQ(t.alpha, 2.5);
  EXPECT_EQ(t.rank, 8);
}

TEST(SettingsSchema, YamlErrorsNameTheFileAndKey) {
  zt::TempDir dir("settings_schema_errors");
  const std::string path = (dir.path() / "bad.yaml").string();
  ToySettings s;
  const SettingsSchema schema = toy_schema(s);
  std::ofstream(path) << "lora_rnak: 4\n";
  EXPECT_TRUE(zt::throws_with([&] { schema.apply_yaml_file(path); },
                              "[finetune] " + path +
                                  ": unknown setting 'lora-rnak' (known: base, lora-rank, "
                                  "alpha, merge)"));
  std::ofstream(path) << "base: a\nlora_rank: four\n";
  EXPECT_TRUE(zt::throws_with([&] { schema.apply_yaml_file(path); },
                              "'lora-rank' has a bad value (line 2)"));
  std::ofstream(path) << "- a list\n";
  EXPECT_TRUE(zt::throws_with([&] { schema.apply_yaml_file(path); }, "expected a map of settings"));
  EXPECT_TRUE(zt::throws_with([&] { schema.apply_yaml_file(path + ".missing"); },
                              "[finetune] " + path + ".missing"));
}

TEST(SettingsSchema, PrescanFindsBothFlagForms) {
  std::vector<std::string> args = {"train", "--epochs", "3", "--config", "a.yaml", "--resume=b"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  EXPECT_EQ(prescan_flag(int(argv.size()), argv.data(), "--config"), "a.yaml");
  EXPECT_EQ(prescan_flag(int(argv.size()), argv.data(), "--resume"), "b");
  EXPECT_EQ(prescan_flag(int(argv.size()), argv.data(), "--out"), "");
}

}  // namespace
