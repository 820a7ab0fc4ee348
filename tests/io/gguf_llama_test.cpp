// LLaMA models as GGUF (include/zenith/gguf.h): zenith -> GGUF -> zenith is bit for bit at
// f32/f16/bf16 on the fixture models (GQA, tied, bf16, head_dim != hidden / heads, linear rope);
// the keys and tensor names are llama.cpp's and Q/K rows are in llama.cpp's rotary order; the
// vocabulary written and read back encodes text as the original tokenizer does. llama.cpp itself
// reads these files in tests/e2e/gguf_llama_cpp.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "io/gguf_file.h"
#include "support/llama_fixtures.h"
#include "support/op_check.h"
#include "support/temp_dir.h"
#include "zenith/autograd.h"
#include "zenith/gguf.h"
#include "zenith/hf.h"
#include "zenith/quant.h"

namespace gguf = zenith::io::gguf;
using zenith::DType;
using zenith::Tensor;
using zenith::models::Llama;
using zenith::testing::llama_fixture;
using zenith::testing::throws_with;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  Tensor x = a.contiguous(), y = b.contiguous();
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

class GgufLlamaTest : public ::testing::Test {
 protected:
  zenith::testing::TempDir dir_{"gguf_llama"};
};

TEST_F(GgufLlamaTest, RoundTripIsBitForBit) {
  for (const std::string name :
       {"llama_gqa", "llama3_tied", "llama_bf16", "mistral_head_dim", "llama_rope_linear"}) {
    for (const std::string dtype : {"f32", "f16", "bf16"}) {
      SCOPED_TRACE(name + " at " + dtype);
      const DType want = zenith::dtype_from_name(dtype);
      std::shared_ptr<Llama> model;
      if (name == "llama3_tied") {  // tied embeddings; its llama3 rope scaling is not written
        auto config = zenith::models::load_llama_config(llama_fixture(name));
        config.rope_scaling = {};
        std::map<std::string, Tensor> weights;
        for (auto& [k, w] : zenith::io::load_hf_state(llama_fixture(name))) weights[k] = w.to(want);
        model = std::make_shared<Llama>(config, weights, name);
        ASSERT_TRUE(config.tie_word_embeddings);
      } else {
        model = Llama::from_pretrained(llama_fixture(name), want);
      }
      const std::string path = dir_ / (name + "-" + dtype + ".gguf");
      zenith::models::save_gguf(*model, nullptr, path, {.dtype = dtype});
      auto back = Llama::from_pretrained(path);  // the .gguf branch of from_pretrained
      const auto a = model->hf_state(), b = back->hf_state();
      ASSERT_EQ(a.size(), b.size());
      for (const auto& [tensor, w] : a) {
        ASSERT_TRUE(b.count(tensor)) << tensor;
        EXPECT_TRUE(same_bits(w, b.at(tensor))) << tensor;
      }
      const auto& c = model->config();
      const auto& d = back->config();
      EXPECT_EQ(d.head_dim, c.head_dim);
      EXPECT_EQ(d.num_key_value_heads, c.num_key_value_heads);
      EXPECT_EQ(d.tie_word_embeddings, c.tie_word_embeddings);
      EXPECT_EQ(d.rope_scaling.type, c.rope_scaling.type);
      EXPECT_FLOAT_EQ(float(d.rope_scaling.factor), float(c.rope_scaling.factor));
      EXPECT_FLOAT_EQ(float(d.rms_norm_eps), float(c.rms_norm_eps));
      EXPECT_EQ(back->weight_dtype(), want);
      if (dtype == "f32") {  // same weights, same logits
        zenith::NoGradGuard no_grad;
        Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 5, 9, 3}, {1, 4});
        EXPECT_TRUE(same_bits(model->forward(ids), back->forward(ids)));
      }
    }
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// GGML blocks (include/zenith/quant.h) go into the file unchanged and come back unchanged;
// quantizing at export writes what quantizing the model first writes.
TEST_F(GgufLlamaTest, QuantizedBlocksRoundTripBitForBit) {
  zenith::models::LlamaConfig c;  // rows of 256 and 512: whole q4_K blocks
  c.vocab_size = 64, c.hidden_size = 256, c.intermediate_size = 512, c.num_hidden_layers = 1;
  c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 64;
  for (zenith::QuantFormat format :
       {zenith::QuantFormat::q8_0, zenith::QuantFormat::q4_0, zenith::QuantFormat::q4_k}) {
    const std::string name = zenith::quant_name(format);
    SCOPED_TRACE(name);
    Llama model(c);
    const std::string direct = dir_ / ("direct-" + name + ".gguf");
    zenith::models::save_gguf(model, nullptr, direct, {.dtype = name});
    model.quantize(format);
    const std::string path = dir_ / (name + ".gguf");
    zenith::models::save_gguf(model, nullptr, path, {.dtype = name});
    EXPECT_EQ(slurp(direct), slurp(path));
    const gguf::File f = gguf::read_file(path);
    EXPECT_EQ(gguf::tensor_type_name(f.find_tensor("blk.0.attn_k.weight")->type),
              name == "q4_k" ? "q4_K" : name);
    EXPECT_EQ(f.find_tensor("token_embd.weight")->type, uint32_t(gguf::TensorType::f32));
    auto back = zenith::models::load_gguf(path);
    const auto a = model.linear_layers(), b = back->linear_layers();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const zenith::QuantizedWeight* p = a[i].second->quantized_weight();
      const zenith::QuantizedWeight* q = b[i].second->quantized_weight();
      ASSERT_TRUE(p && q) << a[i].first;
      EXPECT_EQ(p->format, q->format) << a[i].first;
      EXPECT_TRUE(same_bits(p->blocks, q->blocks)) << a[i].first;
    }
    zenith::NoGradGuard no_grad;
    Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 5, 9, 3}, {1, 4});
    EXPECT_TRUE(same_bits(model.forward(ids), back->forward(ids)));
  }
}

