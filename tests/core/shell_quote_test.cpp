// shell_quote (src/core/shell_quote.h): whatever a string holds, /bin/sh reads it back as one
// word, unchanged.
#include "core/shell_quote.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace {

// What /bin/sh prints for `printf '[%s]' WORDS`: one bracket pair per word it read.
std::string sh_words(const std::string& words) {
  const std::string cmd = "printf '[%s]' " + words;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr) << cmd;
  if (!p) return "";
  std::string out;
  char buf[256];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ::pclose(p);
  return out;
}

TEST(ShellQuote, SingleQuotesAndEscapesQuotes) {
  EXPECT_EQ(zenith::shell_quote("plain"), "'plain'");
  EXPECT_EQ(zenith::shell_quote(""), "''");
  EXPECT_EQ(zenith::shell_quote("it's"), "'it'\\''s'");
}

TEST(ShellQuote, TheShellReadsOneUnchangedWord) {
  for (const std::string s : {"a b", "it's", "$HOME", "`id`", "x;y", "\"q\"", "*", "", "'", "\\n"})
    EXPECT_EQ(sh_words(zenith::shell_quote(s)), "[" + s + "]") << s;
  EXPECT_EQ(sh_words(zenith::shell_quote("a b") + " " + zenith::shell_quote("c")), "[a b][c]");
}

}  // namespace
