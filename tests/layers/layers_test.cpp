// The build says the layers point down: every #include in src/ and include/zenith/ is checked
// against the layer table in src/LAYERS (format described there). A failure names the file, the
// line and the upward edge. The checker itself is tested on small trees written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/files.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

struct Layer {
  std::string name;
  std::vector<std::string> paths;             // relative to the root: folders or single files
  std::optional<std::set<std::string>> uses;  // nullopt: every layer before it
  bool is_private = false;
};

struct Allowance {
  std::string file, header;
  int line = 0;  // in the table, for the stale-allowance message
  bool used = false;
};

struct LayerTable {
  std::vector<Layer> layers;  // low to high
  std::vector<Allowance> allowances;
};

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Parses src/LAYERS; throws with "LAYERS:<line>: ..." on anything it does not understand.
LayerTable parse_layers(const std::string& text) {
  LayerTable t;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("LAYERS:" + std::to_string(n) + ": " + why + " in '" + line + "'");
  };
  while (std::getline(in, line)) {
    ++n;
    const std::string content = line.substr(0, line.find('#'));
    auto w = words(content);
    if (w.empty()) continue;
    if (w[0] == "allow") {
      if (w.size() != 3) fail("expected 'allow FILE HEADER'");
      t.allowances.push_back({w[1], w[2], n});
      continue;
    }
    const bool continues = content[0] == ' ' || content[0] == '\t';
    if (continues && t.layers.empty()) fail("a continued line before any layer");
    if (!continues) {
      for (const auto& l : t.layers)
        if (l.name == w[0]) fail("layer '" + w[0] + "' listed twice");
      t.layers.push_back({w[0]});
    }
    Layer& layer = t.layers.back();
    for (std::size_t i = continues ? 0 : 1; i < w.size(); ++i) {
      if (w[i] == "private") {
        layer.is_private = true;
      } else if (w[i].rfind("uses=", 0) == 0) {
        layer.uses.emplace();
        std::istringstream list(w[i].substr(5));
        for (std::string name; std::getline(list, name, ',');) {
          if (name == "none") continue;
          const bool earlier = std::any_of(t.layers.begin(), t.layers.end() - 1,
                                           [&](const Layer& l) { return l.name == name; });
          if (!earlier) fail("'" + name + "' is not a layer listed before '" + layer.name + "'");
          layer.uses->insert(name);
        }
      } else if (w[i].find('=') != std::string::npos) {
        fail("unknown option '" + w[i] + "'");
      } else {
        layer.paths.push_back(w[i]);
      }
    }
  }
  return t;
}

// The layer holding `path` (relative to the root): the longest matching folder or file.
const Layer* layer_of(const LayerTable& t, const std::string& path) {
  const Layer* best = nullptr;
  std::size_t best_len = 0;
  for (const auto& l : t.layers)
    for (const auto& p : l.paths) {
      const bool match = path == p || path.rfind(p + "/", 0) == 0;
      if (match && p.size() > best_len) best = &l, best_len = p.size();
    }
  return best;
}

// "a,b", or "none".
std::string uses_text(const Layer& l) {
  std::string s;
  for (const auto& u : *l.uses) s += (s.empty() ? "" : ",") + u;
  return s.empty() ? "none" : s;
}

int index_of(const LayerTable& t, const Layer* l) { return static_cast<int>(l - t.layers.data()); }

bool is_source(const fs::path& p) {
  static const std::set<std::string> exts = {".h",  ".hpp", ".cpp", ".cc",
                                             ".cu", ".cuh", ".inl", ".def"};
  return exts.count(p.extension().string()) > 0;
}

// Every include in the C++ files under `root`'s src/, include/ and python/ that goes against the
// table, one message each; then every allowance that no include needed any more.
std::vector<std::string> check_layers(const fs::path& root, LayerTable t) {
  std::vector<std::string> problems;
  std::vector<fs::path> files;
  for (const char* top : {"src", "include", "python"}) {
    if (!fs::exists(root / top)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / top))
      if (e.is_regular_file() && is_source(e.path())) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  static const std::regex include_line(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
  for (const auto& file : files) {
    const std::string rel = file.lexically_relative(root).generic_string();
    const Layer* from = layer_of(t, rel);
    if (!from) {
      problems.push_back(rel + ": in no layer of src/LAYERS (add its folder to one)");
      continue;
    }
    std::ifstream in(file);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::smatch m;
      if (line.find("include") == std::string::npos) continue;  // most lines; regex is slow
      if (!std::regex_search(line, m, include_line)) continue;
      const std::string name = m[1].str();
      // Resolve as the compiler does with -Iinclude -Isrc, then beside the file; anything
      // else (system and third-party headers) has no layer.
      std::string target;
      for (const fs::path& c : {fs::path("include") / name, fs::path("src") / name,
                                file.parent_path().lexically_relative(root) / name}) {
        if (fs::exists(root / c)) {
          target = c.lexically_normal().generic_string();
          break;
        }
      }
      if (target.empty()) continue;
      const Layer* to = layer_of(t, target);
      if (!to || to == from) continue;
      std::string why;
      if (to->is_private)
        why = "which no other layer may include (private)";
      else if (from->uses && !from->uses->count(to->name))
        why = "which " + from->name + " may not use (uses=" + uses_text(*from) + ")";
      else if (index_of(t, to) > index_of(t, from))
        why = "which is above " + from->name;
      if (why.empty()) continue;
      auto allowed = std::find_if(t.allowances.begin(), t.allowances.end(), [&](const auto& a) {
        return a.file == rel && a.header == target;
      });
      if (allowed != t.allowances.end()) {
        allowed->used = true;
        continue;
      }
      problems.push_back(rel + ":" + std::to_string(n) + ": " + from->name + " includes \"" + name +
                         "\" of layer " + to->name + ", " + why);
    }
  }
  for (const auto& a : t.allowances)
    if (!a.used)
      problems.push_back("src/LAYERS:" + std::to_string(a.line) + ": 'allow " + a.file + " " +
                         a.header + "' is no longer needed: delete the line");
  return problems;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += "  " + l + "\n";
  return s;
}

