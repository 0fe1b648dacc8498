# The optimisation of a sanitized build. -O1 runs a sanitized program about
# twice as fast as -O0 and loses no report; -O0 compiles in about 40-60% less
# CPU (Asio/Beast files most: docs/BENCHMARKS.md). The `ci` preset takes -O0:
# its end-to-end tests run the release build, so the sanitized build runs
# only the unit and integration tests, and compiling is most of its time.
set(AL_SANITIZE_OPT "-O1" CACHE STRING "Optimisation flag of sanitized builds (-O0 or -O1)")
if(AL_SANITIZE)
  add_compile_options(-fsanitize=${AL_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all
                      ${AL_SANITIZE_OPT})
  add_link_options(-fsanitize=${AL_SANITIZE})
endif()
