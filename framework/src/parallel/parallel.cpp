#include "fusetrack/parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "fusetrack/error.h"

namespace ft {

#if defined(FUSETRACK_HAVE_MPI)
std::unique_ptr<Communicator> make_mpi_communicator();  // mpi_communicator.cpp
#endif

namespace {

/// The number of ranks that a launcher (Open MPI, MPICH/Hydra, PMIx, Slurm) started, from the
/// environment it sets; 1 when none did.
int launcher_size(std::string* which) {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"}) {
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);
      if (n > 1) {
        *which = var;
        return n;
      }
    }
  }
  return 1;
}

}  // namespace

void Communicator::exchange(int peer, const uint64_t* send, uint64_t* receive, size_t count, int tag) {
  (void)tag;
  if (peer != rank())
    throw Error(fmt::format("exchange with rank {} requested, but this run has only {}", peer, describe()));
  std::copy(send, send + count, receive);
}

bool built_with_mpi() {
#if defined(FUSETRACK_HAVE_MPI)
  return true;
#else
  return false;
#endif
}

Communicator& world() {
  static std::unique_ptr<Communicator> instance = [] {
    std::string var;
    const int launched = launcher_size(&var);
#if defined(FUSETRACK_HAVE_MPI)
    if (launched > 1) return make_mpi_communicator();
    (void)var;
#else
    if (launched > 1)
      throw Error(fmt::format(
          "this fusetrack was built without MPI, but it was started as one of {} ranks ({} is set): each rank "
          "would run the whole job. Rebuild with MPI (Debian: apt install libopenmpi-dev; CMake finds it), or "
          "run a single process, or split a DA scan into job-array parts with --part i/N",
          launched, var));
#endif
    return std::make_unique<Communicator>();
  }();
  return *instance;
}

std::string idle_ranks_notice(size_t work, int ranks, const std::string& what) {
  if (ranks <= 1 || work >= static_cast<size_t>(ranks)) return "";
  const size_t idle = static_cast<size_t>(ranks) - work;
  return fmt::format("{} ranks for {} {}: {} rank{} hold{} none and only take part in the exchanges", ranks, work,
                     what, idle, idle == 1 ? "" : "s", idle == 1 ? "s" : "");
}

Share share_of(size_t n, int rank, int size) {
  const size_t r = static_cast<size_t>(rank), s = static_cast<size_t>(size);
  const size_t base = n / s, extra = n % s;
  Share sh;
  sh.begin = r * base + std::min(r, extra);
  sh.end = sh.begin + base + (r < extra ? 1 : 0);
  return sh;
}

namespace {

/// `p` with every column of `all` passed through cut(column, out).
template <class Cut>
Particles cut_columns(const Particles& all, Cut cut) {
  Particles p;
  p.beta0 = all.beta0;
  cut(all.x, p.x);
  cut(all.px, p.px);
  cut(all.y, p.y);
  cut(all.py, p.py);
  cut(all.zeta, p.zeta);
  cut(all.delta, p.delta);
  cut(all.ptau, p.ptau);
  cut(all.rpp, p.rpp);
  cut(all.rvv, p.rvv);
  cut(all.state, p.state);
  cut(all.lost_turn, p.lost_turn);
  cut(all.lost_element, p.lost_element);
  cut(all.id, p.id);
  if (!all.variant.empty()) cut(all.variant, p.variant);
  return p;
}

}  // namespace

Particles slice_particles(const Particles& all, size_t begin, size_t end) {
  return cut_columns(all, [&](const auto& v, auto& out) {
    out.assign(v.begin() + static_cast<long>(begin), v.begin() + static_cast<long>(end));
  });
}

void append_particles(Particles& all, const Particles& part) {
  auto add = [](auto& to, const auto& from) { to.insert(to.end(), from.begin(), from.end()); };
  all.beta0 = part.beta0;
  add(all.x, part.x);
  add(all.px, part.px);
  add(all.y, part.y);
  add(all.py, part.py);
  add(all.zeta, part.zeta);
  add(all.delta, part.delta);
  add(all.ptau, part.ptau);
  add(all.rpp, part.rpp);
  add(all.rvv, part.rvv);
  add(all.state, part.state);
  add(all.lost_turn, part.lost_turn);
  add(all.lost_element, part.lost_element);
  add(all.id, part.id);
  if (!all.variant.empty() || !part.variant.empty()) {  // lattice variants: absent means variant 0
    all.variant.resize(all.id.size() - part.id.size(), 0);
    if (part.variant.empty())
      all.variant.resize(all.id.size(), 0);
    else
      add(all.variant, part.variant);
  }
}

PartSpec parse_part(const std::string& text, const std::string& option) {
  InputLocation at;
  at.field = option;
  const size_t slash = text.find('/');
  PartSpec p;
  try {
    if (slash == std::string::npos) throw std::invalid_argument("no slash");
    size_t used = 0;
    p.index = std::stoi(text.substr(0, slash), &used);
    if (used != slash) throw std::invalid_argument("index");
    const std::string count = text.substr(slash + 1);
    p.count = std::stoi(count, &used);
    if (used != count.size()) throw std::invalid_argument("count");
  } catch (const std::exception&) {
    throw InputError(at, fmt::format("expected i/N (part i of N, 0 <= i < N), got '{}'", text));
  }
  if (p.count < 1 || p.index < 0 || p.index >= p.count)
    throw InputError(at, fmt::format("part {} of {} does not exist: expected 0 <= i < N", p.index, p.count));
  return p;
}

}  // namespace ft
