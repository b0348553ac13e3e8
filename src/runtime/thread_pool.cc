#include "runtime/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace daisy::runtime {
namespace {
// About 20-50 microseconds of polling before a worker sleeps: long enough to bridge the gap
// between two matmuls of one forward pass, short enough not to burn a core when idle.
constexpr int kSpinIterations = 20000;

inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  n_threads_ = n_threads < 1 ? 1 : n_threads;
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunChunk(int index) {
  // Chunk boundaries: n split evenly in units of grain.
  const int64_t units = (n_ + grain_ - 1) / grain_;
  const int64_t begin = units * index / n_threads_ * grain_;
  int64_t end = units * (index + 1) / n_threads_ * grain_;
  if (end > n_) end = n_;
  if (begin < end) (*fn_)(index, begin, end);
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    uint64_t now = generation_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen && spin < kSpinIterations; ++spin) {
      CpuRelax();
      now = generation_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = now;
    if (stop_.load()) return;
    RunChunk(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const Fn& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n <= grain) {
    fn(0, 0, n);
    return;
  }
  fn_ = &fn;
  n_ = n;
  grain_ = grain < 1 ? 1 : grain;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  RunChunk(0);
  int left = pending_.load(std::memory_order_acquire);
  for (int spin = 0; left != 0 && spin < kSpinIterations; ++spin) {
    CpuRelax();
    left = pending_.load(std::memory_order_acquire);
  }
  while (left != 0) {
    pending_.wait(left, std::memory_order_acquire);
    left = pending_.load(std::memory_order_acquire);
  }
  fn_ = nullptr;
}

}  // namespace daisy::runtime
