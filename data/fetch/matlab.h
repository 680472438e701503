// A reader for MATLAB 5 MAT-files (level 5, little-endian, compressed or not): enough of the format
// for the ImageNet devkit's meta.mat (a struct array `synsets` with numeric and char fields). Numeric
// arrays come back as doubles whatever type stores them (MATLAB saves a double array of small
// integers as uint8); char arrays as UTF-8; cells and structs as nested values. Sparse, complex and
// object arrays are refused. Format facts: MathWorks' "MAT-File Format" (R2020a), chapter 1.
//   std::map<std::string, MatValue> vars = read_mat_file(bytes, "meta.mat");
//   const MatValue& s = vars.at("synsets");  s.field(0, "WNID").text == "n02119789"
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace octet {

struct MatValue {
  enum class Kind { numeric, text, cell, structure };
  Kind kind = Kind::numeric;
  std::vector<int64_t> dims;
  std::vector<double> numbers;      // numeric: column-major
  std::string text;                 // text: the characters, column-major, as UTF-8
  std::vector<std::string> fields;  // structure: field names
  std::vector<MatValue> elements;   // cell: its elements; structure: element i's field f at i * fields + f
  int64_t count() const;            // the number of elements (the product of dims)
  // Structure element `i`'s field `name` (an octet::Error naming what is missing).
  const MatValue& field(int64_t i, const std::string& name) const;
};

// The variables of a MAT-file held in memory; `name` is used in errors.
std::map<std::string, MatValue> read_mat_file(const std::vector<uint8_t>& bytes, const std::string& name);

}  // namespace octet
