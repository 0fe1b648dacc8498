# `npm ci` of tests/mcp (SRC) into DST: the exact packages of
# package-lock.json, no install scripts. Skipped when DST already holds the
# installation of this very lock file.
file(MAKE_DIRECTORY ${DST})
file(SHA256 ${SRC}/package-lock.json lock_hash)
if(EXISTS ${DST}/.installed)
  file(READ ${DST}/.installed done_hash)
  if(done_hash STREQUAL lock_hash AND EXISTS ${DST}/node_modules)
    message(STATUS "npm packages of ${SRC} already installed in ${DST}")
    return()
  endif()
endif()
configure_file(${SRC}/package.json ${DST}/package.json COPYONLY)
configure_file(${SRC}/package-lock.json ${DST}/package-lock.json COPYONLY)
execute_process(COMMAND ${NPM} ci --ignore-scripts --no-audit --no-fund
                WORKING_DIRECTORY ${DST} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "npm ci in ${DST} failed (${rc})")
endif()
file(WRITE ${DST}/.installed ${lock_hash})
