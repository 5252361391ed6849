// The shared workflows of the command line and the Python module (session.h).
#include "fusetrack/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "fusetrack/collective.h"
#include "fusetrack/cuda_device.h"
#include "fusetrack/error.h"
#include "fusetrack/optics.h"
#include "fusetrack/slice_wakes.h"
#include "fusetrack/space_charge.h"

namespace ft {

namespace {

InputError option_error(const std::string& option, const std::string& problem) {
  InputLocation at;
  at.field = option;
  return InputError(at, problem);
}

double elapsed_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Backends

FmaMode parse_fma_mode(const std::string& text, const std::string& option) {
  if (text == "off") return FmaMode::Off;
  if (text == "on") return FmaMode::On;
  throw option_error(option, fmt::format("'{}' is not a numerics mode: expected off or on", text));
}

void check_device_name(const std::string& text, const std::string& option) {
  if (text != "auto" && text != "cpu" && text != "gpu")
    throw option_error(option, fmt::format("'{}' is not a device: expected auto, cpu or gpu", text));
}

std::unique_ptr<Backend> make_backend(const Lattice& lattice, const BackendChoice& choice,
                                      std::vector<std::string>* notices) {
  check_device_name(choice.device, "device");
  if (choice.device == "cpu") return make_cpu_backend(lattice);
  const std::string why = gpu_unavailable_reason();
  if (!why.empty()) {
    if (choice.device == "gpu") throw DeviceError("--device gpu: " + why);
    if (notices) notices->push_back(fmt::format("no usable GPU ({}); tracking on the CPU", why));
    return make_cpu_backend(lattice);
  }
  CudaBackendOptions co;
  co.cache_dir = choice.cache_dir;
  co.dispatch = choice.dispatch;
  // Several ranks on a node: one GPU each, by node-local rank.
  Communicator& comm = world();
  const int gpus = static_cast<int>(list_gpus().size());
  if (comm.size() > 1 && gpus > 0) co.device = comm.local_rank() % gpus;
  if (comm.size() > 1 && comm.local_size() > gpus && notices)
    notices->push_back(fmt::format("{} ranks on this node share {} GPU(s)", comm.local_size(), gpus));
  return std::make_unique<CudaBackend>(lattice, co);
}

// ---------------------------------------------------------------------------------------------
// Initial particles

Particles make_matched_gaussian(const Lattice& lattice, const GaussianBunchSpec& spec) {
  if (!(spec.emittance_nx > 0) || !(spec.emittance_ny > 0))
    throw option_error(spec.emittance_label, "a Gaussian distribution needs positive normalised emittances");
  if (spec.sigma_zeta < 0 || spec.sigma_delta < 0) throw option_error(spec.sigma_label, "must not be negative");
  const LinearOptics optics = compute_linear_optics(lattice);
  return make_gaussian(lattice, optics, spec.count, spec.emittance_nx, spec.emittance_ny, spec.sigma_zeta,
                       spec.sigma_delta, spec.seed);
}

Particles particles_per_variant(const Particles& one, size_t variants) {
  Particles particles(0, one.beta0);
  for (size_t v = 0; v < variants; ++v) append_particles(particles, one);
  particles.variant.resize(particles.size());
  for (size_t v = 0; v < variants; ++v)
    std::fill(particles.variant.begin() + static_cast<long>(v * one.size()),
              particles.variant.begin() + static_cast<long>((v + 1) * one.size()), static_cast<int32_t>(v));
  return particles;
}

std::vector<size_t> alive_per_variant(const Particles& particles, size_t variants) {
  std::vector<size_t> alive(variants, 0);
  for (size_t i = 0; i < particles.size(); ++i) {
    const size_t v = particles.variant.empty() ? 0 : static_cast<size_t>(particles.variant[i]);
    if (particles.state[i] > 0 && v < variants) ++alive[v];
  }
  return alive;
}

Particles make_repro_particles(const Lattice& lattice, size_t count, double amplitude, double delta) {
  const size_t side = static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(count))));
  Particles initial =
      make_grid(lattice.reference().beta0(), -amplitude, amplitude, side, -amplitude, amplitude, side, delta);
  initial.resize(count);
  if (lattice.has_collective()) {
    // A bunch for the collective elements: zeta spread over the middle of the first one's cuts
    // (a deterministic, low-discrepancy fill), delta alternating around the grid's offset.
    // (A space-charge grid's zeta extent; an adapted one: +-1 m.)
    const TurnProgram program = TurnProgram::build(lattice);
    double zeta_min = -1.0, zeta_max = 1.0;
    const size_t first = program.collective.front();
    if (lattice.element(first).type->is_grid_collective()) {
      const ft_grid_model m = GridCollectiveSolver(lattice, first, FmaMode::Off, 1).model();
      if (!(m.adapt_sigmas[2] > 0.0)) zeta_min = m.min[2], zeta_max = m.max[2];
    } else if (lattice.element(first).type->is_moments_collective()) {
      const ft_profile_grid g = MomentsCollectiveSolver(lattice, first, 1).model().grid;
      zeta_min = g.zeta_min, zeta_max = g.zeta_max;
    } else {
      const ft_profile_grid g = CollectiveSolver(lattice, first, FmaMode::Off, 1).grid();
      zeta_min = g.zeta_min, zeta_max = g.zeta_max;
    }
    const double centre = 0.5 * (zeta_min + zeta_max), half = 0.2 * (zeta_max - zeta_min);
    for (size_t i = 0; i < initial.size(); ++i) {
      const double u = std::fmod(0.5 + 0.6180339887498949 * static_cast<double>(i), 1.0);
      initial.set(i, initial.x[i], initial.px[i], initial.y[i], initial.py[i], centre + half * (2.0 * u - 1.0),
                  (i % 2 ? 1.0 : -1.0) * delta);
    }
  }
  return initial;
}

