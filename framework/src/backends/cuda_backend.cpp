#include "fusetrack/cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <tuple>

#include "cuda_backend_impl.h"
#include "cuda_device_particles.h"
#include "cuda_driver.h"
#include "cuda_staging.h"
#include "fusetrack/error.h"
#include "fusetrack/memory_budget.h"

namespace ft {

using cuda::check;
using cuda::check_alloc;
using cuda::DeviceCollective;
using cuda::DeviceParticleBuffers;
using cuda::DeviceParticles;
using cuda::kBytesPerParticle;
using cuda::LoadedKernel;
using cuda::seconds_since;

CudaBackend::CudaBackend(const Lattice& lattice, CudaBackendOptions options)
    : m_impl(std::make_unique<Impl>()), m_lattice(lattice), m_options(std::move(options)) {
  std::string why;
  m_impl->d = cuda::driver(&why);
  if (!m_impl->d) throw DeviceError("no GPU available: " + why);
  m_impl->staging = std::make_unique<cuda::StagedCopier>(*m_impl->d);
  const auto gpus = list_gpus();
  if (m_options.device < 0 || m_options.device >= static_cast<int>(gpus.size()))
    throw DeviceError(fmt::format("GPU {} does not exist ({} found)", m_options.device, gpus.size()));
  m_gpu = gpus[static_cast<size_t>(m_options.device)];
  const cuda::Driver& d = *m_impl->d;
  CUdevice dev;
  check(d.device_get(&dev, m_options.device), "cuDeviceGet");
  check(d.primary_ctx_retain(&m_impl->context, dev), "cuDevicePrimaryCtxRetain");
  check(d.ctx_set_current(m_impl->context), "cuCtxSetCurrent");
}

CudaBackend::~CudaBackend() = default;

std::string CudaBackend::name() const { return fmt::format("gpu ({}, sm_{})", m_gpu.name, m_gpu.arch); }

namespace {

LoadedKernel& get_kernel(CudaBackend::Impl& impl, const Lattice& lattice, const CudaBackendOptions& o, FmaMode fma,
                         KernelForm form, int arch, CudaRunStats& stats) {
  const Dispatch dispatch = form.dispatch;
  const auto key =
      std::make_tuple(static_cast<int>(fma), static_cast<int>(dispatch), form.max_registers, form.particles_per_thread);
  auto it = impl.kernels.find(key);
  if (it != impl.kernels.end()) return it->second;
  LoadedKernel k;
  k.source =
      generate_fused_kernel(lattice, fma, dispatch, form.max_registers, impl.variants, form.particles_per_thread);
  std::string dump_dir;
  if (const char* dump = std::getenv("FUSETRACK_DUMP_SOURCE"); dump && *dump) {
    dump_dir = fmt::format("{}/{}{}{}_{}", dump, dispatch_name(dispatch),
                           form.max_registers > 0 ? fmt::format("_r{}", form.max_registers) : "",
                           k.source.particles_per_thread > 1 ? fmt::format("_k{}", k.source.particles_per_thread) : "",
                           fma == FmaMode::On ? "fma_on" : "fma_off");
    dump_kernel_source(k.source, dump_dir);
  }
  KernelCompiler compiler(o.cache_dir);
  k.compiled = compiler.compile(k.source, arch);
  if (!dump_dir.empty())  // the binary too, for cuobjdump -sass / -res-usage
    std::ofstream(dump_dir + "/fusetrack_fused.cubin", std::ios::binary)
        .write(k.compiled.cubin.data(), static_cast<std::streamsize>(k.compiled.cubin.size()));
  stats.compile_seconds += k.compiled.seconds;
  stats.kernel_from_cache = k.compiled.from_cache;
  const cuda::Driver& d = *impl.d;
  check(d.module_load_data(&k.module, k.compiled.cubin.data()), "cuModuleLoadData");
  check(d.module_get_function(&k.function, k.module, kFusedKernelName), "cuModuleGetFunction");
  if (k.source.few_particles_form)
    check(d.module_get_function(&k.few_particles, k.module, kFewParticlesKernelName), "cuModuleGetFunction");
  // The tables are shared by the switch, staged and collective kernels; a switch kernel with motifs
  // needs the motif table after the steps, and uploads the steps again when a form without came first.
  const size_t step_entries = lattice.sequence().size() + k.source.motif_at.size();
  if (dispatch != Dispatch::Baked && (!impl.switch_steps || impl.switch_step_entries < step_entries)) {
    const KernelTables tables = kernel_tables(lattice, k.source, impl.variants);
    impl.variant_stride = tables.variant_stride_bytes;
    if (impl.switch_steps) d.mem_free(impl.switch_steps);
    CUdeviceptr p = 0;
    check_alloc(d, &p, std::max<size_t>(tables.steps.size() * sizeof(KernelStep), 8), "cuMemAlloc(steps)");
    check(d.memcpy_htod(p, tables.steps.data(), tables.steps.size() * sizeof(KernelStep)), "cuMemcpyHtoD(steps)");
    impl.switch_steps = p;
    impl.switch_step_entries = tables.steps.size();
    if (!impl.switch_params) {
      check_alloc(d, &impl.switch_params, tables.params.size() * sizeof(uint64_t), "cuMemAlloc(parameters)");
      check(d.memcpy_htod(impl.switch_params, tables.params.data(), tables.params.size() * sizeof(uint64_t)),
            "cuMemcpyHtoD(parameters)");
    }
  }
  return impl.kernels.emplace(key, std::move(k)).first->second;
}

}  // namespace

CudaBackend::MatchedShareRun CudaBackend::track_matched_share(const MatchedBunchShare& share, Particles& particles,
                                                              const TrackOptions& options, bool download_final,
                                                              const std::function<void(const Particles&)>& on_initial) {
  if (!runs_collective(m_lattice, options)) {  // single-particle runs keep the particles on the host
    m_stats = CudaRunStats{};
    const auto t0 = std::chrono::steady_clock::now();
    particles = share.sample();
    const double made = seconds_since(t0);
    MatchedShareRun r;
    r.initial = longitudinal_sums(particles);
    if (on_initial) on_initial(particles);
    run(particles, options, false);
    m_stats.generate_seconds = made;
    r.alive = particles.alive_count();
    return r;
  }
  DeviceSource source{share, download_final, on_initial, {}};
  particles = Particles();
  particles.beta0 = share.beta0();
  run_collective(particles, options, &source);
  return source.result;
}

void CudaBackend::track(Particles& particles, const TrackOptions& options) {
  if (runs_collective(m_lattice, options)) {
    run_collective(particles, options);
    return;
  }
  run(particles, options, false);
}

void CudaBackend::parameters_changed() {
  Impl& impl = *m_impl;
  const cuda::Driver& d = *impl.d;
  check(d.ctx_set_current(impl.context), "cuCtxSetCurrent");
  // Motifs fix integer fields of the elements as constants (codegen.h, KernelSource::motif_at): when a
  // changed field changes the generated source or the motif table, the switch kernels are made again.
  bool motifs_stale = false;
  for (const auto& [key, k] : impl.kernels) {
    if (k.source.dispatch != Dispatch::Switch || k.source.motif_at.empty()) continue;
    const KernelSource again = generate_fused_kernel(m_lattice, k.source.fma, Dispatch::Switch, k.source.max_registers,
                                                     impl.variants, k.source.particles_per_thread);
    motifs_stale |= again.text != k.source.text || again.motif_at != k.source.motif_at;
  }
  if (motifs_stale) {
    for (auto& [key, k] : impl.kernels)
      if (k.module) d.module_unload(k.module);
    impl.kernels.clear();
    if (impl.switch_steps) d.mem_free(impl.switch_steps);
    if (impl.switch_params) d.mem_free(impl.switch_params);
    impl.switch_steps = impl.switch_params = 0;
  }
  // The switch kernels read the parameter table: it is uploaded again (same layout), no recompile.
  if (impl.switch_params) {
    const KernelSource* source = impl.collective_ready && impl.collective_kernels.source.dispatch == Dispatch::Switch
                                     ? &impl.collective_kernels.source
                                     : nullptr;
    for (const auto& [key, k] : impl.kernels)
      if (!source && static_cast<Dispatch>(std::get<1>(key)) != Dispatch::Baked) source = &k.source;
    if (source) {
      const KernelTables tables = kernel_tables(m_lattice, *source, impl.variants);
      check(d.memcpy_htod(impl.switch_params, tables.params.data(), tables.params.size() * sizeof(uint64_t)),
            "cuMemcpyHtoD(parameters)");
    }
  }
  // Baked kernels carry the parameters as constants: regenerated on their next use.
  for (auto it = impl.kernels.begin(); it != impl.kernels.end();) {
    if (static_cast<Dispatch>(std::get<1>(it->first)) == Dispatch::Baked) {
      if (it->second.module) d.module_unload(it->second.module);
      it = impl.kernels.erase(it);
    } else {
      ++it;
    }
  }
  // Collective solvers copy their element's parameters: rebuilt on the next track().
  if (impl.collective_ready) impl.free_collective();
}

void CudaBackend::set_variants(const std::vector<const Lattice*>& variants) {
  check_variants_trackable(m_lattice, variants);
  Impl& impl = *m_impl;
  const cuda::Driver& d = *impl.d;
  check(d.ctx_set_current(impl.context), "cuCtxSetCurrent");
  // The kernels' transformed cases and the tables depend on the variants: made again on next use.
  for (auto& [key, k] : impl.kernels)
    if (k.module) d.module_unload(k.module);
  impl.kernels.clear();
  impl.measured_forms.clear();
  if (impl.switch_steps) d.mem_free(impl.switch_steps);
  if (impl.switch_params) d.mem_free(impl.switch_params);
  impl.switch_steps = impl.switch_params = 0;
  impl.variants = variants;
  impl.variant_stride = 0;
}

void CudaBackend::track_per_element(Particles& particles, const TrackOptions& options) {
  run(particles, options, true);
}

void CudaBackend::run(Particles& particles, const TrackOptions& options, bool per_element) {
  if (per_element && runs_collective(m_lattice, options))
    throw Error("per-element launches are not available for lattices with collective elements");
  const cuda::Driver& d = *m_impl->d;
  check(d.ctx_set_current(m_impl->context), "cuCtxSetCurrent");
  m_stats = CudaRunStats{};
  const size_t n_elements = m_lattice.sequence().size();
  const size_t begin = std::min(options.element_begin, n_elements);
  const size_t end = std::min(options.element_end, n_elements);
  const bool whole_sequence = begin == 0 && end == n_elements;
  KernelForm form{choose_dispatch(m_lattice, m_options.dispatch), m_options.max_registers,
                  particles_per_thread_setting(m_options.particles_per_thread)};
  if ((!whole_sequence || per_element) && form.dispatch == Dispatch::Baked)
    form.dispatch = Dispatch::Switch;  // baked kernels run the whole sequence
  const bool variants = !m_impl->variants.empty();
  if (variants) {
    if (m_options.dispatch != Dispatch::Auto && m_options.dispatch != Dispatch::Switch)
      throw Error(
          fmt::format("lattice variants run with the switch dispatch (each particle reads its variant's "
                      "parameters); {} was asked for",
                      dispatch_name(m_options.dispatch)));
    form.dispatch = Dispatch::Switch;
    for (size_t i = 0; i < particles.variant.size(); ++i) particle_variant(particles, i, m_impl->variants.size());
  } else if (!particles.variant.empty()) {
    for (size_t i = 0; i < particles.variant.size(); ++i) particle_variant(particles, i, 1);
  }
  std::vector<std::pair<KernelForm, double>> measured;
  if (!variants && m_options.dispatch == Dispatch::Auto && !per_element && whole_sequence &&
      worth_measuring(particles, options)) {
    form = measured_form(particles, options);
    measured = m_impl->last_measurement;
  }
  run_form(particles, options, per_element, form);
  m_stats.measured_element_passes_per_s = std::move(measured);
}

namespace {

/// Auto dispatch: the sample of a run that each candidate form is timed on, and its size.
constexpr size_t kProbeMaxParticles = size_t(1) << 20;  // enough to fill any current GPU
constexpr double kProbeElementPasses = 2e9;             // about 10 ms per candidate at 2e11/s
constexpr double kProbeShareOfRun = 0.05;               // the probes' share of the run at most

size_t probe_particles(size_t n) { return std::min(n, kProbeMaxParticles); }

int64_t probe_turns(size_t sample, size_t elements, int64_t turns) {
  const double per_turn = static_cast<double>(sample) * static_cast<double>(std::max<size_t>(elements, 1));
  return std::clamp<int64_t>(static_cast<int64_t>(kProbeElementPasses / per_turn), 1, std::max<int64_t>(turns, 1));
}

}  // namespace

std::string kernel_form_name(const KernelForm& form) {
  std::string name = dispatch_name(form.dispatch);
  if (form.max_registers > 0) name += fmt::format(", {} registers", form.max_registers);
  if (form.particles_per_thread > 1) name += fmt::format(", {} particles per thread", form.particles_per_thread);
  return name;
}

bool CudaBackend::worth_measuring(const Particles& particles, const TrackOptions& options) const {
  const size_t elements = m_lattice.sequence().size();
  const size_t sample = probe_particles(particles.size());
  const double run = static_cast<double>(particles.size()) * static_cast<double>(elements) *
                     static_cast<double>(std::max<int64_t>(options.turns, 0));
  const double probes = 5.0 * static_cast<double>(sample) * static_cast<double>(elements) *
                        static_cast<double>(probe_turns(sample, elements, options.turns));
  return run > 0.0 && (m_options.always_measure || probes <= kProbeShareOfRun * run);
}

KernelForm CudaBackend::measured_form(const Particles& particles, const TrackOptions& options) {
  const auto key = std::make_pair(static_cast<int>(options.fma),
                                  static_cast<int>(std::floor(std::log10(static_cast<double>(particles.size())))));
  m_impl->last_measurement.clear();
  if (auto it = m_impl->measured_forms.find(key); it != m_impl->measured_forms.end()) return it->second;

  const size_t sample = probe_particles(particles.size());
  const size_t elements = m_lattice.sequence().size();
  Particles probe(sample, particles.beta0);
  for (size_t i = 0; i < sample; ++i) probe.store(i, particles.view(i));
  TrackOptions probe_options;
  probe_options.turns = probe_turns(sample, elements, options.turns);
  probe_options.fma = options.fma;
  probe_options.first_turn = options.first_turn;

  // Register caps are not candidates: on the thin collider with 16 crab cavities (H100, 10^6
  // particles) the switch capped at 64 registers ran at 0.42x and at 80 at 0.89x of the uncapped
  // switch (92 registers): the spills cost every element, not only the rare heavy one.
  const int particles_per_thread = particles_per_thread_setting(m_options.particles_per_thread);
  std::vector<KernelForm> candidates = {{Dispatch::Switch, 0, particles_per_thread}, {Dispatch::Staged, 0, 1}};
  if (bakeable(m_lattice)) candidates.push_back({Dispatch::Baked, 0, 1});
  std::vector<std::pair<KernelForm, double>> measured;
  KernelForm best = candidates.front();
  double best_rate = 0.0;
  for (size_t c = 0; c < candidates.size(); ++c) {
    Particles copy = probe;
    run_form(copy, probe_options, false, candidates[c]);
    const double rate = static_cast<double>(sample) * static_cast<double>(elements) *
                        static_cast<double>(probe_options.turns) / std::max(m_stats.kernel_seconds, 1e-12);
    measured.emplace_back(candidates[c], rate);
    if (rate > best_rate) best_rate = rate, best = candidates[c];
  }
  m_impl->measured_forms[key] = best;
  m_impl->last_measurement = measured;
  return best;
}

void CudaBackend::run_form(Particles& particles, const TrackOptions& options, bool per_element, KernelForm form) {
  const cuda::Driver& d = *m_impl->d;
  m_stats = CudaRunStats{};
  m_stats.form = form;
  const size_t n_elements = m_lattice.sequence().size();
  const size_t begin = std::min(options.element_begin, n_elements);
  const size_t end = std::min(options.element_end, n_elements);
  LoadedKernel& kernel = get_kernel(*m_impl, m_lattice, m_options, options.fma, form, m_gpu.arch, m_stats);
  const size_t particles_per_thread = static_cast<size_t>(kernel.source.particles_per_thread);
  m_stats.form.particles_per_thread = kernel.source.particles_per_thread;
  CUdeviceptr steps = m_impl->switch_steps;
  CUdeviceptr params = m_impl->switch_params;  // unused (0) by baked kernels

  // Particles resident on the device at once: all of them when they fit in 80% of free memory,
  // otherwise consecutive chunks, each tracked for all turns (single-particle physics is
  // independent per particle, so chunking does not change results).
  // (fusetrack/memory_budget.h: FUSETRACK_GPU_MEMORY_LIMIT caps the memory used.)
  size_t free_bytes = 0, total_bytes = 0;
  check(d.mem_get_info(&free_bytes, &total_bytes), "cuMemGetInfo");
  const size_t n = particles.size();
  const size_t resident =
      plan_gpu_residency(n, kBytesPerParticle, free_bytes, m_options.max_resident_particles,
                         static_cast<bool>(options.callback), "a run with per-turn callbacks (monitors, checkpoints)")
          .resident;

  DeviceParticleBuffers buffers(d, *m_impl->staging, resident, m_stats);
  DeviceParticles& dp = buffers.arrays();
  // Each particle's variant (null: every particle reads the first table).
  const bool with_variants = !m_impl->variants.empty() && !particles.variant.empty();
  CUdeviceptr variant_index = 0;
  if (with_variants)
    check_alloc(d, &variant_index, std::max<size_t>(resident, 1) * sizeof(int32_t), "cuMemAlloc(variants)");
  unsigned long long variant_stride = m_impl->variant_stride;

  CUevent ev0, ev1;
  check(d.event_create(&ev0, CU_EVENT_DEFAULT), "cuEventCreate");
  check(d.event_create(&ev1, CU_EVENT_DEFAULT), "cuEventCreate");
  const GlobalLimits limits = m_lattice.limits();
  double beta0 = particles.beta0;
  int n_el = static_cast<int>(n_elements), eb = static_cast<int>(begin), ee = static_cast<int>(end);

  for (size_t first = 0; first < n; first += resident) {
    const size_t count = std::min(resident, n - first);
    ++m_stats.chunks;
    buffers.upload(particles, first, count);
    if (with_variants)
      check(d.memcpy_htod(variant_index, particles.variant.data() + first, count * sizeof(int32_t)),
            "cuMemcpyHtoD(variants)");
    const int64_t chunk_turns = options.callback_every > 0 ? options.callback_every : options.turns;
    int64_t done = 0;
    int n_particles = static_cast<int>(count);
    // Few particles (a DA scan late in its life): small blocks spread them over every multiprocessor.
    // FUSETRACK_THREADS_PER_BLOCK (1..128) overrides both, for the benchmarks.
    static const int tpb_from_env = [] {
      const char* v = std::getenv("FUSETRACK_THREADS_PER_BLOCK");
      return v ? std::clamp(std::atoi(v), 0, 128) : 0;
    }();
    const bool few = count < static_cast<size_t>(m_gpu.multiprocessors) * 512;
    const int tpb = m_options.threads_per_block > 0 ? m_options.threads_per_block
                    : tpb_from_env > 0              ? tpb_from_env
                    : few                           ? 32
                                                    : 128;
    // The kernel form for few particles, where the source has one (CudaBackendOptions::few_particles_form).
    static const int few_form_from_env = [] {
      const char* v = std::getenv("FUSETRACK_FEW_PARTICLES_FORM");
      return v ? std::atoi(v) : -1;
    }();
    const int few_form = m_options.few_particles_form >= 0 ? m_options.few_particles_form : few_form_from_env;
    const bool use_few_form = kernel.few_particles && (few_form < 0 ? few : few_form > 0);
    CUfunction function = use_few_form ? kernel.few_particles : kernel.function;
    if (first == 0) {  // the resources of the entry point that runs (of the first chunk's)
      d.func_get_attribute(&m_stats.registers_per_thread, CU_FUNC_ATTRIBUTE_NUM_REGS, function);
      d.func_get_attribute(&m_stats.local_bytes_per_thread, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, function);
    }
    const size_t threads = (count + particles_per_thread - 1) / particles_per_thread;
    const unsigned blocks = static_cast<unsigned>((threads + static_cast<size_t>(tpb) - 1) / static_cast<size_t>(tpb));
    while (done < options.turns) {
      int turns_now = static_cast<int>(std::min(chunk_turns, options.turns - done));
      check(d.event_record(ev0, nullptr), "cuEventRecord");
      // Fused: one launch for `turns_now` turns of [begin, end). Per element (benchmark
      // baseline): one launch per element and turn, particles through device memory in between.
      const int64_t turn_launches = per_element ? turns_now : 1;
      for (int64_t t = 0; t < turn_launches; ++t) {
        int first_turn = static_cast<int>(options.first_turn + done + t);
        int launch_turns = per_element ? 1 : turns_now;
        const size_t element_launches = per_element ? end - begin : 1;
        for (size_t k = 0; k < element_launches; ++k) {
          int lb = per_element ? static_cast<int>(begin + k) : eb;
          int le = per_element ? lb + 1 : ee;
          void* args[] = {&dp,
                          &steps,
                          &params,
                          &n_particles,
                          &beta0,
                          &lb,
                          &le,
                          &n_el,
                          &first_turn,
                          &launch_turns,
                          const_cast<GlobalLimits*>(&limits),
                          &variant_index,
                          &variant_stride};
          check(d.launch_kernel(function, blocks, 1, 1, static_cast<unsigned>(tpb), 1, 1, 0, nullptr, args, nullptr),
                "cuLaunchKernel");
          ++m_stats.launches;
        }
      }
      check(d.event_record(ev1, nullptr), "cuEventRecord");
      check(d.event_synchronize(ev1), "kernel execution");
      float ms = 0;
      d.event_elapsed_time(&ms, ev0, ev1);
      m_stats.kernel_seconds += ms * 1e-3;
      done += turns_now;
      if (options.callback) {
        buffers.download(particles, first, count);
        if (!options.callback(done, particles)) break;
      }
    }
    if (!options.callback) buffers.download(particles, first, count);
  }
  d.event_destroy(ev0);
  d.event_destroy(ev1);
  if (variant_index) d.mem_free(variant_index);
}

std::vector<CollectiveSnapshot> CudaBackend::collective_snapshots() const {
  std::vector<CollectiveSnapshot> profiles;  // the profile kind's (grid elements: grid_reports)
  for (size_t c = 0; c < m_impl->snapshots.size(); ++c)
    if (c < m_impl->collective.size() && m_impl->collective[c].solver) profiles.push_back(m_impl->snapshots[c]);
  return profiles;
}

std::vector<GridCollectiveReport> CudaBackend::grid_reports() const {
  std::vector<GridCollectiveReport> reports;
  for (const DeviceCollective& c : m_impl->collective)
    if (c.grid) reports.push_back(c.grid->report());
  return reports;
}

double CudaBackend::copy_bandwidth(size_t bytes) {
  const cuda::Driver& d = *m_impl->d;
  check(d.ctx_set_current(m_impl->context), "cuCtxSetCurrent");
  CUdeviceptr a = 0, b = 0;
  check_alloc(d, &a, bytes, "cuMemAlloc(bandwidth)");
  check_alloc(d, &b, bytes, "cuMemAlloc(bandwidth)");
  CUevent e0, e1;
  check(d.event_create(&e0, CU_EVENT_DEFAULT), "cuEventCreate");
  check(d.event_create(&e1, CU_EVENT_DEFAULT), "cuEventCreate");
  float best_ms = 1e30f;
  for (int i = 0; i < 6; ++i) {
    check(d.event_record(e0, nullptr), "cuEventRecord");
    check(d.memcpy_dtod(b, a, bytes), "cuMemcpyDtoD");
    check(d.event_record(e1, nullptr), "cuEventRecord");
    check(d.event_synchronize(e1), "bandwidth copy");
    float ms = 0;
    d.event_elapsed_time(&ms, e0, e1);
    if (i > 0) best_ms = std::min(best_ms, ms);
  }
  d.event_destroy(e0);
  d.event_destroy(e1);
  d.mem_free(a);
  d.mem_free(b);
  return 2.0 * static_cast<double>(bytes) / (best_ms * 1e-3);
}

}  // namespace ft
