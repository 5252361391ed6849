// Space charge around a ring: install and remove SpaceChargeBiGaussian (frozen) or SpaceChargePIC elements
// (fusetrack/space_charge_install.h documents the rules).
#include "fusetrack/space_charge_install.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "core/math_helpers.hpp"
#include "fusetrack/error.h"
#include "fusetrack/monitor.h"

namespace ft {

namespace {

using json = nlohmann::ordered_json;

constexpr const char* kType = "SpaceChargeBiGaussian";
constexpr const char* kPicType = "SpaceChargePIC";

bool is_space_charge(const std::string& type) { return type == kType || type == kPicType; }
constexpr double kBoundaryTolerance = 1e-9;  // [m]

InputLocation option_at(const std::string& file, const std::string& field) {
  InputLocation w{file};
  w.field = field;
  return w;
}

InputLocation element_at(const std::string& file, size_t index, const std::string& name, const std::string& type,
                         const std::string& field = "") {
  InputLocation w{file};
  w.element_index = static_cast<long>(index);
  w.element_name = name;
  w.element_type = type;
  w.field = field;
  return w;
}

bool is_splittable_drift(const Lattice& lattice, uint32_t d) {
  const ElementDefinition& def = lattice.definitions()[d];
  return (def.type->name == "Drift" || def.type->name == "DriftExact") && lattice.transform(d) == nullptr;
}

std::string piece_name(const std::string& original, size_t split, size_t j, size_t n) {
  return fmt::format("{}|sc_split{}_{}of{}", original, split, j, n);
}

const std::regex& piece_pattern() {
  static const std::regex p(R"(^(.*)\|sc_split(\d+)_(\d+)of(\d+)$)");
  return p;
}

/// Where one element goes: before sequence entry `before` (== size: at the end), or inside the drift
/// entry `inside` at distance `offset` from its entrance.
struct Placement {
  double s = 0.0, requested = 0.0;
  size_t before = 0;
  long inside = -1;
  double offset = 0.0;
};

void validate(const Lattice& lattice, const SpaceChargeInstallOptions& o, const std::string& file) {
  const double c = lattice.circumference();
  if (!(c > 0.0))
    throw InputError(option_at(file, "sequence"), "the ring has no length: space charge needs a circumference > 0");
  if (o.positions.empty()) {
    if (o.elements < 1)
      throw InputError(option_at(file, "--elements"),
                       fmt::format("needs at least 1 element (got {}), or positions", o.elements));
  } else {
    for (size_t i = 0; i < o.positions.size(); ++i) {
      const double p = o.positions[i];
      if (!std::isfinite(p) || p < 0.0 || p >= c)
        throw InputError(option_at(file, fmt::format("--positions[{}]", i)),
                         fmt::format("position {:.17g} m is outside the ring [0, {:.17g}) m", p, c));
      if (i > 0 && !(p > o.positions[i - 1]))
        throw InputError(
            option_at(file, fmt::format("--positions[{}]", i)),
            fmt::format("positions must increase strictly ({:.17g} m after {:.17g} m)", p, o.positions[i - 1]));
    }
  }
  auto positive = [&](double v, const char* field, const char* unit) {
    if (!std::isfinite(v) || !(v > 0.0))
      throw InputError(option_at(file, field), fmt::format("must be positive and finite [{}], got {:.17g}", unit, v));
  };
  auto non_negative = [&](double v, const char* field, const char* unit) {
    if (!std::isfinite(v) || v < 0.0)
      throw InputError(option_at(file, field), fmt::format("must be finite and >= 0 [{}], got {:.17g}", unit, v));
  };
  non_negative(o.intensity, "--intensity", "particles");
  positive(o.eps_nx, "--emittances[0]", "m rad");
  positive(o.eps_ny, "--emittances[1]", "m rad");
  positive(o.sigma_zeta, "--sigma-zeta", "m");
  non_negative(o.delta_rms, "--delta-rms", "1");
  if (o.z0 && !std::isfinite(*o.z0)) throw InputError(option_at(file, "--z0"), "must be finite [m]");
  if (o.prefix.empty()) throw InputError(option_at(file, "--prefix"), "the element name prefix must not be empty");
  if (o.pic) {
    if (o.pic_model != "2.5D" && o.pic_model != "3D")
      throw InputError(option_at(file, "--pic-model"), fmt::format("unknown model '{}': 2.5D or 3D", o.pic_model));
    const char* node_fields[3] = {"--nodes[0]", "--nodes[1]", "--nodes[2]"};
    for (int d = 0; d < 3; ++d)
      if (o.pic_nodes[static_cast<size_t>(d)] < 2)
        throw InputError(
            option_at(file, node_fields[d]),
            fmt::format("a grid needs at least 2 nodes per dimension, got {}", o.pic_nodes[static_cast<size_t>(d)]));
    positive(o.pic_extent_sigmas, "--extent-sigmas", "rms");
    non_negative(o.pic_fixed_sigmas, "--fixed-grid-sigmas", "rms");
  }
  for (size_t e = 0; e < lattice.sequence().size(); ++e) {
    const ElementDefinition& def = lattice.element(e);
    if (is_space_charge(def.type->name))
      throw InputError(element_at(file, e, def.name, def.type->name),
                       "the lattice already holds space-charge elements: remove them first "
                       "(fusetrack spacecharge remove)");
  }
}

/// The placement of a position s in [0, C) (file comment of the header).
Placement place(const Lattice& lattice, const std::vector<double>& length, double s) {
  const auto& seq = lattice.sequence();
  Placement p;
  p.s = p.requested = s;
  // First entry starting at or after s - tol.
  auto first_from = [&](double at) {
    return static_cast<size_t>(std::lower_bound(seq.begin(), seq.end(), at - kBoundaryTolerance,
                                                [](const SequenceEntry& e, double v) { return e.s < v; }) -
                               seq.begin());
  };
  const size_t lower = first_from(s);
  if (lower < seq.size() && seq[lower].s <= s + kBoundaryTolerance) {
    p.before = lower;
    return p;
  }
  if (lower == 0 || (lower == seq.size() && s >= lattice.circumference() - kBoundaryTolerance)) {
    p.before = lower;
    return p;
  }
  const size_t k = lower - 1;  // the thick entry that holds s
  const double start = seq[k].s, end = seq[k].s + length[k];
  if (is_splittable_drift(lattice, seq[k].definition)) {
    p.inside = static_cast<long>(k);
    p.offset = s - start;
    return p;
  }
  p.s = s - start <= end - s ? start : end;
  p.before = first_from(p.s);
  return p;
}

/// One installation: the kicks placed and named, the sequence with them, their definitions from the
/// optics of the lattice with them at zero intensity, the description and the Laslett tune shifts.
class SpaceChargeInstallation {
 public:
  SpaceChargeInstallation(const Lattice& lattice, const SpaceChargeInstallOptions& o, ElementRegistry& registry,
                          const std::string& file)
      : m_lattice(lattice), m_o(o), m_registry(registry), m_file(file) {}