// ---------------------------------------------------------------------------------------------
// Tracking a bunch

namespace {

/// The GPU backend's own account of the last track() call (zeros on the CPU).
void add_device_times(const Backend& backend, TrackRun& run) {
  const auto* gpu = dynamic_cast<const CudaBackend*>(&backend);
  if (!gpu) return;
  const CudaRunStats& s = gpu->last_stats();
  run.setup_seconds = s.compile_seconds + s.setup_seconds;
  run.upload_seconds = s.upload_seconds;
  run.kernel_seconds = s.kernel_seconds;
  run.download_seconds = s.download_seconds;
  run.generate_seconds = s.generate_seconds;
}

/// Frozen space charge that follows the beam: one update at `turn` (session.h, SpaceChargeFollowOptions).
/// Rank 0 takes the moments of the whole bunch (gathered in rank order) and computes the sizes; they
/// reach every rank through a sum in which the other ranks add zeros (exact), so all apply the same.
void update_space_charge(const Lattice& lattice, Backend& backend, const Particles& tracked, const TrackRunOptions& o,
                         const SpaceChargeBeamSizes& follow, double intensity, int64_t turn, TrackRun& run) {
  Communicator& comm = world();
  const bool parallel = comm.size() > 1;
  const size_t n = follow.elements();
  SpaceChargeUpdate u;
  u.turn = turn;
  std::string failure;
  bool ok = true;
  {
    Particles gathered;
    if (parallel) gathered = comm.gather(tracked);
    const Particles& all = parallel ? gathered : tracked;
    if (comm.is_root()) {
      const BunchMoments m = bunch_moments(all, lattice.reference().p0c);
      u.total = all.size();
      u.alive = static_cast<size_t>(m.alive);
      u.emittance_x = m.emittance_x;
      u.emittance_y = m.emittance_y;
      u.rms_delta = m.rms_delta;
      u.rms_zeta = m.rms_zeta;
      u.mean_zeta = m.mean_zeta;
      try {
        u.sizes = follow.sizes(m, all.size(), intensity);
      } catch (const Error& e) {
        ok = false;
        failure = fmt::format("{}: at turn {}: {}", o.space_charge.label, turn, e.what());
      }
    }
  }
  if (parallel) {
    std::vector<double> packet(1 + 5 * n, 0.0);
    if (comm.is_root()) {
      packet[0] = ok ? 1.0 : 0.0;
      for (size_t k = 0; ok && k < n; ++k) {
        const SpaceChargeSizes& z = u.sizes[k];
        double* v = packet.data() + 1 + 5 * k;
        v[0] = z.sigma_x, v[1] = z.sigma_y, v[2] = z.sigma_z, v[3] = z.z0, v[4] = z.number_of_particles;
      }
    }
    comm.allreduce_sum(packet.data(), packet.size());
    ok = packet[0] == 1.0;
    if (!ok && !comm.is_root())
      failure = fmt::format("{}: the update at turn {} failed on rank 0", o.space_charge.label, turn);
    if (ok && !comm.is_root()) {
      u.sizes.resize(n);
      for (size_t k = 0; k < n; ++k) {
        const double* v = packet.data() + 1 + 5 * k;
        u.sizes[k] = SpaceChargeSizes{v[0], v[1], v[2], v[3], v[4]};
      }
    }
  }
  if (!ok) throw Error(failure);
  follow.apply(*o.space_charge.lattice, u.sizes);
  // The CPU backend reads the elements' parameters at every call (and a collective lattice's solvers
  // keep their multi-turn memory that way); the GPU uploads its switch table again or rebuilds a
  // baked kernel (a GPU with collective elements is refused before tracking).
  if (!lattice.has_collective() || dynamic_cast<CudaBackend*>(&backend)) backend.parameters_changed();
  if (!comm.is_root()) return;
  for (const SpaceChargeSizes& z : u.sizes) u.mean_sigma_x += z.sigma_x, u.mean_sigma_y += z.sigma_y;
  u.mean_sigma_x /= static_cast<double>(n);
  u.mean_sigma_y /= static_cast<double>(n);
  if (o.space_charge.on_update) o.space_charge.on_update(u);
  run.space_charge_updates.push_back(std::move(u));
}

/// Tracking with frozen space charge that follows the beam: pieces of K turns, an update before the
/// first and after every piece that ends at a multiple of K. `options` (with the monitor's and the
/// ranks' callback) is the run's whole; each piece calls its callback at the same turns a single
/// track() call would (every callback_every turns and after the last).
void track_following(const Lattice& lattice, Backend& backend, Particles& tracked, const TrackOptions& options,
                     const TrackRunOptions& o, const SpaceChargeBeamSizes& follow, double intensity, TrackRun& run) {
  const int64_t k = o.space_charge.every;
  const int64_t turns = options.turns;
  const int64_t every = options.callback_every > 0 ? options.callback_every : turns;
  int64_t done = 0;
  bool stopped = false;
  update_space_charge(lattice, backend, tracked, o, follow, intensity, 0, run);
  while (done < turns && !stopped) {
    TrackOptions piece = options;
    piece.turns = std::min(k, turns - done);
    piece.first_turn = options.first_turn + done;
    if (options.callback) {
      // Pieces start at multiples of K: calls every gcd(K, every) turns reach every multiple of `every`.
      piece.callback_every = std::gcd(k, every);
      const int64_t start = done;
      piece.callback = [&, start](int64_t d, const Particles& p) {
        const int64_t global = start + d;
        if (global % every != 0 && global != turns) return true;
        if (options.callback(global, p)) return true;
        stopped = true;
        return false;
      };
    }
    backend.track(tracked, piece);
    done += piece.turns;
    if (!stopped && done % k == 0) update_space_charge(lattice, backend, tracked, o, follow, intensity, done, run);
  }
}

/// One run_tracking call. Several MPI ranks: each tracks a contiguous share of the particles; collective
/// profiles are summed over the ranks every turn; rank 0 gathers the particles (unless each rank holds its
/// own share) and holds the monitor.
class TrackingRun {
 public:
  TrackingRun(const Lattice& lattice, Backend& backend, Particles& particles, const TrackRunOptions& o)
      : m_lattice(lattice),
        m_backend(backend),
        m_particles(particles),
        m_o(o),
        m_comm(world()),
        m_parallel(m_comm.size() > 1),
        m_is_share(o.particles_are_share || o.matched),
        m_split_here(m_parallel && !m_is_share),
        m_macroparticles(m_is_share ? o.total_particles : particles.size()) {
    m_run.root = m_comm.is_root();
    m_run.ranks = m_comm.size();
    m_run.backend = backend.name();
  }

