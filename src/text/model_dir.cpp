#include "text/model_dir.h"

#include <algorithm>
#include <filesystem>

#include "text/json_config.h"
#include "zenith/error.h"

namespace zenith::text::detail {
namespace {

// A token is written as "<s>", as {"content": "<s>", ...} (an AddedToken), or null.
std::optional<NamedToken> token_of(const nlohmann::json& config, const char* key,
                                   const std::string& where) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  std::string source = where + ": " + key;
  if (it->is_string()) return NamedToken{it->get<std::string>(), source};
  if (it->is_object())
    return NamedToken{member(*it, "content", "string", source).get<std::string>(), source};
  ZENITH_FAIL("[tokenizer] ", source, ": expected a string or {\"content\": ...}, got ",
              it->type_name());
}

// An id or a list of ids (generation_config.json's eos_token_id).
std::vector<int32_t> ids_of(const nlohmann::json& config, const char* key,
                            const std::string& where) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return {};
  auto check = [&](const nlohmann::json& v) {
    ZENITH_CHECK(v.is_number_integer(), "[tokenizer] ", where, ": ", key,
                 ": expected an integer id or a list of them, got ", v.dump());
    return v.get<int32_t>();
  };
  std::vector<int32_t> ids;
  if (it->is_array())
    for (const auto& v : *it) ids.push_back(check(v));
  else
    ids.push_back(check(*it));
  return ids;
}

std::string chat_template_of(const nlohmann::json& config, const std::string& where) {
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  // Several named templates: [{"name": "default", "template": "..."}, ...].
  ZENITH_CHECK(it->is_array(), "[tokenizer] ", where,
               ": chat_template: expected a string or a list of {name, template}");
  for (const auto& entry : *it)
    if (entry.is_object() && entry.value("name", "") == "default")
      return member(entry, "template", "string", where + ": chat_template").get<std::string>();
  return it->empty() ? ""
                     : member(it->front(), "template", "string", where + ": chat_template")
                           .get<std::string>();
}

}  // namespace

ModelDirConfig read_model_dir_config(const std::string& dir) {
  namespace fs = std::filesystem;
  ModelDirConfig c;
  c.dir = dir;
  // special_tokens_map.json first: tokenizer_config.json overrides it.
  for (const char* name : {"special_tokens_map.json", "tokenizer_config.json"}) {
    std::string path = (fs::path(dir) / name).string();
    if (!fs::exists(path)) continue;
    nlohmann::json j = read_json(path);
    ZENITH_CHECK(j.is_object(), "[tokenizer] ", path, ": expected a JSON object");
    for (auto [key, slot] : {std::pair{"bos_token", &c.bos_token},
                             {"eos_token", &c.eos_token},
                             {"pad_token", &c.pad_token},
                             {"unk_token", &c.unk_token}})
      if (j.contains(key)) *slot = token_of(j, key, path);
    if (std::string_view(name) != "tokenizer_config.json") continue;
    if (j.contains("add_bos_token") && !j["add_bos_token"].is_null())
      c.add_bos_token = member(j, "add_bos_token", "boolean", path + ": ").get<bool>();
    if (j.contains("add_eos_token") && !j["add_eos_token"].is_null())
      c.add_eos_token = member(j, "add_eos_token", "boolean", path + ": ").get<bool>();
    c.chat_template = chat_template_of(j, path);
    if (j.contains("added_tokens_decoder")) {
      const auto& decoder = member(j, "added_tokens_decoder", "object", path + ": ");
      for (const auto& [id, token] : decoder.items()) {
        std::string where = path + ": added_tokens_decoder." + id;
        AddedTokenSpec spec;
        try {
          spec.id = std::stoi(id);
        } catch (const std::exception&) {
          ZENITH_FAIL("[tokenizer] ", where, ": the key is not an id");
        }
        spec.content = member(token, "content", "string", where).get<std::string>();
        spec.special = bool_or(token, "special", false, where);
        spec.lstrip = bool_or(token, "lstrip", false, where);
        spec.rstrip = bool_or(token, "rstrip", false, where);
        spec.single_word = bool_or(token, "single_word", false, where);
        spec.normalized = bool_or(token, "normalized", !spec.special, where);
        c.added_tokens.push_back(spec);
      }
    }
  }
  std::string generation = (fs::path(dir) / "generation_config.json").string();
  if (fs::exists(generation)) {
    nlohmann::json j = read_json(generation);
    ZENITH_CHECK(j.is_object(), "[tokenizer] ", generation, ": expected a JSON object");
    if (auto ids = ids_of(j, "bos_token_id", generation); !ids.empty()) c.bos_token_id = ids[0];
    if (auto ids = ids_of(j, "pad_token_id", generation); !ids.empty()) c.pad_token_id = ids[0];
    c.eos_token_ids = ids_of(j, "eos_token_id", generation);
  }
  return c;
}

SpecialIds resolve_special_ids(const ModelDirConfig& config, const Tokenizer& tokenizer,
                               const SpecialIds& defaults) {
  auto id_of = [&](const std::optional<NamedToken>& token, std::optional<int32_t> id,
                   int32_t fallback) {
    if (token) {
      auto found = tokenizer.piece_to_id(token->content);
      ZENITH_CHECK(found, "[tokenizer] ", token->source, ": \"", token->content,
                   "\" is not in the vocabulary");
      return *found;
    }
    if (id) {
      ZENITH_CHECK(*id >= 0 && *id < tokenizer.vocab_size(), "[tokenizer] ", config.dir,
                   "/generation_config.json: id ", *id, " is outside the vocabulary (size ",
                   tokenizer.vocab_size(), ")");
      return *id;
    }
    return fallback;
  };
  SpecialIds s;
  s.bos = id_of(config.bos_token, config.bos_token_id, defaults.bos);
  std::optional<int32_t> first_eos;
  if (!config.eos_token_ids.empty()) first_eos = config.eos_token_ids[0];
  s.eos = id_of(config.eos_token, first_eos, defaults.eos);
  s.pad = id_of(config.pad_token, config.pad_token_id, defaults.pad);
  s.unk = id_of(config.unk_token, std::nullopt, defaults.unk);
  if (s.eos >= 0) s.eos_ids.push_back(s.eos);
  for (int32_t id : config.eos_token_ids) {
    id_of(std::nullopt, id, -1);  // range check
    if (std::find(s.eos_ids.begin(), s.eos_ids.end(), id) == s.eos_ids.end())
      s.eos_ids.push_back(id);
  }
  return s;
}

}  // namespace zenith::text::detail