  InstalledSpaceCharge run() {
    m_out.circumference = m_lattice.circumference();
    place_kicks();
    insert_into_sequence();
    define_kicks(false);
    take_beam_sizes_from_optics();
    define_kicks(true);
    describe();
    laslett_tune_shifts();
    return std::move(m_out);
  }

 private:
  json& elements() { return m_doc["elements"]; }

  /// The kicks at the positions asked for (or evenly spaced), moved to the nearest place allowed, named
  /// and given their integration lengths: each element's share of the ring, (s_{k+1} - s_{k-1}) / 2, periodic.
  void place_kicks() {
    const double circumference = m_out.circumference;
    const auto& seq = m_lattice.sequence();
    m_length.assign(seq.size(), 0.0);
    for (size_t e = 0; e < seq.size(); ++e)
      if (m_lattice.element(e).type->thick) m_length[e] = m_lattice.field(seq[e].definition, "length");
    std::vector<double> requested = m_o.positions;
    if (requested.empty())
      for (int64_t k = 0; k < m_o.elements; ++k)
        requested.push_back(circumference * static_cast<double>(k) / static_cast<double>(m_o.elements));
    const size_t n = requested.size();
    m_placements.reserve(n);
    for (double s : requested) m_placements.push_back(place(m_lattice, m_length, s));
    m_out.kicks.resize(n);
    m_doc = lattice_to_json(m_lattice);
    for (size_t k = 0; k < n; ++k) {
      SpaceChargeKick& kick = m_out.kicks[k];
      kick.name = fmt::format("{}_{}", m_o.prefix, k);
      if (elements().contains(kick.name))
        throw InputError(
            option_at(m_file, "--prefix"),
            fmt::format("the element name '{}' is taken in the lattice: choose another prefix", kick.name));
      kick.s = m_placements[k].s;
      kick.requested_s = m_placements[k].requested;
      kick.shift = kick.s - kick.requested_s;
    }
    for (size_t k = 0; k < n; ++k) {
      if (n == 1) {
        m_out.kicks[k].length = circumference;
        continue;
      }
      const double next = k + 1 < n ? m_out.kicks[k + 1].s : m_out.kicks[0].s + circumference;
      const double prev = k > 0 ? m_out.kicks[k - 1].s : m_out.kicks[n - 1].s - circumference;
      m_out.kicks[k].length = 0.5 * (next - prev);
    }
  }

