// daisy inspect: a GGUF file's metadata (long arrays summarised), tensor table, bytes per type.
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "base/strings.h"
#include "gguf/reader.h"
#include "model/config.h"

namespace daisy::apps {
namespace {

constexpr size_t kShownElements = 8;

// A JSON-quoted string (UTF-8 shown as is, controls escaped), cut after `max_bytes` bytes.
std::string Quote(std::string_view s, size_t max_bytes) {
  const bool cut = s.size() > max_bytes;
  std::string text(s.substr(0, max_bytes));
  std::string quoted = nlohmann::json(text).dump(-1, ' ', false,
                                                 nlohmann::json::error_handler_t::replace);
  if (cut) quoted.insert(quoted.size() - 1, "...");
  return quoted;
}

std::string ScalarText(const gguf::Value& v) {
  switch (v.type) {
    case gguf::ValueType::kString: return Quote(v.str, 120);
    case gguf::ValueType::kBool: return v.u ? "true" : "false";
    case gguf::ValueType::kFloat32:
    case gguf::ValueType::kFloat64: return StrFormat("%g", v.f);
    case gguf::ValueType::kInt8:
    case gguf::ValueType::kInt16:
    case gguf::ValueType::kInt32:
    case gguf::ValueType::kInt64: return StrFormat("%lld", static_cast<long long>(v.i));
    default: return StrFormat("%llu", static_cast<unsigned long long>(v.u));
  }
}

std::string ArrayText(const gguf::Value& v) {
  std::string out = "[";
  const size_t shown = std::min<uint64_t>(v.count, kShownElements);
  for (size_t k = 0; k < shown; ++k) {
    if (k > 0) out += ", ";
    if (v.elem_type == gguf::ValueType::kString) {
      out += Quote(v.strings[k], 40);
    } else {
      gguf::Value e;
      e.type = v.elem_type;
      const size_t size = gguf::ValueTypeSize(v.elem_type);
      const uint8_t* p = v.raw.data() + k * size;
      switch (v.elem_type) {
        case gguf::ValueType::kFloat32: { float x; std::memcpy(&x, p, 4); e.f = x; break; }
        case gguf::ValueType::kFloat64: std::memcpy(&e.f, p, 8); break;
        case gguf::ValueType::kInt8: e.i = static_cast<int8_t>(*p); break;
        case gguf::ValueType::kInt16: { int16_t x; std::memcpy(&x, p, 2); e.i = x; break; }
        case gguf::ValueType::kInt32: { int32_t x; std::memcpy(&x, p, 4); e.i = x; break; }
        case gguf::ValueType::kInt64: std::memcpy(&e.i, p, 8); break;
        default: {
          uint64_t x = 0;
          std::memcpy(&x, p, size);
          e.u = x;
        }
      }
      out += ScalarText(e);
    }
  }
  if (v.count > shown) out += StrFormat(", ... %llu more", static_cast<unsigned long long>(v.count - shown));
  return out + "]";
}

std::string Shape(const gguf::TensorInfo& t) {
  std::string s;
  for (int d = 0; d < t.n_dims; ++d) {
    s += (d ? " x " : "") + std::to_string(t.ne[d]);
  }
  return s;
}

int Run(const std::string& path, bool json) {
  auto reader = gguf::Reader::Open(path);
  if (!reader.ok()) return Fail(reader.status().message());
  const gguf::Reader& r = *reader;
  struct TypeTotal {
    uint64_t tensors = 0, elements = 0, bytes = 0;
  };
  std::map<std::string, TypeTotal> by_type;
  uint64_t total_bytes = 0, total_elements = 0;
  for (const auto& t : r.tensors()) {
    auto& tt = by_type[gguf::Traits(t.type).name];
    ++tt.tensors;
    tt.elements += t.n_elements;
    tt.bytes += t.n_bytes;
    total_bytes += t.n_bytes;
    total_elements += t.n_elements;
  }
  if (json) {
    nlohmann::json j;
    j["path"] = path;
    j["version"] = r.version();
    j["file_bytes"] = r.file_size();
    j["alignment"] = r.alignment();
    j["n_metadata"] = r.metadata().size();
    j["n_tensors"] = r.tensors().size();
    j["n_elements"] = total_elements;
    j["tensor_bytes"] = total_bytes;
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& e : r.metadata()) {
      meta[std::string(e.key)] = e.value.type == gguf::ValueType::kArray
                                     ? e.value.TypeName() + " " + ArrayText(e.value)
                                     : ScalarText(e.value);
    }
    j["metadata"] = meta;
    nlohmann::json types = nlohmann::json::object();
    for (const auto& [name, tt] : by_type) {
      types[name] = {{"tensors", tt.tensors}, {"elements", tt.elements}, {"bytes", tt.bytes}};
    }
    j["bytes_per_type"] = types;
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto& t : r.tensors()) {
      tensors.push_back({{"name", std::string(t.name)},
                         {"type", gguf::Traits(t.type).name},
                         {"shape", std::vector<int64_t>(t.ne, t.ne + t.n_dims)},
                         {"bytes", t.n_bytes},
                         {"offset", r.data_offset() + t.offset}});
    }
    j["tensors"] = tensors;
    if (auto c = model::ModelConfig::FromGguf(r); c.ok()) {
      j["model"] = {{"architecture", c->arch}, {"n_vocab", c->n_vocab}, {"d_model", c->d_model},
                    {"n_layers", c->n_layers}, {"n_heads", c->n_heads}, {"n_kv_heads", c->n_kv_heads},
                    {"head_dim", c->head_dim}, {"d_ff", c->d_ff}, {"context_length", c->context_length},
                    {"rope_theta", c->rope_theta}, {"features", c->FeatureNames()},
                    {"supported", c->CheckSupported().ok()}};
    } else if (r.Find("general.architecture") != nullptr || model::HasDescription(r)) {
      j["model_error"] = c.status().message();
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("%s: GGUF v%u, %s, alignment %u, tensor data at offset %llu\n", path.c_str(),
              r.version(), HumanBytes(r.file_size()).c_str(), r.alignment(),
              static_cast<unsigned long long>(r.data_offset()));
  if (auto c = model::ModelConfig::FromGguf(r); c.ok()) {
    std::string features;
    for (const std::string& f : c->FeatureNames()) features += (features.empty() ? "" : ", ") + f;
    std::printf("model: %s, %d layers, d_model %d, %d heads (%d kv) of %d, d_ff %d, vocabulary %d\n  features: %s\n",
                c->arch.c_str(), c->n_layers, c->d_model, c->n_heads, c->n_kv_heads, c->head_dim, c->d_ff,
                c->n_vocab, features.c_str());
  } else if (r.Find("general.architecture") != nullptr || model::HasDescription(r)) {
    std::printf("model: %s\n", c.status().message().c_str());
  }
  std::printf("\nmetadata (%zu keys):\n", r.metadata().size());
  for (const auto& e : r.metadata()) {
    const std::string value = e.value.type == gguf::ValueType::kArray ? ArrayText(e.value)
                                                                       : ScalarText(e.value);
    std::printf("  %-44s %-22s %s\n", EscapeForMessage(e.key, 60).c_str(),
                e.value.TypeName().c_str(), value.c_str());
  }
  std::printf("\ntensors (%zu):\n", r.tensors().size());
  std::printf("  %-36s %-6s %-22s %12s %14s\n", "name", "type", "shape", "bytes", "file offset");
  for (const auto& t : r.tensors()) {
    std::printf("  %-36s %-6s %-22s %12llu %14llu\n", std::string(t.name).c_str(),
                gguf::Traits(t.type).name, Shape(t).c_str(),
                static_cast<unsigned long long>(t.n_bytes),
                static_cast<unsigned long long>(r.data_offset() + t.offset));
  }
  std::printf("\nbytes per type:\n");
  for (const auto& [name, tt] : by_type) {
    std::printf("  %-6s %5llu tensors %16llu elements %14llu bytes (%s)\n", name.c_str(),
                static_cast<unsigned long long>(tt.tensors),
                static_cast<unsigned long long>(tt.elements),
                static_cast<unsigned long long>(tt.bytes), HumanBytes(tt.bytes).c_str());
  }
  std::printf("\ntotal: %zu tensors, %llu elements, %llu bytes (%s)\n", r.tensors().size(),
              static_cast<unsigned long long>(total_elements),
              static_cast<unsigned long long>(total_bytes), HumanBytes(total_bytes).c_str());
  return 0;
}

}  // namespace

Runner AddInspect(Flags& flags) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  flags.Option("file", *path, "GGUF file (a model or a shard)").Required();
  flags.Switch("--json", *json, "One JSON object instead of tables");
  return [path, json] { return Run(*path, *json); };
}

}  // namespace daisy::apps
