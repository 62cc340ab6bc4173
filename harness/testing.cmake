# swa_add_boost_test(NAME SOURCES ... LIBS ... LABELS ... [ARGS ...])
# One Boost.Test executable, registered with CTest under its labels; ARGS go to the executable.
function(swa_add_boost_test name)
  cmake_parse_arguments(arg "" "" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE ${arg_LIBS} Boost::unit_test_framework swa::host_flags)
  target_compile_definitions(${name} PRIVATE BOOST_TEST_DYN_LINK)
  add_test(NAME ${name} COMMAND ${name} --log_level=test_suite --report_level=short ${arg_ARGS})
  set_tests_properties(${name} PROPERTIES LABELS "${arg_LABELS}")
endfunction()

# swa_tests_own_caches(): called last in each CMakeLists.txt that registers tests. Every test of that
# folder gets the build tree's golden cache folder (XDG_CACHE_HOME=build/test-cache), never the
# user's, so a plain `ctest` is what scripts/test.sh runs. The tests share it: a cache hit gives the
# same bits as a computation (harness_golden_cache_test), and a test whose point needs a cold or
# private cache says so itself (--no-golden-cache, --golden-cache DIR). CMake 3.25 sets test
# properties per folder, hence a call in each.
function(swa_tests_own_caches)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS tests)
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "XDG_CACHE_HOME=${CMAKE_BINARY_DIR}/test-cache")
  endforeach()
endfunction()
