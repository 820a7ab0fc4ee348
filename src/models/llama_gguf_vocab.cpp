// The vocabulary in GGUF (tokenizer.ggml.*), as llama.cpp's converter writes it and llama.cpp
// reads it. Two models: "llama" (SentencePiece: tokens, scores, token types; from
// tokenizer.model, or from a metaspace tokenizer.json where each merged token scores minus its
// merge rank) and "gpt2" (byte-level BPE: tokens, token types and merges, from tokenizer.json).
// Token types are SentencePiece's: 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused,
// 6 byte. Reading back, the keys are turned into the files zenith's tokenizers read
// (tokenizer.model or tokenizer.json, and tokenizer_config.json).
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "io/protobuf_lite.h"
#include "models/llama_gguf.h"
#include "zenith/error.h"

namespace zenith::models::detail {
namespace {

namespace gguf = io::gguf;
using gguf::Value;
namespace fs = std::filesystem;

enum TokenType : int64_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<double> scores;
  std::vector<int64_t> types;
};

// tokenizer.model's pieces (ModelProto field 1: piece 1, score 2, type 3) and
// normalizer_spec.add_dummy_prefix (field 3.3).
Vocab read_sentencepiece(const std::string& path, bool* add_dummy_prefix) {
  const std::string proto = core::read_file(path, "gguf");
  Vocab v;
  io::pb::Reader r(proto, path);
  while (!r.done()) {
    uint32_t field;
    io::pb::WireType wire;
    r.next(&field, &wire);
    if (field == 1 && wire == io::pb::kLengthDelimited) {
      io::pb::Reader p(r.length_delimited(), path);
      std::string piece;
      double score = 0;
      int64_t type = kNormal;
      while (!p.done()) {
        uint32_t f;
        io::pb::WireType w;
        p.next(&f, &w);
        if (f == 1 && w == io::pb::kLengthDelimited)
          piece = std::string(p.length_delimited());
        else if (f == 2 && w == io::pb::kFixed32)
          score = p.fixed32();
        else if (f == 3 && w == io::pb::kVarint)
          type = int64_t(p.varint());
        else
          p.skip(w);
      }
      v.tokens.push_back(piece);
      v.scores.push_back(score);
      v.types.push_back(type);
    } else if (field == 3 && wire == io::pb::kLengthDelimited) {
      io::pb::Reader n(r.length_delimited(), path);
      while (!n.done()) {
        uint32_t f;
        io::pb::WireType w;
        n.next(&f, &w);
        if (f == 3 && w == io::pb::kVarint)
          *add_dummy_prefix = n.varint() != 0;
        else
          n.skip(w);
      }
    } else {
      r.skip(wire);
    }
  }
  ZENITH_CHECK(!v.tokens.empty(), "[gguf] ", path, " holds no SentencePiece pieces");
  return v;
}

std::vector<std::string> json_merges(const nlohmann::json& model) {
  std::vector<std::string> merges;
  for (const auto& m : model.value("merges", nlohmann::json::array()))
    merges.push_back(m.is_string() ? m.get<std::string>()
                                   : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
  return merges;
}

bool is_byte_piece(const std::string& s) {
  return s.size() == 6 && s.rfind("<0x", 0) == 0 && s.back() == '>';
}

// llama.cpp's pre-tokenizer name for a byte-level tokenizer.json's split pattern.
std::string bpe_pre_name(const nlohmann::json& tok) {
  const std::string text = tok.value("pre_tokenizer", nlohmann::json()).dump();
  if (text.find("\\\\p{N}{1,3}") != std::string::npos) return "llama-bpe";
  if (text.find("\\\\p{N}| ?") != std::string::npos) return "qwen2";
  return "default";
}

}  // namespace

std::string append_gguf_vocab(GgufMetadata& kv, const text::Tokenizer& tokenizer,
                              const std::string& tokenizer_dir, int64_t vocab_size) {
  Vocab v;
  std::string model, pre = "default", kind;
  std::vector<std::string> merges;
  bool add_space_prefix = true;
  const fs::path dir(tokenizer_dir);
  nlohmann::json tok_json;
  if (fs::exists(dir / "tokenizer.json")) {
    std::ifstream in(dir / "tokenizer.json");
    tok_json = nlohmann::json::parse(in, nullptr, false);
    ZENITH_CHECK(!tok_json.is_discarded(), "[gguf] ", (dir / "tokenizer.json").string(),
                 " is not valid JSON");
  }
  const bool byte_level =
      tok_json.is_object() &&
      tok_json.value("decoder", nlohmann::json()).dump().find("ByteLevel") != std::string::npos;
  if (fs::exists(dir / "tokenizer.model") && !byte_level) {
    model = "llama", kind = "llama (SentencePiece)";
    v = read_sentencepiece((dir / "tokenizer.model").string(), &add_space_prefix);
  } else {
    ZENITH_CHECK(tok_json.is_object(), "[gguf] ", tokenizer_dir,
                 " has neither tokenizer.model nor tokenizer.json: the vocabulary cannot be "
                 "written");
    const nlohmann::json& m = tok_json.at("model");
    ZENITH_CHECK(m.value("type", "") == "BPE", "[gguf] ", tokenizer_dir,
                 "/tokenizer.json: model type '", m.value("type", ""),
                 "' is not written as GGUF (supported: BPE)");
    merges = json_merges(m);
    std::map<std::string, int64_t> rank;
    for (size_t i = 0; i < merges.size(); ++i) {
      std::string merged = merges[i];
      merged.erase(merged.find(' '), 1);
      rank.emplace(merged, int64_t(i));
    }
    model = byte_level ? "gpt2" : "llama";
    kind = byte_level ? "gpt2 (byte-level BPE)" : "llama (SentencePiece-style BPE)";
    if (byte_level) {
      pre = bpe_pre_name(tok_json);
      const std::string p = tok_json.value("pre_tokenizer", nlohmann::json()).dump();
      add_space_prefix = p.find("\"add_prefix_space\":true") != std::string::npos;
    }
    for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
      std::string piece = tokenizer.id_to_piece(id);
      auto r = rank.find(piece);
      v.scores.push_back(byte_level || r == rank.end() ? 0.0 : -double(r->second));
      v.types.push_back(!byte_level && is_byte_piece(piece) ? kByte : kNormal);
      v.tokens.push_back(std::move(piece));
    }
    if (!byte_level) merges.clear();
  }
  for (const text::AddedToken& t : tokenizer.added_tokens()) {
    if (t.id < 0) continue;
    if (t.id >= int64_t(v.tokens.size())) {
      v.tokens.resize(t.id + 1), v.scores.resize(t.id + 1, -1000), v.types.resize(t.id + 1);
      v.tokens[t.id] = t.content;
    }
    if (v.types[t.id] == kNormal || v.types[t.id] == 0)
      v.types[t.id] = t.special ? kControl : kUserDefined;
  }
  if (tokenizer.unk_id() >= 0 && tokenizer.unk_id() < int64_t(v.types.size()) && model == "llama")
    v.types[tokenizer.unk_id()] = kUnknown;
  ZENITH_CHECK(int64_t(v.tokens.size()) <= vocab_size, "[gguf] the tokenizer in ", tokenizer_dir,
               " has ", v.tokens.size(), " tokens, more than the model's vocab_size ", vocab_size);
  for (int64_t i = int64_t(v.tokens.size()); i < vocab_size; ++i) {
    v.tokens.push_back("[PAD" + std::to_string(i) + "]");
    v.scores.push_back(-1000);
    v.types.push_back(kUnused);
  }
  kv.emplace_back("tokenizer.ggml.model", Value::str(model));
  kv.emplace_back("tokenizer.ggml.pre", Value::str(pre));
  kv.emplace_back("tokenizer.ggml.tokens", Value::string_array(v.tokens));
  if (model == "llama") kv.emplace_back("tokenizer.ggml.scores", Value::f32_array(v.scores));
  kv.emplace_back("tokenizer.ggml.token_type", Value::i32_array(v.types));
  if (!merges.empty()) kv.emplace_back("tokenizer.ggml.merges", Value::string_array(merges));
  auto id = [&](const char* key, int32_t value) {
    if (value >= 0) kv.emplace_back(key, Value::u32(uint32_t(value)));
  };
  id("tokenizer.ggml.bos_token_id", tokenizer.bos_id());
  id("tokenizer.ggml.eos_token_id", tokenizer.eos_id());
  id("tokenizer.ggml.unknown_token_id", tokenizer.unk_id());
  id("tokenizer.ggml.padding_token_id", tokenizer.pad_id());
  // Whether encoding adds bos / eos, as the tokenizer does it.
  const std::vector<int32_t> probe = tokenizer.encode("a", true);
  const bool add_bos =
      !probe.empty() && tokenizer.bos_id() >= 0 && probe.front() == tokenizer.bos_id();
  const bool add_eos =
      !probe.empty() && tokenizer.eos_id() >= 0 && probe.back() == tokenizer.eos_id();
  kv.emplace_back("tokenizer.ggml.add_bos_token", Value::boolean(add_bos));
  kv.emplace_back("tokenizer.ggml.add_eos_token", Value::boolean(add_eos));
  if (add_space_prefix != (model == "llama"))  // the default is llama's true, gpt2's false
    kv.emplace_back("tokenizer.ggml.add_space_prefix", Value::boolean(add_space_prefix));
  if (!tokenizer.chat_template().empty())
    kv.emplace_back("tokenizer.chat_template", Value::str(tokenizer.chat_template()));
  return kind + ", " + std::to_string(v.tokens.size()) + " tokens";
}

