// What the kernel did with this process's memory: peak resident size, and how much of it sits
// in transparent huge pages. Weights are copied into 2 MiB-aligned, MADV_HUGEPAGE memory
// (AlignedBuffer); whether the kernel actually backs them with huge pages depends on its
// settings and on fragmentation, and a run on 4 KiB pages can decode several times slower, so
// daisy reports the number instead of assuming it.
#pragma once

#include <cstdint>

namespace daisy {

// Peak resident set size in bytes (getrusage).
uint64_t PeakRssBytes();

// Bytes of anonymous memory backed by transparent huge pages (AnonHugePages in
// /proc/self/smaps_rollup); 0 where the kernel does not say.
uint64_t HugePageBytes();

// Threads this process has now (the entries of /proc/self/task); 0 where the kernel does not say.
int ProcessThreads();

}  // namespace daisy
