#include "kernels/kernel_table.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "base/check.h"
#include "base/log.h"
#include "kernels/int_matmul.h"
#include "kernels/quant/float_formats.h"

namespace daisy::kernels {

// Each ISA file defines its kernels as constant-initialised data (no code of an ISA file runs
// before the CPU check below).
namespace ref {
extern const MatmulKernel kMatmuls[];
extern const size_t kMatmulCount;
extern const OpKernels kOps;
}  // namespace ref
// The SIMD sets this build compiled (DAISY_KERNEL_ISAS, the top-level CMakeLists.txt).
#if defined(DAISY_KERNELS_AVX2)
namespace avx2 {
extern const MatmulKernel kMatmuls[];
extern const size_t kMatmulCount;
extern const OpKernels kOps;
}  // namespace avx2
#endif
#if defined(DAISY_KERNELS_AVX512)
namespace avx512 {
extern const MatmulKernel kMatmuls[];
extern const size_t kMatmulCount;
extern const OpKernels kOps;
}  // namespace avx512
#endif
#if defined(DAISY_KERNELS_AMX)
namespace amx {
extern const MatmulKernel kMatmuls[];  // the kernels it replaces in the AVX-512 set
extern const size_t kMatmulCount;
}  // namespace amx
#endif

namespace {

bool HasAvx2() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && CpuHasF16c();
#else
  return false;
#endif
}
bool HasAvx512() {
#if defined(__x86_64__)
  return HasAvx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

// AMX-TILE and AMX-INT8 (CPUID leaf 7: EDX bits 24, 25) on top of AVX-512, and the tile data
// state granted by Linux, which hands it out only on request (arch_prctl ARCH_REQ_XCOMP_PERM
// for XFEATURE_XTILEDATA, Linux 5.16 and later); asked once, for the whole process.
bool HasAmx() {
#if defined(__x86_64__) && defined(__linux__)
  static const bool usable = [] {
    if (!HasAvx512()) return false;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if ((d & (1u << 24)) == 0 || (d & (1u << 25)) == 0) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
#else
  return false;
#endif
}

#if defined(DAISY_KERNELS_AMX)
// The AMX set: AVX-512's kernels with AMX's in place of those it has. Only function pointers
// are copied: no code of either file runs.
std::span<const MatmulKernel> AmxMatmuls() {
  static const std::vector<MatmulKernel> list = [] {
    std::vector<MatmulKernel> out(avx512::kMatmuls, avx512::kMatmuls + avx512::kMatmulCount);
    for (size_t i = 0; i < amx::kMatmulCount; ++i) {
      for (MatmulKernel& k : out) {
        if (k.type == amx::kMatmuls[i].type) k.fn = amx::kMatmuls[i].fn;
      }
    }
    return out;
  }();
  return list;
}
#endif

// A set's table, built once; a set that is not complete is a bug of this build: stop, naming it.
KernelTable BuiltOrDie(const KernelSet& set) {
  Result<KernelTable> t = BuildKernelTable(set);
  if (!t.ok()) internal::CheckFailed(__FILE__, __LINE__, "BuildKernelTable(set).ok()", t.status().message().c_str());
  return *t;
}

}  // namespace

Result<KernelTable> BuildKernelTable(const KernelSet& set) {
  KernelTable t;
  t.name = set.isa;
  for (const MatmulKernel& k : set.matmuls) {
    const int i = static_cast<int>(k.type);
    if (i < 0 || i >= kNumWeightTypes || k.fn == nullptr) {
      return Internal("kernel table %s: a matrix kernel entry for type %d is invalid", set.isa, i);
    }
    if (t.matmul[i] != nullptr) {
      return Internal("kernel table %s: two matrix kernels for %s", set.isa, WeightTypeName(k.type));
    }
    t.matmul[i] = k.fn;
  }
  for (const WeightFormat& f : WeightFormats()) {
    if (t.matmul[static_cast<int>(f.type)] == nullptr) {
      return Internal("kernel table %s has no matrix kernel for weight type %s", set.isa, f.name);
    }
  }
  if (set.ops == nullptr) return Internal("kernel table %s has no element-wise ops", set.isa);
  t.ops = *set.ops;
  const struct {
    const char* name;
    bool present;
  } ops[] = {{"rms_norm", t.ops.rms_norm != nullptr}, {"rope", t.ops.rope != nullptr},
             {"silu_mul", t.ops.silu_mul != nullptr}, {"gelu_mul", t.ops.gelu_mul != nullptr}, {"add", t.ops.add != nullptr},
             {"dot", t.ops.dot != nullptr},           {"axpy", t.ops.axpy != nullptr},
             {"attention", t.ops.attention != nullptr}, {"key_dots", t.ops.key_dots != nullptr},
             {"weighted_rows", t.ops.weighted_rows != nullptr}, {"exp_sum", t.ops.exp_sum != nullptr},
             {"log_sum_exp", t.ops.log_sum_exp != nullptr}};
  for (const auto& op : ops) {
    if (!op.present) return Internal("kernel table %s has no %s kernel", set.isa, op.name);
  }
  return t;
}

std::vector<KernelSet> AllKernelSets() {
  std::vector<KernelSet> sets{{"scalar", {ref::kMatmuls, ref::kMatmulCount}, &ref::kOps}};
#if defined(DAISY_KERNELS_AVX2)
  sets.push_back({"avx2", {avx2::kMatmuls, avx2::kMatmulCount}, &avx2::kOps});
#endif
#if defined(DAISY_KERNELS_AVX512)
  sets.push_back({"avx512", {avx512::kMatmuls, avx512::kMatmulCount}, &avx512::kOps});
#endif
#if defined(DAISY_KERNELS_AMX)
  sets.push_back({"amx", AmxMatmuls(), &avx512::kOps});
#endif
  return sets;
}

const KernelTable& ScalarKernels() {
  static const KernelTable table = BuiltOrDie(AllKernelSets()[0]);
  return table;
}

namespace {
// The table of the set named kIsa, built once, where this build has the set and the CPU supports
// it (kSupported is not asked otherwise: HasAmx asks Linux for the tile state); else nullptr.
template <const char* kIsa, bool (*kSupported)()>
const KernelTable* BuiltIf() {
  static const std::optional<KernelTable> table = []() -> std::optional<KernelTable> {
    for (const KernelSet& s : AllKernelSets()) {
      if (std::strcmp(s.isa, kIsa) == 0 && kSupported()) return BuiltOrDie(s);
    }
    return std::nullopt;
  }();
  return table ? &*table : nullptr;
}
constexpr char kAvx2[] = "avx2", kAvx512[] = "avx512", kAmx[] = "amx";
}  // namespace

const KernelTable* Avx2Kernels() { return BuiltIf<kAvx2, HasAvx2>(); }
const KernelTable* Avx512Kernels() { return BuiltIf<kAvx512, HasAvx512>(); }
const KernelTable* AmxKernels() { return BuiltIf<kAmx, HasAmx>(); }

std::vector<const KernelTable*> AllSupportedKernels() {
  std::vector<const KernelTable*> out{&ScalarKernels()};
  if (const KernelTable* t = Avx2Kernels()) out.push_back(t);
  if (const KernelTable* t = Avx512Kernels()) out.push_back(t);
  if (const KernelTable* t = AmxKernels()) out.push_back(t);
  return out;
}

std::vector<const char*> UnsupportedKernelNames() {
  std::vector<const char*> out;
  for (const KernelSet& s : AllKernelSets()) {
    if (FindKernels(s.isa) == nullptr) out.push_back(s.isa);
  }
  return out;
}

const KernelTable* FindKernels(const char* name) {
  for (const KernelTable* t : AllSupportedKernels()) {
    if (std::strcmp(t->name, name) == 0) return t;
  }
  return nullptr;
}

const KernelTable& BestKernels() {
  static const KernelTable* const best = [] {
    // Every table this CPU can run is built (and so checked complete) at start-up.
    const std::vector<const KernelTable*> all = AllSupportedKernels();
    if (const char* forced = std::getenv("DAISY_KERNELS")) {
      if (const KernelTable* t = FindKernels(forced)) return t;
      DAISY_LOG_WARN("DAISY_KERNELS=%s is not supported on this CPU; using %s", forced,
                     all.back()->name);
    }
    return all.back();
  }();
  return *best;
}

namespace {
std::atomic<int> prefetch_override{-1};

// The x86 family and model as /proc/cpuinfo and lscpu print them, from CPUID leaf 1 with the
// extended fields folded in as Intel's and AMD's manuals define; nullopt where there is no CPUID.
struct FamilyModel {
  unsigned family, model;
};
std::optional<FamilyModel> CpuFamilyModel() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return std::nullopt;
  const unsigned base_family = (eax >> 8) & 0xF, base_model = (eax >> 4) & 0xF;
  const unsigned family = base_family == 0xF ? base_family + ((eax >> 20) & 0xFF) : base_family;
  const unsigned model = base_family == 0x6 || base_family == 0xF ? base_model | (((eax >> 16) & 0xF) << 4) : base_model;
  return FamilyModel{family, model};
#else
  return std::nullopt;
#endif
}
}  // namespace

void OverridePrefetch(int on) { prefetch_override.store(on < 0 ? -1 : on != 0, std::memory_order_relaxed); }

bool PrefetchSmallTiles() {
  if (const int o = prefetch_override.load(std::memory_order_relaxed); o >= 0) return o != 0;
  static const bool on = [] {
    if (const char* forced = std::getenv("DAISY_PREFETCH_SMALL_TILES")) return std::strcmp(forced, "0") != 0;
#if defined(__x86_64__)
    unsigned a = 0, vendor[3] = {};
    if (__get_cpuid(0, &a, &vendor[0], &vendor[2], &vendor[1])) {
      if (std::memcmp(vendor, "GenuineIntel", 12) == 0) return true;
      if (std::memcmp(vendor, "AuthenticAMD", 12) == 0) {
        const std::optional<FamilyModel> fm = CpuFamilyModel();
        return fm.has_value() && fm->family >= 0x1A;  // Zen 5 and later
      }
    }
#endif
    return false;
  }();
  return on;
}

bool PrefetchFloatRows() {
  if (const int o = prefetch_override.load(std::memory_order_relaxed); o >= 0) return o != 0;
  static const bool on = [] {
    const char* forced = std::getenv("DAISY_PREFETCH_FLOAT_ROWS");
    return forced == nullptr || std::strcmp(forced, "0") != 0;
  }();
  return on;
}

bool Bf16Dots() {
  static const bool on = [] {
    const char* forced = std::getenv("DAISY_BF16_DOTS");
    if (forced != nullptr && std::strcmp(forced, "0") == 0) return false;
#if defined(__x86_64__)
    return HasAvx512() && __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
  }();
  return on;
}

std::vector<std::string> KernelChoices(const KernelTable& table) {
  std::vector<std::string> out;
  const std::string name = table.name;
  if (name == "scalar") return out;
  if ((name == "avx512" || name == "amx") && Bf16Dots()) out.emplace_back("bf16-dots");
  if (PrefetchSmallTiles()) out.emplace_back("prefetch-small-tiles");
  if (PrefetchFloatRows()) out.emplace_back("prefetch-float-rows");
  return out;
}

namespace {

std::string Trimmed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\n");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\n") - first + 1);
}

