if(AL_SANITIZE)
  add_compile_options(-fsanitize=${AL_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${AL_SANITIZE})
endif()
