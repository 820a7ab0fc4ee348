// A GGUF LoRA adapter read back (--adapter X.gguf, models::read_lora_adapter) is refused, naming
// the file and the tensor or key, when it is no LoRA adapter or does not fit the base: another
// adapter.type, lora_a or lora_b of a shape the base's layer cannot take, a layer the base lacks,
// half of a pair. The round trip of a good file is tests/io/gguf_llama_test.cpp's.
#include <gtest/gtest.h>

#include <functional>

#include "io/gguf_file.h"
#include "support/llama_fixtures.h"
#include "support/temp_dir.h"
#include "zenith/gguf.h"
#include "zenith/hf.h"

namespace zenith::testing {
namespace {

namespace gguf = io::gguf;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

class GgufAdapterRead : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = models::load_llama_config(llama_fixture("llama_gqa"));
    good_ = dir_ / "good.gguf";
    models::save_gguf_adapter(io::load_lora_adapter(llama_fixture("lora_qv")), base_, good_);
    const gguf::File f = gguf::read_file(good_);
    kv_ = f.metadata;
    for (const gguf::TensorEntry& e : f.tensors)
      tensors_.push_back({e.name, e.ne, gguf::TensorType::f32, gguf::read_tensor(f, e)});
  }
  // The good file's keys and tensors, changed by `edit`, written as NAME.gguf; the error reading
  // it on the base.
  std::string read_changed(
      const std::string& name,
      const std::function<void(std::vector<std::pair<std::string, gguf::Value>>&,
                               std::vector<gguf::OutTensor>&)>& edit) {
    auto kv = kv_;
    auto tensors = tensors_;
    edit(kv, tensors);
    const std::string path = dir_ / (name + ".gguf");
    gguf::write_file(path, kv, tensors);
    return error_of([&] { models::read_lora_adapter(path, base_); });
  }
  static gguf::OutTensor& tensor(std::vector<gguf::OutTensor>& tensors, const std::string& name) {
    for (auto& t : tensors)
      if (t.name == name) return t;
    throw std::runtime_error("no tensor " + name);
  }

  TempDir dir_{"gguf_adapter_read"};
  models::LlamaConfig base_;
  std::string good_;
  std::vector<std::pair<std::string, gguf::Value>> kv_;
  std::vector<gguf::OutTensor> tensors_;
};

TEST_F(GgufAdapterRead, TheGoodFileReads) {
  const io::LoraAdapter back = models::read_lora_adapter(good_, base_);
  EXPECT_EQ(back.modules.size(), tensors_.size() / 2);
}

TEST_F(GgufAdapterRead, AnotherAdapterTypeIsRefused) {
  const std::string e = read_changed("control", [](auto& kv, auto&) {
    for (auto& [key, value] : kv)
      if (key == "adapter.type") value = gguf::Value::str("control_vector");
  });
  EXPECT_NE(e.find("control.gguf: adapter.type is 'control_vector'"), std::string::npos) << e;
}

TEST_F(GgufAdapterRead, AShapeTheBaseCannotTakeIsRefusedNamingTheTensor) {
  const int64_t in = base_.hidden_size;
  const std::string name = "blk.0.attn_q.weight.lora_a";
  // lora_a over one input too many
  std::string e = read_changed("wide_a", [&](auto&, auto& tensors) {
    gguf::OutTensor& a = tensor(tensors, name);
    a.data = Tensor::zeros({a.ne[1], in + 1});
    a.ne = {in + 1, a.ne[1]};
  });
  EXPECT_NE(e.find("wide_a.gguf: tensor '" + name + "' has ne [" + std::to_string(in + 1)),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("lora_a must have ne [" + std::to_string(in) + ", r]"), std::string::npos) << e;
  // lora_b of k_proj with q_proj's rows (the GQA base's k has fewer)
  const std::string b_name = "blk.1.attn_k.weight.lora_b";
  e = read_changed("tall_b", [&](auto&, auto& tensors) {
    bool found = false;
    for (auto& t : tensors) found |= t.name == b_name;
    if (!found) {  // lora_qv adapts q and v: give k a pair of q's shapes
      gguf::OutTensor a = tensor(tensors, "blk.1.attn_q.weight.lora_a");
      gguf::OutTensor b = tensor(tensors, "blk.1.attn_q.weight.lora_b");
      a.name = "blk.1.attn_k.weight.lora_a";
      b.name = b_name;
      tensors.push_back(a);
      tensors.push_back(b);
    }
  });
  EXPECT_NE(e.find("tall_b.gguf: tensor '" + b_name + "'"), std::string::npos) << e;
  EXPECT_NE(e.find("which does not fit the base model"), std::string::npos) << e;
}

TEST_F(GgufAdapterRead, ALayerTheBaseLacksAndAMissingHalfAreRefused) {
  std::string e = read_changed("deep", [&](auto&, auto& tensors) {
    gguf::OutTensor a = tensor(tensors, "blk.0.attn_q.weight.lora_a");
    a.name = "blk.99.attn_q.weight.lora_a";
    tensors.push_back(a);
  });
  EXPECT_NE(e.find("deep.gguf: tensor 'blk.99.attn_q.weight.lora_a' adapts blk.99.attn_q.weight, "
                   "which the base model"),
            std::string::npos)
      << e;
  e = read_changed("half", [&](auto&, auto& tensors) {
    std::erase_if(tensors,
                  [](const gguf::OutTensor& t) { return t.name == "blk.0.attn_q.weight.lora_b"; });
  });
  EXPECT_NE(e.find("half.gguf: "), std::string::npos) << e;
  EXPECT_NE(e.find("has lora_a but no lora_b"), std::string::npos) << e;
}

}  // namespace
}  // namespace zenith::testing
