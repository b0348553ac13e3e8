#include "gguf/writer.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "base/strings.h"

namespace daisy::gguf {
namespace {

template <typename T>
void Append(std::string& out, T value) {
  char buf[sizeof(T)];
  std::memcpy(buf, &value, sizeof(T));  // little-endian host, little-endian format
  out.append(buf, sizeof(T));
}

void AppendString(std::string& out, std::string_view s) {
  Append<uint64_t>(out, s.size());
  out.append(s);
}

}  // namespace

Result<Writer> Writer::Create(const std::filesystem::path& path, uint32_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return InvalidArgument("GGUF alignment %u is not a power of two", alignment);
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return IoError("%s: cannot create: %s", path.c_str(), std::strerror(errno));
  Writer w;
  w.path_ = path;
  w.file_ = f;
  w.alignment_ = alignment;
  // A large stdio buffer: tensor data arrives in row-sized pieces.
  std::setvbuf(f, nullptr, _IOFBF, 4 << 20);
  if (alignment != kDefaultAlignment) w.AddUint32("general.alignment", alignment);
  return w;
}

Writer::Writer(Writer&& o) noexcept { *this = std::move(o); }

Writer& Writer::operator=(Writer&& o) noexcept {
  if (this != &o) {
    path_ = std::move(o.path_);
    file_ = std::exchange(o.file_, nullptr);
    alignment_ = o.alignment_;
    kv_bytes_ = std::move(o.kv_bytes_);
    n_kv_ = o.n_kv_;
    tensor_index_ = std::move(o.tensor_index_);
    tensors_ = std::move(o.tensors_);
    next_data_offset_ = o.next_data_offset_;
    keys_ = std::move(o.keys_);
    first_error_ = std::move(o.first_error_);
    header_written_ = o.header_written_;
    finished_ = std::exchange(o.finished_, true);
    current_ = o.current_;
    current_written_ = o.current_written_;
    bytes_written_ = o.bytes_written_;
  }
  return *this;
}

Writer::~Writer() {
  if (file_ != nullptr) {
    std::fclose(file_);
    if (!finished_) {
      std::error_code ec;
      std::filesystem::remove(path_, ec);  // never leave a half-written model behind
    }
  }
}

void Writer::KeyHeader(std::string_view key, ValueType type) {
  if (header_written_ && first_error_.empty()) {
    first_error_ = StrFormat("metadata key '%.*s' added after tensor data started",
                             static_cast<int>(key.size()), key.data());
  }
  if (!keys_.emplace(key).second && first_error_.empty()) {
    first_error_ = StrFormat("duplicate metadata key '%.*s'", static_cast<int>(key.size()),
                             key.data());
  }
  AppendString(kv_bytes_, key);
  Append<uint32_t>(kv_bytes_, static_cast<uint32_t>(type));
  value_offsets_.emplace(std::string(key), kv_bytes_.size());
  ++n_kv_;
}

Result<uint64_t> Writer::ValueOffset(std::string_view key) const {
  auto it = value_offsets_.find(std::string(key));
  if (it == value_offsets_.end()) {
    return NotFound("metadata key '%.*s' was not added", static_cast<int>(key.size()), key.data());
  }
  constexpr uint64_t kHeaderBytes = 4 + 4 + 8 + 8;  // magic, version, tensor count, kv count
  return kHeaderBytes + it->second;
}

namespace {
void AppendScalar(std::string& out, ValueType type, const Value& v) {
  switch (type) {
    case ValueType::kUint8: Append<uint8_t>(out, static_cast<uint8_t>(v.u)); break;
    case ValueType::kInt8: Append<int8_t>(out, static_cast<int8_t>(v.i)); break;
    case ValueType::kUint16: Append<uint16_t>(out, static_cast<uint16_t>(v.u)); break;
    case ValueType::kInt16: Append<int16_t>(out, static_cast<int16_t>(v.i)); break;
    case ValueType::kUint32: Append<uint32_t>(out, static_cast<uint32_t>(v.u)); break;
    case ValueType::kInt32: Append<int32_t>(out, static_cast<int32_t>(v.i)); break;
    case ValueType::kFloat32: Append<float>(out, static_cast<float>(v.f)); break;
    case ValueType::kBool: Append<uint8_t>(out, v.u != 0 ? 1 : 0); break;
    case ValueType::kUint64: Append<uint64_t>(out, v.u); break;
    case ValueType::kInt64: Append<int64_t>(out, v.i); break;
    case ValueType::kFloat64: Append<double>(out, v.f); break;
    case ValueType::kString: AppendString(out, v.str); break;
    case ValueType::kArray: break;  // never nested: the reader refuses arrays of arrays
  }
}
}  // namespace

void Writer::AddValue(std::string_view key, const Value& value) {
  KeyHeader(key, value.type);
  if (value.type != ValueType::kArray) {
    AppendScalar(kv_bytes_, value.type, value);
    return;
  }
  Append<uint32_t>(kv_bytes_, static_cast<uint32_t>(value.elem_type));
  Append<uint64_t>(kv_bytes_, value.count);
  if (value.elem_type == ValueType::kString) {
    for (std::string_view s : value.strings) AppendString(kv_bytes_, s);
  } else {
    kv_bytes_.append(reinterpret_cast<const char*>(value.raw.data()), value.raw.size());
  }
}

void Writer::AddString(std::string_view key, std::string_view value) {
  KeyHeader(key, ValueType::kString);
  AppendString(kv_bytes_, value);
}
void Writer::AddUint32(std::string_view key, uint32_t value) {
  KeyHeader(key, ValueType::kUint32);
  Append(kv_bytes_, value);
}
void Writer::AddInt32(std::string_view key, int32_t value) {
  KeyHeader(key, ValueType::kInt32);
  Append(kv_bytes_, value);
}
void Writer::AddUint64(std::string_view key, uint64_t value) {
  KeyHeader(key, ValueType::kUint64);
  Append(kv_bytes_, value);
}
void Writer::AddFloat32(std::string_view key, float value) {
  KeyHeader(key, ValueType::kFloat32);
  Append(kv_bytes_, value);
}
void Writer::AddBool(std::string_view key, bool value) {
  KeyHeader(key, ValueType::kBool);
  Append<uint8_t>(kv_bytes_, value ? 1 : 0);
}
void Writer::AddStringArray(std::string_view key, std::span<const std::string> values) {
  KeyHeader(key, ValueType::kArray);
  Append<uint32_t>(kv_bytes_, static_cast<uint32_t>(ValueType::kString));
  Append<uint64_t>(kv_bytes_, values.size());
  for (const std::string& s : values) AppendString(kv_bytes_, s);
}
void Writer::AddInt32Array(std::string_view key, std::span<const int32_t> values) {
  KeyHeader(key, ValueType::kArray);
  Append<uint32_t>(kv_bytes_, static_cast<uint32_t>(ValueType::kInt32));
  Append<uint64_t>(kv_bytes_, values.size());
  for (int32_t v : values) Append(kv_bytes_, v);
}
void Writer::AddFloat32Array(std::string_view key, std::span<const float> values) {
  KeyHeader(key, ValueType::kArray);
  Append<uint32_t>(kv_bytes_, static_cast<uint32_t>(ValueType::kFloat32));
  Append<uint64_t>(kv_bytes_, values.size());
  for (float v : values) Append(kv_bytes_, v);
}

Status Writer::AddTensor(std::string_view name, TensorType type, std::span<const int64_t> ne) {
  if (header_written_) return InvalidArgument("tensor '%.*s' declared after data started",
                                              static_cast<int>(name.size()), name.data());
  if (name.empty() || name.size() > kMaxNameLength) {
    return InvalidArgument("tensor name '%.*s' must have 1..%zu bytes",
                           static_cast<int>(name.size()), name.data(), kMaxNameLength);
  }
  if (ne.empty() || ne.size() > static_cast<size_t>(kMaxDims)) {
    return InvalidArgument("tensor '%.*s' has %zu dimensions", static_cast<int>(name.size()),
                           name.data(), ne.size());
  }
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) return InvalidArgument("duplicate tensor '%.*s'",
                                               static_cast<int>(name.size()), name.data());
  }
  const TensorTypeTraits& traits = Traits(type);
  uint64_t n_elements = 1;
  for (int64_t d : ne) {
    if (d <= 0) return InvalidArgument("tensor '%.*s' has a dimension %lld",
                                       static_cast<int>(name.size()), name.data(),
                                       static_cast<long long>(d));
    n_elements *= static_cast<uint64_t>(d);
  }
  if (ne[0] % traits.block_size != 0) {
    return InvalidArgument("tensor '%.*s': row length %lld is not a multiple of the %s block "
                           "size %u", static_cast<int>(name.size()), name.data(),
                           static_cast<long long>(ne[0]), traits.name, traits.block_size);
  }
  const uint64_t n_bytes = n_elements / traits.block_size * traits.block_bytes;
  AppendString(tensor_index_, name);
  Append<uint32_t>(tensor_index_, static_cast<uint32_t>(ne.size()));
  for (int64_t d : ne) Append<uint64_t>(tensor_index_, static_cast<uint64_t>(d));
  Append<uint32_t>(tensor_index_, static_cast<uint32_t>(type));
  Append<uint64_t>(tensor_index_, next_data_offset_);
  next_data_offset_ += (n_bytes + alignment_ - 1) / alignment_ * alignment_;
  tensors_.push_back({std::string(name), n_bytes});
  return Status::Ok();
}

