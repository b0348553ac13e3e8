# DAISY_SANITIZE=address,undefined builds everything with those sanitizers (CI runs the GGUF
# corruption tests this way).
if(DAISY_SANITIZE)
  string(REPLACE "," ";" _daisy_sanitizers "${DAISY_SANITIZE}")
  foreach(_s IN LISTS _daisy_sanitizers)
    add_compile_options(-fsanitize=${_s})
    add_link_options(-fsanitize=${_s})
  endforeach()
  add_compile_options(-fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fno-sanitize-recover=all)
endif()
