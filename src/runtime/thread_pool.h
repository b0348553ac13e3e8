// ThreadPool: persistent workers for fork-join loops. Threads are created once and joined at
// destruction, never per call. Workers spin for a bounded time waiting for work (a forward
// pass issues hundreds of loops per token), then sleep on an atomic wait.
// Thread-compatible: one caller at a time runs ParallelFor.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace daisy::runtime {

class ThreadPool {
 public:
  // `n_threads` counts the calling thread: 1 means no workers. 0 = all hardware threads.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Splits [0, n) into size() contiguous chunks whose boundaries are multiples of `grain`, and
  // runs fn(thread, begin, end) for each non-empty chunk (thread in [0, size()), chunk 0 on
  // the calling thread). Returns when all are done.
  using Fn = std::function<void(int, int64_t, int64_t)>;
  void ParallelFor(int64_t n, int64_t grain, const Fn& fn);

 private:
  void WorkerLoop(int index);
  void RunChunk(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  const Fn* fn_ = nullptr;  // valid during a ParallelFor
  int64_t n_ = 0;
  int64_t grain_ = 1;
  std::atomic<uint64_t> generation_{0};  // bumped to publish work (and to stop)
  std::atomic<int> pending_{0};          // workers still running the current generation
  std::atomic<bool> stop_{false};
};

}  // namespace daisy::runtime
