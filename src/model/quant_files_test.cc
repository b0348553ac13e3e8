// Files of the integer family that are broken or that daisy cannot compute: a clear error naming
// the tensor, never a crash or NaN logits.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <functional>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/generator.h"
#include "model/model.h"
#include "model/quant_mix.h"
#include "tokenizer/hf_import.h"

namespace daisy::model {
namespace {

namespace fs = std::filesystem;

fs::path Temp(const std::string& name) {
  return fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".gguf");
}

// A small Q4_K_M model (d_model 256: every row is whole super-blocks).
fs::path MakeQ4KM() {
  const fs::path path = Temp("kq-src");
  GenerateOptions o;
  o.config = FindShape("small")->config;
  o.config.n_layers = 2;
  o.mix = FindQuantMix("q4_k_m");
  EXPECT_TRUE(GenerateModel(o, tokenizer::BuiltinByteVocab(), path).ok());
  return path;
}

// A copy of `src` with tensor `name`'s bytes changed by `edit` (and its type / shape replaced
// when asked).
struct Change {
  std::string name;
  std::function<void(std::vector<uint8_t>&)> edit;
  std::optional<gguf::TensorType> type = std::nullopt;
  std::vector<int64_t> ne = {};
};

fs::path Rewrite(const fs::path& src_path, const std::string& out, const Change& change) {
  auto src = gguf::Reader::Open(src_path);
  EXPECT_TRUE(src.ok());
  const fs::path dst = Temp(out);
  auto w = gguf::Writer::Create(dst);
  EXPECT_TRUE(w.ok());
  for (const gguf::MetadataEntry& e : src->metadata()) {
    if (e.key != "general.alignment") w->AddValue(e.key, e.value);
  }
  for (const gguf::TensorInfo& t : src->tensors()) {
    const bool it = t.name == change.name;
    const auto type = it && change.type ? *change.type : t.type;
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    if (it && !change.ne.empty()) ne = change.ne;
    EXPECT_TRUE(w->AddTensor(t.name, type, ne).ok()) << t.name;
  }
  for (const gguf::TensorInfo& t : src->tensors()) {
    std::vector<uint8_t> bytes(src->TensorData(t).begin(), src->TensorData(t).end());
    if (t.name == change.name) change.edit(bytes);
    EXPECT_TRUE(w->WriteTensorData(bytes).ok());
  }
  EXPECT_TRUE(w->Finish().ok());
  return dst;
}

std::string LoadError(const fs::path& path) {
  auto m = Model::Load(path);
  return m.ok() ? "(loaded)" : m.status().message();
}

TEST(QuantFiles, TheGeneratedMixLoadsWithItsTypes) {
  const fs::path path = MakeQ4KM();
  auto r = gguf::Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->FindTensor("blk.0.attn_q.weight")->type, gguf::TensorType::kQ4_K);
  EXPECT_EQ(r->FindTensor("blk.0.attn_v.weight")->type, gguf::TensorType::kQ4_K);
  EXPECT_EQ(r->FindTensor("blk.1.attn_v.weight")->type, gguf::TensorType::kQ6_K);  // use_more_bits
  EXPECT_EQ(r->FindTensor("output.weight")->type, gguf::TensorType::kQ6_K);
  EXPECT_EQ(LoadError(path), "(loaded)");
  fs::remove(path);
}

// The fraction of `path`'s pages in the page cache (mincore on a fresh mapping).
double CachedFraction(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0);
  const size_t size = fs::file_size(path), page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  EXPECT_NE(p, MAP_FAILED);
  std::vector<unsigned char> resident((size + page - 1) / page);
  EXPECT_EQ(::mincore(p, size, resident.data()), 0);
  ::munmap(p, size);
  return static_cast<double>(std::count_if(resident.begin(), resident.end(), [](unsigned char c) { return c & 1; })) /
         static_cast<double>(resident.size());
}

TEST(QuantFiles, LoadingLeavesTheFileInThePageCache) {
  // Loading copies the weights out and unmaps the file, but the page cache keeps it: the next
  // start of the same file (a restarted worker) reads it from memory, not from the disk. The
  // file is written back first: the kernel could not drop dirty pages, whatever loading asked.
  const fs::path path = MakeQ4KM();
  {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fsync(fd), 0);
    ::close(fd);
    std::ifstream in(path, std::ios::binary);
    std::vector<char> all(fs::file_size(path));
    ASSERT_TRUE(in.read(all.data(), static_cast<std::streamsize>(all.size())));
  }
  ASSERT_GT(CachedFraction(path), 0.99);
  auto m = Model::Load(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_GE((*m)->owned_bytes(), fs::file_size(path) / 2);  // the weights were copied: the file is unmapped
  EXPECT_GT(CachedFraction(path), 0.99);
  fs::remove(path);
}

