#include "gguf/reader.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "base/strings.h"

namespace daisy::gguf {
namespace {

// Largest element count of one tensor we accept (2^48): far above any real model, far below
// where byte counts could overflow uint64.
constexpr uint64_t kMaxTensorElements = uint64_t{1} << 48;
// Smallest encodings, used to bound counts by the bytes left before reserving anything.
constexpr uint64_t kMinKvBytes = 8 + 4;              // key length + value type (empty key)
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name len, n_dims, 1 dim, type, offset

// Reads little-endian fields from the file, failing with the offset and the field's meaning.
class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  Status Need(uint64_t n, const char* what) const {
    if (n > remaining()) {
      return DataLoss("truncated at offset %llu: %s needs %llu bytes, %llu left", ull(pos_), what,
                      ull(n), ull(remaining()));
    }
    return Status::Ok();
  }

  template <typename T>
  Result<T> Read(const char* what) {
    DAISY_RETURN_IF_ERROR(Need(sizeof(T), what));
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));  // the format is little-endian, as is x86
    pos_ += sizeof(T);
    return value;
  }

  Result<std::string_view> ReadString(const char* what) {
    const uint64_t at = pos_;
    DAISY_ASSIGN_OR_RETURN(uint64_t len, Read<uint64_t>(what));
    if (len > remaining()) {
      return DataLoss("truncated or corrupt at offset %llu: %s has length %llu but only %llu "
                      "bytes follow", ull(at), what, ull(len), ull(remaining()));
    }
    std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return s;
  }

  std::span<const uint8_t> Take(uint64_t n) {  // precondition: Need(n) succeeded
    std::span<const uint8_t> s = bytes_.subspan(pos_, n);
    pos_ += n;
    return s;
  }

  Status Error(uint64_t at, const std::string& what) const {
    return DataLoss("at offset %llu: %s", ull(at), what.c_str());
  }

  static unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
};

using ull = unsigned long long;

Result<ValueType> ReadValueType(Cursor& c, const char* what) {
  const uint64_t at = c.pos();
  DAISY_ASSIGN_OR_RETURN(uint32_t raw, c.Read<uint32_t>(what));
  if (!IsValidValueType(raw)) return c.Error(at, StrFormat("%s: unknown value type %u", what, raw));
  return static_cast<ValueType>(raw);
}

// Reads one scalar of `type` into `v` (bool is checked to be 0 or 1).
Status ReadScalar(Cursor& c, ValueType type, Value& v) {
  const uint64_t at = c.pos();
  switch (type) {
    case ValueType::kUint8: { DAISY_ASSIGN_OR_RETURN(v.u, c.Read<uint8_t>("uint8 value")); break; }
    case ValueType::kUint16: { DAISY_ASSIGN_OR_RETURN(v.u, c.Read<uint16_t>("uint16 value")); break; }
    case ValueType::kUint32: { DAISY_ASSIGN_OR_RETURN(v.u, c.Read<uint32_t>("uint32 value")); break; }
    case ValueType::kUint64: { DAISY_ASSIGN_OR_RETURN(v.u, c.Read<uint64_t>("uint64 value")); break; }
    case ValueType::kInt8: { DAISY_ASSIGN_OR_RETURN(v.i, c.Read<int8_t>("int8 value")); break; }
    case ValueType::kInt16: { DAISY_ASSIGN_OR_RETURN(v.i, c.Read<int16_t>("int16 value")); break; }
    case ValueType::kInt32: { DAISY_ASSIGN_OR_RETURN(v.i, c.Read<int32_t>("int32 value")); break; }
    case ValueType::kInt64: { DAISY_ASSIGN_OR_RETURN(v.i, c.Read<int64_t>("int64 value")); break; }
    case ValueType::kFloat32: { DAISY_ASSIGN_OR_RETURN(v.f, c.Read<float>("float32 value")); break; }
    case ValueType::kFloat64: { DAISY_ASSIGN_OR_RETURN(v.f, c.Read<double>("float64 value")); break; }
    case ValueType::kBool: {
      DAISY_ASSIGN_OR_RETURN(uint8_t b, c.Read<uint8_t>("bool value"));
      if (b > 1) return c.Error(at, StrFormat("bool value is %u, not 0 or 1", b));
      v.u = b;
      break;
    }
    case ValueType::kString: { DAISY_ASSIGN_OR_RETURN(v.str, c.ReadString("string value")); break; }
    case ValueType::kArray: return c.Error(at, "array where a scalar was expected");
  }
  return Status::Ok();
}

