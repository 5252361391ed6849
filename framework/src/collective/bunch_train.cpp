// Bunch trains: the declared train, trains from one bunch, per-bunch moments (fusetrack/bunch_train.h).
#include "fusetrack/bunch_train.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "fusetrack/collective.h"
#include "fusetrack/error.h"
#include "fusetrack/parallel.h"
#include "fusetrack/reduction.h"

namespace ft {

BunchTrain declared_train(const Lattice& lattice) {
  BunchTrain t;
  if (!lattice.has_collective()) return t;
  const ft_reference reference = lattice.reference().to_abi(lattice.circumference());
  const std::string base = lattice.base_directory();
  for (size_t e : TurnProgram::build(lattice).collective) {
    const ElementDefinition& def = lattice.element(e);
    if (!def.type->is_moments_collective()) continue;
    const ft_collective_desc& desc = *def.type->collective;
    ft_moments_model model{};
    ft_error err{};
    const void* params = lattice.params(lattice.sequence()[e].definition);
    if (desc.create_moments(params, def.json.c_str(), base.c_str(), &reference, &model, &err) != 0)
      throw InputError(collective_element_location(lattice, e), err.message);
    if (model.destroy) model.destroy(model.state);
    if (model.n_bunches < 2) continue;
    t.bunches = model.n_bunches;
    t.spacing = model.bunch_spacing;
    t.centre = 0.5 * (model.grid.zeta_min + model.grid.zeta_max);
    t.declared_by = def.name;
  }
  return t;
}

Particles make_bunch_train(int bunches, double spacing, const std::function<Particles(int)>& bunch) {
  if (bunches < 1) throw Error(fmt::format("a train needs at least one bunch, got {}", bunches));
  if (!std::isfinite(spacing) || (bunches > 1 && !(spacing > 0.0)))
    throw Error(fmt::format("a train of {} bunches needs a finite spacing > 0 [m], got {}", bunches, spacing));
  Particles train(0, 1.0);
  for (int b = 0; b < bunches; ++b) {
    Particles copy = bunch(b);
    if (b == 0) train = Particles(0, copy.beta0);
    for (size_t i = 0; i < copy.size(); ++i)
      copy.set(i, copy.x[i], copy.px[i], copy.y[i], copy.py[i], copy.zeta[i] - b * spacing, copy.delta[i]);
    append_particles(train, copy);
  }
  return train;
}

TrainMoments bunch_moments(const Particles& particles, const BunchTrain& train, size_t total_particles,
                           Communicator* comm, int threads) {
  if (train.bunches < 1) throw Error(fmt::format("a train needs at least one bunch, got {}", train.bunches));
  const double s = train.bunches > 1 ? train.spacing : 1.0;
  if (!(s > 0.0) || !std::isfinite(s) || !std::isfinite(train.centre))
    throw Error(fmt::format("a train of {} bunches needs a finite spacing > 0 [m], got {}", train.bunches, s));
  const double lo = train.centre - (train.bunches - 1) * s - 0.5 * s, hi = train.centre + 0.5 * s;
  const SliceGrid grid{train.bunches, 0, lo, hi, static_cast<double>(train.bunches) / (hi - lo)};
  const std::array<double, 6> ranges{0.1, 0.01, 0.1, 0.01, std::max(std::fabs(lo), std::fabs(hi)), 0.1};
  SliceMomentReducer r(grid, ranges, std::max<size_t>(1, total_particles));
  r.deposit(particles, threads);
  if (comm && comm->size() > 1) r.allreduce(*comm);
  const SliceMoments m = r.moments();
  TrainMoments out;
  out.out_of_range = r.out_of_range();
  for (int b = 0; b < train.bunches; ++b) {
    const size_t k = static_cast<size_t>(train.bunches - 1 - b);  // slices in zeta order: the last bunch first
    const auto& c = m.second_central[k];
    out.macroparticles.push_back(m.macroparticles[k]);
    out.mean.push_back(m.mean[k]);
    out.emittance_x.push_back(std::sqrt(std::max(0.0, c[0] * c[4] - c[1] * c[1])));
    out.emittance_y.push_back(std::sqrt(std::max(0.0, c[7] * c[9] - c[8] * c[8])));
  }
  return out;
}

}  // namespace ft
