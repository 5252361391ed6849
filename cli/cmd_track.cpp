// fusetrack track LATTICE: track particles for N turns and write them out.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli_common.h"
#include "fusetrack/bunch_train.h"
#include "fusetrack/collective.h"
#include "fusetrack/device/collective.h"
#include "fusetrack/error.h"
#include "fusetrack/lattice_optimize.h"
#include "fusetrack/longitudinal.h"
#include "fusetrack/matched_bunch.h"
#include "fusetrack/monitor.h"
#include "fusetrack/optics.h"
#include "fusetrack/parallel.h"
#include "fusetrack/particle_files.h"
#include "fusetrack/reduction.h"
#include "fusetrack/session.h"
#include "fusetrack/variants.h"

namespace ft::cli {

namespace {

struct TrackArgs {
  CommonOptions common;
  std::string lattice;
  int64_t turns = 100;
  std::string particles_file;
  std::vector<double> grid;  // x_min x_max nx y_min y_max ny
  double delta = 0.0;
  std::string output;
  size_t gaussian = 0;  // number of particles of a matched Gaussian distribution
  double emittance_nx = 0.0, emittance_ny = 0.0, sigma_zeta = 0.0, sigma_delta = 0.0;
  uint64_t seed = 1;
  // Matched longitudinal bunch and monitors (collective lattices).
  double matched = 0;  // a count, given as 1000000 or 1e6
  std::string distribution = "gaussian";
  double mu = 1.5;
  bool potential_well = false;
  std::string monitor;
  int64_t monitor_every = 1;
  int64_t profile_every = 0;
  std::string plots;
  bool progress = false;
  bool optimize = false;  // markers and inactive elements removed, drifts and kicks merged (lattice_optimize.h)
  std::vector<std::string> variants;  // --variants: the particles tracked through every variant in one run
  // Frozen space charge whose sizes follow the beam (SpaceChargeFollowOptions).
  CLI::Option* space_charge_update_option = nullptr;
  int64_t space_charge_update = 0;
  CLI::Option* space_charge_intensity_option = nullptr;
  double space_charge_intensity = -1.0;  // not given: the elements' number_of_particles
  std::string space_charge_sizes;        // CSV of the updates; "": next to --output / --monitor
  bool verbose = false;
  // Bunch trains: --bunches copies of the generated bunch, bunch b at zeta - b spacing; per-bunch moments.
  int bunches = 1;
  double bunch_spacing = 0.0;  // [s]; 0: the spacing the lattice's train elements declare
  std::string bunches_output;  // CSV per turn and bunch
  int64_t bunches_every = 1;
};

/// A train's bunch count and zeta spacing: --bunches and --bunch-spacing [s] (beta0 c seconds), checked
/// against the train the lattice's slice-moment elements declare (declared_train: n_bunches > 1,
/// bunch_spacing [m]; a train read with --particles: theirs by default); `centre`: the middle of that
/// element's cuts (bunch 0), else 0.
BunchTrain train_spec(const TrackArgs& a, const Lattice& lattice) {
  InputLocation at;
  at.field = "--bunches";
  if (a.bunches < 1) throw InputError(at, fmt::format("must be >= 1, got {}", a.bunches));
  at.field = "--bunch-spacing";
  if (!(a.bunch_spacing >= 0.0) || !std::isfinite(a.bunch_spacing))
    throw InputError(at, fmt::format("must be a finite time >= 0 [s], got {}", a.bunch_spacing));
  const double beta_c = lattice.reference().beta0() * 299792458.0;
  const BunchTrain declared = declared_train(lattice);
  const int declared_bunches = declared.bunches > 1 ? declared.bunches : 0;
  BunchTrain t;
  t.bunches = a.bunches;
  t.centre = declared.centre;
  t.declared_by = declared.declared_by;
  t.spacing = a.bunch_spacing > 0.0 ? a.bunch_spacing * beta_c : declared.spacing;
  if (a.bunches == 1 && !a.particles_file.empty() && declared_bunches > 1)
    t.bunches = declared_bunches;  // a file's train
  if (t.bunches > 1 && !(t.spacing > 0.0))
    throw InputError(at,
                     "a train of --bunches > 1 needs a spacing: --bunch-spacing T [s], or the lattice's "
                     "TransverseWake/TransverseDamper n_bunches and bunch_spacing");
  if (a.bunches > 1 && declared_bunches > 0 &&
      (declared_bunches != t.bunches || std::fabs(t.spacing - declared.spacing) > 1e-9 * declared.spacing)) {
    at.file = lattice.source_file();  // the lattice's element that declares the train
    at.element_name = declared.declared_by;
    throw InputError(at, fmt::format("--bunches {} at {:.12g} m do not match element '{}': n_bunches {} at "
                                     "bunch_spacing {:.12g} m",
                                     t.bunches, t.spacing, declared.declared_by, declared_bunches, declared.spacing));
  }
  return t;
}

/// Per turn and bunch of a train: the centroids and the geometric rms emittances (bunch_moments: integer
/// moments summed over the ranks, the same numbers for any rank count), written by rank 0.
class BunchesWriter {
 public:
  BunchesWriter(const std::string& path, const BunchTrain& t, size_t total_particles, bool root)
      : m_root(root), m_path(path), m_train(t), m_total(std::max<size_t>(1, total_particles)) {
    if (m_root) {
      m_file = std::fopen(path.c_str(), "w");
      if (!m_file) throw Error(fmt::format("{}: cannot write the per-bunch moments", path));
      fmt::print(m_file,
                 "turn,bunch,macroparticles,mean_x,mean_px,mean_y,mean_py,mean_zeta,mean_delta,emittance_x,"
                 "emittance_y,out_of_range\n");
    }
  }
  ~BunchesWriter() {
    if (m_file) std::fclose(m_file);
  }
  BunchesWriter(const BunchesWriter&) = delete;
  BunchesWriter& operator=(const BunchesWriter&) = delete;