  /// The new sequence: elements before entries, drifts split around the ones inside them.
  void insert_into_sequence() {
    const auto& seq = m_lattice.sequence();
    const size_t n = m_out.kicks.size();
    std::vector<std::vector<size_t>> before(seq.size() + 1), inside(seq.size());
    for (size_t k = 0; k < n; ++k) {
      if (m_placements[k].inside >= 0)
        inside[static_cast<size_t>(m_placements[k].inside)].push_back(k);
      else
        before[m_placements[k].before].push_back(k);
    }
    json sequence = json::array();
    const json original_sequence = m_doc.at("sequence");
    auto push_kick = [&](size_t k) {
      m_out.kicks[k].sequence_index = sequence.size();
      sequence.push_back(m_out.kicks[k].name);
    };
    for (size_t e = 0; e <= seq.size(); ++e) {
      for (size_t k : before[e]) push_kick(k);
      if (e == seq.size()) break;
      const std::string& name = original_sequence[e].get_ref<const std::string&>();
      if (inside[e].empty()) {
        sequence.push_back(name);
        continue;
      }
      const size_t pieces = inside[e].size() + 1;
      const size_t split = m_out.split_drifts++;
      double done = 0.0;
      for (size_t j = 0; j < pieces; ++j) {
        const double to = j + 1 < pieces ? m_placements[inside[e][j]].offset : m_length[e];
        json piece = elements().at(name);
        piece["length"] = to - done;
        done = to;
        const std::string pname = piece_name(name, split, j + 1, pieces);
        if (elements().contains(pname))
          throw InputError(element_at(m_file, e, name, m_lattice.element(e).type->name),
                           fmt::format("the name '{}' for a piece of the split drift is taken", pname));
        elements()[pname] = piece;
        sequence.push_back(pname);
        if (j + 1 < pieces) push_kick(inside[e][j]);
      }
    }
    m_doc["sequence"] = sequence;
  }

  /// The kicks' definitions: `final_values` false, frozen elements of no intensity (they change nothing:
  /// the optics of the lattice as it is); true, the elements asked for with the beam's sizes.
  void define_kicks(bool final_values) {
    const SpaceChargeInstallOptions& o = m_o;
    for (const SpaceChargeKick& kick : m_out.kicks) {
      json def = {{"type", kType}, {"length", kick.length}};
      if (final_values && o.pic) {  // the optics were taken with frozen elements of zero intensity
        const double k = o.pic_fixed_sigmas;
        def = {{"type", kPicType},
               {"length", kick.length},
               {"intensity", o.intensity},
               {"model", o.pic_model},
               {"nodes_x", o.pic_nodes[0]},
               {"nodes_y", o.pic_nodes[1]},
               {"nodes_zeta", o.pic_nodes[2]},
               {"extent_sigmas", o.pic_extent_sigmas}};
        if (k > 0.0) {
          def["x_min"] = kick.mean_x - k * kick.sigma_x;
          def["x_max"] = kick.mean_x + k * kick.sigma_x;
          def["y_min"] = kick.mean_y - k * kick.sigma_y;
          def["y_max"] = kick.mean_y + k * kick.sigma_y;
          def["zeta_min"] = m_out.z0 - k * o.sigma_zeta;
          def["zeta_max"] = m_out.z0 + k * o.sigma_zeta;
        }
      } else if (final_values) {
        def["number_of_particles"] = o.intensity;
        def["sigma_z"] = o.sigma_zeta;
        def["sigma_x"] = kick.sigma_x;
        def["sigma_y"] = kick.sigma_y;
        def["z0"] = m_out.z0;
        def["mean_x"] = kick.mean_x;
        def["mean_y"] = kick.mean_y;
      } else {  // no intensity: changes nothing (optics of the lattice as it is)
        def["number_of_particles"] = 0.0;
        def["sigma_z"] = 1.0;
        def["sigma_x"] = 1.0;
        def["sigma_y"] = 1.0;
      }
      elements()[kick.name] = def;
    }
  }

