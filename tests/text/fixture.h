// The tokenizer fixtures of tests/fixtures/text (written by scripts/tokenizer_fixtures).
#pragma once

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "zenith/error.h"
#include "zenith/text.h"

namespace zenith::testing {

inline std::string text_fixture(const std::string& name) {
  return std::string(ZENITH_FIXTURE_DIR) + "/text/" + name;
}

inline nlohmann::json load_text_fixture(const std::string& file) {
  std::ifstream in(text_fixture(file));
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// The test tokenizers: tokenizer.json ones (checked against @huggingface/tokenizers) and
// tokenizer.model ones (checked against python3-sentencepiece).
inline const std::vector<std::string> kHfTokenizers = {"llama3_bpe", "qwen2_bpe", "gpt2_bpe",
                                                       "llama2_hf", "metaspace_hf"};
inline const std::vector<std::string> kSpTokenizers = {"sp_bpe", "sp_unigram"};

// The message of the zenith::Error that fn throws ("" if none).
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline std::vector<int32_t> ids_of(const nlohmann::json& j) {
  return j.get<std::vector<int32_t>>();
}

}  // namespace zenith::testing