namespace {

// A SentencePiece ModelProto (BPE) holding the file's pieces, for libsentencepiece.
std::string sentencepiece_proto(const gguf::File& f, const std::vector<std::string>& tokens) {
  const Value* scores = f.find("tokenizer.ggml.scores");
  const Value* types = f.find("tokenizer.ggml.token_type");
  ZENITH_CHECK(
      scores && scores->type == gguf::ValueType::array && scores->floats.size() == tokens.size(),
      "[gguf] ", f.path, ": tokenizer.ggml.scores must be an array of ", tokens.size(),
      " floats (one per token)");
  ZENITH_CHECK(
      types && types->type == gguf::ValueType::array && types->ints.size() == tokens.size(),
      "[gguf] ", f.path, ": tokenizer.ggml.token_type must be an array of ", tokens.size(),
      " integers (one per token)");
  std::string proto;
  bool byte_fallback = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t type = types->ints[i];
    ZENITH_CHECK(type >= kNormal && type <= kByte, "[gguf] ", f.path,
                 ": tokenizer.ggml.token_type[", i, "] is ", type, ", expected 1 to 6");
    byte_fallback |= type == kByte;
    std::string piece;
    io::pb::put_bytes(piece, 1, tokens[i]);
    io::pb::put_fixed32(piece, 2, float(scores->floats[i]));
    io::pb::put_int64(piece, 3, type);
    io::pb::put_bytes(proto, 1, piece);
  }
  std::string trainer;
  io::pb::put_int64(trainer, 3, 2);  // model_type BPE
  io::pb::put_int64(trainer, 4, int64_t(tokens.size()));
  io::pb::put_int64(trainer, 35, byte_fallback ? 1 : 0);
  io::pb::put_int64(trainer, 40, f.get_int("tokenizer.ggml.unknown_token_id", 0));
  io::pb::put_int64(trainer, 41, f.get_int("tokenizer.ggml.bos_token_id", -1));
  io::pb::put_int64(trainer, 42, f.get_int("tokenizer.ggml.eos_token_id", -1));
  io::pb::put_int64(trainer, 43, f.get_int("tokenizer.ggml.padding_token_id", -1));
  io::pb::put_bytes(proto, 2, trainer);
  std::string normalizer;
  io::pb::put_bytes(normalizer, 1, "identity");
  io::pb::put_int64(normalizer, 3, f.get_bool("tokenizer.ggml.add_space_prefix", true) ? 1 : 0);
  io::pb::put_int64(normalizer, 4, 0);  // remove_extra_whitespaces: llama.cpp keeps them
  io::pb::put_int64(normalizer, 5, 1);  // escape_whitespaces
  io::pb::put_bytes(proto, 3, normalizer);
  return proto;
}

