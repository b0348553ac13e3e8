#include "kernels/kernel_table.h"

#include <cstdlib>
#include <cstring>

#include "base/log.h"

namespace daisy::kernels {

// Defined in x86_avx2/ and x86_avx512/ (compiled with their own ISA flags); they are only
// called after the CPU check below.
namespace avx2 {
const KernelTable& Table();
}
namespace avx512 {
const KernelTable& Table();
}

namespace {
bool HasAvx2() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
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
}  // namespace

const KernelTable* Avx2Kernels() {
#if defined(DAISY_HAVE_X86_KERNELS)
  return HasAvx2() ? &avx2::Table() : nullptr;
#else
  return nullptr;
#endif
}

const KernelTable* Avx512Kernels() {
#if defined(DAISY_HAVE_X86_KERNELS)
  return HasAvx512() ? &avx512::Table() : nullptr;
#else
  return nullptr;
#endif
}

std::vector<const KernelTable*> AllSupportedKernels() {
  std::vector<const KernelTable*> out{&ScalarKernels()};
  if (const KernelTable* t = Avx2Kernels()) out.push_back(t);
  if (const KernelTable* t = Avx512Kernels()) out.push_back(t);
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

}  // namespace daisy::kernels