  TrackRun run() {
    check_space_charge_follow();
    make_initial_share();
    set_track_options();
    attach_monitor();
    add_on_turn();
    track();
    finish();
    return std::move(m_run);
  }

 private:
  Particles& tracked() { return m_split_here ? m_share_particles : m_particles; }

  /// Frozen space charge that follows the beam: its elements and intensity, checked before anything runs.
  void check_space_charge_follow() {
    const SpaceChargeFollowOptions& sc = m_o.space_charge;
    if (sc.every == 0) return;
    if (sc.every < 0) throw option_error(sc.label, fmt::format("must be a positive number of turns, got {}", sc.every));
    if (sc.lattice != &m_lattice)
      throw Error("run_tracking: space_charge.lattice must be the lattice that is tracked (it is changed in place)");
    if (m_lattice.has_collective() && dynamic_cast<CudaBackend*>(&m_backend))
      throw option_error(sc.label,
                         "on the GPU a lattice with collective elements would restart their multi-turn "
                         "memory at every update (the backend is set up again): track it on the CPU "
                         "(--device cpu)");
    try {
      m_follow = std::make_unique<SpaceChargeBeamSizes>(m_lattice, sc.optics);
      m_sc_intensity = sc.intensity >= 0.0 ? sc.intensity : m_follow->installed_intensity(m_lattice);
    } catch (const InputError& e) {  // the lattice's problem, reported with the option that needs it
      throw InputError(e.where(), fmt::format("{} (needed by {})", e.problem(), sc.label));
    }
    if (!std::isfinite(m_sc_intensity))
      throw option_error(sc.label, fmt::format("the bunch intensity must be finite, got {}", m_sc_intensity));
    m_run.space_charge_elements = m_follow->entries();
  }

