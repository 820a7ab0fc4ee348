// The environment variable table (src/cli/env_vars.cpp): every ZENITH_ name the sources use is in
// it, every entry is still used, docs/environment.md is what `zenith env --markdown` prints, and
// `zenith env` shows each variable's value.
#include "cli/env_vars.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "support/run_zenith.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

using zenith::testing::run_zenith;

// Where the variables are read or set: the program, its Python package, the scripts, the
// examples and benches, and the whole-program and Python tests (which read theirs from CTest).
const char* const kScanned[] = {"src",   "include",   "python",       "scripts",      "examples",
                                "bench", "tests/e2e", "tests/python", "tests/support"};
const std::set<std::string> kExtensions = {".cpp", ".h",  ".hpp",  ".py",
                                           ".sh",  ".js", ".bash", ".yaml"};

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every ZENITH_ name in the files under `roots` (name -> a file that uses it), less the names the
// same files #define (macros such as ZENITH_CHECK are not variables).
std::map<std::string, std::string> zenith_names(const fs::path& base,
                                                const std::vector<std::string>& roots) {
  static const std::regex name(R"(\bZENITH_[A-Z0-9_]+\b)");
  static const std::regex define(R"(#\s*define\s+(ZENITH_[A-Z0-9_]+))");
  std::map<std::string, std::string> used;
  std::set<std::string> macros;
  for (const auto& root : roots) {
    if (!fs::exists(base / root)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(base / root)) {
      if (!entry.is_regular_file() || !kExtensions.count(entry.path().extension().string()) ||
          entry.path().filename() == "env_vars.cpp")  // the table names them all: not a use
        continue;
      const std::string text = read_text(entry.path());
      for (std::sregex_iterator it(text.begin(), text.end(), define), end; it != end; ++it)
        macros.insert((*it)[1]);
      for (std::sregex_iterator it(text.begin(), text.end(), name), end; it != end; ++it)
        used.emplace(it->str(), fs::relative(entry.path(), base).string());
    }
  }
  for (const auto& m : macros) used.erase(m);
  return used;
}

std::map<std::string, std::string> names_in_the_tree() {
  std::vector<std::string> roots(std::begin(kScanned), std::end(kScanned));
  return zenith_names(ZENITH_SOURCE_DIR, roots);
}

TEST(EnvVars, TheScanFindsAVariableInEachKindOfFile) {
  zenith::testing::TempDir dir("env_scan");
  fs::create_directories(dir.path() / "src");
  std::ofstream(dir.path() / "src/a.cpp") << "#define ZENITH_MACRO(x) x\n"
                                             "auto v = std::getenv(\"ZENITH_NEW_KNOB\");\n";
  std::ofstream(dir.path() / "src/b.py") << "os.environ.get('ZENITH_PY_KNOB')\n";
  std::ofstream(dir.path() / "src/c.sh") << "[ \"${ZENITH_SH_KNOB:-0}\" = 1 ]\n";
  const auto used = zenith_names(dir.path(), {"src"});
  EXPECT_EQ(used.size(), 3u);
  EXPECT_TRUE(used.count("ZENITH_NEW_KNOB"));
  EXPECT_TRUE(used.count("ZENITH_PY_KNOB"));
  EXPECT_TRUE(used.count("ZENITH_SH_KNOB"));
}

TEST(EnvVars, EveryZenithNameTheSourcesUseIsInTheTable) {
  std::set<std::string> declared, excluded;
  for (const auto& v : zenith::cli::env_vars()) declared.insert(std::string(v.name));
  for (const auto& v : zenith::cli::not_env_vars()) excluded.insert(std::string(v.name));
  const auto used = names_in_the_tree();
  ASSERT_GT(used.size(), 25u) << "the scan found too little: is ZENITH_SOURCE_DIR right?";
  for (const auto& [name, file] : used)
    EXPECT_TRUE(declared.count(name) || excluded.count(name))
        << name << " (used in " << file
        << ") is not in src/cli/env_vars.cpp: declare it there (default and meaning), or list it "
           "in kNotVars if it is not an environment variable; then run `zenith env --markdown > "
           "docs/environment.md`";
}

TEST(EnvVars, EveryEntryIsStillUsedAndDeclaredOnce) {
  const auto used = names_in_the_tree();
  std::set<std::string> seen;
  for (const auto& v : zenith::cli::env_vars()) {
    const std::string name(v.name);
    EXPECT_TRUE(seen.insert(name).second) << name << " is declared twice";
    EXPECT_FALSE(v.default_value.empty()) << name << " has no default";
    EXPECT_FALSE(v.meaning.empty()) << name << " has no meaning";
    if (name.rfind("ZENITH_", 0) == 0)
      EXPECT_TRUE(used.count(name)) << name << " is in the table but nothing uses it any more";
  }
}

TEST(EnvVars, DocsAreTheGeneratedTable) {
  const fs::path docs = fs::path(ZENITH_SOURCE_DIR) / "docs/environment.md";
  ASSERT_TRUE(fs::exists(docs)) << docs << " is missing: zenith env --markdown > " << docs;
  auto r = run_zenith("env --markdown");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, zenith::cli::env_markdown());
  EXPECT_EQ(read_text(docs), zenith::cli::env_markdown())
      << docs << " differs from the table in src/cli/env_vars.cpp: regenerate it with "
      << "`zenith env --markdown > docs/environment.md`";
}

TEST(EnvVars, EnvShowsEachVariableWithItsValue) {
  auto r = run_zenith("env");  // the test's own environment, plus one variable set here
  ASSERT_EQ(r.code, 0) << r.output;
  for (const auto& v : zenith::cli::env_vars())
    EXPECT_NE(r.output.find("  " + std::string(v.name)), std::string::npos) << v.name;
  r = zenith::testing::run_shell("env -u ZENITH_COMM_TIMEOUT ZENITH_ALLOC_CACHE_MB=512 " +
                                 std::string(ZENITH_BINARY) + " env");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("  ZENITH_ALLOC_CACHE_MB=512\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  ZENITH_COMM_TIMEOUT unset (default: 60)\n"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("Set by the platform for each rank:\n  ZENITH_JOB_ID"), std::string::npos)
      << r.output;
}

}  // namespace
