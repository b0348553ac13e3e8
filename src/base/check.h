// DAISY_CHECK*: our own invariants. A failure is a bug in daisy: print file:line and the values,
// then abort. Always on (DAISY_DCHECK* only in debug builds, for hot loops).
#pragma once

#include <cstdio>
#include <cstdlib>

namespace daisy::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* expr, const char* detail);
}  // namespace daisy::internal

#define DAISY_CHECK(cond)                                                        \
  do {                                                                           \
    if (!(cond)) [[unlikely]] ::daisy::internal::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define DAISY_CHECK_OP_(a, b, op)                                                            \
  do {                                                                                       \
    const auto& _daisy_a = (a);                                                              \
    const auto& _daisy_b = (b);                                                              \
    if (!(_daisy_a op _daisy_b)) [[unlikely]] {                                              \
      char _daisy_buf[96];                                                                   \
      std::snprintf(_daisy_buf, sizeof(_daisy_buf), "(%lld vs %lld)",                       \
                    static_cast<long long>(_daisy_a), static_cast<long long>(_daisy_b));     \
      ::daisy::internal::CheckFailed(__FILE__, __LINE__, #a " " #op " " #b, _daisy_buf);     \
    }                                                                                        \
  } while (0)

#define DAISY_CHECK_EQ(a, b) DAISY_CHECK_OP_(a, b, ==)
#define DAISY_CHECK_NE(a, b) DAISY_CHECK_OP_(a, b, !=)
#define DAISY_CHECK_LT(a, b) DAISY_CHECK_OP_(a, b, <)
#define DAISY_CHECK_LE(a, b) DAISY_CHECK_OP_(a, b, <=)
#define DAISY_CHECK_GT(a, b) DAISY_CHECK_OP_(a, b, >)
#define DAISY_CHECK_GE(a, b) DAISY_CHECK_OP_(a, b, >=)

#ifdef NDEBUG
#define DAISY_DCHECK(cond) ((void)0)
#define DAISY_DCHECK_LT(a, b) ((void)0)
#define DAISY_DCHECK_LE(a, b) ((void)0)
#define DAISY_DCHECK_EQ(a, b) ((void)0)
#else
#define DAISY_DCHECK(cond) DAISY_CHECK(cond)
#define DAISY_DCHECK_LT(a, b) DAISY_CHECK_LT(a, b)
#define DAISY_DCHECK_LE(a, b) DAISY_CHECK_LE(a, b)
#define DAISY_DCHECK_EQ(a, b) DAISY_CHECK_EQ(a, b)
#endif
