// Whole-run robustness: corrupt particle, cache and plugin inputs (the regressions of the fuzzers
// in tests/fuzz), output files checked before a run and never half-written, requests that cannot fit
// refused with the sizes, GPU chunk planning under a memory cap, and byte-identical outputs of
// identical runs.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fusetrack/memory_budget.h"
#include "fusetrack/npy.h"
#include "fusetrack/nvrtc_compiler.h"
#include "fusetrack/output_files.h"
#include "fusetrack/particle_files.h"
#include "fusetrack/particles.h"
#include "fusetrack/registry.h"
#include "support/paths.h"
#include "support/process.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_robustness.
namespace test_robustness {

namespace fs = std::filesystem;
using ft::test::run_command;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ft::Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// A .npy image with the given header dictionary text and `data_bytes` zero bytes of data.
std::string npy_with_header(const std::string& dict, size_t data_bytes) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header + std::string(data_bytes, '\0');
}

/// Files in `dir` whose names contain ".tmp." (left-over temporary files).
size_t temporary_files_in(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += contains(e.path().filename().string(), ".tmp.");
  return n;
}

struct EnvOverride {
  std::string name;
  EnvOverride(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~EnvOverride() { unsetenv(name.c_str()); }
};

}  // namespace

// ---- .npy / .npz (fuzz target particles_npz) --------------------------------------------------

TEST_CASE("npy headers: a shape whose size overflows, is not an integer or exceeds the data is an error") {
  // The product of these dimensions wraps around 2^64 to a small number: it must not pass the
  // length check and be read past the data.
  const std::string wrap = npy_with_header(
      "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387905, 4), }", 64);
  CHECK(contains(error_of([&] { ft::npy_decode(wrap, "a.npy"); }), "more than 2^64"));
  const std::string words = npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (x3,), }", 24);
  CHECK(contains(error_of([&] { ft::npy_decode(words, "a.npy"); }), "not a non-negative integer"));
  const std::string negative = npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (-3,), }", 24);
  CHECK(contains(error_of([&] { ft::npy_decode(negative, "a.npy"); }), "not a non-negative integer"));
  const std::string short_data = npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }", 16);
  CHECK(contains(error_of([&] { ft::npy_decode(short_data, "a.npy"); }), "needs 40 bytes, the file holds 16"));
  const std::string unquoted = npy_with_header("{'descr': <f8, 'fortran_order': False, 'shape': (1,), }", 8);
  CHECK(contains(error_of([&] { ft::npy_decode(unquoted, "a.npy"); }), "'descr' is not a quoted string"));
  const std::string no_shape = npy_with_header("{'descr': '<f8', 'fortran_order': False, }", 8);
  CHECK(contains(error_of([&] { ft::npy_decode(no_shape, "a.npy"); }), "lacks 'shape'"));
  // A valid header for comparison: two doubles.
  const std::string good = npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16);
  const ft::NpyArray a = ft::npy_decode(good, "a.npy");
  CHECK(a.to_doubles() == std::vector<double>{0.0, 0.0});
}

TEST_CASE("a particle file that is not an archive, or a member that is not an array, names the file") {
  const auto dir = ft::test::temp_dir("robust_npz");
  const std::string garbage = (dir / "garbage.npz").string();
  write_bytes(garbage, "PK\x03\x04 this is not a zip archive");
  CHECK(contains(error_of([&] { ft::read_particles(garbage, 0.9); }), garbage));
  // A valid archive whose x member holds text.
  const std::string bad_member = (dir / "bad_member.npz").string();
  ft::write_npz(bad_member, {{"y", ft::NpyArray::from(std::vector<double>{1.0})}});
  std::string bytes = read_bytes(bad_member);
  const size_t magic = bytes.find("\x93NUMPY");
  REQUIRE(magic != std::string::npos);
  bytes[magic + 1] = 'X';  // the member's magic no longer reads NUMPY
  write_bytes(bad_member, bytes);
  const std::string msg = error_of([&] { ft::read_particles(bad_member, 0.9); });
  CHECK(contains(msg, bad_member));
  CHECK(!msg.empty());
}

