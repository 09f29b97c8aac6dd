// Small text helpers shared by the subcommands: printf into a std::string, byte sizes, dates.
#pragma once

#include <cstddef>
#include <string>

namespace nktool {

// printf-style formatting into a std::string.
std::string strprintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// "512.0 MiB", "2.00 GiB", "640 bytes".
std::string format_bytes(size_t bytes);

// Current time in UTC, ISO 8601: "2026-11-22T10:35:00Z".
std::string utc_timestamp();

// argv joined with spaces, each argument quoted for a POSIX shell when it needs it.
std::string command_line(int argc, const char* const* argv);

}  // namespace nktool