  /// A matched share: the GPU makes it on the device inside track_matched_share; any other backend gets
  /// it sampled here (also the GPU's when space charge follows the beam: tracked in pieces). Whole
  /// particles given to several ranks: this rank's share cut out.
  void make_initial_share() {
    m_device_maker = m_o.matched && !m_follow ? dynamic_cast<CudaBackend*>(&m_backend) : nullptr;
    if (m_o.matched && !m_device_maker) {
      const auto t = std::chrono::steady_clock::now();
      m_particles = m_o.matched->sample(m_o.threads);
      m_run.initial_sums = longitudinal_sums(m_particles);
      m_run.generate_seconds = elapsed_since(t);
    }
    if (m_run.root) {
      const std::string idle = idle_ranks_notice(m_macroparticles, m_comm.size(), "particles");
      if (!idle.empty()) fmt::print(stderr, "note: {}\n", idle);
    }
    if (m_split_here) {
      const Share share = share_of(m_particles.size(), m_comm.rank(), m_comm.size());
      m_share_particles = slice_particles(m_particles, share.begin, share.end);
    }
  }

  void set_track_options() {
    m_options.turns = m_o.turns;
    m_options.threads = m_o.threads;
    m_options.fma = m_o.fma;
    m_options.macroparticles = m_macroparticles;
    m_options.warnings = m_run.root;  // the same counts on every rank: printed once
    if (m_parallel)
      m_options.reduce_profile = [this](uint64_t* counts, size_t n) {
        const auto t = std::chrono::steady_clock::now();
        m_comm.allreduce_sum(counts, n);
        m_run.reduce_seconds += elapsed_since(t);
        ++m_run.reductions;
      };
  }