// load_gguf(..., dequantize): what full fine-tuning and LoRA over a quantized file train on,
// each linear layer a float weight equal to its blocks decoded; the config from the metadata.
TEST_F(GgufLlamaTest, DequantizedLoadWidensEachBlockToItsFloatValues) {
  zenith::models::LlamaConfig c;
  c.vocab_size = 64, c.hidden_size = 64, c.intermediate_size = 96, c.num_hidden_layers = 1;
  c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 16;
  for (zenith::QuantFormat format : {zenith::QuantFormat::q8_0, zenith::QuantFormat::q4_0}) {
    const std::string name = zenith::quant_name(format);
    SCOPED_TRACE(name);
    Llama model(c);
    const std::string path = dir_ / ("widen-" + name + ".gguf");
    zenith::models::save_gguf(model, nullptr, path, {.dtype = name});
    EXPECT_EQ(zenith::models::load_llama_config(path).intermediate_size, 96);
    auto blocks = zenith::models::load_gguf(path);
    auto widened = zenith::models::load_gguf(path, std::nullopt, true);
    const auto a = blocks->linear_layers(), b = widened->linear_layers();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const zenith::QuantizedWeight* q = a[i].second->quantized_weight();
      ASSERT_TRUE(q) << a[i].first;
      EXPECT_EQ(b[i].second->quantized_weight(), nullptr) << b[i].first;
      EXPECT_TRUE(same_bits(b[i].second->weight(), zenith::dequantize_weight(*q))) << b[i].first;
    }
  }
}

