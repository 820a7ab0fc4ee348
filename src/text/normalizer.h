// tokenizer.json "normalizer": text rewrites applied before pre-tokenization (Prepend, Replace,
// NFC/NFD/NFKC/NFKD, Strip, Sequence).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace zenith::text::detail {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string apply(std::string text) const = 0;
};

// Null for a JSON null. `where` names the file and key in errors ("DIR/tokenizer.json:
// normalizer"); unsupported types fail listing the supported ones.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& config, const std::string& where);

}  // namespace zenith::text::detail
