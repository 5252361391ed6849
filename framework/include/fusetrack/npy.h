// NumPy .npy / .npz files, so that results load in one line of Python:
//   d = numpy.load("out.npz"); d["x"], d["lost_turn"], ...
// .npz archives are written with libzip (stored, uncompressed members).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ft {

struct NpyArray {
  std::string dtype;           // "<f8", "<i4" or "<i8"
  std::vector<size_t> shape;   // C order
  std::vector<unsigned char> data;

  size_t element_count() const;
  static NpyArray from(const std::vector<double>& v, std::vector<size_t> shape = {});
  static NpyArray from(const std::vector<int32_t>& v, std::vector<size_t> shape = {});
  static NpyArray from(const std::vector<int64_t>& v, std::vector<size_t> shape = {});
  /// Converts any supported dtype to double / int64 (throws ft::Error otherwise).
  std::vector<double> to_doubles() const;
  std::vector<int64_t> to_int64() const;
};

using NpzArchive = std::map<std::string, NpyArray>;

std::string npy_encode(const NpyArray& a);
/// `what` names the file/member in error messages.
NpyArray npy_decode(const std::string& bytes, const std::string& what);

void write_npy(const std::string& path, const NpyArray& a);
NpyArray read_npy(const std::string& path);
/// Writes the members in the given order (names without ".npy"). Written to a temporary file
/// and renamed, so a reader never sees a half-written archive.
void write_npz(const std::string& path, const std::vector<std::pair<std::string, NpyArray>>& members);
NpzArchive read_npz(const std::string& path);

}  // namespace ft