TEST(QuantFiles, ANonFiniteScaleIsRefusedNamingTensorBlockAndRow) {
  const fs::path path = MakeQ4KM();
  // q4_K: d at byte 0 of each 144-byte block; row 1 (256 / 256 = 1 block per row... d_model 256).
  const fs::path nan_d = Rewrite(path, "kq-nan", {"blk.1.attn_q.weight", [](std::vector<uint8_t>& b) {
                                                    const uint16_t nan = 0x7e00;
                                                    std::memcpy(b.data() + 3 * 144, &nan, 2);  // row 3
                                                  }});
  std::string e = LoadError(nan_d);
  EXPECT_NE(e.find("tensor blk.1.attn_q.weight: block 0 of row 3 has a scale d that is not a finite number (f16 0x7e00)"),
            std::string::npos) << e;
  // q6_K: d at byte 208 of each 210-byte block; infinity.
  const fs::path inf_d = Rewrite(path, "kq-inf", {"output.weight", [](std::vector<uint8_t>& b) {
                                                    const uint16_t inf = 0xfc00;
                                                    std::memcpy(b.data() + 7 * 210 + 208, &inf, 2);
                                                  }});
  e = LoadError(inf_d);
  EXPECT_NE(e.find("tensor output.weight: block 0 of row 7 has a scale d that is not a finite number (f16 0xfc00)"),
            std::string::npos) << e;
  // q4_K's dmin.
  const fs::path nan_dmin = Rewrite(path, "kq-dmin", {"blk.0.ffn_gate.weight", [](std::vector<uint8_t>& b) {
                                                        const uint16_t nan = 0x7c01;
                                                        std::memcpy(b.data() + 2, &nan, 2);
                                                      }});
  e = LoadError(nan_dmin);
  EXPECT_NE(e.find("blk.0.ffn_gate.weight: block 0 of row 0 has a scale dmin"), std::string::npos) << e;
  for (const fs::path& p : {path, nan_d, inf_d, nan_dmin}) fs::remove(p);
}

TEST(QuantFiles, TheFirstBadTensorIsNamedWhateverTheLoadingThreads) {
  // The scales are checked as the tensors are packed, several at once: with bad ones in two
  // tensors (and the later one's error found first by some thread), the error is always the
  // first tensor's in the file's binding order (layer 0's attention before layer 1's).
  const fs::path path = MakeQ4KM();
  const auto nan_at = [](size_t at) {
    return [at](std::vector<uint8_t>& b) {
      const uint16_t nan = 0x7e00;
      std::memcpy(b.data() + at, &nan, 2);
    };
  };
  const fs::path one = Rewrite(path, "kq-bad1", {"blk.1.ffn_down.weight", nan_at(0)});
  const fs::path both = Rewrite(one, "kq-bad2", {"blk.0.attn_k.weight", nan_at(5 * 144)});
  for (const int threads : {1, 2, 3, 8}) {
    SCOPED_TRACE(threads);
    auto m = Model::Load(both, {.threads = threads});
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("tensor blk.0.attn_k.weight: block 0 of row 5 has a scale d that is not a "
                                        "finite number (f16 0x7e00)"),
              std::string::npos)
        << m.status().message();
  }
  for (const fs::path& p : {path, one, both}) fs::remove(p);
}

TEST(QuantFiles, TruncatedSuperBlocksAreRefused) {
  const fs::path path = MakeQ4KM();
  const auto size = fs::file_size(path);
  const fs::path cut = Temp("kq-cut");
  fs::copy_file(path, cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, size - 100);  // inside the last tensor's last super-block
  auto r = gguf::Reader::Open(cut);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("truncated: tensor 'output.weight' needs bytes"), std::string::npos)
      << r.status().message();
  fs::remove(path);
  fs::remove(cut);
}

TEST(QuantFiles, RowsThatAreNotWholeSuperBlocksAreRefused) {
  const fs::path path = MakeQ4KM();
  // The header's blk.0.attn_q.weight says rows of 320: not whole 256-element super-blocks.
  std::vector<char> bytes(fs::file_size(path));
  {
    std::ifstream in(path, std::ios::binary);
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const std::string name = "blk.0.attn_q.weight";
  auto at = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(at, bytes.end());
  const size_t ne0 = static_cast<size_t>(at - bytes.begin()) + name.size() + 4;  // after n_dims
  uint64_t v;
  std::memcpy(&v, bytes.data() + ne0, 8);
  ASSERT_EQ(v, 256u);
  v = 320;
  std::memcpy(bytes.data() + ne0, &v, 8);
  const fs::path odd = Temp("kq-odd");
  {
    std::ofstream out(odd, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  auto r = gguf::Reader::Open(odd);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("row length 320 is not a multiple of the q4_K block"), std::string::npos)
      << r.status().message();
  fs::remove(path);
  fs::remove(odd);
}

TEST(QuantFiles, TypesDaisyCannotComputeAreRefusedByName) {
  const fs::path path = MakeQ4KM();
  struct Case {
    gguf::TensorType type;
    const char* name;
    int block, bytes;
  };
  for (const Case& c : {Case{gguf::TensorType::kIQ2_XXS, "iq2_xxs", 256, 66}, Case{gguf::TensorType::kTQ1_0, "tq1_0", 256, 54},
                        Case{gguf::TensorType::kMXFP4, "mxfp4", 32, 17}}) {
    const fs::path other = Rewrite(path, std::string("kq-") + c.name,
                                   {"blk.1.ffn_up.weight",
                                    [&](std::vector<uint8_t>& b) { b.assign(768 * 256 / c.block * c.bytes, 0); },
                                    c.type, {256, 768}});
    const std::string e = LoadError(other);
    EXPECT_NE(e.find("tensor blk.1.ffn_up.weight"), std::string::npos) << e;
    EXPECT_NE(e.find(std::string("tensor type ") + c.name + " is not supported"), std::string::npos) << e;
    fs::remove(other);
  }
  fs::remove(path);
}

}  // namespace
}  // namespace daisy::model
