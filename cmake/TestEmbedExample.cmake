# Run by CTest (embed_installed_package): installs BUILD_DIR into a fresh
# prefix under WORK_DIR, builds examples/embed against it with
# find_package(agentloop), and runs it on a scratch workspace with the
# scripted provider (no network). Fails on any step's failure or when the
# example's turn does not end as its script says.
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT ${var})
    message(FATAL_ERROR "TestEmbedExample: ${var} is not set")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

set(flags "")
if(SANITIZE)
  set(flags "-fsanitize=${SANITIZE}")
endif()
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/embed -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DCMAKE_CXX_COMPILER_LAUNCHER=${COMPILER_LAUNCHER} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
    -DCMAKE_CXX_FLAGS=${flags})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build -j2)

file(MAKE_DIRECTORY ${WORK_DIR}/ws)
file(WRITE ${WORK_DIR}/ws/notes.txt "agentloop runs tools for a model\n")
run(${WORK_DIR}/build/embed ${WORK_DIR}/ws ${SOURCE_DIR}/examples/embed/script.json)
foreach(want "hook: word_count -> 6 words" "notes.txt has 6 words.")
  string(FIND "${run_output}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "examples/embed printed no '${want}':\n${run_output}")
  endif()
endforeach()
message(STATUS "examples/embed built against the installed package and ran:\n${run_output}")
