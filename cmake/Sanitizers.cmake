if(AL_SANITIZE)
  # -O1 keeps sanitized test runs fast enough for CI without losing reports.
  add_compile_options(-fsanitize=${AL_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all -O1)
  add_link_options(-fsanitize=${AL_SANITIZE})
endif()