  void record(int64_t turn, const Particles& local) {
    const TrainMoments m = bunch_moments(local, m_train, m_total, &world());
    if (!m_root) return;
    for (int b = 0; b < m_train.bunches; ++b) {
      const size_t k = static_cast<size_t>(b);
      const auto& u = m.mean[k];
      fmt::print(m_file, "{},{},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{}\n", turn, b,
                 m.macroparticles[k], u[0], u[1], u[2], u[3], u[4], u[5], m.emittance_x[k], m.emittance_y[k],
                 m.out_of_range);
    }
  }
  void finish() {
    if (!m_file) return;
    const bool failed = std::ferror(m_file) != 0;
    const int closed = std::fclose(m_file);
    m_file = nullptr;
    if (closed != 0 || failed) throw Error(fmt::format("{}: writing the per-bunch moments failed", m_path));
  }

 private:
  bool m_root;
  std::string m_path;
  BunchTrain m_train;
  size_t m_total = 1;
  std::FILE* m_file = nullptr;
};

/// Where the space-charge updates are written: --space-charge-sizes, else next to the output
/// particles (OUTPUT without its extension + ".space_charge.csv"), the monitor, or in the current
/// directory.
std::string space_charge_sizes_path(const TrackArgs& a) {
  if (!a.space_charge_sizes.empty()) return a.space_charge_sizes;
  const std::string& next_to = !a.output.empty() ? a.output : a.monitor;
  if (next_to.empty()) return "space_charge_sizes.csv";
  return std::filesystem::path(next_to).replace_extension(".space_charge.csv").string();
}

/// One row per update and element: the turn, the element, the sizes it got and the beam's moments.
void write_space_charge_sizes(const std::string& path, const Lattice& lattice, const TrackRun& run) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw Error(fmt::format("{}: cannot write the space-charge sizes", path));
  fmt::print(f,
             "turn,element,name,s,sigma_x,sigma_y,sigma_z,z0,number_of_particles,alive,emittance_x,emittance_y,"
             "rms_delta\n");
  for (const SpaceChargeUpdate& u : run.space_charge_updates)
    for (size_t k = 0; k < u.sizes.size(); ++k) {
      const size_t e = run.space_charge_elements[k].sequence_index;
      const SpaceChargeSizes& z = u.sizes[k];
      fmt::print(f, "{},{},{},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{},{:.17g},{:.17g},{:.17g}\n", u.turn, e,
                 lattice.element(e).name, lattice.sequence()[e].s, z.sigma_x, z.sigma_y, z.sigma_z, z.z0,
                 z.number_of_particles, u.alive, u.emittance_x, u.emittance_y, u.rms_delta);
    }
  const bool failed = std::ferror(f) != 0;
  if (std::fclose(f) != 0 || failed) throw Error(fmt::format("{}: writing the space-charge sizes failed", path));
}

/// A matched longitudinal bunch (fusetrack/matched_bunch.h): every rank solves the same
/// distribution; its share is made where it is tracked (on the GPU: on the device).
struct MatchedRun {
  MatchedBunchReport report;
  std::unique_ptr<MatchedBunchShare> share;  // this rank's particles, not yet made
};

MatchedRun matched_run(const TrackArgs& a, const Lattice& lattice) {
  MatchedBunchOptions o;
  o.distribution = a.distribution;
  o.mu = a.mu;
  o.sigma_zeta = a.sigma_zeta;
  o.potential_well = a.potential_well;
  o.seed = a.seed;
  o.fma = parse_fma(a.common.fma);
  o.bucket.threads = threads_per_rank(a.common);
  Communicator& comm = world();
  MatchedRun m;
  m.report = match_longitudinal_bunch(lattice, o);
  const Share share = share_of(static_cast<size_t>(a.matched), comm.rank(), comm.size());
  m.share = std::make_unique<MatchedBunchShare>(m.report, a.seed, share.begin, share.size());
  return m;
}

/// The matched bunch's report, with the sample moments of the particles made (all ranks).
void print_matched(const TrackArgs& a, const Lattice& lattice, MatchedBunchReport r, const LongitudinalSums& sums) {
  set_sample_moments(r, sums);
  const size_t count = static_cast<size_t>(a.matched);
  fmt::print(
      "rf bucket   eta {:.6e}, stable zeta {:.6g} m, bucket [{:.6g}, {:.6g}] m, height delta {:.4e}, Qs {:.5e}\n",
      r.bucket.eta, r.bucket.zeta_s, r.bucket.zeta_left, r.bucket.zeta_right, r.bucket_height, r.qs0);
  fmt::print(
      "matched     {} {}{}: sigma_zeta {:.6g} m (RF alone {:.6g} m), sigma_delta {:.4e}, samples {:.6g} m / "
      "{:.4e}\n",
      count, r.distribution, r.distribution == "binomial" ? fmt::format(" (mu {})", r.mu) : "", r.sigma_zeta,
      r.sigma_zeta_rf, r.sigma_delta, r.sigma_zeta_sample, r.sigma_delta_sample);
  if (r.potential_well) {
    if (!lattice.has_collective())
      fmt::print("potential   the lattice has no collective element: no potential-well distortion\n");
    else
      fmt::print("potential   well {} after {} iterations (residual {:.2e}; single-turn wake), incoherent Qs {:.5e}\n",
                 r.converged ? "converged" : "NOT converged", r.iterations, r.residual, r.qs);
    if (!r.converged)
      fmt::print(stderr, "warning: the potential-well iteration did not converge (residual {:.2e})\n", r.residual);
  }
}

Particles one_bunch_particles(const TrackArgs& a, const Lattice& lattice);

/// The whole set of initial particles from a file, grid or Gaussian (every rank makes it); --bunches > 1:
/// the generated bunch copied into a train (a file holds its train as it is).
Particles whole_initial_particles(const TrackArgs& a, const Lattice& lattice) {
  if (a.bunches > 1 && a.particles_file.empty()) {
    // --gaussian: bunch b drawn with seed + b (independent bunches); --grid: copies.
    const BunchTrain train = train_spec(a, lattice);
    return make_bunch_train(train.bunches, train.spacing, [&](int b) {
      TrackArgs one = a;
      one.seed = a.seed + static_cast<uint64_t>(b);
      return one_bunch_particles(one, lattice);
    });
  }
  return one_bunch_particles(a, lattice);
}

Particles one_bunch_particles(const TrackArgs& a, const Lattice& lattice) {
  const double beta0 = lattice.reference().beta0();
  if (!a.particles_file.empty()) return read_particles(a.particles_file, beta0);
  if (a.gaussian > 0) {
    GaussianBunchSpec spec;
    spec.count = a.gaussian;
    spec.emittance_nx = a.emittance_nx;
    spec.emittance_ny = a.emittance_ny;
    spec.sigma_zeta = a.sigma_zeta;
    spec.sigma_delta = a.sigma_delta;
    spec.seed = a.seed;
    spec.emittance_label = "--emittance-nx/--emittance-ny";
    spec.sigma_label = "--sigma-zeta/--sigma-delta";
    return make_matched_gaussian(lattice, spec);
  }
  std::vector<double> g = a.grid;
  if (g.empty()) g = {1e-4, 1e-3, 10, 1e-4, 1e-3, 10};
  InputLocation at;
  at.field = "--grid";
  if (g.size() != 6) throw InputError(at, "expects six values: x_min x_max nx y_min y_max ny");
  // Bounded before the conversion to an integer (a double beyond size_t is undefined behaviour).
  if (!(g[2] >= 1 && g[2] <= 1e15) || !(g[5] >= 1 && g[5] <= 1e15) ||
      g[2] != static_cast<double>(static_cast<size_t>(g[2])) || g[5] != static_cast<double>(static_cast<size_t>(g[5])))
    throw InputError(at, "nx and ny must be positive integers");
  return make_grid(beta0, g[0], g[1], static_cast<size_t>(g[2]), g[3], g[4], static_cast<size_t>(g[5]), a.delta);
}

/// This rank's share of the initial particles (from a file, grid or Gaussian), and the size of the
/// whole bunch.
Particles initial_particles(const TrackArgs& a, const Lattice& lattice, size_t* total) {
  Communicator& comm = world();
  Particles all = whole_initial_particles(a, lattice);
  *total = all.size();
  if (comm.size() == 1) return all;
  const Share share = share_of(all.size(), comm.rank(), comm.size());
  return slice_particles(all, share.begin, share.end);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Where the time of the command went, on rank 0's clock.
struct TimeBreakdown {
  double start = 0.0, initial = 0.0, output = 0.0, total = 0.0;
  bool generated = false;  // a matched bunch made by run_tracking (TrackRun::generate_seconds)
};

void print_times(const TrackRun& run, const TimeBreakdown& t, double particle_turns, double passes) {
  fmt::print(
      "time        {:.3f} s  ({:.3g} element-passes/s upper bound, {:.3g} particle-turns/s) for the whole "
      "track() call\n",
      run.seconds, passes / run.seconds, particle_turns / run.seconds);
  if (run.kernel_seconds > 0.0) {
    // The kernels alone, as `fusetrack bench` times them (device events): the track() call also
    // compiles or loads the kernels, sets up the solvers and copies the particles both ways.
    fmt::print(
        "tracking    {:.3f} s in kernels: {:.3g} element-passes/s upper bound, {:.3g} particle-turns/s (as "
        "bench counts)\n",
        run.kernel_seconds, passes / run.kernel_seconds, particle_turns / run.kernel_seconds);
  }
  // A matched bunch made on the device counts inside the track() call; one made on the host before it.
  const double on_device = run.generated_on_device ? run.generate_seconds : 0.0;
  const double rest =
      run.seconds - run.setup_seconds - run.upload_seconds - run.kernel_seconds - run.download_seconds - on_device;
  const std::string generation = t.generated ? fmt::format(" (generation {:.3f} s on the {})", run.generate_seconds,
                                                           run.generated_on_device ? "device" : "host")
                                             : std::string();
  fmt::print(
      "breakdown   {:.3f} s in all: start-up {:.3f} s, initial particles {:.3f} s{}, setup/compile {:.3f} s, "
      "upload {:.3f} s, kernels {:.3f} s, download {:.3f} s, rest of track() {:.3f} s, output {:.3f} s\n",
      t.total, t.start, t.initial + run.generate_seconds, generation, run.setup_seconds, run.upload_seconds,
      run.kernel_seconds, run.download_seconds, std::max(0.0, rest), t.output);
}

/// The checks of the output paths and of the options of frozen space charge that follows the beam
/// (before anything is loaded); true where the sizes follow the beam (--space-charge-update).
bool check_output_and_space_charge_options(const TrackArgs& a, bool root) {
  if (!a.output.empty() && root) check_output_path(a.output, "--output");
  if (!a.monitor.empty() && root) check_output_path(a.monitor, "--monitor");
  const bool follow = a.space_charge_update_option && a.space_charge_update_option->count() > 0;
  if (follow) {
    InputLocation sc_at;
    sc_at.field = "--space-charge-update";
    if (a.space_charge_update <= 0)
      throw InputError(sc_at, fmt::format("must be a positive number of turns, got {}", a.space_charge_update));
    if (!a.variants.empty()) throw InputError(sc_at, "does not mix with --variants");
    sc_at.field = "--space-charge-intensity";
    if (a.space_charge_intensity_option->count() > 0 &&
        (!(a.space_charge_intensity >= 0.0) || !std::isfinite(a.space_charge_intensity)))
      throw InputError(sc_at, fmt::format("must be finite and >= 0, got {}", a.space_charge_intensity));
    if (root) check_output_path(space_charge_sizes_path(a), "--space-charge-sizes");
  } else {
    InputLocation sc_at;
    sc_at.field = a.space_charge_intensity_option->count() > 0 ? "--space-charge-intensity" : "--space-charge-sizes";
    if (a.space_charge_intensity_option->count() > 0 || !a.space_charge_sizes.empty())
      throw InputError(sc_at, "needs --space-charge-update K");
  }
  return follow;
}

/// The lattice of a run: the file's (optimized with --optimize), or its variants (--variants: the same
/// particles through each variant, all in one run, each particle a copy carrying its variant;
/// fusetrack/variants.h). Variants are applied before the optimization.
struct TrackedLattice {
  LatticeVariants variants;
  Lattice single;  // the file's lattice where there are no variants
  OptimizeReport optimization;

  const Lattice& lattice() const { return variants.lattices.empty() ? single : variants.lattices[0]; }
};

void load_tracked_lattice(const TrackArgs& a, ElementRegistry& registry, TrackedLattice& t) {
  if (!a.variants.empty()) {
    InputLocation v_at;
    v_at.field = "--variants";
    if (a.matched > 0 || !a.monitor.empty() || world().size() > 1)
      throw InputError(v_at, "tracks particles from a file or a grid, without --matched, --monitor or MPI ranks");
    t.variants = load_variants(load_lattice(a.lattice, registry), a.variants, registry);
    if (a.optimize) t.variants.lattices = optimize_variants_for_tracking(t.variants.pointers(), &t.optimization);
  }
  t.single = [&] {
    if (!t.variants.lattices.empty()) return Lattice();
    Lattice loaded = load_lattice(a.lattice, registry);
    if (!a.optimize) return loaded;
    return optimize_for_tracking(loaded, &t.optimization);
  }();
  if (a.optimize && world().is_root()) fmt::print("{}\n", t.optimization.summary());
}

/// The backend of --device/--dispatch. Sizes that follow the beam change parameters every K turns: on
/// the GPU the switch kernel takes them by uploading its table again, where a baked kernel (auto's form
/// of short lattices) would be compiled again at every update.
std::unique_ptr<Backend> make_track_backend(const TrackArgs& a, const TrackedLattice& t, bool follow) {
  CommonOptions backend_options = a.common;
  if (follow && backend_options.dispatch == "auto") backend_options.dispatch = "switch";
  auto backend = make_backend(t.lattice(), backend_options);
  if (!t.variants.lattices.empty()) backend->set_variants(t.variants.pointers());
  return backend;
}

void check_monitor_options(const TrackArgs& a) {
  InputLocation at;
  at.field = "--profile-every";
  if (a.profile_every < 0 || (a.profile_every > 0 && a.profile_every % a.monitor_every != 0))
    throw InputError(at, fmt::format("must be a multiple of --monitor-every ({})", a.monitor_every));
  at.field = "--plots";
  if (!a.plots.empty() && a.monitor.empty()) throw InputError(at, "needs --monitor FILE.npz");
}

/// The bunch a run starts from: this rank's particles (or the matched bunch's share, made by
/// run_tracking), the size of the whole bunch and its train.
struct InitialBunch {
  size_t size = 0;
  Particles particles;
  MatchedRun matched;
  BunchTrain train;
};

InitialBunch initial_bunch(const TrackArgs& a, const TrackedLattice& t) {
  const Lattice& lattice = t.lattice();
  InitialBunch b;
  b.train = train_spec(a, lattice);  // checks --bunches, --bunch-spacing against the elements
  InputLocation at;
  at.field = "--bunches";
  if (a.bunches > 1 && (a.matched > 0 || !a.variants.empty()))
    throw InputError(at,
                     "a train is made from --gaussian or --grid (or read with --particles), not with --matched "
                     "or --variants");
  at.field = "--bunches-every";
  if (a.bunches_every < 1) throw InputError(at, fmt::format("must be >= 1, got {}", a.bunches_every));
  if (a.matched > 0) {
    at.field = "--matched";
    if (!(a.matched <= 1e15) || a.matched != std::floor(a.matched))
      throw InputError(at, fmt::format("expects a whole number of particles (1000000 or 1e6), got {}", a.matched));
    b.size = static_cast<size_t>(a.matched);
    b.matched = matched_run(a, lattice);  // the particles are made by run_tracking (on the GPU: on the device)
  } else {
    b.particles = initial_particles(a, lattice, &b.size);
  }
  if (!t.variants.lattices.empty()) {
    b.particles = particles_per_variant(b.particles, t.variants.size());
    b.size = b.particles.size();
  }
  return b;
}

/// The options of run_tracking from the command's (the per-turn callback of --bunches-output aside).
TrackRunOptions track_run_options(const TrackArgs& a, const InitialBunch& b, TrackedLattice& t, bool follow) {
  TrackRunOptions options;
  options.turns = a.turns;
  options.threads = threads_per_rank(a.common);
  options.fma = parse_fma(a.common.fma);
  options.monitor = !a.monitor.empty();
  options.monitor_every = a.monitor_every;
  options.profile_every = a.profile_every;
  options.progress = a.progress ? "on" : "auto";
  options.particles_are_share = true;
  options.total_particles = b.size;
  options.matched = b.matched.share.get();
  options.keep_particles = !a.output.empty();  // nothing else reads the final particles
  if (follow) {
    options.space_charge.every = a.space_charge_update;
    options.space_charge.lattice = &t.single;
    options.space_charge.intensity = a.space_charge_intensity;
    options.space_charge.label = "--space-charge-update";
    if (a.verbose)
      options.space_charge.on_update = [](const SpaceChargeUpdate& u) {
        fmt::print(
            "space charge turn {}: mean sigma_x {:.6g} m, sigma_y {:.6g} m (emittances {:.4e} {:.4e} m, {} "
            "alive)\n",
            u.turn, u.mean_sigma_x, u.mean_sigma_y, u.emittance_x, u.emittance_y, u.alive);
        std::fflush(stdout);
      };
  }
  return options;
}

/// The files of a run: the final particles (one shard per rank), the monitor and the space-charge sizes.
/// Output files name the elements of the lattice file (a loss in a merged element at its first part).
void write_track_outputs(const TrackArgs& a, const TrackedLattice& t, Particles& particles, const TrackRun& run,
                         bool follow) {
  if (a.optimize) map_lost_elements_to_original(particles, t.optimization);
  if (!a.output.empty()) write_particle_shards(a.output, particles, world());
  if (run.monitor) run.monitor->write(a.monitor);
  if (follow && run.root) write_space_charge_sizes(space_charge_sizes_path(a), t.lattice(), run);
}

/// The report's lines on the lattice, the backend, the particles and, for variants, the survivors of each.
void print_run_summary(const TrackArgs& a, const TrackedLattice& t, const Particles& particles, const TrackRun& run) {
  const Lattice& lattice = t.lattice();
  const bool parallel = run.ranks > 1;
  fmt::print("lattice     {} ({} elements, {} definitions, circumference {:.6g} m)\n", a.lattice,
             lattice.sequence().size(), lattice.definitions().size(), lattice.circumference());
  fmt::print("reference   mass0 {:.9g} eV, q0 {:g}, p0c {:.9g} eV, beta0 {:.9f}\n", lattice.reference().mass0,
             lattice.reference().q0, lattice.reference().p0c, lattice.reference().beta0());
  fmt::print("backend     {}{}\n", run.backend,
             parallel ? fmt::format(" on each of {} MPI ranks", run.ranks) : std::string());
  if (parallel && run.reductions > 0)
    fmt::print("mpi         {} profile all-reduces on rank 0: {:.3g} s, {:.3g} us each\n", run.reductions,
               run.reduce_seconds, 1e6 * run.reduce_seconds / static_cast<double>(run.reductions));
  fmt::print("particles   {} tracked for {} turns: {} survived, {} lost\n", run.total, a.turns, run.alive,
             run.total - run.alive);
  if (!t.variants.lattices.empty()) {
    const std::vector<size_t> alive = alive_per_variant(particles, t.variants.size());
    fmt::print("variants    {} in one run, {} particles each (the column 'variant' of the output); survivors:\n",
               t.variants.size(), particles.size() / t.variants.size());
    for (size_t v = 0; v < t.variants.size(); ++v) fmt::print("  {:>4} {:<40} {}\n", v, t.variants.names[v], alive[v]);
  }
}

/// The report's lines on the collective elements: the profiles' and the space-charge grids' last turn.
void print_collective(const TrackRun& run) {
  for (const CollectiveSnapshot& snap : run.collective) {
    uint64_t total = 0;
    for (uint64_t c : snap.counts) total += c;
    double vmax = 0.0;
    for (double v : snap.field) vmax = std::max(vmax, std::fabs(v));
    fmt::print("collective  '{}': {:.0f} macroparticles in {} slices, max |field| {:.6g} V on the last turn\n",
               snap.element_name, static_cast<double>(total) / static_cast<double>(kProfileUnit), snap.grid.n_slices,
               vmax);
  }
  for (const GridCollectiveReport& g : run.grid)
    fmt::print(
        "space charge '{}': {} on {} x {} x {} nodes, last grid x [{:.6g}, {:.6g}] y [{:.6g}, {:.6g}] zeta "
        "[{:.6g}, {:.6g}] m, max |E| {:.6g} V/m on the last turn; outside the grid {} particle-turns in {} of {} "
        "turns\n",
        g.element_name, g.solver == FT_GRID_3D ? "3D" : "2.5D", g.nodes[0], g.nodes[1], g.nodes[2], g.min[0], g.max[0],
        g.min[1], g.max[1], g.min[2], g.max[2], g.max_field, g.outside_total, g.turns_with_outside, g.turns);
}

/// The report's lines on what the run wrote: monitor, space-charge sizes, bunches, particles and plots.
void print_run_files(const TrackArgs& a, const TrackRun& run, const BunchTrain& train, bool follow) {
  if (run.monitor && !run.monitor->moments().empty()) {
    const BunchMonitor& monitor = *run.monitor;
    const BunchMoments& first = monitor.moments().front();
    const BunchMoments& last = monitor.moments().back();
    fmt::print("bunch       rms zeta {:.6g} -> {:.6g} m, rms delta {:.4e} -> {:.4e}, emittance {:.4e} -> {:.4e} eV s\n",
               first.rms_zeta, last.rms_zeta, first.rms_delta, last.rms_delta, first.emittance_evs, last.emittance_evs);
    fmt::print("monitor     {} ({} records, {} profile snapshots)\n", a.monitor, monitor.turns().size(),
               monitor.profile_turns().size());
  }
  if (follow && !run.space_charge_updates.empty()) {
    const SpaceChargeUpdate& first = run.space_charge_updates.front();
    const SpaceChargeUpdate& last = run.space_charge_updates.back();
    fmt::print(
        "space charge {} elements follow the beam every {} turns: {} updates, mean sigma_x {:.6g} -> {:.6g} m, "
        "sigma_y {:.6g} -> {:.6g} m; sizes in {}\n",
        run.space_charge_elements.size(), a.space_charge_update, run.space_charge_updates.size(), first.mean_sigma_x,
        last.mean_sigma_x, first.mean_sigma_y, last.mean_sigma_y, space_charge_sizes_path(a));
  }
  if (!a.bunches_output.empty())
    fmt::print("bunches     {} bunches ({:.6g} m apart): centroids and emittances per bunch every {} turns in {}\n",
               train.bunches, train.spacing, a.bunches_every, a.bunches_output);
  if (!a.output.empty())
    fmt::print("output      {}{}\n", a.output,
               run.ranks > 1 ? fmt::format(" (the index of {} shards, one per rank: {} ...)", run.ranks,
                                           particle_shard_path(a.output, 0))
                             : std::string());
  // Plots by fusetrack.plot.collective (matplotlib).
  if (!a.plots.empty() &&
      run_plot_script("collective", {a.monitor, "-o", a.plots}, "the plots of the monitor file are"))
    fmt::print("plots       {}\n", a.plots);
}

/// Rank 0's report of a run.
void print_track_report(const TrackArgs& a, const TrackedLattice& t, const InitialBunch& b, const TrackRun& run,
                        const TimeBreakdown& times, bool follow) {
  const Lattice& lattice = t.lattice();
  if (b.matched.share) print_matched(a, lattice, b.matched.report, run.initial_sums);
  const double particle_turns = static_cast<double>(run.total) * static_cast<double>(a.turns);
  const double passes = particle_turns * static_cast<double>(lattice.sequence().size());
  print_run_summary(a, t, b.particles, run);
  print_times(run, times, particle_turns, passes);
  if (lattice.has_collective()) print_collective(run);
  print_run_files(a, run, b.train, follow);
}

void run_track(const TrackArgs& a) {
  // Several MPI ranks each make, track and write their own share of the particles
  // (fusetrack/parallel.h); rank 0 writes the index of the shard set, the monitor and the report.
  const auto t_start = std::chrono::steady_clock::now();
  TimeBreakdown times;
  Communicator& comm = world();
  const bool root = comm.is_root();
  const bool follow = check_output_and_space_charge_options(a, root);
  ElementRegistry registry;
  load_plugins(registry, a.common);
  TrackedLattice tracked;
  load_tracked_lattice(a, registry, tracked);
  auto backend = make_track_backend(a, tracked, follow);
  check_monitor_options(a);
  times.start = seconds_since(t_start);

  const auto t_initial = std::chrono::steady_clock::now();
  InitialBunch bunch = initial_bunch(a, tracked);
  comm.barrier();
  times.initial = seconds_since(t_initial);
  TrackRunOptions options = track_run_options(a, bunch, tracked, follow);
  std::unique_ptr<BunchesWriter> bunches_writer;
  if (!a.bunches_output.empty()) {
    if (root) check_output_path(a.bunches_output, "--bunches-output");
    bunches_writer = std::make_unique<BunchesWriter>(a.bunches_output, bunch.train, bunch.size, root);
    bunches_writer->record(0, bunch.particles);
    options.on_turn = [&bunches_writer](int64_t done, const Particles& local) { bunches_writer->record(done, local); };
    options.on_turn_every = a.bunches_every;
  }
  const TrackRun run = run_tracking(tracked.lattice(), *backend, bunch.particles, options);
  if (bunches_writer) bunches_writer->finish();
  times.generated = options.matched != nullptr;

  const auto t_output = std::chrono::steady_clock::now();
  write_track_outputs(a, tracked, bunch.particles, run, follow);
  comm.barrier();
  times.output = seconds_since(t_output);
  times.total = seconds_since(t_start);
  if (run.root) print_track_report(a, tracked, bunch, run, times, follow);
}

}  // namespace

void add_track_command(CLI::App& app) {
  auto args = std::make_shared<TrackArgs>();
  CLI::App* cmd = app.add_subcommand("track", "track particles through a lattice for N turns");
  cmd->add_option("lattice", args->lattice, "lattice file (fusetrack JSON or Xsuite line JSON)")->required();
  cmd->add_option("-n,--turns", args->turns, "number of turns")->check(CLI::PositiveNumber);
  cmd->add_option("-p,--particles", args->particles_file, "initial particles (.npz or .csv)");
  cmd->add_option("--grid", args->grid, "x-y grid instead of a file: x_min x_max nx y_min y_max ny [m]")
      ->expected(6)
      ->excludes("--particles");
  cmd->add_option("--gaussian", args->gaussian,
                  "instead of a file or grid: N particles of a matched Gaussian from the optics at the start")
      ->excludes("--particles")
      ->excludes("--grid");
  cmd->add_option("--emittance-nx", args->emittance_nx, "normalised horizontal emittance [m] (--gaussian)");
  cmd->add_option("--emittance-ny", args->emittance_ny, "normalised vertical emittance [m] (--gaussian)");
  cmd->add_option("--sigma-zeta", args->sigma_zeta, "rms zeta [m] (--gaussian, --matched)");
  cmd->add_option("--sigma-delta", args->sigma_delta, "rms delta (--gaussian)");
  cmd->add_option("--seed", args->seed, "random seed (--gaussian, --matched)");
  cmd->add_option("--matched", args->matched,
                  "instead of a file or grid: N particles of a longitudinal bunch matched to the RF bucket "
                  "(rms length --sigma-zeta)")
      ->check(CLI::NonNegativeNumber)
      ->excludes("--particles")
      ->excludes("--grid")
      ->excludes("--gaussian");
  cmd->add_option("--distribution", args->distribution, "--matched: gaussian, parabolic or binomial")
      ->check(CLI::IsMember({"gaussian", "parabolic", "binomial"}));
  cmd->add_option("--mu", args->mu, "--matched binomial: exponent mu of (K_max - K)^mu");
  cmd->add_flag("--potential-well", args->potential_well,
                "--matched: include the induced voltage of the collective elements (self-consistent profile)");
  cmd->add_option("--monitor", args->monitor, "write bunch moments per turn and profile snapshots to this .npz");
  cmd->add_option("--monitor-every", args->monitor_every, "record the moments every K turns (default 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--profile-every", args->profile_every,
                  "record the profiles and fields of the collective elements every K turns (with --monitor)");
  cmd->add_option("--plots", args->plots, "with --monitor: plots of the bunch length and profiles into DIR");
  cmd->add_option("--variants", args->variants,
                  "lattice variants (variants files applied to LATTICE, or lattice files with its sequence): the "
                  "particles are tracked through every variant in one run; the output gets a 'variant' column");
  cmd->add_flag("--optimize", args->optimize,
                "track a simplified lattice: markers, inactive kicks and zero-length drifts removed, consecutive "
                "drifts and thin kicks merged (the same "
                "map to rounding; lost_element still indexes the lattice file's sequence)");
  args->space_charge_update_option = cmd->add_option(
      "--space-charge-update", args->space_charge_update,
      "frozen space charge that follows the beam: every K turns (from turn 0) set every SpaceChargeBiGaussian "
      "element's sigma_x, sigma_y (sqrt(beta eps + (D sigma_delta)^2)), sigma_z, z0 and intensity (x alive "
      "fraction) from the particles");
  args->space_charge_intensity_option =
      cmd->add_option("--space-charge-intensity", args->space_charge_intensity,
                      "--space-charge-update: real particles of the whole bunch (default: the elements' "
                      "number_of_particles)");
  cmd->add_option("--space-charge-sizes", args->space_charge_sizes,
                  "--space-charge-update: CSV of the sizes per update and element (default: OUTPUT.space_charge.csv "
                  "next to --output or --monitor, else space_charge_sizes.csv)");
  cmd->add_flag("-v,--verbose", args->verbose, "a line per space-charge update");
  cmd->add_option("--bunches", args->bunches,
                  "a train: the --gaussian or --grid bunch copied N times, bunch b at zeta - b spacing (the spacing of "
                  "the lattice's TransverseWake/TransverseDamper n_bunches, bunch_spacing, or --bunch-spacing)");
  cmd->add_option("--bunch-spacing", args->bunch_spacing,
                  "--bunches: the time between bunches [s] (e.g. 25e-9; default: the elements' bunch_spacing)");
  cmd->add_option("--bunches-output", args->bunches_output,
                  "CSV of the per-bunch centroids and rms emittances per turn (turn, bunch, macroparticles, mean_x, "
                  "mean_px, mean_y, mean_py, mean_zeta, mean_delta, emittance_x, emittance_y, out_of_range)");
  cmd->add_option("--bunches-every", args->bunches_every,
                  "--bunches-output: a row per bunch every K turns (default 1)");
  cmd->add_flag("--progress", args->progress, "progress bar with ETA on stderr (default: only on a terminal)");
  cmd->add_option("--delta", args->delta, "momentum offset of the grid particles");
  cmd->add_option("-o,--output", args->output,
                  "write the final particles (.npz or .csv); several MPI ranks write one shard each into "
                  "OUTPUT.d/ and OUTPUT is their index");
  add_common_options(*cmd, args->common);
  cmd->callback([args] { run_track(*args); });
}

}  // namespace ft::cli
