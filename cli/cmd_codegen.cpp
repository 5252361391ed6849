// fusetrack codegen LATTICE --out DIR: the CUDA source of a lattice's kernels, compiled by NVRTC
// (no GPU needed), with ptxas's register and spill report, so that an element or plugin author can
// read and check exactly what would run on the GPU.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>

#include "cli_common.h"
#include "fusetrack/codegen.h"
#include "fusetrack/collective.h"
#include "fusetrack/motifs.h"
#include "fusetrack/nvrtc_compiler.h"
#include "fusetrack/variants.h"

namespace ft::cli {

namespace {

struct CodegenArgs {
  CommonOptions common;
  std::string lattice;
  std::string out = "fusetrack_codegen";
  std::string dispatch = "auto";
  int arch = 90;
  int max_registers = 0;
  int particles_per_thread = 0;  // 0: FUSETRACK_PARTICLES_PER_THREAD, else the default (particles_per_thread_setting)
  std::vector<std::string> variants;  // --variants: the kernel of a study of lattice variants
};

void run_codegen(const CodegenArgs& a) {
  {
    std::error_code ec;
    std::filesystem::create_directories(a.out, ec);
    if (ec || !std::filesystem::is_directory(a.out)) {
      InputLocation at;
      at.field = "--out";
      throw InputError(at, fmt::format("cannot create the directory '{}'{}", a.out, ec ? ": " + ec.message() : ""));
    }
  }
  ElementRegistry registry;
  load_plugins(registry, a.common);
  const Lattice lattice = load_lattice(a.lattice, registry);
  const FmaMode fma = parse_fma(a.common.fma);
  Dispatch requested = Dispatch::Auto;
  parse_dispatch(a.dispatch, requested);  // the option is checked against the names
  KernelSource source;
  if (lattice.has_collective()) {
    if (!a.variants.empty()) {
      InputLocation at;
      at.file = a.lattice;
      at.field = "--variants";
      throw InputError(at, "lattice variants run without collective elements; this lattice has some");
    }
    const TurnProgram program = TurnProgram::build(lattice);
    std::vector<SliceGrid> grids;
    for (size_t c : program.collective)  // grid and slice-moment elements: no slice grid
      grids.push_back(!lattice.element(c).type->is_profile_collective() ? SliceGrid{}
                                                                         : CollectiveSolver(lattice, c, fma, 1).slice_grid());
    source = generate_collective_kernels(lattice, fma, requested, grids);
  } else {
    LatticeVariants variants;
    if (!a.variants.empty()) variants = load_variants(lattice, a.variants, registry);
    source = generate_fused_kernel(lattice, fma, requested, a.max_registers,
                                   variants.size() > 1 ? variants.pointers() : std::vector<const Lattice*>{},
                                   particles_per_thread_setting(a.particles_per_thread));
  }
  source.report_resources = true;
  dump_kernel_source(source, a.out);
  const KernelCompiler compiler("off");  // always compiled: this command measures and reports
  const CompiledKernel k = compiler.compile(source, a.arch);
  const std::string cubin = (std::filesystem::path(a.out) / (source.name.substr(0, source.name.rfind('.')) + ".cubin")).string();
  std::ofstream(cubin, std::ios::binary).write(k.cubin.data(), static_cast<std::streamsize>(k.cubin.size()));
  std::ofstream(std::filesystem::path(a.out) / "ptxas.log") << k.log;

  fmt::print("lattice   {} ({} elements, {} baked parameter words, {} element types{})\n", a.lattice,
             lattice.sequence().size(), baked_parameter_words(lattice),
             source.types.size(), lattice.has_collective() ? ", collective" : "");
  fmt::print(
      "source    {}/{} ({} lines, {} headers; dispatch {}, fma {}{})\n", a.out, source.name,
      std::count(source.text.begin(), source.text.end(), '\n'), source.headers.size(), dispatch_name(source.dispatch),
      a.common.fma,
      source.particles_per_thread > 1 ? fmt::format(", {} particles per thread", source.particles_per_thread) : "");
  if (const MotifCounts motifs = count_motifs(source.motif_at); motifs.motifs > 0)
    fmt::print("motifs    {} (recurring runs compiled as one case) cover {} of {} elements: {} dispatches per turn\n",
               motifs.motifs, motifs.covered, lattice.sequence().size(), motifs.dispatches);
  fmt::print("nvrtc     {} for sm_{} in {:.2f} s (NVRTC {}), {} bytes\n", cubin, a.arch, k.seconds,
             KernelCompiler::nvrtc_version(), k.cubin.size());
  // ptxas --verbose: "Compiling entry function 'NAME'", "... N bytes stack frame, N bytes spill stores,
  // N bytes spill loads", "Used N registers".
  const std::regex entry(R"(Compiling entry function '([^']+)')"), frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)"),
      regs(R"(Used (\d+) registers)");
  std::istringstream log(k.log);
  std::string line, current;
  std::string stack, stores, loads;
  bool any = false;
  fmt::print("{:<36} {:>9} {:>12} {:>12} {:>12}\n", "kernel", "registers", "stack bytes", "spill stores", "spill loads");
  while (std::getline(log, line)) {
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
      current = m[1];
      stack = stores = loads = "?";
    } else if (std::regex_search(line, m, frame)) {
      stack = m[1];
      stores = m[2];
      loads = m[3];
    } else if (std::regex_search(line, m, regs) && !current.empty()) {
      fmt::print("{:<36} {:>9} {:>12} {:>12} {:>12}\n", current, std::string(m[1]), stack, stores, loads);
      any = true;
      current.clear();
    }
  }
  if (!any) fmt::print("(no resource report in the NVRTC log: {}/ptxas.log)\n", a.out);
}

}  // namespace

void add_codegen_command(CLI::App& app) {
  auto a = std::make_shared<CodegenArgs>();
  CLI::App* cmd = app.add_subcommand(
      "codegen", "write a lattice's generated CUDA source, compile it with NVRTC (no GPU needed), report registers and spills");
  cmd->add_option("lattice", a->lattice, "lattice file")->required();
  cmd->add_option("-o,--out", a->out, "output directory for the source, its headers, the cubin and ptxas.log");
  cmd->add_option("--dispatch", a->dispatch, "auto, baked, switch or staged")
      ->check(CLI::IsMember({"auto", "baked", "switch", "staged"}));
  cmd->add_option("--arch", a->arch, "target sm_<arch> (90: H100/H200)");
  cmd->add_option("--max-registers", a->max_registers,
                  "cap the fused kernel's registers per thread (its launch bounds); 0: none")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option(
         "--particles-per-thread", a->particles_per_thread,
         "particles each thread of the switch kernels tracks, 1 or 2 (default: FUSETRACK_PARTICLES_PER_THREAD, "
         "else 1)")
      ->check(CLI::IsMember({1, 2}));
  cmd->add_option("--variants", a->variants,
                  "lattice variants (variants files applied to LATTICE, or lattice files with its sequence): the kernel "
                  "of a study that tracks them in one run");
  add_common_options(*cmd, a->common, false);
  cmd->add_option("--fma", a->common.fma, "off (reproducible) or on")->check(CLI::IsMember({"off", "on"}));
  cmd->callback([a] { run_codegen(*a); });
}

}  // namespace ft::cli