Status ReadArray(Cursor& c, Value& v) {
  const uint64_t at = c.pos();
  DAISY_ASSIGN_OR_RETURN(v.elem_type, ReadValueType(c, "array element type"));
  DAISY_ASSIGN_OR_RETURN(v.count, c.Read<uint64_t>("array length"));
  if (v.elem_type == ValueType::kArray) {
    return c.Error(at, "arrays of arrays are not supported");
  }
  if (v.elem_type == ValueType::kString) {
    // Every string needs at least its 8-byte length: bound the count before reserving.
    if (v.count > c.remaining() / 8) {
      return DataLoss("truncated or corrupt at offset %llu: array of %llu strings cannot fit in "
                      "the %llu bytes left", ull(at), ull(v.count), ull(c.remaining()));
    }
    v.strings.reserve(v.count);
    for (uint64_t k = 0; k < v.count; ++k) {
      DAISY_ASSIGN_OR_RETURN(std::string_view s, c.ReadString("array string"));
      v.strings.push_back(s);
    }
    return Status::Ok();
  }
  const uint64_t elem = ValueTypeSize(v.elem_type);
  if (v.count > c.remaining() / elem) {
    return DataLoss("truncated or corrupt at offset %llu: array of %llu %s values needs %llu "
                    "bytes, %llu left", ull(at), ull(v.count), ValueTypeName(v.elem_type),
                    ull(v.count) * elem, ull(c.remaining()));
  }
  v.raw = c.Take(v.count * elem);
  if (v.elem_type == ValueType::kBool) {
    for (uint64_t k = 0; k < v.count; ++k) {
      if (v.raw[k] > 1) return c.Error(at, StrFormat("bool array element %llu is not 0 or 1", ull(k)));
    }
  }
  return Status::Ok();
}

// Reads a little-endian scalar of `type` at `p` as a double / int64 (array element access).
double ElementAsDouble(ValueType type, const uint8_t* p) {
  switch (type) {
    case ValueType::kFloat32: { float x; std::memcpy(&x, p, 4); return x; }
    case ValueType::kFloat64: { double x; std::memcpy(&x, p, 8); return x; }
    default: return 0;
  }
}

bool ElementAsInt(ValueType type, const uint8_t* p, int64_t* out) {
  switch (type) {
    case ValueType::kUint8: *out = *p; return true;
    case ValueType::kInt8: *out = static_cast<int8_t>(*p); return true;
    case ValueType::kBool: *out = *p; return true;
    case ValueType::kUint16: { uint16_t x; std::memcpy(&x, p, 2); *out = x; return true; }
    case ValueType::kInt16: { int16_t x; std::memcpy(&x, p, 2); *out = x; return true; }
    case ValueType::kUint32: { uint32_t x; std::memcpy(&x, p, 4); *out = x; return true; }
    case ValueType::kInt32: { int32_t x; std::memcpy(&x, p, 4); *out = x; return true; }
    case ValueType::kInt64: { std::memcpy(out, p, 8); return true; }
    case ValueType::kUint64: {
      uint64_t x;
      std::memcpy(&x, p, 8);
      if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
      *out = static_cast<int64_t>(x);
      return true;
    }
    default: return false;
  }
}