// A byte-level BPE tokenizer.json holding the file's tokens and merges.
std::string bpe_json(const gguf::File& f, const std::vector<std::string>& tokens) {
  const Value* merges = f.find("tokenizer.ggml.merges");
  const Value* types = f.find("tokenizer.ggml.token_type");
  ZENITH_CHECK(
      merges && merges->type == gguf::ValueType::array && merges->elem == gguf::ValueType::string,
      "[gguf] ", f.path, ": tokenizer.ggml.merges (an array of strings) is missing");
  nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    vocab[tokens[i]] = i;
    const int64_t type = types && i < types->ints.size() ? types->ints[i] : kNormal;
    if (type == kControl || type == kUserDefined)
      added.push_back({{"id", i},
                       {"content", tokens[i]},
                       {"special", type == kControl},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false}});
  }
  nlohmann::json pre = {{"type", "ByteLevel"},
                        {"add_prefix_space", f.get_bool("tokenizer.ggml.add_space_prefix", false)},
                        {"trim_offsets", true},
                        {"use_regex", true}};
  if (f.get_string("tokenizer.ggml.pre", "default") == "llama-bpe") {
    const char* split =
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
        "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    nlohmann::json byte_level = pre;
    byte_level["use_regex"] = false;
    pre = {{"type", "Sequence"},
           {"pretokenizers",
            {{{"type", "Split"},
              {"pattern", {{"Regex", split}}},
              {"behavior", "Isolated"},
              {"invert", false}},
             byte_level}}};
  }
  nlohmann::json doc = {{"version", "1.0"},
                        {"added_tokens", added},
                        {"normalizer", nullptr},
                        {"pre_tokenizer", pre},
                        {"post_processor", nullptr},
                        {"decoder",
                         {{"type", "ByteLevel"},
                          {"add_prefix_space", true},
                          {"trim_offsets", true},
                          {"use_regex", true}}},
                        {"model",
                         {{"type", "BPE"},
                          {"vocab", vocab},
                          {"merges", merges->strings},
                          {"byte_fallback", false},
                          {"ignore_merges", false}}}};
  return doc.dump();
}

}  // namespace

