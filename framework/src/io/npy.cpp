#include "fusetrack/npy.h"

#include <fmt/format.h>
#include <zip.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fusetrack/error.h"
#include "fusetrack/output_files.h"

namespace ft {

namespace {

size_t dtype_size(const std::string& dtype) {
  if (dtype == "<f8" || dtype == "<i8") return 8;
  if (dtype == "<i4") return 4;
  return 0;
}

template <class T>
NpyArray make_array(const std::vector<T>& v, std::vector<size_t> shape, const char* dtype) {
  NpyArray a;
  a.dtype = dtype;
  a.shape = shape.empty() ? std::vector<size_t>{v.size()} : std::move(shape);
  if (a.element_count() != v.size()) throw Error("npy: shape does not match the data size");
  a.data.resize(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(a.data.data(), v.data(), a.data.size());
  return a;
}

}  // namespace

size_t NpyArray::element_count() const {
  size_t n = 1;
  for (size_t s : shape) n *= s;
  return n;
}

NpyArray NpyArray::from(const std::vector<double>& v, std::vector<size_t> shape) { return make_array(v, shape, "<f8"); }
NpyArray NpyArray::from(const std::vector<int32_t>& v, std::vector<size_t> shape) { return make_array(v, shape, "<i4"); }
NpyArray NpyArray::from(const std::vector<int64_t>& v, std::vector<size_t> shape) { return make_array(v, shape, "<i8"); }

std::vector<double> NpyArray::to_doubles() const {
  const size_t n = element_count();
  if (dtype_size(dtype) != 0 && (data.size() / dtype_size(dtype) != n || data.size() % dtype_size(dtype) != 0))
    throw Error(fmt::format("npy: {} bytes of dtype {} do not make the shape's {} elements", data.size(), dtype, n));
  std::vector<double> out(n);
  if (dtype == "<f8") {
    std::memcpy(out.data(), data.data(), n * 8);
  } else if (dtype == "<i8") {
    for (size_t i = 0; i < n; ++i) {
      int64_t v;
      std::memcpy(&v, data.data() + 8 * i, 8);
      out[i] = static_cast<double>(v);
    }
  } else if (dtype == "<i4") {
    for (size_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, data.data() + 4 * i, 4);
      out[i] = v;
    }
  } else {
    throw Error(fmt::format("npy: unsupported dtype {}", dtype));
  }
  return out;
}

std::vector<int64_t> NpyArray::to_int64() const {
  const size_t n = element_count();
  if (dtype_size(dtype) != 0 && (data.size() / dtype_size(dtype) != n || data.size() % dtype_size(dtype) != 0))
    throw Error(fmt::format("npy: {} bytes of dtype {} do not make the shape's {} elements", data.size(), dtype, n));
  std::vector<int64_t> out(n);
  if (dtype == "<i8") {
    std::memcpy(out.data(), data.data(), n * 8);
  } else if (dtype == "<i4") {
    for (size_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, data.data() + 4 * i, 4);
      out[i] = v;
    }
  } else {
    throw Error(fmt::format("npy: expected an integer array, got dtype {}", dtype));
  }
  return out;
}

std::string npy_encode(const NpyArray& a) {
  std::string shape = "(";
  for (size_t i = 0; i < a.shape.size(); ++i) shape += fmt::format("{}{}", a.shape[i], a.shape.size() == 1 ? "," : (i + 1 < a.shape.size() ? ", " : ""));
  shape += ")";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", a.dtype, shape);
  // Version 1.0: magic(6) + version(2) + header length(2) + header, padded so data is 64-aligned.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.push_back(static_cast<char>(len & 0xff));
  out.push_back(static_cast<char>(len >> 8));
  out += header;
  out.append(reinterpret_cast<const char*>(a.data.data()), a.data.size());
  return out;
}

namespace {

/// The text after `'key':` in a .npy header dictionary, or npos.
size_t header_value(const std::string& header, const std::string& key) {
  const size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return k;
  size_t p = header.find_first_not_of(' ', k + key.size() + 2);
  if (p == std::string::npos || header[p] != ':') return std::string::npos;
  p = header.find_first_not_of(' ', p + 1);
  return p;
}

}  // namespace