// convert_lora_to_gguf.py's layout: lora_a [r, in] and lora_b [out, r] under the base tensor's
// name, lora_b rows of q in llama.cpp's rotary order, alpha giving PEFT's scaling.
TEST_F(GgufLlamaTest, LoraAdapterIsLlamaCppsAdapterLayout) {
  const auto config = zenith::models::load_llama_config(llama_fixture("llama_gqa"));
  zenith::io::LoraAdapter adapter =
      zenith::io::load_lora_adapter(llama_fixture("lora_qv"));  // r 4, alpha 8, q and v
  const std::string path = dir_ / "adapter.gguf";
  EXPECT_EQ(zenith::models::save_gguf_adapter(adapter, config, path),
            int64_t(2 * adapter.modules.size()));
  const gguf::File f = gguf::read_file(path);
  EXPECT_EQ(f.get_string("general.type"), "adapter");
  EXPECT_EQ(f.get_string("adapter.type"), "lora");
  EXPECT_FLOAT_EQ(float(f.get_float("adapter.lora.alpha", 0)), 8.0f);  // scaling 2 = 8 / 4
  const auto& w = adapter.modules.at("model.layers.1.self_attn.q_proj");
  const gguf::TensorEntry* a = f.find_tensor("blk.1.attn_q.weight.lora_a");
  const gguf::TensorEntry* b = f.find_tensor("blk.1.attn_q.weight.lora_b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->ne, std::vector<int64_t>({config.hidden_size, 4}));
  EXPECT_EQ(b->ne, std::vector<int64_t>({4, config.q_dim()}));
  EXPECT_EQ(gguf::read_tensor(f, *a).to_double_vector(), w.A.to(DType::f32).to_double_vector());
  const std::vector<double> hf = w.B.to_double_vector(),
                            gg = gguf::read_tensor(f, *b).to_double_vector();
  const int64_t D = config.head_dim;
  for (int64_t h = 0; h < config.num_attention_heads; ++h)
    for (int64_t i = 0; i < D / 2; ++i)
      for (int64_t t = 0; t < 2; ++t)
        for (int64_t col = 0; col < 4; ++col)
          ASSERT_EQ(gg[(h * D + 2 * i + t) * 4 + col], hf[(h * D + t * D / 2 + i) * 4 + col]);
  EXPECT_TRUE(f.find_tensor("blk.0.attn_v.weight.lora_b"));
  EXPECT_FALSE(f.find_tensor("blk.0.attn_k.weight.lora_a"));
}

// Read back (--adapter X.gguf): the same A and B (q's lora_b rows back in HF's order), the same
// scaling (rsLoRA's too), the same logits as the PEFT directory; a model file is not an adapter.
TEST_F(GgufLlamaTest, AdapterReadsBackAsThePeftAdapter) {
  for (const auto& [adapter_name, base] :
       {std::pair{"lora_qv", "llama_gqa"}, std::pair{"lora_all_linear_rslora", "llama_bf16"}}) {
    SCOPED_TRACE(adapter_name);
    const auto config = zenith::models::load_llama_config(llama_fixture(base));
    const zenith::io::LoraAdapter peft = zenith::io::load_lora_adapter(llama_fixture(adapter_name));
    const std::string path = dir_ / (std::string(adapter_name) + ".gguf");
    zenith::models::save_gguf_adapter(peft, config, path);
    const zenith::io::LoraAdapter back = zenith::models::read_lora_adapter(path, config);
    EXPECT_EQ(back.config.r, peft.config.r);
    EXPECT_NEAR(back.config.scaling(), peft.config.scaling(), 1e-6);
    ASSERT_EQ(back.modules.size(), peft.modules.size());
    for (const auto& [module, w] : peft.modules) {
      ASSERT_TRUE(back.modules.count(module)) << module;
      EXPECT_EQ(back.modules.at(module).A.to_double_vector(), w.A.to_double_vector()) << module;
      EXPECT_EQ(back.modules.at(module).B.to_double_vector(), w.B.to_double_vector()) << module;
    }
    auto with_dir = Llama::from_pretrained(llama_fixture(base));
    auto with_gguf = Llama::from_pretrained(llama_fixture(base));
    zenith::models::load_lora(*with_dir, llama_fixture(adapter_name));
    zenith::models::load_lora(*with_gguf, path);
    zenith::NoGradGuard no_grad;
    const Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 5, 9, 2, 7}, {1, 5});
    const std::vector<double> a = with_dir->forward(ids).to_double_vector(),
                              b = with_gguf->forward(ids).to_double_vector();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5 * (1 + std::abs(a[i])));
  }
  // A model GGUF given as an adapter, and an adapter on a base it does not fit.
  auto model = Llama::from_pretrained(llama_fixture("llama_gqa"));
  const std::string model_path = dir_ / "model.gguf";
  zenith::models::save_gguf(*model, nullptr, model_path);
  EXPECT_TRUE(throws_with([&] { zenith::models::read_lora_adapter(model_path, model->config()); },
                          "general.type is 'model', not a LoRA adapter"));
  EXPECT_TRUE(throws_with(
      [&] {
        zenith::models::load_gguf_adapter(
            dir_ / "lora_qv.gguf",
            zenith::models::load_llama_config(llama_fixture("mistral_head_dim")));
      },
      "does not fit the base model"));
}

