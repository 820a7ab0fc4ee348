// QLoRA (zenith finetune --method qlora): LoRA on a base quantized at load (Options::quant). On
// the small reference model tests/fixtures/llama/llama_gqa: it learns; its PEFT adapter, loaded
// on the same base quantized the same way, computes the loss training ended with; on the
// unquantized base it computes about the same.
#include <gtest/gtest.h>

#include "support/finetune_fixtures.h"
#include "support/llama_fixtures.h"
#include "support/temp_dir.h"
#include "zenith/finetune.h"
#include "zenith/quant.h"

namespace zenith::testing {
namespace {

TEST(FinetuneQlora, LearnsAndItsAdapterLoadsOnTheUnquantizedBase) {
  for (const char* quant : {"q4_0", "nf4"}) {
    TempDir dir(std::string("finetune_qlora_") + quant);
    Data train = pattern_data(16, 1), eval = pattern_data(8, 2);
    finetune::Options o = lora_options(dir.str());
    finetune::set_lora_targets(o.lora, "all-linear");
    o.quant = quant;
    o.max_steps = 12;
    o.batch_size = 4;
    finetune::Result r = finetune::run(o, train, &eval);
    ASSERT_EQ(r.evals.size(), 2u);
    EXPECT_LT(r.evals[1].loss, r.evals[0].loss * 0.95) << quant;

    auto quantized = models::Llama::from_pretrained(o.model);
    models::load_lora(*quantized, dir.str());
    // q4_0 quantizes every linear layer and lm_head (in 32 or 64); nf4 only down_proj (in 64)
    EXPECT_EQ(quantized->quantize(quant_from_name(quant)).size(),
              std::string(quant) == "q4_0" ? 15u : 2u);
    const double at_end = finetune::evaluate(*quantized, eval, 4, 0).loss;
    EXPECT_NEAR(at_end, r.evals[1].loss, 1e-5 * at_end) << quant;

    auto plain = models::Llama::from_pretrained(o.model);
    models::load_lora(*plain, dir.str());
    const double unquantized = finetune::evaluate(*plain, eval, 4, 0).loss;
    EXPECT_NEAR(unquantized, at_end, 0.05 * at_end) << quant;
  }
}

}  // namespace
}  // namespace zenith::testing
