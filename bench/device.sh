#!/usr/bin/env bash
# One call on the GPU machine: build for sm_90, run the C++ tests (CUDA ones included),
# `normkit check`, `normkit bench`, the Python tests and benchmarks; logs (as logs.tar.gz) and
# the JSON results go to $OUT (or ./device-out).
# Usage: bench/device.sh [steps...]   steps: build sass test check bench quant install python
# compare models binding narrow train dtypes huge columns ncu_quant ncu_quant_source
# quant_bench exact items fused tickets wide modes bwd_probe probe inductor dram aftermath
# sanitize profile method ncu_method ring ncu_detail ncu_peer pending pending_python order_ncu carveout
# after_gemm compile_gap weight_first fwd_sass_counts lean lean_waves launch rows
# defaults39 lean_small wide_plain gap64mb lean_many harness_policy flush_demote gap_dram
# weak_stores flush_retune fp32_wide fp32_split bwd_4096 fp32_mixed bwd_tail few_rows few_rows_ncu
# (default: build test check bench)
# BUILD=dir names the build tree (default build-device). (A tree built on the CPU machine cannot
# travel instead: its binaries are over 64 MiB each.) `install` links that tree's libnormkit.a.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
# The device tool returns at most 8 files: logs travel as one archive, results as JSON.
LOGS=$(mktemp -d)
# (with ninja's per-file compile times, also when `timeout` stops a build)
trap 'cp "$BUILD/.ninja_log" "$LOGS/ninja_log.txt" 2>/dev/null; tar czf "$OUT/logs.tar.gz" -C "$LOGS" .' EXIT
trap 'exit 143' TERM INT  # under `timeout`, still write the logs archive
BUILD=${BUILD:-build-device}
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(build test check bench)
status=0
run() {  # run NAME CMD...: tee output to $OUT/NAME.log, remember failures
  local name=$1; shift
  echo "=== $name: $*"
  local start=$SECONDS
  "$@" 2>&1 | tee "$LOGS/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc after $((SECONDS - start)) s"
  [ "$rc" -ne 0 ] && status=1
  return "$rc"
}
run_probe() {  # run_probe NAME: build bench/NAME.cu (standalone, sm_90) and run it
  run "$1_build" nvcc -O3 -arch=sm_90 -std=c++17 -Isrc -Ibench "bench/$1.cu" -o "$LOGS/$1" &&
    run "$1" "$LOGS/$1"
  rm -f "$LOGS/$1"  # (the logs archive carries text, not binaries)
}
install_package() {  # links the library that `build` made, when there is one
  local prebuilt=""
  [ -f "$BUILD/src/libnormkit.a" ] && prebuilt="-DNK_PREBUILT_STATIC=$PWD/$BUILD/src/libnormkit.a"
  run pip_install env CMAKE_ARGS="-DNK_CUDA_ARCHITECTURES=90 $prebuilt" python3 -m pip install \
    --no-build-isolation --no-deps -v .
}
knob_words() {  # knob_words CONFIG: a config of knob_runs (words joined by commas, or "none")
  # as separate words (for `env`: one knob each), none for "none"
  [ "$1" = none ] || echo "${1//,/ }"
}
knob_runs() {  # knob_runs PREFIX SECONDS CONFIGS ARGS...: `normkit bench --explain ARGS` under
  # each config of CONFIGS (knobs joined by commas; "none": the defaults), each stopped after
  # SECONDS, one JSON each in the logs named PREFIX_<config> (a repeated config gets a suffix)
  local cfg name knobs
  for cfg in $3; do
    name=$1_${cfg//[^A-Za-z0-9_]/_}
    while [ -e "$LOGS/$name.json" ]; do name=${name}_again; done
    knobs=$(knob_words "$cfg")
    # shellcheck disable=SC2086  # the knobs, one word each
    run "$name" timeout "$2" env $knobs "$BUILD/tools/normkit" bench --explain "${@:4}" \
      --json "$LOGS/$name.json"
  done
}
run_fwd_tests() {  # run_fwd_tests NAME: the CUDA forward tests (their knob entries for the
  # weight with x and the lean kernel included) and the planner tests, logged as NAME
  run "$1" ctest --test-dir "$BUILD" --output-on-failure -j"${CTEST_JOBS:-14}" \
    -R 'Fwd.*Cuda|LaunchConfig|fwd_weight|fwd_lean'
}
knob_array() {  # knob_array CFG: the array `knobs` of CFG's knobs (joined by commas; "none":
  # the defaults), for `env "${knobs[@]}" CMD`
  knobs=()
  if [ "$1" != none ]; then IFS=, read -ra knobs <<< "$1"; fi
}
mode_runs() {  # mode_runs MODES CONFIGS: `normkit bench --fwd-only` of each of MODES (plain,
  # tensor, token, block, mxfp8, transposed; backward: `--bwd-only`) under each of CONFIGS
  # (words joined by commas: NK_TUNE_* knobs or bench options such as --zero-centered; "none":
  # the defaults), the whole set twice; JSON as bench_ab_<mode>_<config>_<a|b>.json in the logs
  # (ab.py compares them; ab.py --pool pools the repeats of each config)
  local rep cfg words w mode pass
  local -a knobs margs args
  for rep in a b; do
    for cfg in $2; do
      words=$(knob_words "$cfg")
      knobs=() args=()
      for w in $words; do
        case $w in NK_TUNE_*) knobs+=("$w") ;; *) args+=("$w") ;; esac
      done
      for mode in $1; do
        margs=(--quant "$mode") pass=--fwd-only
        [ "$mode" = plain ] && margs=()
        [ "$mode" = backward ] && margs=() pass=--bwd-only
        [ "$mode" = transposed ] && margs=(--quant tensor --transposed)
        run "bench_ab_${mode}_${cfg//[^A-Za-z0-9_]/_}_$rep" env "${knobs[@]}" \
          "$BUILD/tools/normkit" bench "$pass" "${margs[@]}" "${args[@]}" \
          --json "$LOGS/bench_ab_${mode}_${cfg//[^A-Za-z0-9_]/_}_$rep.json"
      done
    done
  done
}
quant_tables() {  # the forward with quantized outputs, one table per mode (JSON in the logs)
  local mode
  for mode in tensor token block mxfp8; do
    run "bench_quant_$mode" "$BUILD/tools/normkit" bench --quant "$mode" --fwd-only --explain \
      --json "$LOGS/bench_quant_$mode.json"
  done
  run bench_quant_transposed "$BUILD/tools/normkit" bench --quant tensor --transposed \
    --fwd-only --explain --json "$LOGS/bench_quant_transposed.json"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$LOGS/gpu.txt" 2>&1
for step in "${steps[@]}"; do
  case $step in
    build)
      run configure cmake -S . -B "$BUILD" -G Ninja -DNK_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
      run build cmake --build "$BUILD" -j16 ;;
    sass)  # every function's SASS read for descriptor reads of uniform registers nothing sets
      # (bench/sass_desc_check.py: ptxas of CUDA 13.0 emitted one for a cache-hinted cp.async,
      # an illegal instruction at run time). 150 s on the CPU machine's 2 cores (a cuobjdump per
      # core); run it after `build` where a kernel's registers or its cache-hinted code changed
      mapfile -t objects < <(find "$BUILD" -name '*.cu.o') &&
      run sass_desc_check python3 bench/sass_desc_check.py "${objects[@]}" ;;
    test)  # (TEST_REGEX: only the ctest entries it matches; CTEST_JOBS processes at once, 14 by
      # default: on 2026-11-27 the first 815 entries summed to 2067 s and took ~300 s of wall
      # time at 8, so that `build test` (~290 s of build) ran out of its 590 s; most of an
      # entry's time is its float64 reference on the CPU, and the machine has 16 cores)
      run ctest ctest --test-dir "$BUILD" --output-on-failure -j"${CTEST_JOBS:-14}" ${TEST_REGEX:+-R "$TEST_REGEX"} ;;
    check) run check "$BUILD/tools/normkit" check ;;
    bench) run bench "$BUILD/tools/normkit" bench --explain --json "$OUT/bench.json" ;;
    quant)  # quant_tables, then torch.compile of the same composites in the same call, with
      # normkit's figures beside
      quant_tables
      run compare_quant env PYTHONUNBUFFERED=1 python3 bench/compare_quant.py \
        --json "$OUT/compare_quant.json" --normkit "tensor=$LOGS/bench_quant_tensor.json" \
        --normkit "transposed=$LOGS/bench_quant_transposed.json" \
        --normkit "token=$LOGS/bench_quant_token.json" \
        --normkit "block=$LOGS/bench_quant_block.json" \
        --normkit "mxfp8=$LOGS/bench_quant_mxfp8.json" ;;
    quant_bench) quant_tables ;;  # the quant step without the torch.compile comparison
    install) install_package ;;  # the Python package alone (compare and train need it)
    python)  # (PYTEST_FILES: only those test files)
      install_package &&
      # One process per file: a crash in one file cannot hide the others' results.
      for f in ${PYTEST_FILES:-tests/python/test_*.py}; do
        run "pytest_$(basename "$f" .py)" env PYTHONUNBUFFERED=1 NK_REQUIRE_CUDA=1 \
          python3 -X faulthandler -m pytest "$f" -q -rs -p no:cacheprovider
      done ;;
    compare) run compare env PYTHONUNBUFFERED=1 python3 bench/compare.py --json "$OUT/compare.json" ;;
    models)  # the "models" shape set (norms of current LLMs: per-head QK norms, MLA ranks, model
      # hidden sizes): the C API bench beside a copy of the same bytes, with the fused residual
      # too, then bench/compare.py against the peers in the same call (installs the package)
      run bench_models "$BUILD/tools/normkit" bench --explain --shapes models --same-size-copy \
        --json "$OUT/bench_models.json"
      run bench_models_residual "$BUILD/tools/normkit" bench --explain --shapes models --residual \
        --json "$LOGS/bench_models_residual.json"
      install_package &&
        run compare_models env PYTHONUNBUFFERED=1 python3 bench/compare.py --shapes models \
          --json "$OUT/compare_models.json" ;;
    binding)  # host time per call of normkit.torch on the GPU against the bare C API and
      # torch's own (bench/binding_overhead.py; needs `install`): 1 x 64, then 1 x 4096
      run binding env PYTHONUNBUFFERED=1 python3 bench/binding_overhead.py --device cuda --repeats 20
      run binding_4096 env PYTHONUNBUFFERED=1 python3 bench/binding_overhead.py --device cuda \
        --hidden 4096 --repeats 20 --no-quant ;;
    train) run train env PYTHONUNBUFFERED=1 python3 bench/train_llama.py --json "$OUT/train.json" ;;
    dtypes)  # the issue's other sweeps: float16, float32 and the fused residual (bf16)
      run bench_fp16 "$BUILD/tools/normkit" bench --dtype fp16 --json "$LOGS/bench_fp16.json"
      run bench_fp32 "$BUILD/tools/normkit" bench --dtype fp32 --json "$LOGS/bench_fp32.json"
      run bench_residual "$BUILD/tools/normkit" bench --residual --json "$LOGS/bench_residual.json" ;;
    huge)  # past 64K columns, default plan and the prepared cluster plan (docs/notes.md v13)
      run bench_huge "$BUILD/tools/normkit" bench --explain --shapes 512x262144,1024x131072 \
        --json "$LOGS/bench_huge.json"
      run ctest_huge env NK_TUNE_BWD_HUGE_ROW_CLUSTER=16 ctest --test-dir "$BUILD" \
        --output-on-failure -R 'Large|LaunchConfig'
      run bench_huge_cluster env NK_TUNE_BWD_HUGE_ROW_CLUSTER=16 "$BUILD/tools/normkit" bench \
        --bwd-only --explain --shapes 512x262144,1024x131072 --json "$LOGS/bench_huge_cluster.json" ;;
    profile)  # per-kernel GPU time (Nsight Compute) of PROFILE_SHAPES, forward and backward
      run profile ncu --kernel-name regex:'rms_norm|reduce_slots|quant' --csv \
        --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,dram__throughput.avg.pct_of_peak_sustained_elapsed \
        "$BUILD/tools/normkit" bench --reps 2 --shapes "${PROFILE_SHAPES:-29x17389,4096x1024,128x4096,8192x2048}" \
        ${PROFILE_ARGS:-} ;;
    columns)  # the column-owning backward (v3): its tests, memcheck, A/B on few-row shapes, ncu
      few=1x4096,128x4096,29x17389,64x1001,9x1003,1x17389,32x8192,2x65536,256x2048,64x4096,4x17389,8x4095,16x4096,2x17389
      run ctest_columns ctest --test-dir "$BUILD" --output-on-failure -R bwd_columns_kernel
      run sanitize_columns env NK_TUNE_BWD_COLUMNS_MAX_ELEMENTS=1048576 compute-sanitizer \
        --tool memcheck --error-exitcode 1 "$BUILD/tools/normkit" check --quick --backend cuda
      for v in 1048576 0; do
        run "bench_columns_$v" env NK_TUNE_BWD_COLUMNS_MAX_ELEMENTS=$v "$BUILD/tools/normkit" \
          bench --bwd-only --explain --shapes "$few" --json "$LOGS/bench_columns_$v.json"
      done
      run profile_columns env NK_TUNE_BWD_COLUMNS_MAX_ELEMENTS=1048576 ncu \
        --kernel-name regex:'rms_norm_bwd' --csv --metrics gpu__time_duration.sum \
        "$BUILD/tools/normkit" bench --reps 2 --bwd-only --shapes 1x4096,128x4096,29x17389,256x2048 ;;
    launch)  # whether the way a small forward is launched shows in its event time
      # (bench/launch_probe.cu): a plain RMSNorm kernel and an empty one, launched with small
      # parameters, with 256 bytes, and through cudaLaunchKernelEx; events and spans
      run_probe launch_probe ;;
    few_rows)  # a plain RMSNorm forward of few long rows by cluster split, sum and alignment,
      # and normkit's realigned forward on the plans of NK_TUNE_FWD_REALIGN_CLUSTERS=1
      # (bench/few_rows_probe.cu, with the planner): where 29x17389's time goes.
      # FEW_ROWS_ONE_ROW=1: only normkit's one-row realigned plans, realigned against lean
      # (FEW_ROWS_SHAPES=RxH,...: those shapes)
      run few_rows_probe_build nvcc -O3 -arch=sm_90 -std=c++17 -Isrc -Iinclude -Ibench \
        bench/few_rows_probe.cu src/cuda/launch_config.cpp -o "$LOGS/few_rows_probe" &&
        run few_rows_probe "$LOGS/few_rows_probe"
      rm -f "$LOGS/few_rows_probe" ;;
    few_rows_ncu)  # ncu of the probe's kernel and normkit's realigned forward on one split of
      # 29x17389 (bench/few_rows_probe.cu, FEW_ROWS_NCU=1): where the time between them goes
      run few_rows_probe_build nvcc -O3 -arch=sm_90 -std=c++17 -Isrc -Iinclude -Ibench \
        bench/few_rows_probe.cu src/cuda/launch_config.cpp -o "$LOGS/few_rows_probe" &&
        run few_rows_ncu env FEW_ROWS_NCU=1 ncu --kernel-name regex:'split_rows|rms_norm_fwd_realigned' \
          --section SpeedOfLight --section Occupancy --section LaunchStats \
          --section WarpStateStats --section SchedulerStats --section InstructionStats \
          --section MemoryWorkloadAnalysis "$LOGS/few_rows_probe"
      rm -f "$LOGS/few_rows_probe" ;;
    rows)  # a plain RMSNorm forward of many rows by CTA shape and L2 hints (bench/rows_probe.cu):
      # what torch.compile's one-warp programs reach at 16384x1024 that normkit does not
      run_probe rows_probe ;;
    method)  # what the timing method gives kernels that only move bytes (bench/method_probe.cu):
      # memcpy, a copy kernel with and without evict-last loads, an empty kernel; after the
      # bench's memset flush and after a read flush; ~1 minute, no normkit build needed
      run_probe method_probe ;;
    ncu_method)  # the kernels' own time in the L2 state the bench leaves (its memset flush, no
      # ncu cache control, the card's clocks), plain and per-tensor, at NCU_SHAPES: against
      # bench/method_probe.cu's copy-kernel spans after the same flush
      for quant in "" tensor; do
        qargs=()
        [ -n "$quant" ] && qargs=(--fwd-only --quant "$quant")
        run "ncu_method${quant:+_$quant}" ncu --cache-control none --clock-control none \
          --kernel-name regex:'rms_norm|reduce' --csv \
          --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
          "$BUILD/tools/normkit" bench --reps 3 "${qargs[@]}" \
          --shapes "${NCU_SHAPES:-4096x4096,8192x2048,8192x4096,1024x32768,2048x16384,8192x8192,4096x1024}"
      done ;;
    ring)  # the prototype forward fed by bulk copies into a deep shared-memory ring
      # (bench/ring_probe.cu), timed as the bench times; ~1 minute, no normkit build needed
      run_probe ring_probe ;;
    ncu_quant)  # why the quantized forward moves bytes no faster than the plain one (8192x8192)
      for args in "" "--quant tensor" "--quant token" "--quant block"; do
        name=ncu_fwd_$(echo "${args:-plain}" | tr -d ' -')
        run "$name" ncu --kernel-name regex:'rms_norm_fwd' --launch-skip 3 --launch-count 1 \
          --section SpeedOfLight --section Occupancy --section LaunchStats \
          --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
          "$BUILD/tools/normkit" bench --reps 2 --fwd-only --shapes 8192x8192 $args
      done ;;
    ncu_detail)  # why a kernel takes what it takes: ncu's stall, occupancy and memory sections
      # for one launch of each NCU_KERNELS regex (default rms_norm_bwd) at each NCU_SHAPES
      # (default 29x17389, 128x4096), bench arguments NCU_ARGS (default --bwd-only)
      for shape in ${NCU_SHAPES:-29x17389 128x4096}; do
        for kernel in ${NCU_KERNELS:-rms_norm_bwd}; do
          run "ncu_detail_${shape}_${kernel//[^A-Za-z0-9_]/_}" ncu --kernel-name regex:"$kernel" \
            --launch-skip "${NCU_SKIP:-2}" --launch-count "${NCU_COUNT:-2}" \
            --section SpeedOfLight --section Occupancy --section LaunchStats \
            --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
            "$BUILD/tools/normkit" bench --reps 2 --shapes "$shape" ${NCU_ARGS:---bwd-only}
        done
      done ;;
    ncu_quant_source)  # where the pinned quantized forward's issue slots go: ncu's full set
      # and the SASS source page of one launch per mode (NCU_QMODES, default tensor and block)
      # and shape (NCU_QSHAPES, default 8192x8192)
      for shape in ${NCU_QSHAPES:-8192x8192}; do
        for mode in ${NCU_QMODES:-tensor block}; do
          name="${mode}_$shape"
          run "ncu_quant_${name}_full" ncu --set full --import-source no \
            --kernel-name regex:'rms_norm_fwd_quant' --launch-skip 3 --launch-count 1 \
            -o "$LOGS/quant_$name" "$BUILD/tools/normkit" bench --reps 2 --fwd-only \
            --shapes "$shape" --quant "$mode" &&
          run "ncu_quant_${name}_source" ncu -i "$LOGS/quant_$name.ncu-rep" --page source \
            --csv --print-source sass &&
          run "ncu_quant_${name}_details" ncu -i "$LOGS/quant_$name.ncu-rep" --page details
        done
      done ;;
    exact)  # the EXACT forward kernels (no per-item range checks) against the general ones:
      # event timings of the sweep, then ncu's instruction counts at 8192x8192
      for v in 2 1 0; do
        run "bench_exact_$v" env NK_TUNE_FWD_EXACT=$v "$BUILD/tools/normkit" bench --fwd-only \
          --explain --json "$LOGS/bench_exact_$v.json"
        run "bench_exact_warps_$v" env NK_TUNE_FWD_EXACT=$v "$BUILD/tools/normkit" bench \
          --fwd-only --explain --shapes 16384x7168,4096x5120,8192x5120,2048x7168 \
          --json "$LOGS/bench_exact_warps_$v.json"
        run "bench_exact_warps_block_$v" env NK_TUNE_FWD_EXACT=$v "$BUILD/tools/normkit" bench \
          --quant block --fwd-only --explain --shapes 16384x7168,4096x5120,8192x5120,2048x7168 \
          --json "$LOGS/bench_exact_warps_block_$v.json"
        for mode in tensor token block; do
          run "bench_exact_${mode}_$v" env NK_TUNE_FWD_EXACT=$v "$BUILD/tools/normkit" bench \
            --quant "$mode" --fwd-only --explain --json "$LOGS/bench_exact_${mode}_$v.json"
        done
      done
      for v in 2 0; do
        for args in "" "--quant tensor" "--quant token" "--quant block"; do
          name=ncu_exact_${v}_$(echo "${args:-plain}" | tr -d ' -')
          run "$name" env NK_TUNE_FWD_EXACT=$v ncu --kernel-name regex:'rms_norm_fwd' \
            --launch-skip 3 --launch-count 1 --csv \
            --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
            "$BUILD/tools/normkit" bench --reps 2 --fwd-only --shapes 8192x8192 $args
        done
      done ;;
    items)  # vectors per thread of the forward registers plans (NK_TUNE_FWD_ITEMS), plain and
      # per-tensor, the sweep
      for v in 4 2 1; do
        run "bench_items_$v" env NK_TUNE_FWD_ITEMS=$v "$BUILD/tools/normkit" bench --fwd-only \
          --explain --json "$LOGS/bench_items_$v.json"
        run "bench_items_tensor_$v" env NK_TUNE_FWD_ITEMS=$v "$BUILD/tools/normkit" bench \
          --quant tensor --fwd-only --explain --json "$LOGS/bench_items_tensor_$v.json"
      done ;;
    tickets)  # the ticketed one-grid forward with y_t (setting 3): its tests, memcheck and
      # racecheck of its own test, then the A/B against the two kernels (0) and other lags over
      # the sweep. Each under `timeout`: a wait that never ends must not take the whole call.
      run ctest_tickets timeout 240 ctest --test-dir "$BUILD" --output-on-failure \
        -R "${TICKET_TEST_REGEX:-Quant|quant_two_kernel|quant_ticket|LaunchConfig}"
      run gtest_tickets timeout 120 "$BUILD/tests/normkit_tests" --gtest_filter='*Transposed*/Cuda'
      run sanitize_tickets timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 \
        "$BUILD/tests/normkit_tests" --gtest_filter='*TransposedOutput*/Cuda'
      run racecheck_tickets timeout 120 compute-sanitizer --tool racecheck --error-exitcode 1 \
        "$BUILD/tools/normkit" bench --reps 1 --quant tensor --transposed --fwd-only \
        --shapes 520x12288,1000x7168,4096x1024
      knob_runs bench_tickets 60 "${TICKET_CONFIGS:-NK_TUNE_QUANT_FUSED_TRANSPOSE=3 \
        NK_TUNE_QUANT_FUSED_TRANSPOSE=0 NK_TUNE_QUANT_TICKET_LAG=50 NK_TUNE_QUANT_TICKET_LAG=200 \
        NK_TUNE_QUANT_FUSED_TRANSPOSE=3 NK_TUNE_QUANT_FUSED_TRANSPOSE=0}" \
        --quant tensor --transposed --fwd-only
      # DRAM bytes and time per kernel with the bench's own L2 state, the card's clocks: does
      # the transpose read y from L2? Then where the ticketed kernel's warps stall.
      for k in 3 0; do
        run "ncu_tickets_dram_$k" timeout 120 env NK_TUNE_QUANT_FUSED_TRANSPOSE=$k ncu \
          --cache-control none --clock-control none --kernel-name regex:'rms_norm|transpose' --csv \
          --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum \
          "$BUILD/tools/normkit" bench --reps 2 --quant tensor --transposed --fwd-only \
          --shapes "${TICKET_NCU_SHAPES:-8192x8192,4096x12288}"
      done
      run ncu_tickets_stalls timeout 180 ncu --kernel-name regex:'rms_norm_fwd_quant_ticketed' \
        --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
        --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis \
        "$BUILD/tools/normkit" bench --reps 2 --quant tensor --transposed --fwd-only \
        --shapes 8192x8192 ;;
    fused)  # the per-tensor forward with y_t in one kernel (settings 1 and 2): tests, memcheck
      # (the quick check's y_t strides are too narrow for those plans: their own test too), A/B
      run ctest_fused ctest --test-dir "$BUILD" --output-on-failure -R 'quant_fused_transpose|LaunchConfig'
      for k in 1 2; do
        run "sanitize_fused_$k" env NK_TUNE_QUANT_FUSED_TRANSPOSE=$k compute-sanitizer \
          --tool memcheck --error-exitcode 1 "$BUILD/tools/normkit" check --quick --quant --backend cuda
        run "sanitize_fused_runs_$k" env NK_TUNE_QUANT_FUSED_TRANSPOSE=$k compute-sanitizer \
          --tool memcheck --error-exitcode 1 "$BUILD/tests/normkit_tests" \
          --gtest_filter='*TransposedOutputOfWholeRuns/Cuda'
      done
      run bench_fused_0 "$BUILD/tools/normkit" bench --quant tensor --transposed --fwd-only \
        --explain --json "$LOGS/bench_fused_0.json"
      for k in ${FUSED_SETTINGS:-1 2}; do
        for v in 1 2 4; do  # vectors per thread of the one-kernel plans (NK_TUNE_QUANT_FUSED_ITEMS)
          run "bench_fused_${k}_items_$v" env NK_TUNE_QUANT_FUSED_TRANSPOSE=$k \
            NK_TUNE_QUANT_FUSED_ITEMS=$v "$BUILD/tools/normkit" bench --quant tensor --transposed \
            --fwd-only --explain --json "$LOGS/bench_fused_${k}_items_$v.json"
        done
      done ;;
    wide)  # rows of 16K-32K bf16 columns on many rows: one CTA per row or a cluster of two
      # (NK_TUNE_FWD_SPLIT_WIDE_ROWS), plain and quantized forwards; its tests under the knob
      run ctest_wide env NK_TUNE_FWD_SPLIT_WIDE_ROWS=1 "$BUILD/tests/normkit_tests" \
        --gtest_filter='*Fwd*/Cuda*:*Quant*/Cuda*' --gtest_brief=1
      for v in 0 1; do
        run "bench_wide_$v" env NK_TUNE_FWD_SPLIT_WIDE_ROWS=$v "$BUILD/tools/normkit" bench \
          --fwd-only --explain --shapes 1024x32768,600x32768,2048x24576 --json "$LOGS/bench_wide_$v.json"
        for mode in tensor token block mxfp8; do
          run "bench_wide_${mode}_$v" env NK_TUNE_FWD_SPLIT_WIDE_ROWS=$v "$BUILD/tools/normkit" \
            bench --quant "$mode" --fwd-only --explain --shapes 1024x32768,600x32768,2048x24576 \
            --json "$LOGS/bench_wide_${mode}_$v.json"
        done
      done ;;
    narrow)  # the registers backward of misaligned rows (2-byte accesses) at up to 16 vectors
      # per thread (the default since the seventeenth session) against 8 (NK_TUNE_BWD_NARROW_ITEMS
      # =8): its ctest entry, memcheck of its plans, then the A/B over odd hidden sizes, twice
      # (knob_runs: one JSON each in the logs)
      run ctest_narrow ctest --test-dir "$BUILD" --output-on-failure -R 'bwd_narrow_items_8|LaunchConfig'
      run sanitize_narrow timeout 240 compute-sanitizer --tool memcheck \
        --error-exitcode 1 "$BUILD/tests/normkit_tests" \
        --gtest_filter='*BwdFewRows*/Cuda*:*BwdLargeShapes*/Cuda*' --gtest_brief=1
      knob_runs bench_narrow 300 "none NK_TUNE_BWD_NARROW_ITEMS=8 none NK_TUNE_BWD_NARROW_ITEMS=8" \
        --bwd-only --shapes "${NARROW_SHAPES:-29x17389,1x17389,64x17389,29x30001,29x40001,601x30001,128x4095,4096x4095,1024x16383,8192x2049,64x1001,9x1003}" ;;
    bwd_probe)  # where the backward's time goes at the shapes that miss their goals: per-kernel
      # GPU time at the card's own clocks (ncu --clock-control none), then the knobs' A/B over
      # PROBE_SHAPES (PROBE_SHAPES=sweep: the default sweep) under each of PROBE_CONFIGS
      shapes=${PROBE_SHAPES:-4096x1024,8192x2048,128x4096,4096x4096,29x17389,256x65536,2048x16384}
      ncu_shapes=$shapes
      [ "$shapes" = sweep ] && ncu_shapes=4096x1024,8192x2048,128x4096,4096x4096,29x17389,256x65536,2048x16384
      run ncu_bwd ncu --clock-control none --kernel-name regex:'rms_norm_bwd|reduce_slots' \
        --csv --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
        "$BUILD/tools/normkit" bench --reps 3 --bwd-only --shapes "$ncu_shapes"
      shape_args=(--shapes "$shapes")
      [ "$shapes" = sweep ] && shape_args=()
      knob_runs bench_probe 600 "${PROBE_CONFIGS:-NK_TUNE_BWD_ITEMS=0 NK_TUNE_BWD_ITEMS=1 NK_TUNE_BWD_CTAS_PER_SM=1 NK_TUNE_BWD_CTAS_PER_SM=3}" \
        --bwd-only "${shape_args[@]}" ;;
    modes)  # A/B over the plain forward, the quantized modes and the backward in one run
      # (mode_runs) of AB_MODES under AB_CONFIGS
      mode_runs "${AB_MODES:-plain tensor token block mxfp8 transposed}" "${AB_CONFIGS:-none}" ;;
    pending)  # the thirty-seventh session's prepared runs (docs/notes.md, its Next 0-1): the
      # CUDA forward and planner tests (fwd_lean_small_params new); the lean kernel on 64 bytes
      # of parameters (NK_TUNE_FWD_LEAN_PARAMS=1) against FwdParams, twice over small shapes;
      # x's loads without evict-last at the 32 MB shapes where torch.compile is 3 us ahead
      # (NK_TUNE_EVICT_LAST_MIN_MIB=0), twice; the lean kernel's sub-warp CTAs on few rows of
      # 128-1024 columns (taken by default since 06:46, not timed) against the pipelined kernel,
      # twice; the plain-kernel probes (rows, launch)
      run_fwd_tests ctest_pending
      for rep in a b; do
        knob_runs "bench_params_$rep" 60 "none NK_TUNE_FWD_LEAN_PARAMS=1" --fwd-only --shapes \
          1x4096,32x4096,128x4096,256x4096,512x4096,1x8192,132x2048,64x1024,1024x1024,1024x4096,4096x1024
        knob_runs "bench_evict_$rep" 60 "none NK_TUNE_EVICT_LAST_MIN_MIB=0" --fwd-only --shapes \
          16384x1024,8192x1024,8192x2048,4096x4096,4096x1024,2048x4096
        knob_runs "bench_subwarp_$rep" 60 "none NK_TUNE_FWD_LEAN_PIPELINE_MAX_ROWS=264" \
          --fwd-only --shapes 1x1024,8x512,64x512,200x256,264x128,128x128
      done
      run_probe rows_probe
      run_probe launch_probe
      run bench_pending_sweep "$BUILD/tools/normkit" bench --explain \
        --json "$LOGS/bench_pending_sweep.json" ;;
    defaults39)  # the thirty-ninth session's defaults (lean backward, 64-byte lean forward
      # parameters): the CUDA forward, backward and planner tests; the lean backward at one
      # vector per thread against two, twice, on rows of 1536-3072 columns; the sweep
      run_fwd_tests ctest_defaults39_fwd
      run ctest_defaults39_bwd ctest --test-dir "$BUILD" --output-on-failure -j"${CTEST_JOBS:-14}" \
        -R 'Bwd.*Cuda|GradCheck.*Cuda|bwd_lean|bwd_pipelined_common'
      for rep in a b; do
        knob_runs "bench_bwd_items_$rep" 90 "none NK_TUNE_BWD_ITEMS=1" --bwd-only --shapes \
          1024x2048,2048x2048,4096x2048,8192x2048,16384x2048,32768x2048,8192x1536,8192x2560,8192x3072,4096x3072
      done
      run bench_defaults39_sweep "$BUILD/tools/normkit" bench --explain \
        --json "$LOGS/bench_defaults39_sweep.json" ;;
    wide_plain)  # the plain forward's rows of 16K-32K columns split over clusters of 256-thread
      # CTAs, as the quantized forwards have by default (never timed on the plain forward at
      # that CTA size; 512-thread clusters of two were 1.04-1.15x slower): 1024x32768 trails
      # torch.compile by 4% (52.0 against 50.0 us). Twice, against the default
      for rep in a b; do
        knob_runs "bench_wide_plain_$rep" 60 \
          "none NK_TUNE_FWD_SPLIT_WIDE_ROWS=1,NK_TUNE_FWD_CLUSTER_THREADS=256" --fwd-only \
          --shapes 1024x32768,600x32768,2048x24576,2048x16384,4096x16384,4096x12288,256x65536
      done ;;
    lean_small)  # the lean backward (default since the thirty-ninth session) against the
      # pipelined kernel on few rows, where the 11:00 sweep read 1 x 4096 at 7.2 us (6.8 before),
      # and the one-vector rule's 2048-column plans, twice (needs only tools/normkit built)
      for rep in a b; do
        knob_runs "bench_lean_small_$rep" 60 "none NK_TUNE_BWD_LEAN=0" --bwd-only --shapes \
          1x4096,1x8192,32x4096,128x4096,256x4096,1x2048,1024x1024,8192x2048,2048x2048
      done ;;
    lean)  # the thirty-seventh session's default: the lean forward kernel for the common call
      # (NK_TUNE_FWD_LEAN=1), also on the few rows the pipelined kernel had
      # (NK_TUNE_FWD_LEAN_PIPELINE_MAX_ROWS=0). The CUDA forward and planner tests; the default
      # against each knob's old value, twice; then the lean kernel on many rows, one row per CTA
      # (rows of 1024, 2048, 4096 columns on CTAs of 32, 64, 128 threads, weight with x on every
      # CTA count), against the default plans; then the sweep
      run_fwd_tests ctest_lean
      for rep in a b; do
        knob_runs "bench_lean_$rep" 60 "none NK_TUNE_FWD_LEAN=0 NK_TUNE_FWD_LEAN_PIPELINE_MAX_ROWS=264" \
          --fwd-only --shapes 512x4096,512x2048,300x1024,512x5120,1x4096,128x4096,256x4096,1x8192,132x2048,32x4096,1x2048,64x1024,512x16384
      done
      for cfg in "32 4096x1024,16384x1024,1024x1024" "64 2048x2048,8192x2048" \
        "128 1024x4096,4096x4096"; do
        read -r threads shapes <<< "$cfg"
        many=NK_TUNE_FWD_CTA_THREADS=$threads,NK_TUNE_FWD_ROWS_PER_GROUP=1
        for rep in a b; do
          knob_runs "bench_many_${threads}_$rep" 60 "none $many $many,NK_TUNE_FWD_WEIGHT_FIRST=1048576" \
            --fwd-only --shapes "$shapes"
        done
      done
      run bench_lean_sweep "$BUILD/tools/normkit" bench --explain \
        --json "$LOGS/bench_lean_sweep.json" ;;
    lean_waves)  # the lean forward's one row per CTA on lean calls whose rows fill one wave
      # (NK_TUNE_FWD_LEAN_WAVES=1, thirty-seventh session): the CUDA forward and planner tests;
      # the default against 0, 2 and 4 waves, twice, over one-, two- and four-wave shapes; the sweep
      run_fwd_tests ctest_lean_waves
      for rep in a b; do
        knob_runs "bench_waves_$rep" 60 "none NK_TUNE_FWD_LEAN_WAVES=0 NK_TUNE_FWD_LEAN_WAVES=2 \
NK_TUNE_FWD_LEAN_WAVES=4" --fwd-only --shapes \
          1024x1024,4096x1024,2048x2048,1024x4096,8192x1024,4096x2048,2048x4096,3072x4096,16384x1024,8192x2048,4096x4096,512x4096
      done
      run bench_waves_sweep "$BUILD/tools/normkit" bench --explain \
        --json "$LOGS/bench_waves_sweep.json" ;;
    pending_python)  # the torch binding's GPU tests that the thirty-third session's device time
      # did not reach (its final commit's: test_torch_eager.py stopped at 179 passed)
      install_package &&
        for f in tests/python/test_torch_eager.py tests/python/test_torch_ops.py \
          tests/python/test_torch_module.py tests/python/test_extension.py; do
          run "pytest_$(basename "$f" .py)" env PYTHONUNBUFFERED=1 NK_REQUIRE_CUDA=1 \
            python3 -X faulthandler -m pytest "$f" -q -rs -p no:cacheprovider
        done ;;
    ncu_peer)  # ncu's detail sections for torch.compile's forward kernels (bench/peer_fwd_kernels.py)
      # at NCU_SHAPES (comma-separated; default 131072x128,65536x256), one call each
      run ncu_peer ncu --profile-from-start off --kernel-name regex:triton \
        --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
        python3 bench/peer_fwd_kernels.py "${NCU_SHAPES:-131072x128,65536x256}" ;;
    probe)  # knob A/Bs in one run: `normkit bench $PROBE_ARGS` over PROBE_SHAPES (default: the
      # sweep) under each of PROBE_CONFIGS (knobs joined by commas; "none": the defaults)
      shape_args=()
      [ -n "${PROBE_SHAPES:-}" ] && shape_args=(--shapes "$PROBE_SHAPES")
      # shellcheck disable=SC2086  # the bench arguments, one word each
      knob_runs bench_probe 600 "${PROBE_CONFIGS:-none}" ${PROBE_ARGS:-} "${shape_args[@]}" ;;
    inductor)  # the Triton code torch.compile generates for the peer composite
      run inductor env PYTHONUNBUFFERED=1 python3 bench/inductor_code.py --out "$LOGS/inductor" ;;
    order_ncu)  # the forward's run-order offset (docs/notes.md, thirty-fourth and thirty-fifth
      # sessions): the kernels' own durations, with the bench's L2 state and the card's clocks,
      # of 1x4096's and 4096x1024's forward alone and after 8192x2048's backward. If they
      # differ, the kernel itself is slower after a backward; if not, the time goes between
      # the events and the kernel (launch, queue). Twice each, alternating.
      for rep in a b; do
        run "ncu_order_alone_$rep" ncu --cache-control none --clock-control none --csv \
          --kernel-name regex:'rms_norm' --metrics gpu__time_duration.sum,dram__bytes_read.sum \
          "$BUILD/tools/normkit" bench --reps 20 --fwd-only --shapes 1x4096,4096x1024
        run "ncu_order_after_bwd_$rep" ncu --cache-control none --clock-control none --csv \
          --kernel-name regex:'rms_norm' --metrics gpu__time_duration.sum,dram__bytes_read.sum \
          "$BUILD/tools/normkit" bench --reps 20 --shapes 8192x2048,1x4096,4096x1024
      done ;;
    carveout)  # the run-order offset against the shared-memory carveout that every normkit
      # kernel prefers (NK_TUNE_SMEM_CARVEOUT: the driver's choice, 0, 100 percent): the CUDA
      # forward and backward tests at 100, then 1x4096's and 4096x1024's forward alone and after
      # 8192x2048's backward under each, three times. If the offset is an L1/shared-memory
      # reconfiguration between the backward's kernels and the forward's, one fixed carveout
      # removes it (docs/notes.md, thirty-fifth session, Next 1)
      run ctest_carveout ctest --test-dir "$BUILD" --output-on-failure -R smem_carveout_max_shared
      for rep in a b c; do
        for cfg in none NK_TUNE_SMEM_CARVEOUT=0 NK_TUNE_SMEM_CARVEOUT=100; do
          knob_array "$cfg"
          run "carveout_${cfg//[^A-Za-z0-9_]/_}_alone_$rep" env "${knobs[@]}" \
            "$BUILD/tools/normkit" bench --fwd-only --shapes 1x4096,4096x1024
          run "carveout_${cfg//[^A-Za-z0-9_]/_}_after_bwd_$rep" env "${knobs[@]}" \
            "$BUILD/tools/normkit" bench --shapes 8192x2048,1x4096,4096x1024
        done
      done ;;
    dram)  # DRAM bytes per kernel with the bench's own L2 state (no ncu cache flush, card's
      # clocks) at DRAM_SHAPES; then the pipelined backward's SASS-level stall profile at
      # 4096x1024 (Nsight Compute source page, as CSV)
      run ncu_dram ncu --cache-control none --clock-control none \
        --kernel-name regex:'rms_norm|reduce' --csv \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_lookup_miss.sum \
        "$BUILD/tools/normkit" bench --reps 3 \
        --shapes "${DRAM_SHAPES:-4096x1024,8192x2048,128x4096,4096x4096,8192x8192}"
      run ncu_source ncu --set full --import-source no --kernel-name regex:'rms_norm_bwd' \
        --launch-skip 4 --launch-count 1 -o "$LOGS/bwd_4096x1024" \
        "$BUILD/tools/normkit" bench --reps 3 --bwd-only --shapes 4096x1024 &&
      run ncu_source_page ncu -i "$LOGS/bwd_4096x1024.ncu-rep" --page source --csv \
        --print-source sass
      run ncu_details ncu -i "$LOGS/bwd_4096x1024.ncu-rep" --page details ;;
    after_gemm)  # the norm's forward right after a GEMM, normkit against torch eager and
      # torch.compile (bench/norm_after_gemm.py; needs `install`), under the driver's carveout
      # and NK_TUNE_SMEM_CARVEOUT 0 and 100
      for cfg in none NK_TUNE_SMEM_CARVEOUT=0 NK_TUNE_SMEM_CARVEOUT=100; do
        knob_array "$cfg"
        run "after_gemm_${cfg//[^A-Za-z0-9_]/_}" env PYTHONUNBUFFERED=1 "${knobs[@]}" python3 \
          bench/norm_after_gemm.py --json "$OUT/after_gemm_${cfg//[^A-Za-z0-9_]/_}.json"
      done ;;
    compile_gap)  # torch.compile's Triton forward against normkit's where it came out faster
      # (1x4096, 128x4096, 4096x1024 at 05:07 on 2026-11-27; docs/notes.md, thirty-sixth session):
      # both timed with events in one process over GAP_SHAPES, as the sweep times (gap_events),
      # and with the GPU held 300 us behind the host after each flush (gap_events_lead:
      # torch.compile's host time per call can exceed the flush's); then each kernel's own duration,
      # grid, block and registers under ncu with the events' L2 state and clocks
      # (bench/kernel_gap.py), the full section set of one launch each at 128x4096 and
      # 4096x1024, and normkit's forward under the forward knobs (`normkit bench`)
      run gap_events env PYTHONUNBUFFERED=1 python3 bench/norm_after_gemm.py --settings flush \
        --impls normkit,torch_compile --json "$OUT/gap_events.json" \
        --shapes "${GAP_SHAPES:-1x4096,32x4096,128x4096,512x4096,1024x4096,1024x1024,4096x1024,16384x1024,2048x2048}"
      run gap_events_lead env PYTHONUNBUFFERED=1 python3 bench/norm_after_gemm.py --settings flush \
        --impls normkit,torch_compile --lead-us 300 --json "$OUT/gap_events_lead.json" \
        --shapes "${GAP_SHAPES:-1x4096,32x4096,128x4096,512x4096,1024x4096,1024x1024,4096x1024,16384x1024,2048x2048}"
      run gap_ncu timeout 150 ncu --profile-from-start off --cache-control none --clock-control none \
        --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__occupancy_limit_registers \
        python3 bench/kernel_gap.py --reps 20
      run gap_ncu_full timeout 150 ncu --profile-from-start off --set full --import-source no \
        --kernel-name regex:'rms_norm|triton' --launch-count 4 -o "$LOGS/gap_full" \
        python3 bench/kernel_gap.py --reps 1 --shapes 128x4096,4096x1024 &&
        run gap_ncu_full_details ncu -i "$LOGS/gap_full.ncu-rep" --page details
      knob_runs gap_knobs 30 "none NK_TUNE_EVICT_LAST_MIN_MIB=0 NK_TUNE_FWD_ROWS_PER_GROUP=1 \
NK_TUNE_FWD_ITEMS=2 NK_TUNE_FWD_CTA_THREADS=128 NK_TUNE_FWD_CTA_THREADS=512 \
NK_TUNE_FWD_PIPELINE_MAX_ROWS=8192 NK_TUNE_FWD_EXACT=0 NK_TUNE_FWD_CTAS_PER_SM=4 none" \
        --fwd-only --shapes 1x4096,128x4096,4096x1024 ;;
    gap64mb)  # torch.compile's forward against normkit's at every 16M-element bf16 shape
      # (64 MiB moved), GPU 300 us behind the host so neither side's host time shows: at
      # 16384x1024 Triton read 24.5 us against our 27.7 (13:22 on 2026-11-27); is that gap there
      # at 8192x2048 and 4096x4096 too (both miss their goals, 27.4 us)? Then ncu's full section
      # set of both kernels at 16384x1024 and 4096x4096, one launch each (needs `install`)
      run gap64mb_events env PYTHONUNBUFFERED=1 python3 bench/norm_after_gemm.py --settings flush \
        --impls normkit,torch_compile --lead-us 300 --json "$OUT/gap64mb_events.json" \
        --shapes 16384x1024,8192x2048,4096x4096,2048x8192,1024x16384,32768x512
      run gap64mb_ncu timeout 200 ncu --profile-from-start off --set full --import-source no \
        --kernel-name regex:'rms_norm|triton' --launch-count 4 -o "$LOGS/gap64mb" \
        python3 bench/kernel_gap.py --reps 1 --shapes 16384x1024,4096x4096 &&
        run gap64mb_ncu_details ncu -i "$LOGS/gap64mb.ncu-rep" --page details
      rm -f "$LOGS/gap64mb.ncu-rep" ;;  # (the details page holds what is read; the report is ~80 MB)
    lean_many)  # the 64 MiB forwards (forty-first session): torch.compile's one-warp programs
      # read 24.4-24.6 us at 16384x1024 and 32768x512 (ours 27.4-27.5) and ncu gives the two
      # kernels the same DRAM bytes. Ours loads x evict-last, Triton's with no hint. Each
      # combination of the lean kernel on many waves (Triton's geometry) and x's policy, twice
      for rep in a b; do
        knob_runs "bench_many_$rep" 60 "none NK_TUNE_FWD_LEAN_WAVES=8 \
NK_TUNE_FWD_LEAN_WAVES=8,NK_TUNE_EVICT_LAST_MIN_MIB=0 NK_TUNE_FWD_LEAN_WAVES=8,NK_TUNE_EVICT_FIRST_MAX_MIB=64 \
NK_TUNE_EVICT_LAST_MIN_MIB=0 NK_TUNE_EVICT_FIRST_MAX_MIB=64" --fwd-only --shapes \
          16384x1024,32768x512,8192x1024,65536x256,8192x2048,4096x4096,2048x8192
      done ;;
    harness_policy)  # lean_many's settings in torch's harness (bench/norm_after_gemm.py: torch
      # tensors, `zero_()` flush, GPU 300 us behind the host), where Triton reads 24.5 us at
      # 16384x1024 (needs `install`); ncu of our kernel under each beside Triton's; the PTX that
      # Triton makes at 16384x1024 and 32768x512 (one cache per shape)
      sections=(--section SpeedOfLight --section Occupancy --section LaunchStats
        --section SchedulerStats --section WarpStateStats --section InstructionStats
        --section MemoryWorkloadAnalysis --section WorkloadDistribution)
      for cfg in none NK_TUNE_FWD_LEAN_WAVES=8 NK_TUNE_FWD_LEAN_WAVES=8,NK_TUNE_EVICT_LAST_MIN_MIB=0 \
        NK_TUNE_EVICT_LAST_MIN_MIB=0 none; do
        name=${cfg//[^A-Za-z0-9_]/_}
        while [ -e "$OUT/harness_$name.json" ]; do name=${name}_again; done
        env_knobs=$(knob_words "$cfg") impls=normkit
        [ "$cfg" = none ] && impls=normkit,torch_compile
        # shellcheck disable=SC2086  # the knobs, one word each
        run "harness_$name" env $env_knobs PYTHONUNBUFFERED=1 python3 bench/norm_after_gemm.py \
          --settings flush --impls "$impls" --lead-us 300 --json "$OUT/harness_$name.json" \
          --shapes 16384x1024,32768x512,8192x2048,4096x4096
      done
      for cfg in none NK_TUNE_FWD_LEAN_WAVES=8 NK_TUNE_FWD_LEAN_WAVES=8,NK_TUNE_EVICT_LAST_MIN_MIB=0; do
        env_knobs=$(knob_words "$cfg")
        # shellcheck disable=SC2086  # the knobs, one word each
        run "ncu_many_${cfg//[^A-Za-z0-9_]/_}" env $env_knobs ncu "${sections[@]}" \
          --kernel-name regex:rms_norm --launch-skip 3 --launch-count 1 \
          "$BUILD/tools/normkit" bench --fwd-only --reps 1 --shapes 16384x1024
      done
      run ncu_many_triton ncu "${sections[@]}" --profile-from-start off \
        --kernel-name regex:triton --launch-count 1 \
        python3 bench/kernel_gap.py --reps 1 --impls torch_compile --shapes 16384x1024
      for shape in 16384x1024 32768x512; do
        cache=$(mktemp -d)  # (a fresh cache: the kernel is compiled, so its PTX is written)
        run "inductor_ptx_$shape" env TRITON_CACHE_DIR="$cache/triton" \
          TORCHINDUCTOR_CACHE_DIR="$cache/inductor" PYTHONUNBUFFERED=1 \
          python3 bench/inductor_code.py --out "$LOGS/inductor" --shapes "$shape"
        mkdir -p "$LOGS/ptx_$shape" && find "$cache" -name '*.ptx' -exec cp {} "$LOGS/ptx_$shape/" \;
        rm -rf "$cache"
      done ;;
    flush_demote)  # the bench's flush now first demotes the inputs' L2 lines to normal
      # priority (forty-first session: at 128x4096 our evict-last x outlived the flush and the
      # forward read none of it from HBM). Its test; the sweep and the models set with and
      # without (--keep-l2-priority), twice, alternated; DRAM bytes per kernel (no ncu cache
      # control: the bench's own L2 state) at small shapes under each
      run ctest_l2 ctest --test-dir "$BUILD" --output-on-failure -R 'L2Priority'
      for rep in a b; do
        for mode in demote keep; do
          flag=""
          [ "$mode" = keep ] && flag=--keep-l2-priority
          # shellcheck disable=SC2086  # the flag, one word or none
          run "bench_flush_${mode}_$rep" "$BUILD/tools/normkit" bench --explain $flag \
            --json "$LOGS/bench_flush_${mode}_$rep.json"
          # shellcheck disable=SC2086
          run "bench_flush_models_${mode}_$rep" "$BUILD/tools/normkit" bench $flag --shapes models \
            --json "$LOGS/bench_flush_models_${mode}_$rep.json"
        done
      done
      for mode in demote keep; do
        flag=""
        [ "$mode" = keep ] && flag=--keep-l2-priority
        # shellcheck disable=SC2086
        run "ncu_flush_$mode" ncu --cache-control none --clock-control none --csv \
          --kernel-name regex:'rms_norm|reduce' \
          --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
          "$BUILD/tools/normkit" bench $flag --reps 3 --shapes 1x4096,128x4096,512x4096,4096x1024,29x17389
      done ;;
    gap_dram)  # torch.compile leads by ~3 us at 16384x1024 and 32768x512 in events, not under
      # ncu's own (clean) flush (forty-first session). Each kernel with the events' L2 state (no
      # ncu cache control, card clocks): duration and DRAM bytes read and written, ours (default
      # and lean on one-warp CTAs) and Triton's, 20 launches each (needs `install`); since the
      # forty-second session also 4096x1024 and 1024x4096, where torch.compile leads in
      # compare.py (9.5 against 10.4 us at 4096x1024)
      for cfg in none NK_TUNE_FWD_LEAN_WAVES=8; do
        env_knobs=$(knob_words "$cfg")
        # shellcheck disable=SC2086  # the knobs, one word each
        run "gap_dram_${cfg//[^A-Za-z0-9_]/_}" env $env_knobs timeout 200 ncu --profile-from-start off \
          --cache-control none --clock-control none --csv --kernel-name regex:'rms_norm|triton' \
          --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_write.sum \
          python3 bench/kernel_gap.py --reps 20 --shapes 16384x1024,32768x512,4096x4096,4096x1024,1024x4096
      done ;;
    weak_stores)  # the lean and rows-per-group forwards' y by weak st.global instead of
      # __stcg's strong GPU-scope stores (NK_TUNE_FWD_WEAK_STORES, forty-first session: Triton's
      # stores are weak): its tests; A/B twice on the default plans and on lean at many waves
      # (LEAN_WAVES=8); then in torch's harness beside Triton (needs `install`)
      run ctest_weak ctest --test-dir "$BUILD" --output-on-failure -R 'fwd_lean_weak_stores|fwd_weak_stores'
      for rep in a b; do
        knob_runs "bench_weak_$rep" 60 "none NK_TUNE_FWD_WEAK_STORES=1 NK_TUNE_FWD_LEAN_WAVES=8 \
NK_TUNE_FWD_LEAN_WAVES=8,NK_TUNE_FWD_WEAK_STORES=1" --fwd-only --shapes \
          16384x1024,8192x2048,4096x4096,8192x1024,4096x1024,1024x1024,512x4096,128x4096,1x4096,8192x4096,8192x8192,16384x4096
      done
      for cfg in NK_TUNE_FWD_LEAN_WAVES=8 NK_TUNE_FWD_LEAN_WAVES=8,NK_TUNE_FWD_WEAK_STORES=1; do
        env_knobs=$(knob_words "$cfg")
        # shellcheck disable=SC2086  # the knobs, one word each
        run "harness_weak_${cfg//[^A-Za-z0-9_]/_}" env $env_knobs PYTHONUNBUFFERED=1 \
          python3 bench/norm_after_gemm.py --settings flush --impls normkit,torch_compile \
          --lead-us 300 --json "$LOGS/harness_weak_${cfg//[^A-Za-z0-9_]/_}.json" \
          --shapes 16384x1024,8192x2048,4096x4096
      done ;;
    flush_retune)  # the defaults that earlier sessions chose while the flush left part of x
      # in L2 (forty-second session: at 4096x1024 the old flush left 91% of x cached, and
      # EVICT_LAST_MIN_MIB's 14% gain there was that). Under the demoting flush, twice each:
      # x's evict-last policy and the lean forward on many waves over the sweep and the models
      # set; the 1K-4K-column forward and backward plans of 2-16 MB
      for rep in a b; do
        knob_runs "retune_sweep_$rep" 90 "none NK_TUNE_EVICT_LAST_MIN_MIB=0 NK_TUNE_FWD_LEAN_WAVES=8 \
NK_TUNE_EVICT_LAST_MIN_MIB=0,NK_TUNE_FWD_LEAN_WAVES=8"
        knob_runs "retune_models_$rep" 90 "none NK_TUNE_EVICT_LAST_MIN_MIB=0 NK_TUNE_FWD_LEAN_WAVES=8 \
NK_TUNE_EVICT_LAST_MIN_MIB=0,NK_TUNE_FWD_LEAN_WAVES=8" --shapes models
      done
      mid_shapes=4096x1024,2048x1024,8192x1024,4096x768,4096x2048,1024x4096,2048x4096,512x4096
      for rep in a b; do
        knob_runs "retune_fwd_$rep" 40 "none NK_TUNE_FWD_LEAN_PIPELINE_MAX_ROWS=100000 \
NK_TUNE_FWD_LEAN=0 NK_TUNE_FWD_LEAN=0,NK_TUNE_FWD_PIPELINE_MAX_ROWS=100000 NK_TUNE_FWD_WEIGHT_FIRST=0 \
NK_TUNE_FWD_ROWS_PER_GROUP=1" --fwd-only --shapes "$mid_shapes"
        knob_runs "retune_bwd_$rep" 40 "none NK_TUNE_BWD_MID_ROW_CTA_THREADS=256 \
NK_TUNE_BWD_PIPELINED_CTAS_PER_SM=2 NK_TUNE_BWD_PIPELINED_CTAS_PER_SM=4 NK_TUNE_BWD_ITEMS=1 \
NK_TUNE_BWD_LEAN=0 NK_TUNE_BWD_CTA_THREADS=512" --bwd-only --shapes "$mid_shapes"
      done ;;
    fp32_wide)  # float32 1024x32768's forward read 105 us (86% of copy) on 2026-11-26 and
      # 115-116 (78%) since 2026-11-27 13:24 (forty-second session): the plan of each suspect
      # default against its former setting, twice, with --explain; and the backward of few
      # rows of 4096 columns at one vector per thread (0.95x at 512x4096 in flush_retune)
      for rep in a b; do
        knob_runs "fp32_wide_$rep" 40 "none NK_TUNE_FWD_WHOLE_WARPS=0 NK_TUNE_FWD_SPLIT_WIDE_ROWS=0 \
NK_TUNE_FWD_SPLIT_WIDE_ROWS=1 NK_TUNE_FWD_ROWS_PER_GROUP=1 NK_TUNE_FWD_WEIGHT_FIRST=0 \
NK_TUNE_FWD_PIPELINE_CLUSTERS=1" --fwd-only --dtype fp32 --shapes \
          1024x32768,512x32768,2048x32768,1024x16384,4096x12288,256x65536
        knob_runs "few_bwd_$rep" 30 "none NK_TUNE_BWD_ITEMS=1" --bwd-only --shapes \
          128x4096,256x4096,512x4096,1024x4096,64x8192,128x2048
      done ;;
    fp32_split)  # float32 rows split over clusters by default (plain_fwd_facts, after
      # fp32_wide): the forward tests and the planner's; the float32 sweep, plain and with a
      # residual, against the former plans (NK_TUNE_FWD_SPLIT_WIDE_ROWS=0: for the plain
      # forward what setting 2 did before), twice
      run ctest_fp32_split ctest --test-dir "$BUILD" --output-on-failure -j"${CTEST_JOBS:-14}" \
        -R 'FwdFloat32WideRows|FwdLargeShapes|FwdModelShapes|LaunchConfig|Fwd.*Cuda'
      for rep in a b; do
        knob_runs "fp32_split_$rep" 90 "none NK_TUNE_FWD_SPLIT_WIDE_ROWS=0" --fwd-only --dtype fp32
        knob_runs "fp32_split_residual_$rep" 90 "none NK_TUNE_FWD_SPLIT_WIDE_ROWS=0" --fwd-only \
          --dtype fp32 --residual
      done ;;
    bwd_4096)  # the lean backward of 4096-column rows at one vector per thread on 512-thread
      # CTAs (fp32_wide's few_bwd: 0.93-0.96x at 512 and 1024 rows, 1.02-1.03x at 128), from 128
      # to 16384 rows, twice; what a rule for 4096 columns beside 2048's would give
      for rep in a b; do
        knob_runs "bwd_4096_$rep" 60 "none NK_TUNE_BWD_ITEMS=1" --bwd-only --shapes \
          128x4096,256x4096,384x4096,512x4096,768x4096,1024x4096,2048x4096,4096x4096,8192x4096,16384x4096
      done ;;
    fp32_mixed)  # the float32 split rule (plain_fwd_facts keys on x's size) on calls it reaches
      # unmeasured: float32 x beside a bf16 y (and a bf16 weight), plain and with a residual,
      # against the former plans (NK_TUNE_FWD_SPLIT_WIDE_ROWS=0), twice (forty-second session)
      for rep in a b; do
        knob_runs "fp32_mixed_$rep" 90 "none NK_TUNE_FWD_SPLIT_WIDE_ROWS=0" --fwd-only \
          --dtype fp32 --out-dtype bf16 --weight-dtype bf16
        knob_runs "fp32_mixed_residual_$rep" 90 "none NK_TUNE_FWD_SPLIT_WIDE_ROWS=0" --fwd-only \
          --dtype fp32 --out-dtype bf16 --weight-dtype bf16 --residual
      done ;;
    build_one_form)  # a second build, build-device-one-form, with every ReadPolicy load in one
      # form (-DNK_ONE_FORM_LOADS=ON; docs/notes.md, forty-third session), beside build-device
      run configure_one_form cmake -S . -B build-device-one-form -G Ninja -DNK_CUDA_ARCHITECTURES=90 \
        -DCMAKE_BUILD_TYPE=Release -DNK_ONE_FORM_LOADS=ON &&
        run build_one_form cmake --build build-device-one-form -j16 ;;
    one_form)  # A/B of the two builds (`build` and `build_one_form` first): the one-form build's
      # CUDA tests of both passes, then the sweep, the models set, float32, the residual and
      # three quantized forwards from each build in turn, twice; JSON
      # one_form_<set>_<default|one_form>_<a|b> (bench/ab.py). Run on 2026-11-27 22:49
      # (T2249-h100-one-form): the quantized forwards gained and now take one form by default
      run ctest_one_form ctest --test-dir build-device-one-form --output-on-failure \
        -j"${CTEST_JOBS:-14}" -R 'Fwd.*Cuda|Bwd.*Cuda|fwd_lean|GradCheck.*Cuda'
      for rep in a b; do
        for set in "sweep" "models --shapes models" "fp32 --dtype fp32" "residual --residual" \
          "tensor --quant tensor --fwd-only" "block --quant block --fwd-only" \
          "transposed --quant tensor --transposed --fwd-only"; do
          read -r label set_args <<< "$set"
          for build in build-device build-device-one-form; do
            tag=default
            [ "$build" = build-device-one-form ] && tag=one_form
            # shellcheck disable=SC2086  # set_args: bench options, one word each
            run "one_form_${label}_${tag}_$rep" timeout 90 "$build/tools/normkit" bench $set_args \
              --json "$LOGS/one_form_${label}_${tag}_$rep.json"
          done
        done
      done ;;
    bwd_tail)  # the small backwards' dweight reduction under the demoting flush: the second
      # kernel launched early (EARLY_DEPENDENT 1: at the main kernel's start, 2: after each CTA's
      # rows), in the grid after a barrier (REDUCE_IN_GRID), or on more CTAs (REDUCE_KERNEL), all
      # measured slower or level under the former flush (ninth and thirty-fourth sessions); twice
      for rep in a b; do
        knob_runs "bwd_tail_$rep" 60 "none NK_TUNE_BWD_EARLY_DEPENDENT=1 NK_TUNE_BWD_EARLY_DEPENDENT=2 \
NK_TUNE_BWD_REDUCE_IN_GRID=1 NK_TUNE_BWD_REDUCE_KERNEL=1" --bwd-only --shapes \
          4096x1024,2048x1024,8192x1024,32768x128,16384x512,2048x2048,8192x2048,128x4096
      done ;;
    weight_first)  # the forward of few rows on registers CTAs that load the weight with x
      # (NK_TUNE_FWD_WEIGHT_FIRST, thirty-sixth session): A/B against the default (pipelined)
      # plans, twice; its CUDA forward tests; the kernels' own durations under ncu
      local_shapes=1x4096,32x4096,128x4096,256x4096,64x8192,132x2048,1x8192,128x1024,512x4096
      first=NK_TUNE_FWD_PIPELINE_MAX_ROWS=0,NK_TUNE_FWD_WEIGHT_FIRST=2
      for rep in a b; do
        knob_runs "wf_$rep" 30 "none NK_TUNE_FWD_PIPELINE_MAX_ROWS=0 $first $first,NK_TUNE_FWD_ITEMS=2 \
$first,NK_TUNE_FWD_ITEMS=1 NK_TUNE_FWD_PIPELINE_MAX_ROWS=0,NK_TUNE_FWD_WEIGHT_FIRST=4" \
          --fwd-only --shapes "$local_shapes"
      done
      run ctest_weight_first ctest --test-dir "$BUILD" --output-on-failure -j8 \
        -R 'fwd_weight_first|LaunchConfig'
      for cfg in none "$first,NK_TUNE_FWD_ITEMS=2" "$first,NK_TUNE_FWD_ITEMS=1"; do
        knob_array "$cfg"
        run "wf_ncu_${cfg//[^A-Za-z0-9_]/_}" timeout 60 env "${knobs[@]}" ncu --cache-control none \
          --clock-control none --csv --kernel-name regex:'rms_norm' \
          --metrics gpu__time_duration.sum,launch__registers_per_thread,smsp__inst_executed.sum \
          "$BUILD/tools/normkit" bench --reps 20 --fwd-only --shapes 1x4096,128x4096
      done ;;
    fwd_sass_counts)  # where the forward's instructions go (docs/notes.md, thirty-sixth session,
      # Next 1: 400-490 per warp against Triton's 139 at 128x4096): each SASS instruction's
      # executed count (ncu source page) of one launch of the pipelined kernel at 128x4096 (the
      # default), the registers kernel with the weight loaded with x there, the lean kernel
      # there, and the registers kernel at 4096x1024
      for cfg in "pipelined_128x4096 none 128x4096" \
        "weight_first_128x4096 NK_TUNE_FWD_PIPELINE_MAX_ROWS=0 128x4096" \
        "lean_128x4096 NK_TUNE_FWD_PIPELINE_MAX_ROWS=0,NK_TUNE_FWD_LEAN=1 128x4096" \
        "registers_4096x1024 none 4096x1024"; do
        read -r name knob shape <<< "$cfg"
        knob_array "$knob"
        run "sass_$name" env "${knobs[@]}" ncu --set full \
          --import-source no --kernel-name regex:'rms_norm_fwd' --launch-skip 4 --launch-count 1 \
          -o "$LOGS/sass_$name" "$BUILD/tools/normkit" bench --reps 3 --fwd-only --shapes "$shape" &&
          run "sass_${name}_source" ncu -i "$LOGS/sass_$name.ncu-rep" --page source --csv \
            --print-source sass
        rm -f "$LOGS/sass_$name.ncu-rep"
      done ;;
    aftermath)  # the GEMM after the norm, with normkit's evict-last reads and without
      # (bench/l2_aftermath.py; needs `install`)
      run aftermath env PYTHONUNBUFFERED=1 python3 bench/l2_aftermath.py --json "$OUT/aftermath.json"
      run aftermath_normal env PYTHONUNBUFFERED=1 NK_TUNE_EVICT_LAST_MIN_MIB=0 python3 \
        bench/l2_aftermath.py --json "$OUT/aftermath_normal.json" ;;
    sanitize)
      run sanitize compute-sanitizer --tool memcheck --error-exitcode 1 \
        "$BUILD/tools/normkit" check --quick --backend cuda ;;
    *) echo "unknown step $step"; status=1 ;;
  esac
done
exit $status