TEST_F(GgufLlamaTest, KeysNamesAndRotaryRowOrderAreLlamaCpps) {
  auto model = Llama::from_pretrained(llama_fixture("llama_gqa"));
  const auto& c = model->config();
  const std::string path = dir_ / "gqa.gguf";
  zenith::models::save_gguf(*model, nullptr, path, {.dtype = "f32", .name = "gqa"});
  const gguf::File f = gguf::read_file(path);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("general.name"), "gqa");
  EXPECT_EQ(f.get_int("llama.block_count"), c.num_hidden_layers);
  EXPECT_EQ(f.get_int("llama.embedding_length"), c.hidden_size);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), c.intermediate_size);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), c.num_attention_heads);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), c.num_key_value_heads);
  EXPECT_EQ(f.get_int("llama.context_length"), c.max_position_embeddings);
  EXPECT_EQ(f.get_int("llama.rope.dimension_count"), c.head_dim);
  EXPECT_EQ(f.get_int("llama.vocab_size"), c.vocab_size);
  EXPECT_EQ(f.get_int("general.file_type"), 0);
  EXPECT_FLOAT_EQ(float(f.get_float("llama.rope.freq_base", 0)), float(c.rope_theta));
  for (const char* t : {"token_embd.weight", "output_norm.weight", "blk.0.attn_q.weight",
                        "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight",
                        "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight",
                        "blk.0.attn_norm.weight", "blk.0.ffn_norm.weight"})
    EXPECT_TRUE(f.find_tensor(t)) << t;
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->ne,
            std::vector<int64_t>({c.hidden_size, c.q_dim()}));  // ne: innermost first
  // Row h*D + 2i + t of llama.cpp's k is HF's row h*D + t*D/2 + i.
  const auto state = model->hf_state();
  const std::vector<double> hf =
      state.at("model.layers.0.self_attn.k_proj.weight").to_double_vector();
  const std::vector<double> gg =
      gguf::read_tensor(f, *f.find_tensor("blk.0.attn_k.weight")).to_double_vector();
  const int64_t D = c.head_dim, in = c.hidden_size;
  for (int64_t h = 0; h < c.num_key_value_heads; ++h)
    for (int64_t i = 0; i < D / 2; ++i)
      for (int64_t t = 0; t < 2; ++t)
        for (int64_t col = 0; col < in; ++col)
          ASSERT_EQ(gg[(h * D + 2 * i + t) * in + col], hf[(h * D + t * D / 2 + i) * in + col]);
}