  /// Optics at every element, on the lattice with the elements at zero intensity: each kick's beta,
  /// dispersion, closed orbit and rms sizes, and the bunch's centre z0.
  void take_beam_sizes_from_optics() {
    const Lattice probe = lattice_from_json(m_doc, m_file, m_registry);
    const TwissTable table = compute_twiss_table(probe, m_o.optics);
    const ReferenceParticle& ref = m_lattice.reference();
    const double beta_gamma = ref.beta0() * ref.gamma0();
    const SpaceChargeInstallOptions& o = m_o;
    for (SpaceChargeKick& kick : m_out.kicks) {
      const size_t row = kick.sequence_index + 1;  // at the exit of the (thin) element
      kick.beta_x = table.beta_x[row];
      kick.beta_y = table.beta_y[row];
      kick.dx = table.dx[row];
      kick.dy = table.dy[row];
      kick.mean_x = table.x[row];
      kick.mean_y = table.y[row];
      kick.sigma_x = std::sqrt(kick.beta_x * o.eps_nx / beta_gamma + kick.dx * o.delta_rms * kick.dx * o.delta_rms);
      kick.sigma_y = std::sqrt(kick.beta_y * o.eps_ny / beta_gamma + kick.dy * o.delta_rms * kick.dy * o.delta_rms);
      if (!(kick.sigma_x > 0.0) || !(kick.sigma_y > 0.0) || !std::isfinite(kick.sigma_x) ||
          !std::isfinite(kick.sigma_y))
        throw InputError(element_at(m_file, kick.sequence_index, kick.name, kType, "sigma_x"),
                         fmt::format("the optics give no beam size at s = {:.6f} m (beta_x {:.6g} m, beta_y {:.6g} m)",
                                     kick.s, kick.beta_x, kick.beta_y));
    }
    m_out.z0 = o.z0 ? *o.z0 : (table.six_d ? table.zeta[m_out.kicks[0].sequence_index + 1] : 0.0);
  }

  /// The lattice's description names what was installed; its keys in a readable order.
  void describe() {
    const SpaceChargeInstallOptions& o = m_o;
    const std::string kind =
        o.pic
            ? fmt::format("particle-in-cell space-charge elements (SpaceChargePIC {}, {} x {} x {} nodes, {}",
                          o.pic_model, o.pic_nodes[0], o.pic_nodes[1], o.pic_nodes[2],
                          o.pic_fixed_sigmas > 0.0 ? fmt::format("grids fixed at +- {:.6g} rms", o.pic_fixed_sigmas)
                                                   : fmt::format("grids adapted to +- {:.6g} rms", o.pic_extent_sigmas))
            : std::string("frozen space-charge elements (SpaceChargeBiGaussian");
    m_doc["description"] = fmt::format(
        "{}{}{} {}, {} ... {}) installed by fusetrack spacecharge install: N = {:.6g}, eps_n = ({:.6g}, {:.6g}) m rad, "
        "sigma_zeta = {:.6g} m, delta_rms = {:.6g}",
        m_doc.contains("description") ? m_doc.at("description").get<std::string>() : std::string(),
        m_doc.contains("description") ? "; " : "", m_out.kicks.size(), kind, m_out.kicks.front().name,
        m_out.kicks.back().name, o.intensity, o.eps_nx, o.eps_ny, o.sigma_zeta, o.delta_rms);
    // A lattice_to_json document has no "description"; keep the key order readable.
    m_out.lattice = json::object();
    for (const char* key :
         {"fusetrack_lattice", "description", "reference", "plugins", "global_aperture", "elements", "sequence"})
      if (m_doc.contains(key)) m_out.lattice[key] = m_doc.at(key);
  }

  /// Laslett tune shifts (first order), the header's formula.
  void laslett_tune_shifts() {
    const ReferenceParticle& ref = m_lattice.reference();
    const double elementary_charge = 1.602176634e-19, epsilon0 = 8.8541878128e-12;
    const double r0 = elementary_charge / (4.0 * kPi * epsilon0 * ref.mass0);
    const double b2g3 = ref.beta0() * ref.beta0() * ref.gamma0() * ref.gamma0() * ref.gamma0();
    const double factor = -r0 * ref.q0 * ref.q0 * m_o.intensity / (std::pow(2.0 * kPi, 1.5) * m_o.sigma_zeta * b2g3);
    double sum_x = 0.0, sum_y = 0.0;
    for (const SpaceChargeKick& kick : m_out.kicks) {
      sum_x += kick.beta_x * kick.length / (kick.sigma_x * (kick.sigma_x + kick.sigma_y));
      sum_y += kick.beta_y * kick.length / (kick.sigma_y * (kick.sigma_x + kick.sigma_y));
    }
    m_out.laslett_dqx = factor * sum_x;
    m_out.laslett_dqy = factor * sum_y;
  }

