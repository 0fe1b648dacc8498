function(al_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Woverloaded-virtual -Wimplicit-fallthrough)
  if(AL_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