TEST_CASE("particle files: each bad input names the file, the column or array, and the line") {
  const auto dir = ft::test::temp_dir("robust_particles");
  auto csv_error = [&](const std::string& name, const std::string& text) {
    const std::string path = (dir / name).string();
    write_bytes(path, text);
    return error_of([&] { ft::read_particles(path, 0.9); });
  };
  CHECK(csv_error("ok.csv", "x,px,y,py,zeta,delta\n1e-3,0,0,0,0,0\n").empty());  // the control case reads
  CHECK(contains(csv_error("empty.csv", ""), "empty file; expected a header line"));
  CHECK(contains(csv_error("column.csv", "x,energy\n1,2\n"), "energy"));
  CHECK(contains(csv_error("column.csv", "x,energy\n1,2\n"), "unknown column"));
  CHECK(contains(csv_error("word.csv", "x,px,y,py,zeta,delta\n1,abc,0,0,0,0\n"), "line 2: 'abc' is not a number"));
  CHECK(contains(csv_error("inf.csv", "x,px,y,py,zeta,delta\n1,2,0,0,0,0\n3,1e999,0,0,0,0\n"), "line 3: value is not finite"));
  CHECK(contains(csv_error("ragged.csv", "x,px,y,py,zeta,delta\n1\n"), "line 2 has 1 columns, the header has 6"));
  CHECK(contains(csv_error("wide.csv", "x,px,y,py,zeta,delta\n1,2,3,4,5,6,7\n"), "line 2 has too many columns"));
  CHECK(contains(csv_error("p.txt", "x\n1\n"), "unsupported particle file; use .npz or .csv"));
  const std::string lengths = (dir / "lengths.npz").string();
  ft::write_npz(lengths, {{"x", ft::NpyArray::from(std::vector<double>{1, 2})},
                          {"y", ft::NpyArray::from(std::vector<double>{1, 2, 3})}});
  CHECK(contains(error_of([&] { ft::read_particles(lengths, 0.9); }), "has 3 entries, other arrays have 2"));
  const std::string nonfinite = (dir / "nonfinite.npz").string();
  ft::write_npz(nonfinite, {{"delta", ft::NpyArray::from(std::vector<double>{0, std::nan("")})}});
  CHECK(contains(error_of([&] { ft::read_particles(nonfinite, 0.9); }), "contains a value that is not finite"));
  const std::string none = (dir / "none.npz").string();
  ft::write_npz(none, {{"energy", ft::NpyArray::from(std::vector<double>{1})}});
  CHECK(contains(error_of([&] { ft::read_particles(none, 0.9); }), "no coordinate arrays found"));
}

// ---- kernel cache entries (fuzz target kernel_cache) -------------------------------------------

TEST_CASE("a kernel-cache entry claiming a huge payload is refused without allocating it") {
  const auto dir = ft::test::temp_dir("robust_cache");
  const std::string path = (dir / "entry.cubin").string();
  // magic, format version 1, reserved, payload size 2^32, checksum 0, then three bytes.
  std::string entry = "FTKCUBIN";
  const uint32_t version = 1, reserved = 0;
  const uint64_t size = uint64_t{1} << 32, checksum = 0;
  entry.append(reinterpret_cast<const char*>(&version), 4);
  entry.append(reinterpret_cast<const char*>(&reserved), 4);
  entry.append(reinterpret_cast<const char*>(&size), 8);
  entry.append(reinterpret_cast<const char*>(&checksum), 8);
  entry += "abc";
  write_bytes(path, entry);
  std::vector<char> payload;
  std::string why;
  CHECK_FALSE(ft::read_kernel_cache_entry(path, payload, why));
  CHECK(contains(why, "truncated (3 of 4294967296 payload bytes)"));
  CHECK(payload.capacity() < 1024);
  // Extra bytes after the payload are also refused.
  std::string longer = entry.substr(0, 16);
  const uint64_t one = 1;
  longer.append(reinterpret_cast<const char*>(&one), 8);
  longer.append(8, '\0');
  longer += "xy";
  write_bytes(path, longer);
  CHECK_FALSE(ft::read_kernel_cache_entry(path, payload, why));
  CHECK(contains(why, "bad payload size 1"));
  CHECK_FALSE(ft::read_kernel_cache_entry((dir / "absent.cubin").string(), payload, why));
  CHECK(why == "absent");
}

