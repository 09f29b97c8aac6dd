# Runs `normkit bench` with --json and checks the recorded options and byte counts (and that
# each timed pass says whether it was steady).
#   cmake -DNORMKIT=<tool> -DJSON=<file> "-DARGS=a;b;..." -DWEIGHT_DTYPE=fp32 -DBIAS=ON
#         -DZERO_CENTERED=OFF -DFWD_BYTES=<n or -> -DBWD_BYTES=<n or -> -DOUT_DTYPE=bf16
#         -DWEIGHT=ON -P bench_json_bytes.cmake
# FWD_BYTES / BWD_BYTES "-": that pass is not timed (its entry is null). Only the first shape
# is checked.
file(REMOVE "${JSON}")
execute_process(COMMAND "${NORMKIT}" bench ${ARGS} --json "${JSON}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "normkit bench ${ARGS} exited with ${rc}\n${out}\n${err}")
endif()
message("${out}")
file(READ "${JSON}" doc)

function(expect what actual expected)
  if(NOT "${actual}" STREQUAL "${expected}")
    message(FATAL_ERROR "${what}: got '${actual}', expected '${expected}'")
  endif()
  message("ok: ${what} = ${actual}")
endfunction()

string(JSON v GET "${doc}" config weight_dtype)
expect("config.weight_dtype" "${v}" "${WEIGHT_DTYPE}")
string(JSON v GET "${doc}" config out_dtype)
expect("config.out_dtype" "${v}" "${OUT_DTYPE}")
string(JSON v GET "${doc}" config weight)
expect("config.weight" "${v}" "${WEIGHT}")
string(JSON v GET "${doc}" config bias)
expect("config.bias" "${v}" "${BIAS}")
string(JSON v GET "${doc}" config zero_centered)
expect("config.zero_centered" "${v}" "${ZERO_CENTERED}")
foreach(pass fwd bwd)
  string(TOUPPER "${pass}_BYTES" name)
  string(JSON type TYPE "${doc}" shapes 0 ${pass})
  if("${${name}}" STREQUAL "-")
    expect("shapes[0].${pass}" "${type}" "NULL")
  else()
    string(JSON v GET "${doc}" shapes 0 ${pass} bytes)
    expect("shapes[0].${pass}.bytes" "${v}" "${${name}}")
    # whether its samples spread too widely (a timing: either value, but always there)
    string(JSON type TYPE "${doc}" shapes 0 ${pass} steady)
    expect("type of shapes[0].${pass}.steady" "${type}" "BOOLEAN")
  endif()
endforeach()