// A small tree: root/src/LAYERS-style table and files with the given contents.
struct Tree {
  zenith::testing::TempDir dir{"layers"};
  void write(const std::string& rel, const std::string& text) {
    zenith::testing::write_bytes(dir / rel, text);
  }
  std::vector<std::string> check(const std::string& table) {
    return check_layers(dir.path(), parse_layers(table));
  }
};

// What parse_layers says about `table`; "" when it parses.
std::string parse_error(const std::string& table) {
  try {
    parse_layers(table);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

const char* kTable = R"(# low to high
core    src/core include/zenith/tensor.h
backend src/backend   uses=core private
ops     src/ops include/zenith/ops.h
app     src/app       uses=none
top     src/top
)";

}  // namespace

TEST(Layers, TheSourceTreeIncludesOnlyDownward) {
  const fs::path root = ZENITH_SOURCE_DIR;
  const LayerTable table = parse_layers(zenith::testing::read_all((root / "src/LAYERS").string()));
  ASSERT_FALSE(table.layers.empty()) << "src/LAYERS is missing or empty";
  const auto problems = check_layers(root, table);
  EXPECT_TRUE(problems.empty()) << "includes against the layer order of src/LAYERS:\n"
                                << joined(problems);
}

TEST(Layers, DownwardAndSameLayerIncludesPass) {
  Tree t;
  t.write("include/zenith/tensor.h", "#pragma once\n");
  t.write("src/core/a.h", "#pragma once\n#include \"zenith/tensor.h\"\n");
  t.write("src/ops/b.cpp", "#include \"core/a.h\"\n#include <vector>\n#include \"httplib.h\"\n");
  t.write("include/zenith/ops.h", "#pragma once\n#include \"zenith/tensor.h\"\n");
  t.write("src/top/c.cpp", "#include \"zenith/ops.h\"\n#include \"core/a.h\"\n");
  t.write("src/backend/k.cpp", "#include \"core/a.h\"\n");
  EXPECT_TRUE(t.check(kTable).empty()) << joined(t.check(kTable));
}

TEST(Layers, AnUpwardIncludeIsReportedWithFileLineAndEdge) {
  Tree t;
  t.write("include/zenith/ops.h", "#pragma once\n");
  t.write("src/core/tensor.cpp",
          "// a comment\n#include <vector>\n  #  include \"zenith/ops.h\"\n");
  EXPECT_EQ(t.check(kTable), std::vector<std::string>{
                                 "src/core/tensor.cpp:3: core includes \"zenith/ops.h\" of layer "
                                 "ops, which is above core"});
}

TEST(Layers, PrivateAndUsesLimitWhatALayerMayInclude) {
  Tree t;
  t.write("src/backend/loops.h", "#pragma once\n");
  t.write("src/core/a.h", "#pragma once\n");
  t.write("src/ops/b.cpp", "#include \"backend/loops.h\"\n");
  t.write("src/app/c.cpp", "#include \"core/a.h\"\n");
  t.write("src/top/d.cpp", "#include \"core/a.h\"\n");
  EXPECT_EQ(t.check(kTable),
            (std::vector<std::string>{
                "src/app/c.cpp:1: app includes \"core/a.h\" of layer core, which app may not "
                "use (uses=none)",
                "src/ops/b.cpp:1: ops includes \"backend/loops.h\" of layer backend, which no "
                "other layer may include (private)"}));
}

TEST(Layers, AFileInNoLayerIsReported) {
  Tree t;
  t.write("src/newthing/x.cpp", "int x;\n");
  EXPECT_EQ(t.check(kTable), std::vector<std::string>{
                                 "src/newthing/x.cpp: in no layer of src/LAYERS (add its folder "
                                 "to one)"});
}

TEST(Layers, AllowancesExcuseOneEdgeAndMustStayNeeded) {
  Tree t;
  t.write("include/zenith/ops.h", "#pragma once\n");
  t.write("src/core/tensor.cpp", "#include \"zenith/ops.h\"\n");
  const std::string table = std::string(kTable) +
                            "allow src/core/tensor.cpp include/zenith/ops.h\n"
                            "allow src/core/gone.cpp include/zenith/ops.h\n";
  EXPECT_EQ(t.check(table), std::vector<std::string>{
                                "src/LAYERS:8: 'allow src/core/gone.cpp include/zenith/ops.h' is "
                                "no longer needed: delete the line"});
}

TEST(Layers, ContinuedLinesAddPathsAndMistakesNameTheLine) {
  const LayerTable t =
      parse_layers("core src/core\n     include/zenith/tensor.h  # more\nops src/ops\n");
  ASSERT_EQ(t.layers.size(), 2u);
  EXPECT_EQ(t.layers[0].paths, (std::vector<std::string>{"src/core", "include/zenith/tensor.h"}));
  EXPECT_EQ(parse_error("core src/core\nops src/ops uses=graph\n")
                .rfind("LAYERS:2: 'graph' is not a "
                       "layer listed before 'ops'",
                       0),
            0u);
  EXPECT_EQ(parse_error("core src/core speed=fast\n").rfind("LAYERS:1: unknown option", 0), 0u);
  EXPECT_EQ(parse_error("core a\ncore b\n").rfind("LAYERS:2: layer 'core' listed twice", 0), 0u);
  EXPECT_EQ(parse_error("allow x\n").rfind("LAYERS:1: expected 'allow FILE HEADER'", 0), 0u);
}
