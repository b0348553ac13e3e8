# DAISY_SANITIZE=address,undefined builds everything with those sanitizers (CI runs the GGUF
# corruption tests this way).
#
# With clang the debug information is line tables only: reports still name the function, file and
# line of every frame (inlined ones included), and the sanitizer builds compile ~35% faster than
# with full -g (CI builds two of them).
if(DAISY_SANITIZE)
  string(REPLACE "," ";" _daisy_sanitizers "${DAISY_SANITIZE}")
  foreach(_s IN LISTS _daisy_sanitizers)
    add_compile_options(-fsanitize=${_s})
    add_link_options(-fsanitize=${_s})
  endforeach()
  add_compile_options(-fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fno-sanitize-recover=all)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    add_compile_options(-gline-tables-only)
  endif()
endif()

# daisy_no_ubsan(<source>...): those files without UBSan's checks (AddressSanitizer and the rest
# stay). For the SIMD kernels of the integer family: each is hundreds of fully unrolled template
# instances of vector intrinsics, where UBSan has nothing to check that their bit-exact tests
# against the scalar reference (which keeps UBSan) do not, and it doubles their compile time
# (clang 14: ~230 s for the AVX2 file, ~110 s without it).
function(daisy_no_ubsan)
  if(DAISY_SANITIZE MATCHES "undefined")
    set_property(SOURCE ${ARGN} APPEND PROPERTY COMPILE_OPTIONS "-fno-sanitize=undefined")
  endif()
endfunction()

# daisy_asan_outline(<source>...): AddressSanitizer's checks in those files as calls into the
# runtime instead of inline code (-fsanitize-address-outline-instrumentation, clang): the same
# checks and reports, for the integer family's SIMD kernels a fraction of the compile time (clang
# 14: AVX-512 128 s -> 33 s, AVX2 155 s -> 75 s), but kernels several times slower to run. Only
# for those two files: with the q8_0/q4_0 kernels outlined too, the multi-process tests under
# ASan (q8_0 models) took 5.7 min instead of 1.7.
function(daisy_asan_outline)
  if(DAISY_SANITIZE MATCHES "address" AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set_property(SOURCE ${ARGN} APPEND PROPERTY COMPILE_OPTIONS "-fsanitize-address-outline-instrumentation")
  endif()
endfunction()
