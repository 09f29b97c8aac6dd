#include "json_writer.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace nktool {

std::string json_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 2);
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

void JsonWriter::newline_indent() {
  out_ << '\n';
  for (size_t i = 0; i < stack_.size(); ++i) out_ << "  ";
}

void JsonWriter::before_value() {
  if (stack_.empty()) {
    if (wrote_root_) throw std::logic_error("JsonWriter: second top-level value");
    wrote_root_ = true;
    return;
  }
  if (stack_.back() == Frame::kObject) {
    if (!after_key_) throw std::logic_error("JsonWriter: value inside an object without a key");
    after_key_ = false;
    return;
  }
  if (!first_.back()) out_ << ',';
  first_.back() = false;
  newline_indent();
}

void JsonWriter::key(const std::string& name) {
  if (stack_.empty() || stack_.back() != Frame::kObject || after_key_) {
    throw std::logic_error("JsonWriter: key '" + name + "' outside an object or after a key");
  }
  if (!first_.back()) out_ << ',';
  first_.back() = false;
  newline_indent();
  out_ << '"' << json_escape(name) << "\": ";
  after_key_ = true;
}

void JsonWriter::begin_object() {
  before_value();
  out_ << '{';
  stack_.push_back(Frame::kObject);
  first_.push_back(true);
}

void JsonWriter::begin_array() {
  before_value();
  out_ << '[';
  stack_.push_back(Frame::kArray);
  first_.push_back(true);
}

void JsonWriter::end_object() {
  if (stack_.empty() || stack_.back() != Frame::kObject || after_key_) {
    throw std::logic_error("JsonWriter: end_object without a matching begin_object");
  }
  const bool empty = first_.back();
  stack_.pop_back();
  first_.pop_back();
  if (!empty) newline_indent();
  out_ << '}';
  if (stack_.empty()) out_ << '\n';
}

void JsonWriter::end_array() {
  if (stack_.empty() || stack_.back() != Frame::kArray) {
    throw std::logic_error("JsonWriter: end_array without a matching begin_array");
  }
  const bool empty = first_.back();
  stack_.pop_back();
  first_.pop_back();
  if (!empty) newline_indent();
  out_ << ']';
  if (stack_.empty()) out_ << '\n';
}

void JsonWriter::value(const std::string& text) {
  before_value();
  out_ << '"' << json_escape(text) << '"';
}

void JsonWriter::value(double number) {
  before_value();
  if (!std::isfinite(number)) {
    out_ << "null";
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", number);
  out_ << buf;
}

void JsonWriter::value(int64_t number) {
  before_value();
  out_ << number;
}

void JsonWriter::value(bool flag) {
  before_value();
  out_ << (flag ? "true" : "false");
}

void JsonWriter::null() {
  before_value();
  out_ << "null";
}

}  // namespace nktool