// ---- plugin descriptors (fuzz target plugin_descriptor) ----------------------------------------

namespace {

int no_track(const void*, ft_particle_block*, ft_error*) { return 0; }

struct Descriptor {
  ft_field_desc fields[2] = {{"length", "m", "", 0, FT_FIELD_DOUBLE, 1, FT_FIELD_INPUT, 0.0, 0},
                             {"k", "", "", 8, FT_FIELD_DOUBLE, 1, FT_FIELD_INPUT, 0.0, 1}};
  ft_source_file header{"q.h", "struct Q {};"};
  ft_element_type_desc type{"Q", "doc", "Q_track", "q.h", 16, 8, fields, 2, FT_THICK, 0, nullptr, no_track, nullptr, 0u, 0u};
  ft_plugin_desc desc{FT_PLUGIN_ABI_VERSION, "test", "1", &type, 1, &header, 1};
};

}  // namespace

TEST_CASE("plugin descriptors: the valid control case, then each lie is named") {
  {
    Descriptor d;
    CHECK(ft::check_plugin_descriptor(d.desc) == "");
    const ft::ElementType t = ft::element_type_from_descriptor(d.type);
    CHECK(t.default_params().size() == 16);
  }
  {
    Descriptor d;  // offset + size wraps around 2^32 in 32-bit arithmetic
    d.fields[1].offset = 0xfffffff8u;
    d.fields[1].count = 2;
    CHECK(contains(ft::check_plugin_descriptor(d.desc), "field 'k' spans bytes [4294967288, 4294967304)"));
  }
  {
    Descriptor d;  // count * 8 wraps around 2^32
    d.fields[1].count = 0x20000001u;
    CHECK(contains(ft::check_plugin_descriptor(d.desc), "field table does not match the struct size"));
  }
  {
    Descriptor d;
    d.header.include_name = nullptr;
    CHECK(contains(ft::check_plugin_descriptor(d.desc), "embedded header #0 lacks its name or its text"));
  }
  {
    Descriptor d;
    d.type.length_field = 5;
    CHECK(contains(ft::check_plugin_descriptor(d.desc), "length field index 5"));
  }
  {
    Descriptor d;
    d.type.length_field = 1;  // 'k', not 'length'
    CHECK(contains(ft::check_plugin_descriptor(d.desc), "not a scalar double field named 'length'"));
  }
  {
    Descriptor d;
    d.fields[1].type = FT_FIELD_INT32;
    d.fields[1].default_value = 1e300;  // not an int32: converting it would be undefined behaviour
    d.type.param_size = 16;
    CHECK(contains(ft::check_plugin_descriptor(d.desc), "has default 1e+300 (not an int32)"));
  }
  {
    Descriptor d;
    d.fields[1].name = "length";
    CHECK(contains(ft::check_plugin_descriptor(d.desc), "field 'length' is declared twice"));
  }
  {
    Descriptor d;
    d.type.fields = nullptr;
    CHECK(contains(ft::check_plugin_descriptor(d.desc), "declares 2 fields but no field table"));
  }
  {
    Descriptor d;
    d.desc.types = nullptr;
    CHECK(contains(ft::check_plugin_descriptor(d.desc), "declares 1 element types but no type table"));
  }
  {
    // A collective type's host-only JSON field has no place in the struct: its offset and count are
    // not checked and must not be used when the defaults are written (a fuzzer-found overflow).
    Descriptor d;
    ft_collective_desc collective{};
    collective.kick_function = "Q_kick";
    collective.kind = FT_COLLECTIVE_MOMENTS;
    collective.create_moments = [](const void*, const char*, const char*, const ft_reference*, ft_moments_model*,
                                   ft_error*) { return 0; };
    collective.moments_kick_block = [](const void*, const ft_slice_kicks*, ft_particle_block*, ft_error*) {
      return 0;
    };
    d.type.collective = &collective;
    d.type.flags = 0;
    d.type.length_field = -1;
    d.fields[1] = {"table", "", "", 4096, FT_FIELD_JSON, 7, FT_FIELD_INPUT, 1.5, 1};
    d.type.param_size = 8;
    REQUIRE(ft::check_plugin_descriptor(d.desc) == "");
    const std::vector<unsigned char> params = ft::element_type_from_descriptor(d.type).default_params();
    CHECK(params == std::vector<unsigned char>(8, 0));  // only 'length' (0.0) is written
  }
  {
    Descriptor d;
    d.desc.abi_version = 99;
    CHECK(contains(ft::check_plugin_descriptor(d.desc), "plugin ABI version 99 does not match"));
  }
}