  /// Monitors (and the progress bar, which also runs without them).
  void attach_monitor() {
    MonitorOptions mo;
    mo.every = m_o.monitor_every;
    mo.profile_every = m_o.profile_every;
    mo.progress = m_o.progress;
    mo.total_turns = m_o.turns;
    if (!m_o.monitor) mo.every = std::max<int64_t>(1, m_o.turns / 200);  // progress only
    m_monitor = std::make_unique<BunchMonitor>(m_lattice, mo);
    // Under MPI the progress bar alone is not worth a gather: it comes with the monitor only.
    if (!(m_o.monitor || (!m_parallel && ProgressBar::wanted(mo.progress)))) return;
    m_monitor->attach(m_options, m_backend);
    // The monitor's first record (the initial particles; with particles made on the device, as soon
    // as they are made).
    m_record_initial = [this](const Particles& initial) {
      if (m_parallel && m_is_share) {  // the monitor's first record sees the whole bunch
        const Particles all = m_comm.gather(initial);
        if (m_run.root) m_monitor->record(0, all, nullptr);
      } else if (m_run.root) {
        m_monitor->record(0, initial, nullptr);
      }
    };
    if (!m_device_maker) m_record_initial(m_particles);
    if (m_parallel) {  // the monitor sees the whole bunch, on rank 0
      auto inner = m_options.callback;
      Communicator& comm = m_comm;
      m_options.callback = [inner, &comm](int64_t done, const Particles& local) {
        const Particles all = comm.gather(local);
        return comm.all(comm.is_root() ? inner(done, all) : true);
      };
    }
  }

  /// TrackRunOptions::on_turn on this rank's particles, around the monitor's callback (which gathers
  /// under MPI).
  void add_on_turn() {
    if (!m_o.on_turn) return;
    auto inner = m_options.callback;
    const int64_t inner_every = m_options.callback_every > 0 ? m_options.callback_every : m_o.turns;
    const int64_t every = std::max<int64_t>(1, m_o.on_turn_every), turns = m_o.turns;
    m_options.callback_every = inner ? std::gcd(inner_every, every) : every;
    const TrackRunOptions& o = m_o;
    m_options.callback = [inner, inner_every, every, turns, &o](int64_t done, const Particles& local) {
      if (done % every == 0 || done == turns) o.on_turn(done, local);
      if (inner && (done % inner_every == 0 || done == turns)) return inner(done, local);
      return true;
    };
  }

  /// The tracking between barriers; the particles' count and survivors over all ranks.
  void track() {
    m_comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t counts[2] = {0, 0};
    if (m_device_maker) {
      const CudaBackend::MatchedShareRun made = m_device_maker->track_matched_share(
          *m_o.matched, m_particles, m_options, m_o.keep_particles, m_record_initial);
      m_run.initial_sums = made.initial;
      m_run.generated_on_device = runs_collective(m_lattice, m_options);
      counts[0] = m_o.matched->count();
      counts[1] = made.alive;
    } else if (!m_follow) {
      m_backend.track(tracked(), m_options);
      counts[0] = tracked().size();
      counts[1] = tracked().alive_count();
    } else {
      track_following(m_lattice, m_backend, tracked(), m_options, m_o, *m_follow, m_sc_intensity, m_run);
      counts[0] = tracked().size();
      counts[1] = tracked().alive_count();
    }
    m_comm.barrier();
    m_run.seconds = elapsed_since(t0);
    const double generated_on_host = m_run.generate_seconds;
    add_device_times(m_backend, m_run);
    if (!m_device_maker) m_run.generate_seconds = generated_on_host;
    m_monitor->finish();
    if (m_parallel) m_comm.allreduce_sum(counts, 2);
    m_run.total = counts[0];
    m_run.alive = counts[1];
  }

