# daisy_target_warnings(target): the project's warning set; errors when DAISY_WERROR is on (CI).
function(daisy_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wcast-align -Wunused -Woverloaded-virtual
                                           -Wimplicit-fallthrough)
  if(DAISY_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