TEST_F(GgufLlamaTest, UnsupportedArchitecturesAndTypesFailClearly) {
  auto qwen = Llama::from_pretrained(llama_fixture("qwen2_bias"));
  EXPECT_TRUE(
      throws_with([&] { zenith::models::save_gguf(*qwen, nullptr, dir_ / "q.gguf"); }, "qwen2"));
  auto llama3 = Llama::from_pretrained(llama_fixture("llama3_tied"));
  EXPECT_TRUE(throws_with([&] { zenith::models::save_gguf(*llama3, nullptr, dir_ / "l3.gguf"); },
                          "rope_scaling llama3 is not written as GGUF yet"));
  auto model = Llama::from_pretrained(llama_fixture("llama_gqa"));
  EXPECT_TRUE(throws_with(
      [&] { zenith::models::save_gguf(*model, nullptr, dir_ / "x.gguf", {.dtype = "q3_k"}); },
      "unknown --dtype 'q3_k' (known: f32, f16, bf16, q8_0, q4_0, q4_k)"));
  const std::string other = dir_ / "falcon.gguf";
  gguf::write_file(other, {{"general.architecture", gguf::Value::str("falcon")}}, {});
  EXPECT_TRUE(throws_with([&] { zenith::models::load_gguf(other); },
                          "general.architecture is 'falcon'; zenith reads the llama architecture"));
  const std::string path = dir_ / "gqa.gguf";
  zenith::models::save_gguf(*model, nullptr, path);
  gguf::File f = gguf::read_file(path);
  std::vector<std::pair<std::string, gguf::Value>> kv = f.metadata;
  std::vector<gguf::OutTensor> tensors;
  for (const auto& e : f.tensors)
    if (e.name != "blk.1.ffn_up.weight")
      tensors.push_back({e.name, e.ne, gguf::TensorType(e.type), gguf::read_tensor(f, e)});
  gguf::write_file(path, kv, tensors);
  EXPECT_TRUE(throws_with([&] { zenith::models::load_gguf(path); },
                          "tensor blk.1.ffn_up.weight (model.layers.1.mlp.up_proj.weight) is "
                          "missing"));
  for (auto& [key, value] : kv)  // a hostile count fails before anything is sized by it
    if (key == "llama.block_count") value = gguf::Value::u32(1u << 30);
  gguf::write_file(path, kv, tensors);
  EXPECT_TRUE(throws_with([&] { zenith::models::load_gguf(path); },
                          "llama.* sizes out of range (block_count 1073741824"));
}

TEST_F(GgufLlamaTest, VocabularyEncodesAsTheOriginalTokenizer) {
  const std::string text = "Hello world! 12345 caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD\n  spaced  out";
  for (const std::string name : {"llama2_hf", "sp_bpe", "gpt2_bpe", "llama3_bpe"}) {
    SCOPED_TRACE(name);
    const std::string tok_dir = std::string(ZENITH_FIXTURE_DIR) + "/text/" + name;
    auto tok = zenith::text::Tokenizer::from_dir(tok_dir);
    zenith::models::LlamaConfig c;
    c.vocab_size = tok->vocab_size() + 3;  // padded with unused tokens, as the converter pads
    c.hidden_size = 8, c.intermediate_size = 16, c.num_hidden_layers = 1;
    c.num_attention_heads = 2, c.num_key_value_heads = 2, c.head_dim = 4;
    Llama model(c);
    const std::string path = dir_ / (name + ".gguf");
    zenith::models::save_gguf(model, tok.get(), path);
    const gguf::File f = gguf::read_file(path);
    EXPECT_EQ(f.find("tokenizer.ggml.tokens")->strings.size(), size_t(c.vocab_size));
    EXPECT_EQ(f.find("tokenizer.ggml.tokens")->strings.back(),
              "[PAD" + std::to_string(c.vocab_size - 1) + "]");
    auto back = zenith::models::gguf_tokenizer(path);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->encode(text), tok->encode(text));
    EXPECT_EQ(back->bos_id(), tok->bos_id());
    EXPECT_EQ(back->eos_id(), tok->eos_id());
    const auto ids = tok->encode(text, false);
    EXPECT_EQ(back->decode(ids), tok->decode(ids));
  }
}

}  // namespace