  /// The matched bunch's sums and the particles gathered over the ranks; the collective reports.
  void finish() {
    if (m_o.matched && m_parallel) {
      const LongitudinalSums& s = m_run.initial_sums;
      double sums[5] = {s.count, s.zeta, s.zeta2, s.delta, s.delta2};
      m_comm.allreduce_sum(sums, 5);
      m_run.initial_sums = LongitudinalSums{sums[0], sums[1], sums[2], sums[3], sums[4]};
    }
    if (m_split_here) m_particles = m_comm.gather(m_share_particles);
    m_run.collective = m_backend.collective_snapshots();
    m_run.grid = m_backend.grid_reports();
    if (m_o.monitor && m_run.root) m_run.monitor = std::move(m_monitor);
  }

  const Lattice& m_lattice;
  Backend& m_backend;
  Particles& m_particles;
  const TrackRunOptions& m_o;
  Communicator& m_comm;
  const bool m_parallel, m_is_share, m_split_here;
  const size_t m_macroparticles;
  TrackRun m_run;
  std::unique_ptr<SpaceChargeBeamSizes> m_follow;  // sizes that follow the beam, where asked
  double m_sc_intensity = 0.0;
  CudaBackend* m_device_maker = nullptr;  // the GPU that makes the matched share on the device
  Particles m_share_particles;            // this rank's share where the particles were whole
  TrackOptions m_options;
  std::unique_ptr<BunchMonitor> m_monitor;
  std::function<void(const Particles&)> m_record_initial;
};

}  // namespace

TrackRun run_tracking(const Lattice& lattice, Backend& backend, Particles& particles, const TrackRunOptions& o) {
  return TrackingRun(lattice, backend, particles, o).run();
}

// ---------------------------------------------------------------------------------------------
// Dynamic-aperture scan jobs

DaJob::DaJob(Lattice& lattice, const DaConfig& config, const DaJobOptions& options)
    : m_lattice(lattice), m_options(options) {
  validate_da_config(config);
  GlobalLimits limits = lattice.limits();
  std::copy(config.turn_limits, config.turn_limits + 6, limits.turn_limit);
  lattice.set_limits(limits);
  start({}, {}, config);
}

DaJob::DaJob(LatticeVariants& variants, const DaConfig& config, const DaJobOptions& options)
    : m_lattice(variants.lattices.at(0)), m_variants(&variants), m_options(options) {
  validate_da_config(config);
  for (Lattice& lattice : variants.lattices) {
    GlobalLimits limits = lattice.limits();
    std::copy(config.turn_limits, config.turn_limits + 6, limits.turn_limit);
    lattice.set_limits(limits);
  }
  start(variants.pointers(), variants.names, config);
}