Status Writer::Put(const void* data, size_t n) {
  if (n == 0) return Status::Ok();
  if (std::fwrite(data, 1, n, file_) != n) {
    return IoError("%s: write failed after %llu bytes: %s", path_.c_str(),
                   static_cast<unsigned long long>(bytes_written_), std::strerror(errno));
  }
  bytes_written_ += n;
  return Status::Ok();
}

Status Writer::Pad() {
  static const uint8_t kZeros[256] = {};
  uint64_t pad = (alignment_ - bytes_written_ % alignment_) % alignment_;
  while (pad > 0) {
    const size_t n = pad < sizeof(kZeros) ? pad : sizeof(kZeros);
    DAISY_RETURN_IF_ERROR(Put(kZeros, n));
    pad -= n;
  }
  return Status::Ok();
}

Status Writer::WriteHeaderIfNeeded() {
  if (header_written_) return Status::Ok();
  if (file_ == nullptr) return Internal("GGUF writer used after Finish()");
  if (!first_error_.empty()) return InvalidArgument("%s: %s", path_.c_str(), first_error_.c_str());
  header_written_ = true;
  std::string head;
  Append<uint32_t>(head, kMagic);
  Append<uint32_t>(head, 3);
  Append<uint64_t>(head, tensors_.size());
  Append<uint64_t>(head, n_kv_);
  DAISY_RETURN_IF_ERROR(Put(head.data(), head.size()));
  DAISY_RETURN_IF_ERROR(Put(kv_bytes_.data(), kv_bytes_.size()));
  DAISY_RETURN_IF_ERROR(Put(tensor_index_.data(), tensor_index_.size()));
  kv_bytes_.clear();
  kv_bytes_.shrink_to_fit();
  tensor_index_.clear();
  tensor_index_.shrink_to_fit();
  return tensors_.empty() ? Status::Ok() : Pad();
}