NpyArray npy_decode(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw Error(what + ": not a .npy array");
  const unsigned major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw Error(what + ": truncated .npy header");
    header_len = 0;
    for (int k = 0; k < 4; ++k) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + k])) << (8 * k);
    offset = 12;
  } else {
    throw Error(fmt::format("{}: unsupported .npy version {}", what, major));
  }
  if (bytes.size() - offset < header_len) throw Error(what + ": truncated .npy header");
  const std::string header = bytes.substr(offset, header_len);
  auto value_of = [&](const std::string& key) {
    const size_t v = header_value(header, key);
    if (v == std::string::npos) throw Error(fmt::format("{}: .npy header lacks '{}'", what, key));
    return v;
  };
  NpyArray a;
  // 'descr': '<f8'
  size_t p = value_of("descr");
  const size_t q = header[p] == '\'' ? header.find('\'', p + 1) : std::string::npos;
  if (q == std::string::npos) throw Error(what + ": .npy header: 'descr' is not a quoted string");
  a.dtype = header.substr(p + 1, q - p - 1);
  if (dtype_size(a.dtype) == 0)
    throw Error(fmt::format("{}: unsupported dtype {} (use float64, int32 or int64, little endian)", what, a.dtype));
  // 'fortran_order': False
  p = value_of("fortran_order");
  if (header.compare(p, 4, "True") == 0) throw Error(what + ": Fortran-ordered arrays are not supported");
  if (header.compare(p, 5, "False") != 0) throw Error(what + ": .npy header: 'fortran_order' is not True or False");
  // 'shape': (n0, n1, ...): non-negative integers whose product (in bytes) must fit the data.
  p = value_of("shape");
  const size_t e = header[p] == '(' ? header.find(')', p) : std::string::npos;
  if (e == std::string::npos) throw Error(what + ": .npy header: 'shape' is not a tuple");
  const size_t item = dtype_size(a.dtype);
  size_t count = 1;
  bool overflow = false;
  for (size_t i = p + 1; i < e;) {
    while (i < e && (header[i] == ' ' || header[i] == ',')) ++i;
    if (i == e) break;
    if (!std::isdigit(static_cast<unsigned char>(header[i])))
      throw Error(fmt::format("{}: .npy header: shape entry '{}' is not a non-negative integer", what,
                              header.substr(i, e - i)));
    uint64_t dim = 0;
    for (; i < e && std::isdigit(static_cast<unsigned char>(header[i])); ++i) {
      if (dim > (UINT64_MAX - 9) / 10) overflow = true;
      dim = dim * 10 + static_cast<uint64_t>(header[i] - '0');
    }
    if (i < e && header[i] != ',' && header[i] != ' ')
      throw Error(fmt::format("{}: .npy header: bad character '{}' in the shape", what, header[i]));
    if (overflow || (dim != 0 && count > SIZE_MAX / item / dim)) overflow = true;
    else count *= dim;
    a.shape.push_back(dim);
  }
  const size_t available = bytes.size() - offset - header_len;
  if (overflow || count * item > available)
    throw Error(fmt::format("{}: .npy data is truncated: the shape ({}) needs {} bytes, the file holds {}", what,
                            header.substr(p + 1, e - p - 1),
                            overflow ? std::string("more than 2^64") : std::to_string(count * item), available));
  a.data.assign(bytes.begin() + static_cast<long>(offset + header_len),
                bytes.begin() + static_cast<long>(offset + header_len + count * item));
  return a;
}

void write_npy(const std::string& path, const NpyArray& a) { write_file_atomically(path, npy_encode(a)); }

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return npy_decode(ss.str(), path);
}

void write_npz(const std::string& path, const std::vector<std::pair<std::string, NpyArray>>& members) {
  // A temporary archive in the same directory, renamed over `path` when complete: a failed or
  // interrupted write leaves the previous file as it was.
  const std::string tmp = temporary_path_for(path);
  int err = 0;
  std::error_code ec;
  zip_t* z = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!z) throw Error(fmt::format("{}: cannot create archive (libzip error {})", path, err));
  std::vector<std::string> buffers;
  buffers.reserve(members.size());
  for (const auto& [name, array] : members) {
    buffers.push_back(npy_encode(array));
    zip_source_t* src = zip_source_buffer(z, buffers.back().data(), buffers.back().size(), 0);
    const std::string member = name + ".npy";
    const zip_int64_t idx = src ? zip_file_add(z, member.c_str(), src, ZIP_FL_OVERWRITE) : -1;
    if (idx < 0) {
      if (src) zip_source_free(src);
      zip_discard(z);
      std::filesystem::remove(tmp, ec);
      throw Error(fmt::format("{}: cannot add {} to the archive", path, member));
    }
    zip_set_file_compression(z, static_cast<zip_uint64_t>(idx), ZIP_CM_STORE, 0);
    // A fixed modification time (1980-01-01, the first the format can hold): identical results
    // give byte-identical archives, comparable with cmp or a checksum.
    zip_file_set_dostime(z, static_cast<zip_uint64_t>(idx), 0, (0 << 9) | (1 << 5) | 1, 0);
  }
  if (zip_close(z) != 0) {
    const std::string msg = zip_strerror(z);
    zip_discard(z);
    std::filesystem::remove(tmp, ec);
    throw Error(fmt::format("{}: cannot write archive: {}", path, msg));
  }
  commit_temporary(tmp, path);
}

NpzArchive read_npz(const std::string& path) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY, &err);
  if (!z) throw Error(fmt::format("{}: cannot open as a .npz archive (libzip error {})", path, err));
  NpzArchive out;
  const zip_int64_t n = zip_get_num_entries(z, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z, static_cast<zip_uint64_t>(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) || !st.name)
      continue;
    std::string name = st.name;
    zip_file_t* f = zip_fopen_index(z, static_cast<zip_uint64_t>(i), 0);
    if (!f) {
      const std::string why = zip_strerror(z);
      zip_discard(z);
      throw Error(fmt::format("{}: cannot read member {}: {}", path, name, why));
    }
    // Read what the member holds, in pieces: the size in the archive's directory is not trusted
    // for an allocation (a corrupt archive may claim exabytes).
    std::string bytes;
    char chunk[1 << 16];
    zip_int64_t got = 0;
    while ((got = zip_fread(f, chunk, sizeof chunk)) > 0) bytes.append(chunk, static_cast<size_t>(got));
    zip_fclose(f);
    if (got < 0 || ((st.valid & ZIP_STAT_SIZE) && bytes.size() != st.size)) {
      zip_discard(z);
      throw Error(fmt::format("{}: member {} is truncated or corrupt", path, name));
    }
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
    try {
      out[name] = npy_decode(bytes, path + ":" + name);
    } catch (...) {
      zip_discard(z);
      throw;
    }
  }
  zip_discard(z);  // opened read-only: nothing to write back
  return out;
}

}  // namespace ft
