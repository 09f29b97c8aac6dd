// The `normkit` command-line tool: argument parsing and dispatch to the subcommands.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include "bench_command.h"
#include "check_command.h"
#include "info_command.h"
#include "normkit/normkit.h"
#include "shapes.h"
#include "text_format.h"

namespace {

// CLI11 validator: accepts the text when parse_shapes does, else returns its message.
std::string validate_shapes(const std::string& text) {
  try {
    nktool::parse_shapes(text);
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"normkit: RMSNorm forward and backward kernels for CUDA GPUs and CPUs.\n"
               "Inspect the build and devices (info), check every backend against a float64\n"
               "reference (check), or time the kernels against a measured copy ceiling (bench)."};
  app.set_version_flag("--version", std::string("normkit ") + nk_version());
  app.require_subcommand(1);
  app.fallthrough(false);

  app.footer("Run 'normkit SUBCOMMAND --help' for the options of each subcommand.");
  app.add_subcommand("info", "Show the version, the build, the devices and the bench backend")
      ->footer("Prints the normkit version, whether the CUDA backend is built, each CUDA device "
               "(name, compute capability, SMs, L2 size, shared memory per SM and per block, "
               "memory size, clocks and bus width), the CPU's logical cores, and the backend "
               "'normkit bench --backend auto' would pick.");

  nktool::CheckOptions check;
  CLI::App* check_cmd =
      app.add_subcommand("check", "Check every backend against a float64 reference");
  check_cmd->footer(
      "Runs random cases (hidden sizes 1 to 262147, odd row counts, every x/weight/y dtype "
      "combination, strided rows, bias, zero-centered weight, residual, pointers off 16-byte "
      "alignment, in-place) through each backend's forward (y, residual_out, rstd) and backward "
      "(dx, dweight, dbias) with fresh random inputs and poisoned outputs, and compares every "
      "output with the float64 reference; also fails on writes outside an output and on modified "
      "inputs. Prints one line per case and backend with the worst error per output. Then the "
      "quantized forward: every mode (tensor with amax and y transposed, token with and without "
      "scale_ub, block 32/64/128, mxfp8) x y dtype (e4m3, e5m2, int8 where allowed), with and "
      "without residual, bias and zero-centered weight, saturating scales and large magnitudes, "
      "against the float64 quantized reference by its documented rule (codes exact except "
      "counted, bounded rounding-boundary cases; scales, amax, y_t, residual_out, rstd), one line "
      "per case and backend. Ends with 'check: N passed, M failed[, K skipped (why)]'. Exit code "
      "0 only if nothing failed and something was checked.");
  check_cmd->add_option("--backend", check.backend,
                        "Backends to check: cpu, cuda, or all (every backend this build has; one "
                        "without a usable device is reported as skipped)")
      ->check(CLI::IsMember({"cpu", "cuda", "all"}))
      ->capture_default_str();
  check_cmd->add_flag("--quick", check.quick,
                      "Run a small case list (a few seconds) instead of the full one (about a "
                      "minute on two CPU cores)");
  check_cmd->add_option("--seed", check.seed,
                        "Seed of the case list and the random inputs; the same seed reproduces "
                        "the same run")
      ->check([](const std::string& text) {
        return !text.empty() && text[0] == '-' ? std::string("the seed must be >= 0, got " + text)
                                               : std::string();
      })
      ->capture_default_str();
  check_cmd->add_flag("--quant", check.quant_only,
                      "Run only the quantized-forward cases (every quant mode and y dtype)");
  check_cmd->add_flag("--verbose,-v", check.verbose,
                      "Also print each case's layout (strides, pointer offsets), every "
                      "comparison in full, and per-case time");

  nktool::BenchOptions bench;
  CLI::App* bench_cmd =
      app.add_subcommand("bench", "Time forward and backward against the measured copy bandwidth");
  bench_cmd->footer(
      "Per shape: time of one call (median), GB/s by an explicit byte count (forward reads x, "
      "w (and bias) and writes y; backward reads x, dy and w and writes dx and dweight (and "
      "dbias); w, bias, dweight and dbias in the weight's dtype; rstd not counted), % of the "
      "copy bandwidth measured in the same run, and the floor (bytes / copy "
      "bandwidth). On CUDA: warm-up, then per repetition an L2 flush (the inputs' cached lines "
      "set back to normal eviction priority, then a memset of >= 2x L2), a CUDA event, one "
      "normkit call, an event; the copy ceiling is a device-to-device "
      "cudaMemcpyAsync timed the same way. On the CPU: std::chrono per call and a multithreaded "
      "host memcpy. Inputs are random, weight near 1 (near 0 with --zero-centered), eps 1e-6. "
      "Progress goes to stderr.");
  bench_cmd->add_option("--backend", bench.backend,
                        "auto (the GPU if one is usable, else the CPU), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  bench_cmd->add_option("--shapes", bench.shapes,
                        std::string("Comma-separated ROWSxHIDDEN items and shape sets: ") +
                            nktool::shape_sets_help() +
                            ". Default: sweep; on the CPU the default keeps the shapes with "
                            "<= 32 Mi elements")
      ->check(validate_shapes);
  bench_cmd->add_option("--dtype", bench.dtype,
                        "Dtype of x, dy and dx (and residual), of y unless --out-dtype, and "
                        "of the weight unless --weight-dtype: bf16, fp16 or fp32")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}))
      ->capture_default_str();
  bench_cmd->add_option("--weight-dtype", bench.weight_dtype,
                        "Dtype of the weight, bias, dweight and dbias: fp32, fp16 or bf16 "
                        "(default: --dtype); the bytes count them in this dtype")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
      ->type_name("DTYPE");
  bench_cmd->add_option("--out-dtype", bench.out_dtype,
                        "Dtype of the forward's y: fp32, fp16 or bf16 (default: --dtype; not with "
                        "--quant); the backward's dy and dx stay in --dtype")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
      ->type_name("DTYPE");
  bench_cmd->add_flag("--bias", bench.bias,
                      "Add a bias (random values, the weight's dtype): the forward also reads "
                      "it, the backward also writes dbias (counted in the bytes); with --quant, "
                      "the quantized forward takes it too");
  bench_cmd->add_flag("--no-weight", bench.no_weight,
                      "Normalize without a weight (scale 1, as nn.RMSNorm(elementwise_affine="
                      "False)): the forward reads none, the backward writes no dweight (neither "
                      "counted in the bytes)");
  bench_cmd->add_flag("--zero-centered", bench.zero_centered,
                      "Scale by (1 + weight), the Gemma convention, with a weight near 0 (same "
                      "bytes)");
  bench_cmd->add_option("--json", bench.json_path,
                        "Also write the results as JSON to FILE (device, UTC date, command line, "
                        "version, copy bandwidth, and per shape median/min/p90 us, bytes, GB/s, "
                        "% of copy)")
      ->type_name("FILE");
  bench_cmd->add_flag("--explain", bench.explain,
                      "Print the CUDA launch configuration chosen for each shape");
  CLI::Option* reps_opt =
      bench_cmd
          ->add_option("--reps", bench.reps,
                       "Timed repetitions per shape and pass (default 100; 10 on the CPU backend "
                       "unless given)")
          ->check(CLI::Range(1, 100000));
  CLI::Option* fwd_only = bench_cmd->add_flag("--fwd-only", bench.fwd_only,
                                              "Time only the forward");
  CLI::Option* bwd_only = bench_cmd->add_flag(
      "--bwd-only", bench.bwd_only,
      "Time only the backward (dx and dweight, and dbias with --bias; one untimed forward "
      "supplies rstd)");
  fwd_only->excludes(bwd_only);
  bench_cmd->add_flag("--residual", bench.residual,
                      "Fuse a residual add: the forward also reads residual and writes "
                      "residual_out, the backward also reads dresidual_out (counted in the bytes)");
  bench_cmd
      ->add_option("--quant", bench.quant,
                   "Time the forward with a quantized y: tensor (scale 1, amax), token (per-row "
                   "scales), block/block64/block32 (per-block float32 scales) or mxfp8 (1x32 "
                   "e8m0 scales); the bytes count x, the codes and the scales")
      ->check(CLI::IsMember({"tensor", "token", "block", "block128", "block64", "block32", "mxfp8"}));
  bench_cmd->add_option("--quant-dtype", bench.quant_dtype, "Dtype of the quantized y: e4m3, e5m2 or int8")
      ->check(CLI::IsMember({"e4m3", "e5m2", "int8"}))
      ->capture_default_str();
  bench_cmd->add_flag("--same-size-copy", bench.same_size_copy,
                      "Also time, per shape and pass, a copy moving the pass's bytes (half read, "
                      "half written) the same way: what the timing method itself gives at that "
                      "size (columns 'copy us' and '% copy', its time over the pass's)");
  bench_cmd->add_flag("--keep-l2-priority", bench.keep_l2_priority,
                      "CUDA: flush L2 without first giving the inputs' cached lines normal "
                      "eviction priority; the kernels read evict-last, so part of an input may "
                      "then outlive the flush (the bench's method until 2026-11-27)");
  bench_cmd->add_flag("--no-remeasure", bench.no_remeasure,
                      "Keep a pass's first figures even where its median lies more than 15% and "
                      "2 us above its fastest sample; by default such a shape is measured once "
                      "more and the unsteady pass takes the second run's figures (the first "
                      "median stays in the output and the JSON's first_run)");
  bench_cmd->add_flag("--transposed", bench.transposed,
                      "With --quant tensor: also write y transposed ([hidden, rows]), counted in "
                      "the bytes");

  // CLI11 reports an unknown first word as "A subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-' && std::string(argv[1]) != "info" &&
      std::string(argv[1]) != "check" && std::string(argv[1]) != "bench") {
    std::fprintf(stderr, "normkit: unknown subcommand '%s'; expected info, check or bench "
                         "(see normkit --help)\n", argv[1]);
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (app.got_subcommand("info")) return nktool::run_info();
    if (app.got_subcommand(check_cmd)) return nktool::run_check(check);
    bench.reps_given = reps_opt->count() > 0;
    bench.command_line = nktool::command_line(argc, argv);
    return nktool::run_bench(bench);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "normkit: error: %s\n", e.what());
    return 1;
  }
}