// One entry of the tensor index (the `k`-th), every field checked: name length, dimensions,
// element count, type, row length against the block size, offset alignment.
Status ReadTensorInfo(Cursor& c, uint64_t k, uint32_t alignment, TensorInfo& t) {
  const uint64_t at = c.pos();
  DAISY_ASSIGN_OR_RETURN(t.name, c.ReadString("tensor name"));
  const std::string shown = EscapeForMessage(t.name);
  if (t.name.empty() || t.name.size() > kMaxNameLength) {
    return c.Error(at, StrFormat("tensor %llu has a name of %zu bytes (allowed: 1..%zu)",
                                 ull(k), t.name.size(), kMaxNameLength));
  }
  DAISY_ASSIGN_OR_RETURN(uint32_t n_dims, c.Read<uint32_t>("tensor dimension count"));
  if (n_dims == 0 || n_dims > kMaxDims) {
    return c.Error(at, StrFormat("tensor '%s' has %u dimensions (allowed: 1..%d)",
                                 shown.c_str(), n_dims, kMaxDims));
  }
  t.n_dims = static_cast<int>(n_dims);
  uint64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    DAISY_ASSIGN_OR_RETURN(uint64_t ne, c.Read<uint64_t>("tensor dimension"));
    if (ne == 0 || ne > kMaxTensorElements || n_elements > kMaxTensorElements / ne) {
      return c.Error(at, StrFormat("tensor '%s' dimension %u is %llu: out of range",
                                   shown.c_str(), d, ull(ne)));
    }
    t.ne[d] = static_cast<int64_t>(ne);
    n_elements *= ne;
  }
  t.n_elements = n_elements;
  DAISY_ASSIGN_OR_RETURN(uint32_t raw_type, c.Read<uint32_t>("tensor type"));
  const auto traits = FindTensorType(raw_type);
  if (!traits) {
    return c.Error(at, StrFormat("tensor '%s' has unknown type %u", shown.c_str(), raw_type));
  }
  t.type = traits->type;
  if (t.ne[0] % traits->block_size != 0) {
    return c.Error(at, StrFormat("tensor '%s': row length %lld is not a multiple of the %s "
                                 "block size %u", shown.c_str(), static_cast<long long>(t.ne[0]),
                                 traits->name, traits->block_size));
  }
  t.n_bytes = n_elements / traits->block_size * traits->block_bytes;
  DAISY_ASSIGN_OR_RETURN(t.offset, c.Read<uint64_t>("tensor data offset"));
  if (t.offset % alignment != 0) {
    return c.Error(at, StrFormat("tensor '%s' data offset %llu is not a multiple of the "
                                 "alignment %u", shown.c_str(), ull(t.offset), alignment));
  }
  return Status::Ok();
}

// Every tensor's bytes lie inside the data section (from `data_offset` to the end of a
// `file_size`-byte file), and no two overlap.
Status CheckDataSection(const std::vector<TensorInfo>& tensors, uint64_t data_offset, uint64_t file_size) {
  if (tensors.empty()) return Status::Ok();
  if (data_offset > file_size) {
    return DataLoss("truncated: the data section should start at offset %llu but the file "
                    "has %llu bytes", ull(data_offset), ull(file_size));
  }
  const uint64_t data_size = file_size - data_offset;
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors.size());
  for (const TensorInfo& t : tensors) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      return DataLoss("truncated: tensor '%s' needs bytes [%llu, %llu) of the data section "
                      "(file offset %llu), which holds %llu bytes", EscapeForMessage(t.name).c_str(), ull(t.offset),
                      ull(t.offset + t.n_bytes), ull(data_offset + t.offset), ull(data_size));
    }
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const TensorInfo& prev = *by_offset[k - 1];
    if (prev.offset + prev.n_bytes > by_offset[k]->offset) {
      return DataLoss("tensors '%s' and '%s' overlap in the data section", EscapeForMessage(prev.name).c_str(),
                      EscapeForMessage(by_offset[k]->name).c_str());
    }
  }
  return Status::Ok();
}

}  // namespace

bool Value::IsInteger() const {
  switch (type) {
    case ValueType::kUint8: case ValueType::kInt8: case ValueType::kUint16:
    case ValueType::kInt16: case ValueType::kUint32: case ValueType::kInt32:
    case ValueType::kUint64: case ValueType::kInt64: return true;
    default: return false;
  }
}

std::string Value::TypeName() const {
  if (type != ValueType::kArray) return ValueTypeName(type);
  return StrFormat("array[%s; %llu]", ValueTypeName(elem_type), ull(count));
}