// ---- output files --------------------------------------------------------------------------------

TEST_CASE("output checks: missing, read-only and file-instead-of-directory outputs are refused") {
  const auto dir = ft::test::temp_dir("robust_out");
  CHECK_NOTHROW(ft::check_output_file((dir / "out.npz").string(), "--output"));
  CHECK(contains(error_of([&] { ft::check_output_file((dir / "missing" / "out.npz").string(), "--output"); }),
                 "does not exist"));
  CHECK(contains(error_of([&] { ft::check_output_file(dir.string(), "--output"); }), "it is a directory"));
  // /proc refuses new files even to root: a read-only directory on every machine.
  CHECK(contains(error_of([&] { ft::check_output_file("/proc/fusetrack_out.npz", "--output"); }), "is not writable"));
  const std::string file = (dir / "a_file").string();
  write_bytes(file, "x");
  CHECK(contains(error_of([&] { ft::check_output_directory(file, "--output"); }), "is a file"));
  CHECK(contains(error_of([&] { ft::check_output_directory(file + "/sub", "--output"); }), "is a file"));
  CHECK(contains(error_of([&] { ft::check_output_directory("/proc/fusetrack_da", "--output"); }), "not writable"));
  CHECK_NOTHROW(ft::check_output_directory((dir / "new" / "deeper").string(), "--output"));
  CHECK(contains(error_of([&] { ft::check_output_file("", "--monitor"); }), "--monitor"));
  CHECK(temporary_files_in(dir) == 0);  // the probes leave nothing behind
}

TEST_CASE("a write that fails leaves the previous file intact and no temporary file") {
  const auto dir = ft::test::temp_dir("robust_atomic");
  const std::string path = (dir / "result.csv").string();
  ft::write_file_atomically(path, "previous\n");
  CHECK_THROWS_AS(ft::write_file_atomically(path,
                                            [](std::ostream& out) {
                                              out << "half of a new file";
                                              throw ft::Error("the run failed while writing");
                                            }),
                  ft::Error);
  CHECK(read_bytes(path) == "previous\n");
  CHECK(temporary_files_in(dir) == 0);
  // An archive into a directory that does not exist: an error, nothing created.
  const std::string npz = (dir / "none" / "out.npz").string();
  CHECK_THROWS_AS(ft::write_npz(npz, {{"x", ft::NpyArray::from(std::vector<double>{1.0})}}), ft::Error);
  CHECK_FALSE(fs::exists(npz));
  // An archive over an existing one is replaced whole.
  const std::string archive = (dir / "p.npz").string();
  ft::write_npz(archive, {{"x", ft::NpyArray::from(std::vector<double>{1.0})}});
  ft::write_npz(archive, {{"x", ft::NpyArray::from(std::vector<double>{2.0, 3.0})}});
  CHECK(ft::read_npz(archive).at("x").to_doubles() == std::vector<double>{2.0, 3.0});
  CHECK(temporary_files_in(dir) == 0);
}

// ---- memory ----------------------------------------------------------------------------------------

