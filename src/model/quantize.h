// `daisy quantize`: a GGUF model re-written in one of llama-quantize's file types (quant_mix.h),
// tensor by tensor and a block of rows at a time, so memory stays at a few tens of MB whatever
// the model size. Metadata is copied, general.file_type set. Each quantised tensor is
// dequantised again to measure what quantisation cost: the root-mean-square error against the
// input weights, per output type.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "base/status.h"
#include "model/quant_mix.h"

namespace daisy::model {

struct QuantizeOptions {
  std::filesystem::path input;
  std::filesystem::path output;  // written as OUTPUT.partial, renamed when complete
  QuantMix mix;
  int threads = 0;  // 0: all cores
  // Now and then: (input bytes done, input bytes in all, the tensor being written).
  std::function<void(uint64_t, uint64_t, const std::string&)> progress;
};

// What quantisation cost, over the tensors of one output type.
struct TypeError {
  int tensors = 0;
  uint64_t elements = 0;
  uint64_t bytes = 0;
  double sum_sq_error = 0;  // sum over elements of (quantised - input)^2
  double sum_sq = 0;        // sum over elements of input^2
  double rmse() const;
  double relative_rmse() const;  // rmse / rms of the input weights
  double bits_per_weight() const;
};

struct QuantizeReport {
  uint64_t input_bytes = 0;
  uint64_t output_bytes = 0;
  int tensors = 0;
  int quantised = 0;
  std::map<std::string, TypeError> by_type;  // output type name -> error (quantised tensors)
  TypeError all;                             // every quantised tensor
};

// Input tensors must be f32, f16, bf16 or q8_0 to be quantised (a lower-bit input would carry
// its own error into the new type's); tensors that keep their type (norms, vectors, a tensor
// the mix leaves as it is) are copied byte for byte.
Result<QuantizeReport> QuantizeModel(const QuantizeOptions& options);

}  // namespace daisy::model