Status Writer::WriteTensorData(std::span<const uint8_t> bytes) {
  DAISY_RETURN_IF_ERROR(WriteHeaderIfNeeded());
  while (!bytes.empty()) {
    if (current_ >= tensors_.size()) {
      return InvalidArgument("%s: %zu bytes of tensor data beyond the last declared tensor",
                             path_.c_str(), bytes.size());
    }
    const PendingTensor& t = tensors_[current_];
    const uint64_t left = t.n_bytes - current_written_;
    const size_t n = bytes.size() < left ? bytes.size() : static_cast<size_t>(left);
    DAISY_RETURN_IF_ERROR(Put(bytes.data(), n));
    current_written_ += n;
    bytes = bytes.subspan(n);
    if (current_written_ == t.n_bytes) {
      DAISY_RETURN_IF_ERROR(Pad());
      ++current_;
      current_written_ = 0;
    }
  }
  return Status::Ok();
}

Result<uint64_t> Writer::Finish() {
  DAISY_RETURN_IF_ERROR(WriteHeaderIfNeeded());
  if (current_ != tensors_.size()) {
    return InvalidArgument("%s: tensor '%s' got %llu of its %llu bytes", path_.c_str(),
                           tensors_[current_].name.c_str(),
                           static_cast<unsigned long long>(current_written_),
                           static_cast<unsigned long long>(tensors_[current_].n_bytes));
  }
  std::FILE* f = std::exchange(file_, nullptr);
  const bool flushed = std::fflush(f) == 0;
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  if (!flushed || !closed) {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
    return IoError("%s: cannot finish writing: %s", path_.c_str(), std::strerror(err));
  }
  finished_ = true;
  return bytes_written_;
}

}  // namespace daisy::gguf