TEST_CASE("requests that cannot fit are refused with the bytes needed and available") {
  EnvOverride limit("FUSETRACK_HOST_MEMORY_LIMIT", "256M");
  CHECK(ft::available_host_memory() <= (uint64_t{256} << 20));
  const std::string grid = error_of([] { ft::make_grid(1.0, 0, 1, 100000, 0, 1, 100000); });
  // 10^10 particles of 96 bytes each.
  CHECK(contains(grid, "a grid of 100000 x 100000 particles needs 960000000000 bytes"));
  CHECK(contains(grid, "of host memory, but only"));
  CHECK(contains(error_of([] { ft::Particles p(10'000'000, 1.0); }), "10000000 particles needs 960000000 bytes"));
  // Overflowing requests saturate instead of wrapping to a small size.
  CHECK(ft::saturating_product({uint64_t{1} << 40, uint64_t{1} << 40}) == UINT64_MAX);
  CHECK(contains(error_of([] { ft::make_grid(1.0, 0, 1, size_t{1} << 40, 0, 1, size_t{1} << 40); }),
                 "more than 2^64 bytes"));
  const auto [rc, out] = run_command("FUSETRACK_HOST_MEMORY_LIMIT=1G " + ft::test::fusetrack_binary() + " track " +
                                     ft::test::source_path("lattices/fodo_ring.json") +
                                     " -n 100000000000 --device cpu --grid 0 1 2 0 1 1 --monitor /tmp/never.npz");
  CHECK(rc == 1);
  CHECK(contains(out, "a bunch monitor of 100000000001 records (100000000000 turns, one record every 1) needs"));
  ft::Particles small(1000, 1.0);  // below the checked size: no refusal
  CHECK(small.size() == 1000);
}

TEST_CASE("byte sizes: plain, with K/M/G/T suffixes, and errors") {
  CHECK(ft::parse_byte_size("1048576", "x") == 1048576);
  CHECK(ft::parse_byte_size("512M", "x") == (uint64_t{512} << 20));
  CHECK(ft::parse_byte_size("2G", "x") == (uint64_t{2} << 30));
  CHECK(ft::parse_byte_size("3kb", "x") == 3072);
  CHECK(contains(error_of([] { ft::parse_byte_size("lots", "FUSETRACK_GPU_MEMORY_LIMIT"); }),
                 "FUSETRACK_GPU_MEMORY_LIMIT: 'lots' is not a size in bytes"));
  CHECK(contains(error_of([] { ft::parse_byte_size("99999999999999999999", "x"); }), "not a size"));
  CHECK(contains(error_of([] { ft::parse_byte_size("16E", "x"); }), "not a size"));
}

TEST_CASE("GPU residency: all particles when they fit, chunks when not, refusals with the sizes") {
  const size_t per = 96;
  // 1 GiB free: 80% usable.
  const uint64_t gib = uint64_t{1} << 30;
  ft::GpuResidency all = ft::plan_gpu_residency(1000, per, gib, 0, false, "");
  CHECK(all.resident == 1000);
  CHECK(all.chunks == 1);
  const size_t fit = static_cast<size_t>(gib / 5 * 4 / per);
  ft::GpuResidency chunked = ft::plan_gpu_residency(3 * fit + 1, per, gib, 0, false, "");
  CHECK(chunked.resident == fit);
  CHECK(chunked.chunks == 4);
  // The option's cap (CudaBackendOptions::max_resident_particles).
  CHECK(ft::plan_gpu_residency(1000, per, gib, 300, false, "").chunks == 4);
  // A memory cap from the environment shrinks the chunks.
  {
    EnvOverride cap("FUSETRACK_GPU_MEMORY_LIMIT", "1M");
    const ft::GpuResidency capped = ft::plan_gpu_residency(100000, per, gib, 0, false, "");
    CHECK(capped.resident == (uint64_t{1} << 20) / 5 * 4 / per);
    CHECK(capped.chunks == (100000 + capped.resident - 1) / capped.resident);
    const std::string msg = error_of([] { ft::plan_gpu_residency(100000, 96, uint64_t{1} << 30, 0, true, "a collective run"); });
    CHECK(contains(msg, "a collective run keeps all 100000 particles on the GPU: they need 9600000 bytes"));
    CHECK(contains(msg, "1048576 bytes"));
    CHECK(contains(msg, "FUSETRACK_GPU_MEMORY_LIMIT"));
  }
  CHECK(contains(error_of([] { ft::plan_gpu_residency(10, 96, 100, 0, false, ""); }),
                 "not enough free GPU memory for a single particle (96 bytes needed, 100 bytes free)"));
}