Result<Reader> Reader::Open(const std::filesystem::path& path) {
  DAISY_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  Reader reader;
  reader.name_ = path.string();
  reader.file_ = std::make_unique<MappedFile>(std::move(file));
  reader.bytes_ = reader.file_->bytes();
  DAISY_RETURN_IF_ERROR(reader.Parse());
  return reader;
}

Result<Reader> Reader::FromBytes(std::span<const uint8_t> bytes, std::string name) {
  Reader reader;
  reader.name_ = std::move(name);
  reader.bytes_ = bytes;
  DAISY_RETURN_IF_ERROR(reader.Parse());
  return reader;
}

Status Reader::Parse() {
  // Every error names the file first: "model.gguf: truncated at offset 24: ...".
  Status s = ParseHeaderAndIndex();
  if (!s.ok()) return Status(s.code(), name_ + ": " + s.message());
  return s;
}

Status Reader::ParseHeaderAndIndex() {
  Cursor c(bytes_);
  DAISY_ASSIGN_OR_RETURN(uint32_t magic, c.Read<uint32_t>("magic"));
  if (magic != kMagic) {
    return DataLoss("not a GGUF file (magic is 0x%08x, expected \"GGUF\")", magic);
  }
  DAISY_ASSIGN_OR_RETURN(version_, c.Read<uint32_t>("version"));
  if ((version_ & 0xffff) == 0 && version_ != 0) {
    return Unimplemented("big-endian GGUF (version field 0x%08x) is not supported",
                         version_);
  }
  if (version_ == 1) {
    return Unimplemented("GGUF version 1 is obsolete; re-convert the model");
  }
  if (version_ != 2 && version_ != 3) {
    return DataLoss("unknown GGUF version %u (daisy reads 2 and 3)", version_);
  }
  DAISY_ASSIGN_OR_RETURN(uint64_t n_tensors, c.Read<uint64_t>("tensor count"));
  DAISY_ASSIGN_OR_RETURN(uint64_t n_kv, c.Read<uint64_t>("metadata count"));
  if (n_kv > c.remaining() / kMinKvBytes) {
    return DataLoss("truncated or corrupt at offset 16: metadata count %llu cannot fit in a "
                    "%llu-byte file", ull(n_kv), ull(bytes_.size()));
  }
  if (n_tensors > c.remaining() / kMinTensorInfoBytes) {
    return DataLoss("truncated or corrupt at offset 8: tensor count %llu cannot fit in a "
                    "%llu-byte file", ull(n_tensors), ull(bytes_.size()));
  }

  metadata_.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    MetadataEntry entry;
    entry.offset = c.pos();
    DAISY_ASSIGN_OR_RETURN(entry.key, c.ReadString("metadata key"));
    if (entry.key.empty()) return c.Error(entry.offset, "empty metadata key");
    DAISY_ASSIGN_OR_RETURN(entry.value.type, ReadValueType(c, "metadata value type"));
    Status s = entry.value.type == ValueType::kArray ? ReadArray(c, entry.value)
                                                     : ReadScalar(c, entry.value.type, entry.value);
    if (!s.ok()) {
      return s.With(StrFormat("metadata key '%s'", EscapeForMessage(entry.key).c_str()));
    }
    if (!key_index_.emplace(entry.key, metadata_.size()).second) {
      return c.Error(entry.offset,
                     StrFormat("duplicate metadata key '%s'", EscapeForMessage(entry.key).c_str()));
    }
    metadata_.push_back(std::move(entry));
  }

  if (const Value* a = Find("general.alignment")) {
    if (a->type != ValueType::kUint32 || a->u == 0 || (a->u & (a->u - 1)) != 0) {
      return DataLoss("general.alignment must be a non-zero power of two uint32 (got %s %llu)",
                      a->TypeName().c_str(), ull(a->u));
    }
    alignment_ = static_cast<uint32_t>(a->u);
  }

  tensors_.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    const uint64_t at = c.pos();
    TensorInfo t;
    DAISY_RETURN_IF_ERROR(ReadTensorInfo(c, k, alignment_, t));
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
      return c.Error(at, StrFormat("duplicate tensor name '%s'", EscapeForMessage(t.name).c_str()));
    }
    tensors_.push_back(t);
  }

  // The data section starts at the next multiple of the alignment.
  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  return CheckDataSection(tensors_, data_offset_, bytes_.size());
}

