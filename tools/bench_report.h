// Output of `normkit bench`: the table on stdout and the JSON document for --json.
#pragma once

#include <cstdio>
#include <ostream>
#include <string>

#include "bench_types.h"

namespace nktool {

void print_bench_header(std::FILE* out, const BenchReport& report);
void print_bench_table_header(std::FILE* out, const BenchConfig& config);
// One row; with `explain`, the launch configurations on the lines below it.
void print_bench_row(std::FILE* out, const BenchReport& report, const ShapeResult& row,
                     bool explain);

// Writes the whole report as JSON to `out`; throws std::runtime_error if writing fails
// (`path` is for the message).
void write_bench_json(std::ostream& out, const std::string& path, const BenchReport& report);

}  // namespace nktool
