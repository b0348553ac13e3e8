// KernelTable: the math kernels of one instruction set — a matrix kernel for every weight format
// (quant/formats.h) and the element-wise ops (ops.h) — chosen once at start-up from the CPU's
// features. Every table computes the same functions; results differ between tables only in
// floating-point summation order, never between calls of one table (see the contract below).
//
// Each ISA file lists its kernels as constant data (a KernelSet: no code runs to build it, so a
// table can be checked on a CPU that could not run it), and BuildKernelTable turns a set into a
// table, refusing one that lacks a kernel for some weight format or op: the error names the
// format (or op) and the ISA, at start-up, instead of a null pointer at the first product.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/ops.h"
#include "kernels/weights.h"

namespace daisy::kernels {

// Matrix product on converted activation rows (activations.h):
//   y[r * y_stride + o] = dot(weight row o, activation row r)
// for o in [o_begin, o_end) and r in [0, n_rows); activation row r starts at
// act + r * act_stride bytes. Contract (batch invariance): the value written for (o, r)
// depends only on weight row o and activation row r, bit for bit: not on n_rows, on the
// other rows, on o_begin/o_end, or on which thread runs it. Requires cols % ColsMultiple == 0.
using MatmulFn = void (*)(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows,
                          float* y, size_t y_stride, int64_t o_begin, int64_t o_end);

struct MatmulKernel {
  WeightType type;
  MatmulFn fn;
};

// What an ISA file provides, as constant data.
struct KernelSet {
  const char* isa;  // "scalar", "avx2", "avx512", "amx"
  std::span<const MatmulKernel> matmuls;
  const OpKernels* ops;
};

struct KernelTable {
  const char* name = nullptr;  // the ISA
  MatmulFn matmul[kNumWeightTypes] = {};
  OpKernels ops = {};

  MatmulFn Matmul(WeightType type) const { return matmul[static_cast<int>(type)]; }
};

// Checks that `set` has exactly one matrix kernel for every weight format and every op, and
// builds its table; the error names the ISA and what is missing or doubled.
Result<KernelTable> BuildKernelTable(const KernelSet& set);

// The scalar reference: readable loops, the oracle for every other table. Runs anywhere.
const KernelTable& ScalarKernels();
// nullptr when the CPU lacks the instruction set, or the build its table (DAISY_KERNEL_ISAS).
const KernelTable* Avx2Kernels();    // AVX2 + FMA + F16C
const KernelTable* Avx512Kernels();  // AVX-512 F/BW/VL/DQ + VNNI
// AVX-512's table with AMX tiles for the q4_0, q8_0, q4_K, q5_K and iq4_xs products of 16
// activation rows or more (a prompt); the same bits as AVX-512's table (x86_amx/kernels.cc).
const KernelTable* AmxKernels();

// The fastest table this CPU supports (DAISY_KERNELS=scalar|avx2|avx512|amx forces one; an
// unsupported choice falls back to the best with a warning).
const KernelTable& BestKernels();
// Every table this CPU supports, scalar first: tests run each.
std::vector<const KernelTable*> AllSupportedKernels();
// The names of the tables this build has whose CPU features this machine lacks.
std::vector<const char*> UnsupportedKernelNames();
// Looks a table up by name; nullptr when unknown or unsupported here.
const KernelTable* FindKernels(const char* name);
// The CPU's model name (/proc/cpuinfo's "model name", or "unknown") and in parentheses CPUID's
// brand string where the two differ, as in some virtual machines, and the x86 family and model:
// "Intel(R) Xeon(R) Processor (family 6 model 207)",
// reported with the kernels by `run --json`, serve's ready line and /metrics: speeds differ by
// host, and a result names the host it was measured on.
std::string CpuModel();
// The run-time choices a table's kernels make on this CPU (int_matmul.h), by name, for reports
// beside the table's name: "bf16-dots" (Bf16Dots: the bits of bf16 products differ with it),
// "prefetch-small-tiles", "prefetch-float-rows". Empty for the scalar table.
std::vector<std::string> KernelChoices(const KernelTable& table);
// Every set this build has, supported here or not (tests check each is complete).
std::vector<KernelSet> AllKernelSets();

}  // namespace daisy::kernels