void DaJob::start(const std::vector<const Lattice*>& lattices, const std::vector<std::string>& names,
                  const DaConfig& config) {
  const DaJobOptions& options = m_options;
  // The share of the scan this process tracks: an MPI rank's, a job-array part's, or all of it.
  Communicator& comm = world();
  m_part = PartSpec{comm.rank(), comm.size()};
  m_job_part = !options.part.empty();
  if (m_job_part) {
    if (comm.size() > 1)
      throw option_error(options.part_label, "job-array parts and MPI ranks do not mix: use one or the other");
    if (config.refine_resolution > 0)
      throw option_error(options.part_label, "--refine needs whole rays: refine after merging the parts");
    m_part = parse_part(options.part, options.part_label);
  }
  DaScan full = lattices.empty() ? make_da_scan(m_lattice, config) : make_da_study(lattices, names, config, &comm);
  m_fingerprint = da_fingerprint(options.lattice_file, config);
  if (m_variants) m_fingerprint += "-" + variants_fingerprint(*m_variants);
  m_total = full.particles.size();
  m_share = share_of(m_total, m_part.index, m_part.count);
  // A job-array part tracks its contiguous share alone (da-merge concatenates the parts). MPI ranks
  // each hold the whole scan and split its survivors anew before every chunk (DaRunOptions::ranks):
  // the survivors, which crowd in the better variants, stay balanced over the ranks, and the
  // checkpoint (rank 0's) is that of one process, to be resumed with any number of ranks.
  const bool part_of_several = m_job_part && split();  // --part 0/1 is the whole scan
  if (part_of_several) {
    m_scan = slice_da_scan(full, m_share.begin, m_share.end);
  } else {
    m_scan = std::move(full);
    if (split()) m_run.ranks = &comm;
  }
  if (!options.output.empty()) std::filesystem::create_directories(options.output);
  m_run.checkpoint_every = options.checkpoint_every;
  // One checkpoint per job-array part: a resumed part must be the same part of the same split.
  if (!options.output.empty())
    m_run.checkpoint_file =
        (std::filesystem::path(options.output) /
         (part_of_several ? fmt::format("checkpoint.part{}of{}.npz", m_part.index, m_part.count) : "checkpoint.npz"))
            .string();
  m_run.fingerprint = part_of_several ? da_share_fingerprint(m_fingerprint, m_part.index, m_part.count) : m_fingerprint;
  m_run.fma = options.fma;
  m_run.threads = options.threads;
  m_run.stop = options.stop;
}

void DaJob::resume() {
  if (m_run.checkpoint_file.empty()) throw option_error("resume", "needs an output directory holding the checkpoint");
  if (m_run.ranks)
    read_da_checkpoint_on_root(m_scan, m_run.checkpoint_file, m_run.fingerprint, *m_run.ranks);
  else
    read_da_checkpoint(m_scan, m_run.checkpoint_file, m_run.fingerprint);
}

DaJobStatus DaJob::run(Backend& backend) {
  const bool root = this->root();
  DaRunOptions ro = m_run;
  // A planned stop (stop_after) sets a flag of its own; the caller's (SIGINT) is passed on to it
  // after every chunk, where the scan looks at it.
  const std::atomic<bool>* outer = m_options.stop;
  std::atomic<bool> stop{outer && outer->load()};
  ro.stop = &stop;
  ro.on_progress = [&](const DaProgress& p) {
    if (root && m_options.on_progress) m_options.on_progress(p);
    if (m_options.stop_after > 0 && p.turns_done >= m_options.stop_after) stop = true;
    if (outer && outer->load()) stop = true;
  };
  if (m_variants) backend.set_variants(m_variants->pointers());
  const bool done = run_da_scan(m_scan, backend, ro, &m_progress);
  if (!done && m_options.stop_after > 0 && m_scan.turns_done >= m_options.stop_after)
    return DaJobStatus::StoppedAsAsked;
  if (!done) return DaJobStatus::Interrupted;
  if (m_job_part) {
    write_da_part(m_scan, m_part.index, m_part.count, m_total, m_options.output, m_options.lattice_file, m_fingerprint);
    return DaJobStatus::PartWritten;
  }
  if (split()) {  // MPI: every rank holds the whole scan; rank 0 writes the results
    // Each rank's time in the backend and in the exchanges (microseconds), summed over the ranks:
    // the balance of the split.
    const size_t n_ranks = static_cast<size_t>(m_part.count), rank = static_cast<size_t>(m_part.index);
    std::vector<uint64_t> micros(2 * n_ranks, 0);
    micros[rank] = static_cast<uint64_t>(std::llround(m_progress.backend_seconds * 1e6));
    micros[n_ranks + rank] = static_cast<uint64_t>(std::llround(m_progress.exchange_seconds * 1e6));
    world().allreduce_sum(micros.data(), micros.size());
    m_rank_seconds.assign(n_ranks, 0.0);
    m_rank_exchange_seconds.assign(n_ranks, 0.0);
    for (size_t r = 0; r < n_ranks; ++r) {
      m_rank_seconds[r] = static_cast<double>(micros[r]) * 1e-6;
      m_rank_exchange_seconds[r] = static_cast<double>(micros[n_ranks + r]) * 1e-6;
    }
    if (!root) return DaJobStatus::NotRoot;
  }
  if (m_variants) {
    // Each variant summarized (and refined, through a backend given that variant alone) as it would be alone.
    std::vector<DaSummary> per_variant;
    for (size_t v = 0; v < m_variants->size(); ++v) {
      DaScan scan = da_variant_scan(m_scan, v);
      DaSummary summary = summarize_da(scan);
      if (m_scan.config.refine_resolution > 0) {
        backend.set_variants({&m_variants->lattices[v]});
        refine_da(m_variants->lattices[v], scan, summary, backend, ro);
      }
      per_variant.push_back(std::move(summary));
    }
    if (m_scan.config.refine_resolution > 0) backend.set_variants(m_variants->pointers());
    m_study = summarize_da_study(m_scan, std::move(per_variant));
    m_summary = m_study.per_variant.at(m_study.worst_variant);
    if (!m_options.output.empty()) write_da_study_results(m_scan, m_study, m_options.output, m_options.lattice_file);
    return DaJobStatus::Finished;
  }
  m_summary = summarize_da(m_scan);
  if (m_scan.config.refine_resolution > 0) refine_da(m_lattice, m_scan, m_summary, backend, ro);
  if (!m_options.output.empty()) write_da_results(m_scan, m_summary, m_options.output, m_options.lattice_file);
  return DaJobStatus::Finished;
}