// The processor's own brand string (cpuid leaves 0x80000002-4), or "".
std::string CpuidBrand() {
  std::string name;
#if defined(__x86_64__)
  unsigned regs[12] = {};
  unsigned top = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0x80000000u, &top, &b, &c, &d) && top >= 0x80000004u) {
    for (unsigned i = 0; i < 3; ++i) {
      __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2], &regs[4 * i + 3]);
    }
    name.assign(reinterpret_cast<const char*>(regs), sizeof regs);
    name.resize(std::strlen(name.c_str()));
  }
#endif
  return Trimmed(name);
}

// The operating system's name for the processor (/proc/cpuinfo's "model name"), or "".
std::string OsCpuName() {
  std::string name;
  if (FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::strncmp(line, "model name", 10) == 0) {
        if (const char* colon = std::strchr(line, ':')) name = colon + 1;
        break;
      }
    }
    std::fclose(f);
  }
  return Trimmed(name);
}

}  // namespace

// What lscpu and /proc/cpuinfo call the processor, so a benchmark's host reads as its user
// knows it; a virtual machine's cpuid brand can say more (seen: "AMD EPYC" in /proc/cpuinfo,
// "Oxide Virtual Turin-like Processor" from cpuid), and is added when it differs. The family and
// model follow: a virtual machine's name can be as bare as "Intel(R) Xeon(R) Processor", which
// says nothing of the generation (family 6 model 143 is Sapphire Rapids, 207 Emerald Rapids).
std::string CpuModel() {
  const std::string os = OsCpuName();
  const std::string brand = CpuidBrand();
  std::string name = os.empty() ? brand : os;
  std::string details = !os.empty() && !brand.empty() && brand != os ? "cpuid: " + brand : "";
  if (const std::optional<FamilyModel> fm = CpuFamilyModel()) {
    details += (details.empty() ? "family " : "; family ") + std::to_string(fm->family) + " model " +
               std::to_string(fm->model);
  }
  if (name.empty()) name = "unknown";
  return details.empty() ? name : name + " (" + details + ")";
}

}  // namespace daisy::kernels
