// What the CPU zenith runs on can do, where a layer above the backend must know (e.g. the
// fine-tuning banner says whether bfloat16 is arithmetic or only a storage format).
#pragma once

namespace zenith {

// Whether products of two bfloat16 operands run in bfloat16 arithmetic (float32 accumulation):
// the CPU has AVX512_BF16 and ZENITH_BF16_COMPUTE is not 0. Read once.
bool bf16_arithmetic();

}  // namespace zenith
