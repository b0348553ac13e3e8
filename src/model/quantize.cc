#include "model/quantize.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "base/strings.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "kernels/quant/formats.h"
#include "kernels/weights.h"
#include "model/tensors.h"

namespace daisy::model {
namespace {

using kernels::WeightFormat;
using kernels::WeightType;

// A number from `{arch}.<suffix>`, or `fallback`.
int64_t ArchNumber(const gguf::Reader& r, const std::string& arch, const char* suffix, int64_t fallback) {
  auto v = r.GetUint(arch + "." + suffix);
  return v.ok() ? static_cast<int64_t>(*v) : fallback;
}

// What the mix rules need, from the family's keys (any architecture that states them; the
// layer count from the tensors when the key is missing).
MixModel MixModelOf(const gguf::Reader& r) {
  const gguf::Value* arch_value = r.Find("general.architecture");
  const std::string arch =
      arch_value != nullptr && arch_value->type == gguf::ValueType::kString ? std::string(arch_value->str) : "";
  int layers = 0;
  bool has_output = false;
  for (const gguf::TensorInfo& t : r.tensors()) {
    layers = std::max(layers, LayerOf(t.name) + 1);
    if (t.name == "output.weight") has_output = true;
  }
  MixModel m;
  m.n_layers = static_cast<int>(ArchNumber(r, arch, "block_count", layers));
  m.n_heads = static_cast<int>(ArchNumber(r, arch, "attention.head_count", 1));
  m.n_kv_heads = static_cast<int>(ArchNumber(r, arch, "attention.head_count_kv", m.n_heads));
  m.tied_embeddings = !has_output;
  return m;
}

// llama.cpp's rule for which tensors a quantiser may change: 2-D (or more) weights that are
// not norms.
bool Quantisable(const gguf::TensorInfo& t) {
  const std::string_view n = t.name;
  return t.n_dims >= 2 && n.ends_with("weight") && n.find("_norm.weight") == std::string_view::npos;
}

bool ValidInput(gguf::TensorType t) {
  return t == gguf::TensorType::kF32 || t == gguf::TensorType::kF16 || t == gguf::TensorType::kBF16 ||
         t == gguf::TensorType::kQ8_0;
}

struct Plan {
  const gguf::TensorInfo* in;
  gguf::TensorType out;
  bool convert;  // else copied byte for byte
};

// Rows [r0, r1) of `t`: dequantised, quantised to `to`, and dequantised again for the error.
void ConvertRows(const Plan& p, const uint8_t* src, int64_t cols, int64_t r0, int64_t r1, uint8_t* dst,
                 TypeError& err) {
  const WeightFormat& from = *kernels::FindFormat(static_cast<uint32_t>(p.in->type));
  const WeightFormat& to = *kernels::FindFormat(static_cast<uint32_t>(p.out));
  std::vector<float> x(cols), back(cols);
  const size_t in_row = kernels::GgufBytes(from.type, 1, cols), out_row = kernels::GgufBytes(to.type, 1, cols);
  for (int64_t r = r0; r < r1; ++r) {
    from.dequantize_row(src + r * in_row, x.data(), cols);
    to.quantize_row(x.data(), dst + (r - r0) * out_row, cols);
    to.dequantize_row(dst + (r - r0) * out_row, back.data(), cols);
    for (int64_t i = 0; i < cols; ++i) {
      const double d = static_cast<double>(back[i]) - x[i];
      err.sum_sq_error += d * d;
      err.sum_sq += static_cast<double>(x[i]) * x[i];
    }
  }
}

}  // namespace

double TypeError::rmse() const { return elements ? std::sqrt(sum_sq_error / static_cast<double>(elements)) : 0; }
double TypeError::relative_rmse() const { return sum_sq > 0 ? std::sqrt(sum_sq_error / sum_sq) : 0; }
double TypeError::bits_per_weight() const { return elements ? 8.0 * static_cast<double>(bytes) / static_cast<double>(elements) : 0; }

Result<QuantizeReport> QuantizeModel(const QuantizeOptions& o) {
  DAISY_ASSIGN_OR_RETURN(gguf::Reader r, gguf::Reader::Open(o.input));
  const MixModel mix_model = MixModelOf(r);
  std::vector<Plan> plans;
  uint64_t total = 0;
  for (const gguf::TensorInfo& t : r.tensors()) {
    Plan p{&t, t.type, false};
    if (Quantisable(t)) {
      const WeightType want = MixTensorType(o.mix, mix_model, t.name, t.ne[0]);
      const auto out = static_cast<gguf::TensorType>(kernels::FormatOf(want).ggml_type);
      if (out != t.type) {
        if (!ValidInput(t.type)) {
          return InvalidArgument("%s: tensor %.*s is %s; quantize from an f32, f16, bf16 or q8_0 file (a "
                                 "lower-bit input would carry its own error into %s)", r.name().c_str(),
                                 static_cast<int>(t.name.size()), t.name.data(), gguf::Traits(t.type).name,
                                 kernels::WeightTypeName(want));
        }
        p = {&t, out, true};
      }
    }
    plans.push_back(p);
    total += t.n_bytes;
  }

  const std::filesystem::path partial = o.output.string() + ".partial";
  DAISY_ASSIGN_OR_RETURN(gguf::Writer w, gguf::Writer::Create(partial));
  for (const gguf::MetadataEntry& e : r.metadata()) {
    if (e.key == "general.alignment" || e.key == "general.file_type" || e.key == "general.quantization_version") {
      continue;
    }
    w.AddValue(e.key, e.value);
  }
  w.AddUint32("general.quantization_version", 2);
  w.AddUint32("general.file_type", o.mix.file_type);
  for (const Plan& p : plans) {
    DAISY_RETURN_IF_ERROR(w.AddTensor(p.in->name, p.out, std::span<const int64_t>(p.in->ne, p.in->n_dims)));
  }

  QuantizeReport report;
  report.input_bytes = static_cast<uint64_t>(std::filesystem::file_size(o.input));
  report.tensors = static_cast<int>(plans.size());
  const int threads = o.threads > 0 ? o.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  uint64_t done = 0;
  auto last_report = std::chrono::steady_clock::now();
  std::vector<uint8_t> out;
  for (const Plan& p : plans) {
    const std::span<const uint8_t> src = r.TensorData(*p.in);
    const std::string name(p.in->name);
    if (o.progress && std::chrono::steady_clock::now() - last_report > std::chrono::seconds(1)) {
      o.progress(done, total, name);
      last_report = std::chrono::steady_clock::now();
    }
    if (!p.convert) {
      DAISY_RETURN_IF_ERROR(w.WriteTensorData(src));
      r.Forget(src);
      done += src.size();
      continue;
    }
    const int64_t cols = p.in->ne[0];
    const int64_t rows = static_cast<int64_t>(p.in->n_elements) / cols;
    const WeightType to = kernels::FindFormat(static_cast<uint32_t>(p.out))->type;
    const size_t in_row = src.size() / static_cast<size_t>(rows), out_row = kernels::GgufBytes(to, 1, cols);
    // Blocks of about 4M elements, their rows shared out among the threads.
    const int64_t chunk = std::max<int64_t>(threads, (int64_t{4} << 20) / cols);
    TypeError& err = report.by_type[kernels::WeightTypeName(to)];
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t n = std::min(chunk, rows - r0);
      out.resize(static_cast<size_t>(n) * out_row);
      std::vector<TypeError> errs(threads);
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        const int64_t a = r0 + n * t / threads, b = r0 + n * (t + 1) / threads;
        pool.emplace_back([&, t, a, b] {
          ConvertRows(p, src.data(), cols, a, b, out.data() + (a - r0) * out_row, errs[t]);
        });
      }
      for (std::thread& th : pool) th.join();
      for (const TypeError& e : errs) {
        err.sum_sq_error += e.sum_sq_error;
        err.sum_sq += e.sum_sq;
      }
      // A scale that overflowed f16 (weights beyond its range) would make the whole block NaN.
      if (auto bad = kernels::FindBadScale(to, out.data(), n * (cols / kernels::FormatOf(to).block_elems))) {
        return InvalidArgument("%s: tensor %s: quantised to %s, block %lld has a scale %s that is not finite "
                               "(weights beyond f16's range?)", r.name().c_str(), name.c_str(),
                               kernels::WeightTypeName(to), static_cast<long long>(bad->block), bad->field);
      }
      DAISY_RETURN_IF_ERROR(w.WriteTensorData(out));
      r.Forget(src.subspan(static_cast<size_t>(r0) * in_row, static_cast<size_t>(n) * in_row));
      done += static_cast<uint64_t>(n) * in_row;
      if (o.progress && std::chrono::steady_clock::now() - last_report > std::chrono::seconds(1)) {
        o.progress(done, total, name);
        last_report = std::chrono::steady_clock::now();
      }
    }
    err.tensors += 1;
    err.elements += p.in->n_elements;
    err.bytes += static_cast<uint64_t>(rows) * out_row;
    ++report.quantised;
  }
  DAISY_ASSIGN_OR_RETURN(report.output_bytes, w.Finish());
  std::error_code ec;
  std::filesystem::rename(partial, o.output, ec);
  if (ec) return Internal("renaming %s to %s: %s", partial.c_str(), o.output.c_str(), ec.message().c_str());
  for (const auto& [type, e] : report.by_type) {
    report.all.tensors += e.tensors;
    report.all.elements += e.elements;
    report.all.bytes += e.bytes;
    report.all.sum_sq_error += e.sum_sq_error;
    report.all.sum_sq += e.sum_sq;
  }
  if (o.progress) o.progress(total, total, "");
  return report;
}

}  // namespace daisy::model