// ---------------------------------------------------------------------------------------------
// CPU-GPU reproduction

ReproResult run_repro(const Lattice& lattice, const Particles& initial, const ReproOptions& options) {
  ReproResult r;
  auto cpu = make_cpu_backend(lattice);
  CudaBackendOptions co;
  co.cache_dir = options.cache_dir;
  CudaBackend gpu(lattice, co);  // throws with the reason when there is no GPU
  r.gpu_name = gpu.name();

  TrackOptions o;
  o.turns = options.turns;
  o.fma = options.fma;
  o.threads = options.threads;
  r.cpu = initial;
  r.gpu = initial;
  const auto t0 = std::chrono::steady_clock::now();
  cpu->track(r.cpu, o);
  r.cpu_seconds = elapsed_since(t0);
  gpu.track(r.gpu, o);
  r.gpu_stats = gpu.last_stats();
  r.comparison = compare_particles(r.cpu, r.gpu);
  // Collective lattices: the integer profiles and the solved fields of the last turn too.
  bool collective_identical = true;
  const auto cpu_snaps = cpu->collective_snapshots(), gpu_snaps = gpu.collective_snapshots();
  for (size_t k = 0; k < cpu_snaps.size() && k < gpu_snaps.size(); ++k) {
    CollectiveComparison c;
    c.element_name = cpu_snaps[k].element_name;
    c.counts_identical = cpu_snaps[k].counts == gpu_snaps[k].counts;
    c.field_size = cpu_snaps[k].field.size();
    for (size_t i = 0; i < cpu_snaps[k].field.size(); ++i) {
      c.peak = std::max(c.peak, std::fabs(cpu_snaps[k].field[i]));
      c.max_difference = std::max(c.max_difference, std::fabs(cpu_snaps[k].field[i] - gpu_snaps[k].field[i]));
      c.field_equal += ulp_distance(cpu_snaps[k].field[i], gpu_snaps[k].field[i]) == 0 ? 1 : 0;
    }
    collective_identical &= c.counts_identical && c.field_equal == c.field_size;
    r.collective.push_back(c);
  }
  r.identical = r.comparison.identical() && collective_identical;
  if (!r.identical && r.comparison.first_differing >= 0)
    r.divergence = find_divergence(lattice, *cpu, gpu, initial, static_cast<size_t>(r.comparison.first_differing),
                                   options.turns, options.fma);
  return r;
}

}  // namespace ft