  const Lattice& m_lattice;
  const SpaceChargeInstallOptions& m_o;
  ElementRegistry& m_registry;
  const std::string& m_file;
  json m_doc;                           // the lattice being built
  std::vector<double> m_length;         // per sequence entry: its length (thick elements), else 0
  std::vector<Placement> m_placements;  // per kick: where it goes
  InstalledSpaceCharge m_out;
};

}  // namespace

InstalledSpaceCharge install_space_charge(const Lattice& lattice, const SpaceChargeInstallOptions& o,
                                          ElementRegistry& registry, const std::string& file) {
  validate(lattice, o, file);
  return SpaceChargeInstallation(lattice, o, registry, file).run();
}

json remove_space_charge(const Lattice& lattice, const std::string& file, size_t* removed) {
  json doc = lattice_to_json(lattice);
  json& elements = doc["elements"];
  const json& names = doc.at("sequence");
  json sequence = json::array();
  std::set<std::string> drop;
  size_t count = 0;
  const auto& seq = lattice.sequence();
  for (size_t e = 0; e < seq.size(); ++e) {
    const ElementDefinition& def = lattice.element(e);
    if (is_space_charge(def.type->name)) {
      drop.insert(def.name);
      ++count;
      continue;
    }
    std::smatch m;
    if (!std::regex_match(def.name, m, piece_pattern())) {
      sequence.push_back(names[e]);
      continue;
    }
    // The pieces of one split drift, in order (space-charge elements between them).
    const std::string original = m[1].str();
    // digits only (the pattern); a count too large for size_t is no piece this program wrote
    auto number = [&](const std::string& digits) {
      if (digits.size() > 9)
        throw InputError(element_at(file, e, def.name, def.type->name),
                         fmt::format("'{}' is not a piece name of a split drift", def.name));
      return static_cast<size_t>(std::stoul(digits));
    };
    const size_t split = number(m[2].str()), n = number(m[4].str());
    if (m[3].str() != "1")
      throw InputError(element_at(file, e, def.name, def.type->name),
                       fmt::format("piece {} of a split drift without its piece 1 before it", m[3].str()));
    if (!elements.contains(original))
      throw InputError(element_at(file, e, def.name, def.type->name),
                       fmt::format("piece of the split drift '{}', which the lattice does not define", original));
    double total = 0.0;
    size_t j = 1, f = e;
    for (;; ++f) {
      if (f >= seq.size())
        throw InputError(element_at(file, e, def.name, def.type->name),
                         fmt::format("the split drift '{}' ends before its piece {} of {}", original, j, n));
      const ElementDefinition& g = lattice.element(f);
      if (is_space_charge(g.type->name)) {
        drop.insert(g.name);
        ++count;
        continue;
      }
      if (g.name != piece_name(original, split, j, n))
        throw InputError(element_at(file, f, g.name, g.type->name),
                         fmt::format("expected piece {} of {} of the split drift '{}' here", j, n, original));
      drop.insert(g.name);
      total += lattice.field(seq[f].definition, "length");
      if (j == n) break;
      ++j;
    }
    const double full = elements.at(original).at("length").get<double>();
    if (!(std::fabs(total - full) <= 1e-9 * std::fmax(1.0, std::fabs(full))))
      throw InputError(element_at(file, e, def.name, def.type->name, "length"),
                       fmt::format("the pieces of the split drift '{}' sum to {:.17g} m, not its length {:.17g} m",
                                   original, total, full));
    sequence.push_back(original);
    e = f;
  }
  for (const std::string& name : drop) elements.erase(name);
  doc["sequence"] = sequence;
  if (removed) *removed = count;
  return doc;
}

SpaceChargeBeamSizes::SpaceChargeBeamSizes(const Lattice& lattice, const OpticsOptions& optics) {
  Lattice bare = lattice;  // the optics without the space-charge kicks
  std::vector<int> uses(lattice.definitions().size(), 0);
  for (size_t e = 0; e < lattice.sequence().size(); ++e) {
    const uint32_t d = lattice.sequence()[e].definition;
    if (lattice.definitions()[d].type->name != kType) continue;
    if (uses[d]++ == 0) bare.set_field(d, "number_of_particles", 0.0);
  }
  bare.prepare();
  const TwissTable table = compute_twiss_table(bare, optics);
  for (size_t e = 0; e < lattice.sequence().size(); ++e) {
    const uint32_t d = lattice.sequence()[e].definition;
    const ElementDefinition& def = lattice.definitions()[d];
    if (def.type->name != kType) continue;
    if (uses[d] > 1)
      throw InputError(element_at(lattice.source_file(), e, def.name, kType, "name"),
                       fmt::format("stands at {} positions; beam sizes that follow the beam need one definition per "
                                   "position (as `fusetrack spacecharge install` writes them)",
                                   uses[d]));
    // The element is thin: the optics at its exit (row e + 1) are those at its position.
    m_entries.push_back({d, e, table.beta_x[e + 1], table.beta_y[e + 1], table.dx[e + 1], table.dy[e + 1]});
  }
  if (m_entries.empty())
    throw InputError(InputLocation(lattice.source_file()), fmt::format("has no {} element to update", kType));
}

std::vector<SpaceChargeSizes> SpaceChargeBeamSizes::sizes(const BunchMoments& m, size_t particles,
                                                          double intensity) const {
  if (!(intensity >= 0.0) || !std::isfinite(intensity)) {
    InputLocation at;
    at.field = "intensity";
    throw InputError(at, fmt::format("must be finite and >= 0, got {}", intensity));
  }
  if (m.alive < 2 || !(m.rms_zeta > 0.0) || !(m.emittance_x > 0.0) || !(m.emittance_y > 0.0))
    throw Error(
        fmt::format("space-charge beam sizes: the beam ({} particles alive) has no size to take "
                    "(rms zeta {}, emittances {} {})",
                    m.alive, m.rms_zeta, m.emittance_x, m.emittance_y));
  const double n = intensity * static_cast<double>(m.alive) / static_cast<double>(particles);
  std::vector<SpaceChargeSizes> out;
  out.reserve(m_entries.size());
  for (const Element& e : m_entries) {
    const double dxs = e.dx * m.rms_delta, dys = e.dy * m.rms_delta;
    out.push_back({std::sqrt(e.beta_x * m.emittance_x + dxs * dxs), std::sqrt(e.beta_y * m.emittance_y + dys * dys),
                   m.rms_zeta, m.mean_zeta, n});
  }
  return out;
}

void SpaceChargeBeamSizes::apply(Lattice& lattice, const std::vector<SpaceChargeSizes>& sizes) const {
  if (sizes.size() != m_entries.size())
    throw Error(fmt::format("space-charge beam sizes: {} values for {} elements", sizes.size(), m_entries.size()));
  for (size_t k = 0; k < m_entries.size(); ++k) {
    const uint32_t d = m_entries[k].definition;
    lattice.set_field(d, "sigma_x", sizes[k].sigma_x);
    lattice.set_field(d, "sigma_y", sizes[k].sigma_y);
    lattice.set_field(d, "sigma_z", sizes[k].sigma_z);
    lattice.set_field(d, "z0", sizes[k].z0);
    lattice.set_field(d, "number_of_particles", sizes[k].number_of_particles);
  }
  lattice.prepare();
}

void SpaceChargeBeamSizes::update(Lattice& lattice, const Particles& particles, double intensity) const {
  apply(lattice, sizes(bunch_moments(particles, lattice.reference().p0c), particles.size(), intensity));
}

double SpaceChargeBeamSizes::installed_intensity(const Lattice& lattice) const {
  const double first = lattice.field(m_entries.front().definition, "number_of_particles");
  for (const Element& e : m_entries) {
    const double n = lattice.field(e.definition, "number_of_particles");
    if (n != first) {
      const ElementDefinition& def = lattice.definitions()[e.definition];
      throw InputError(element_at(lattice.source_file(), e.sequence_index, def.name, kType, "number_of_particles"),
                       fmt::format("is {:.17g} where '{}' has {:.17g}: the elements do not carry one bunch "
                                   "intensity; give the bunch intensity explicitly",
                                   n, lattice.definitions()[m_entries.front().definition].name, first));
    }
  }
  return first;
}

}  // namespace ft