const Value* Reader::Find(std::string_view key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

const TensorInfo* Reader::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> Reader::TensorData(const TensorInfo& tensor) const {
  return bytes_.subspan(data_offset_ + tensor.offset, tensor.n_bytes);
}

namespace {
Status TypeMismatch(const std::string& file, std::string_view key, const Value& v,
                    const char* wanted) {
  return InvalidArgument("%s: metadata key '%.*s' is %s, expected %s", file.c_str(),
                         static_cast<int>(key.size()), key.data(), v.TypeName().c_str(), wanted);
}
Status Missing(const std::string& file, std::string_view key) {
  return NotFound("%s: metadata key '%.*s' is missing", file.c_str(), static_cast<int>(key.size()),
                  key.data());
}
}  // namespace

Result<uint64_t> Reader::GetUint(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(name_, key);
  if (!v->IsInteger()) return TypeMismatch(name_, key, *v, "an unsigned integer");
  if (v->type == ValueType::kInt8 || v->type == ValueType::kInt16 ||
      v->type == ValueType::kInt32 || v->type == ValueType::kInt64) {
    if (v->i < 0) return TypeMismatch(name_, key, *v, "a non-negative integer");
    return static_cast<uint64_t>(v->i);
  }
  return v->u;
}

Result<int64_t> Reader::GetInt(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(name_, key);
  if (!v->IsInteger()) return TypeMismatch(name_, key, *v, "an integer");
  if (v->type == ValueType::kUint8 || v->type == ValueType::kUint16 ||
      v->type == ValueType::kUint32 || v->type == ValueType::kUint64) {
    if (v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return TypeMismatch(name_, key, *v, "an integer below 2^63");
    }
    return static_cast<int64_t>(v->u);
  }
  return v->i;
}

Result<double> Reader::GetFloat(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(name_, key);
  if (v->type != ValueType::kFloat32 && v->type != ValueType::kFloat64) {
    return TypeMismatch(name_, key, *v, "float32");
  }
  return v->f;
}

Result<bool> Reader::GetBool(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(name_, key);
  if (v->type != ValueType::kBool) return TypeMismatch(name_, key, *v, "bool");
  return v->u != 0;
}

Result<std::string_view> Reader::GetString(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(name_, key);
  if (v->type != ValueType::kString) return TypeMismatch(name_, key, *v, "string");
  return v->str;
}

Result<std::span<const std::string_view>> Reader::GetStringArray(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(name_, key);
  if (v->type != ValueType::kArray || v->elem_type != ValueType::kString) {
    return TypeMismatch(name_, key, *v, "array of strings");
  }
  return std::span<const std::string_view>(v->strings);
}

Result<std::vector<double>> Reader::GetFloatArray(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(name_, key);
  if (v->type != ValueType::kArray ||
      (v->elem_type != ValueType::kFloat32 && v->elem_type != ValueType::kFloat64)) {
    return TypeMismatch(name_, key, *v, "array of float32");
  }
  const size_t elem = ValueTypeSize(v->elem_type);
  std::vector<double> out(v->count);
  for (uint64_t k = 0; k < v->count; ++k) out[k] = ElementAsDouble(v->elem_type, &v->raw[k * elem]);
  return out;
}

Result<std::vector<int64_t>> Reader::GetIntArray(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(name_, key);
  if (v->type != ValueType::kArray || v->elem_type == ValueType::kString ||
      v->elem_type == ValueType::kFloat32 || v->elem_type == ValueType::kFloat64) {
    return TypeMismatch(name_, key, *v, "array of integers");
  }
  const size_t elem = ValueTypeSize(v->elem_type);
  std::vector<int64_t> out(v->count);
  for (uint64_t k = 0; k < v->count; ++k) {
    if (!ElementAsInt(v->elem_type, &v->raw[k * elem], &out[k])) {
      return TypeMismatch(name_, key, *v, "array of integers below 2^63");
    }
  }
  return out;
}

}  // namespace daisy::gguf
