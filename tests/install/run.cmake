# ctest driver: install the built octet into a scratch prefix, then configure, build and run the
# consumer project against it. Variables: OCTET_BUILD_DIR, CONSUMER_SRC, WORK_DIR, RECIPE.
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_consumer: command failed (${rc}): ${ARGN}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install ${OCTET_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} -S ${CONSUMER_SRC} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
    -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/two_layer)
# A program on the core API alone loads no curl nor libarchive (octet::fetch's): liboctet links
# only what training needs.
execute_process(COMMAND ldd ${WORK_DIR}/build/two_layer OUTPUT_VARIABLE libs RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR libs MATCHES "(libcurl|libarchive|liboctet_fetch)[^ ]*")
  message(FATAL_ERROR "install_consumer: two_layer (octet::octet) loads ${CMAKE_MATCH_0} (ldd status ${rc})")
endif()
run(${WORK_DIR}/build/fetch_offline)
run(${WORK_DIR}/build/train_from_recipe ${RECIPE} ${WORK_DIR}/runs)
