# Runs `normkit bench --same-size-copy --json` on the CPU backend and checks that both passes of
# the first shape record a positive same-size copy time and the pass's percentage of it.
#   cmake -DNORMKIT=<tool> -DJSON=<file> -P bench_json_same_size_copy.cmake
file(REMOVE "${JSON}")
execute_process(COMMAND "${NORMKIT}" bench --backend cpu --reps 2 --shapes 3x256 --same-size-copy
                        --json "${JSON}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "normkit bench exited with ${rc}\n${out}\n${err}")
endif()
file(READ "${JSON}" doc)
string(JSON flag GET "${doc}" config same_size_copy)
if(NOT flag STREQUAL "ON")
  message(FATAL_ERROR "config.same_size_copy: got '${flag}'")
endif()
foreach(pass fwd bwd)
  foreach(field same_size_copy_us percent_of_same_size_copy)
    string(JSON v GET "${doc}" shapes 0 ${pass} ${field})
    if(NOT v GREATER 0)
      message(FATAL_ERROR "shapes[0].${pass}.${field}: got '${v}', expected a positive number")
    endif()
    message("ok: ${pass}.${field} = ${v}")
  endforeach()
endforeach()
