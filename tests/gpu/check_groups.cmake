# CTest gpu/every_case_in_a_group: every test case of the GPU suite belongs to one of GROUPS (doctest test
# suites; CTest runs each group as one test, tests/CMakeLists.txt), and every group has a case. A case in no
# group would never run; an empty group would pass without running anything.
#   cmake -DTEST_GPU=<test_gpu> -DGROUPS="quick;elements;...;benchmark" -P check_groups.cmake
foreach(v TEST_GPU GROUPS)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_groups.cmake: -D${v}=... is required")
  endif()
endforeach()

# Number of test cases the filter selects (skipped ones included).
function(count_cases out_var)
  execute_process(COMMAND ${TEST_GPU} --list-test-cases --no-skip ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${TEST_GPU} --list-test-cases ${ARGN} failed (${rc}):\n${out}${err}")
  endif()
  if(NOT out MATCHES "test cases passing the current filters: ([0-9]+)")
    message(FATAL_ERROR "unexpected listing of ${TEST_GPU}:\n${out}")
  endif()
  set(${out_var} ${CMAKE_MATCH_1} PARENT_SCOPE)
  set(listing "${out}" PARENT_SCOPE)
endfunction()

string(REPLACE ";" "," group_list "${GROUPS}")
count_cases(outside --test-suite-exclude=${group_list})
if(NOT outside EQUAL 0)
  message(FATAL_ERROR "${outside} GPU test case(s) in no group (add * doctest::test_suite(\"<group>\") to each; "
                      "groups: ${GROUPS}):\n${listing}")
endif()
count_cases(total)
set(sum 0)
foreach(group IN LISTS GROUPS)
  count_cases(n --test-suite=${group})
  if(n EQUAL 0)
    message(FATAL_ERROR "GPU test group '${group}' has no test case: CTest would pass it without running anything")
  endif()
  message(STATUS "${group}: ${n} case(s)")
  math(EXPR sum "${sum} + ${n}")
endforeach()
if(NOT sum EQUAL total)
  message(FATAL_ERROR "the groups hold ${sum} cases, the suite ${total}")
endif()
message(STATUS "${total} GPU test cases in ${GROUPS}")