bool write_tokenizer_files(const gguf::File& f, const std::string& dir_name) {
  if (!f.find("tokenizer.ggml.model")) return false;
  const std::string model = f.get_string("tokenizer.ggml.model");
  ZENITH_CHECK(model == "llama" || model == "gpt2", "[gguf] ", f.path, ": tokenizer.ggml.model '",
               model, "' is not supported (supported: llama, gpt2)");
  const Value* tokens = f.find("tokenizer.ggml.tokens");
  ZENITH_CHECK(tokens && tokens->type == gguf::ValueType::array &&
                   tokens->elem == gguf::ValueType::string && !tokens->strings.empty(),
               "[gguf] ", f.path, ": tokenizer.ggml.tokens (an array of strings) is missing");
  const std::vector<std::string>& t = tokens->strings;
  const fs::path dir(dir_name);
  nlohmann::json config = {
      {"add_bos_token", f.get_bool("tokenizer.ggml.add_bos_token", model == "llama")},
      {"add_eos_token", f.get_bool("tokenizer.ggml.add_eos_token", false)},
      {"legacy", true}};
  auto token = [&](const char* key, const char* name) {
    int64_t id = f.get_int(key, -1);
    if (id >= 0) {
      ZENITH_CHECK(id < int64_t(t.size()), "[gguf] ", f.path, ": ", key, " is ", id,
                   ", outside the ", t.size(), " tokens");
      config[name] = t[id];
    }
  };
  token("tokenizer.ggml.bos_token_id", "bos_token");
  token("tokenizer.ggml.eos_token_id", "eos_token");
  token("tokenizer.ggml.unknown_token_id", "unk_token");
  token("tokenizer.ggml.padding_token_id", "pad_token");
  config["chat_template"] = f.get_string("tokenizer.chat_template", "");
  core::write_file_atomic((dir / "tokenizer_config.json").string(), config.dump());
  if (model == "llama")
    core::write_file_atomic((dir / "tokenizer.model").string(), sentencepiece_proto(f, t));
  else
    core::write_file_atomic((dir / "tokenizer.json").string(), bpe_json(f, t));
  return true;
}

}  // namespace zenith::models::detail
