// The on-disk kernel cache: miss then hit, key sensitivity, corrupt entries rebuilt. NVRTC only.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "fusetrack/nvrtc_compiler.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_kernel_cache.
namespace test_kernel_cache {

using namespace ft;

TEST_CASE("kernel cache: miss, hit, and a corrupt entry is reported and rebuilt") {
  const auto dir = ft::test::temp_dir("kernel_cache");
  const Lattice lattice = ft::test::bundled_lattice("fodo_ring.json");
  const KernelSource src = generate_fused_kernel(lattice, FmaMode::Off, Dispatch::Switch);
  const KernelCompiler compiler(dir.string());

  const CompiledKernel first = compiler.compile(src, 90);
  CHECK_FALSE(first.from_cache);
  REQUIRE(std::filesystem::exists(first.cache_file));

  const CompiledKernel second = compiler.compile(src, 90);
  CHECK(second.from_cache);
  CHECK(second.cubin == first.cubin);
  CHECK(second.seconds < first.seconds);

  // Flip one byte of the payload: the checksum catches it.
  {
    std::fstream f(first.cache_file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    char c;
    f.read(&c, 1);
    f.seekp(-10, std::ios::end);
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }
  const CompiledKernel third = compiler.compile(src, 90);
  CHECK_FALSE(third.from_cache);
  CHECK(third.cache_note.find("corrupt") != std::string::npos);
  CHECK(third.cache_note.find("checksum") != std::string::npos);
  CHECK(third.cubin == first.cubin);
  CHECK(compiler.compile(src, 90).from_cache);  // rebuilt entry is good again

  // A truncated entry likewise.
  std::filesystem::resize_file(first.cache_file, 20);
  const CompiledKernel fourth = compiler.compile(src, 90);
  CHECK_FALSE(fourth.from_cache);
  CHECK(fourth.cache_note.find("corrupt") != std::string::npos);
}

TEST_CASE("kernel cache key covers source, options and arch") {
  const Lattice lattice = ft::test::bundled_lattice("fodo_ring.json");
  const KernelCompiler compiler("off");
  const KernelSource a = generate_fused_kernel(lattice, FmaMode::Off, Dispatch::Switch);
  const KernelSource b = generate_fused_kernel(lattice, FmaMode::On, Dispatch::Switch);
  KernelSource c = a;
  c.text += "\n// changed\n";
  CHECK(compiler.cache_key(a, 90) == compiler.cache_key(a, 90));
  CHECK(compiler.cache_key(a, 90) != compiler.cache_key(b, 90));
  CHECK(compiler.cache_key(a, 90) != compiler.cache_key(c, 90));
  CHECK(compiler.cache_key(a, 90) != compiler.cache_key(a, 80));
  const auto opts = KernelCompiler::options(a, 90);
  CHECK(std::find(opts.begin(), opts.end(), "--fmad=false") != opts.end());
  const auto fast = KernelCompiler::options(b, 90);
  CHECK(std::find(fast.begin(), fast.end(), "--fmad=true") != fast.end());
}

}  // namespace test_kernel_cache