// ---- the command line ------------------------------------------------------------------------------

namespace {

std::string fusetrack() { return ft::test::fusetrack_binary(); }
std::string lattice(const std::string& name) { return ft::test::source_path("lattices/" + name); }

}  // namespace

TEST_CASE("commands refuse unwritable outputs before any tracking") {
  const auto dir = ft::test::temp_dir("robust_cli_out");
  const std::string missing = (dir / "missing").string();
  const std::string file = (dir / "a_file").string();
  write_bytes(file, "x");
  struct Case {
    std::string args, expected;
  };
  const std::vector<Case> cases = {
      {"track " + lattice("fodo_ring.json") + " -n 100000000 --device cpu -o " + missing + "/out.npz",
       "field '--output': cannot write '" + missing + "/out.npz': the directory '" + missing + "' does not exist"},
      {"track " + lattice("fodo_ring.json") + " -n 100000000 --device cpu -o /proc/out.npz", "is not writable"},
      {"track " + lattice("fodo_ring.json") + " -n 100000000 --device cpu --monitor " + missing + "/m.npz",
       "field '--monitor': cannot write"},
      {"da " + lattice("sextupole_rf_ring.json") + " --turns 100000000 --device cpu --no-plots -o " + file,
       "field '--output': the output directory '" + file + "' is a file"},
      {"da " + lattice("sextupole_rf_ring.json") + " --turns 100000000 --device cpu --no-plots -o /proc/da",
       "not writable"},
      {"optics " + lattice("fodo_ring.json") + " -o " + missing + "/optics.json", "does not exist"},
      {"import-xsuite " + lattice("fodo_ring.json") + " -o " + missing + "/out.json", "does not exist"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const auto [rc, out] = run_command(fusetrack() + " " + c.args);
    CHECK(rc == 2);  // bad input, at once (10^8 turns would take hours)
    CHECK(contains(out, c.expected));
  }
}

TEST_CASE("fusetrack track --bunches: bad train options are refused naming the option, the lattice and its element") {
  // The FODO ring with a bunch-by-bunch damper that declares a train of 4 bunches 2.4 m apart.
  std::ifstream in(lattice("fodo_ring.json"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string damper = R"("damper": {"type": "TransverseDamper", "gain_turns": 20.0, "zeta_min": -0.6, )"
                             R"("zeta_max": 0.6, "n_bunches": 4, "bunch_spacing": 2.4}, )";
  text.insert(text.find('{', text.find("\"elements\"")) + 1, damper);
  text.insert(text.find('[', text.find("\"sequence\"")) + 1, "\"damper\", ");
  const auto dir = ft::test::temp_dir("robust_train");
  const std::string train = (dir / "train_ring.json").string();
  std::ofstream(train) << text;
  const std::string common = " -n 10 --gaussian 100 --emittance-nx 1e-6 --emittance-ny 1e-6 --sigma-zeta 0.1 "
                             "--device cpu -o " + (dir / "out.npz").string();
  struct Case {
    std::string args, expected;
  };
  const std::vector<Case> cases = {
      {"track " + train + common + " --bunches 0", "field '--bunches': must be >= 1, got 0"},
      {"track " + train + common + " --bunches 2 --bunch-spacing -1", "field '--bunch-spacing': must be a finite time"},
      {"track " + train + common + " --bunches 3",
       train + ": element 'damper'"},  // the lattice's element that declares 4 bunches
      {"track " + train + common + " --bunches 3", "do not match element 'damper': n_bunches 4"},
      {"track " + lattice("fodo_ring.json") + common + " --bunches 2", "a train of --bunches > 1 needs a spacing"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const auto [rc, out] = run_command(fusetrack() + " " + c.args);
    CHECK(rc == 2);
    CHECK(contains(out, c.expected));
  }
  // The declared train itself runs.
  const auto [rc, out] = run_command(fusetrack() + " track " + train + common + " --bunches 4");
  CHECK(rc == 0);
}

TEST_CASE("a grid that cannot fit is refused with the sizes, not std::bad_alloc") {
  const auto [rc, out] =
      run_command("FUSETRACK_HOST_MEMORY_LIMIT=1G " + fusetrack() + " track " + lattice("fodo_ring.json") +
                  " -n 1 --device cpu --grid 0 1 100000 0 1 100000");
  CHECK(rc == 1);
  CHECK(contains(out, "a grid of 100000 x 100000 particles needs 960000000000 bytes (894.1 GiB) of host memory"));
  CHECK_FALSE(contains(out, "bad_alloc"));
  const auto [rc2, out2] = run_command(fusetrack() + " track " + lattice("fodo_ring.json") +
                                       " -n 1 --device cpu --grid 0 1 1e300 0 1 2");
  CHECK(rc2 == 2);
  CHECK(contains(out2, "--grid"));
}

TEST_CASE("identical runs write identical files (track, monitor, DA), and a failed run keeps the old output") {
  const auto dir = ft::test::temp_dir("robust_repro");
  for (int run = 0; run < 2; ++run) {
    const std::string tag = std::to_string(run);
    const auto [rc, out] = run_command(fusetrack() + " track " + lattice("sextupole_rf_ring.json") +
                                       " -n 50 --device cpu --threads 2 --grid 1e-3 2e-2 8 1e-3 2e-2 8 -o " +
                                       (dir / ("t" + tag + ".npz")).string());
    REQUIRE(rc == 0);
    const auto [rc_csv, out_csv] = run_command(fusetrack() + " track " + lattice("sextupole_rf_ring.json") +
                                               " -n 50 --device cpu --threads 1 --grid 1e-3 2e-2 8 1e-3 2e-2 8 -o " +
                                               (dir / ("t" + tag + ".csv")).string());
    REQUIRE(rc_csv == 0);
    const auto [rc_mon, out_mon] =
        run_command(fusetrack() + " track " + lattice("longitudinal_bench_ring.json") +
                    " -n 20 --device cpu --matched 2000 --sigma-zeta 0.05 --monitor " +
                    (dir / ("m" + tag + ".npz")).string() + " --profile-every 10 -o " +
                    (dir / ("c" + tag + ".npz")).string());
    const std::string monitor_log = out_mon;  // (INFO's lambda cannot capture a structured binding)
    INFO(monitor_log);
    REQUIRE(rc_mon == 0);
    const auto [rc_da, out_da] = run_command(fusetrack() + " da " + lattice("sextupole_rf_ring.json") +
                                             " --turns 50 --angles 3 --amplitudes 6 --amplitude-range 0.001 0.04 "
                                             "--device cpu --no-plots -o " +
                                             (dir / ("da" + tag)).string());
    const std::string da_log = out_da;
    INFO(da_log);
    REQUIRE(rc_da == 0);
  }
  for (const char* f : {"t%.npz", "t%.csv", "m%.npz", "c%.npz", "da%/da.npz", "da%/summary.json", "da%/summary.csv"}) {
    std::string a = f, b = f;
    a.replace(a.find('%'), 1, "0");
    b.replace(b.find('%'), 1, "1");
    CAPTURE(a);
    const std::string first = read_bytes((dir / a).string());
    CHECK(!first.empty());
    CHECK(first == read_bytes((dir / b).string()));
  }
  // A failed run (an unknown plugin file named on the command line) leaves t0.npz as it was.
  const std::string before = read_bytes((dir / "t0.npz").string());
  const auto [rc_fail, out_fail] =
      run_command(fusetrack() + " track " + lattice("sextupole_rf_ring.json") + " -n 5 --device cpu --plugin " +
                  (dir / "no_such_plugin.so").string() + " -o " + (dir / "t0.npz").string());
  CHECK(rc_fail != 0);
  CHECK(read_bytes((dir / "t0.npz").string()) == before);
  CHECK(temporary_files_in(dir) == 0);
}

}  // namespace test_robustness
