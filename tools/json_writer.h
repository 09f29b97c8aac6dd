// A small streaming JSON writer (objects, arrays, strings, numbers, booleans), pretty-printed.
// Just enough for `normkit bench --json`; misuse (a value without a key inside an object,
// unbalanced ends) throws std::logic_error so a malformed document is never written silently.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace nktool {

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}

  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  void key(const std::string& name);

  void value(const std::string& text);
  void value(const char* text) { value(std::string(text)); }
  void value(double number);  // non-finite numbers are written as null
  void value(int64_t number);
  void value(int number) { value(static_cast<int64_t>(number)); }
  void value(bool flag);
  void null();

  // key + value in one call.
  template <typename T>
  void field(const std::string& name, const T& v) {
    key(name);
    value(v);
  }

  // True once the single top-level value is complete and all containers are closed.
  bool done() const { return stack_.empty() && wrote_root_; }

 private:
  enum class Frame { kObject, kArray };
  void before_value();
  void newline_indent();

  std::ostream& out_;
  std::vector<Frame> stack_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
  bool after_key_ = false;
  bool wrote_root_ = false;
};

std::string json_escape(const std::string& text);

}  // namespace nktool
