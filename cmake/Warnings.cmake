function(al_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Woverloaded-virtual -Wimplicit-fallthrough)
  if(AL_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 reports maybe-uninitialized false positives in libstdc++ under
    # sanitizers; the non-sanitized builds keep the warning.
    target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized)
  endif()
  if(CMAKE_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # A unity build compiles each .cc as an include of a generated file, so
    # GCC takes the anonymous-namespace types of the .cc for a header's and
    # warns about the classes of that same file that use them.
    target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
  endif()
  if(AL_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
