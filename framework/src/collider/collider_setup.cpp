// Reading a collider set-up file (fusetrack/collider.h; the format is in docs/pages/user/colliders.md).
// Every field is checked where it is read; errors name the file and the field path.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "fusetrack/collider.h"
#include "fusetrack/error.h"
#include "fusetrack/lattice_file.h"

namespace ft {

namespace {

using json = nlohmann::ordered_json;

/// A JSON object being read: typed getters that name file and field in their errors, and a final
/// check that no unknown key is left.
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string file, std::string path) : m_obj(object), m_file(std::move(file)) {
    m_path = std::move(path);
    if (!m_obj.is_object()) fail("", fmt::format("expected an object, got {}", json_type_name(m_obj)));
  }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    InputLocation at{m_file};
    at.field = key.empty() ? m_path : (m_path.empty() ? key : m_path + "." + key);
    throw InputError(at, problem);
  }
  std::string field(const std::string& key) const { return m_path.empty() ? key : m_path + "." + key; }
  const std::string& file() const { return m_file; }

  bool has(const std::string& key) {
    m_known.insert(key);
    return m_obj.contains(key);
  }
  const json& at(const std::string& key) {
    if (!has(key)) fail(key, "required field is missing");
    return m_obj.at(key);
  }
  /// A finite number; `lo` < value (or <= with inclusive) when bounded.
  double number(const std::string& key, std::optional<double> fallback = std::nullopt) {
    if (!has(key)) {
      if (fallback) return *fallback;
      fail(key, "required field is missing");
    }
    const json& v = m_obj.at(key);
    if (!v.is_number()) fail(key, fmt::format("expected a number, got {}", json_type_name(v)));
    const double x = v.get<double>();
    if (!std::isfinite(x)) fail(key, "must be a finite number");
    return x;
  }
  double positive(const std::string& key, std::optional<double> fallback = std::nullopt) {
    const double x = number(key, fallback);
    if (!(x > 0)) fail(key, fmt::format("must be positive, got {}", x));
    return x;
  }
  double non_negative(const std::string& key, std::optional<double> fallback = std::nullopt) {
    const double x = number(key, fallback);
    if (!(x >= 0)) fail(key, fmt::format("must be >= 0, got {}", x));
    return x;
  }
  int64_t integer(const std::string& key, int64_t lo, int64_t hi, std::optional<int64_t> fallback = std::nullopt) {
    if (!has(key)) {
      if (fallback) return *fallback;
      fail(key, "required field is missing");
    }
    const json& v = m_obj.at(key);
    if (!v.is_number_integer()) fail(key, fmt::format("expected an integer, got {}", v.dump()));
    const int64_t n = v.get<int64_t>();
    if (n < lo || n > hi) fail(key, fmt::format("must be in [{}, {}], got {}", lo, hi, n));
    return n;
  }
  bool boolean(const std::string& key, bool fallback) {
    if (!has(key)) return fallback;
    const json& v = m_obj.at(key);
    if (!v.is_boolean()) fail(key, fmt::format("expected true or false, got {}", v.dump()));
    return v.get<bool>();
  }
  std::string string(const std::string& key, std::optional<std::string> fallback = std::nullopt) {
    if (!has(key)) {
      if (fallback) return *fallback;
      fail(key, "required field is missing");
    }
    const json& v = m_obj.at(key);
    if (!v.is_string()) fail(key, fmt::format("expected a string, got {}", json_type_name(v)));
    return v.get<std::string>();
  }
  /// Refuses keys that were never asked for (a misspelt field must not be ignored silently).
  void finish(const std::string& known_list) const {
    for (const auto& [key, value] : m_obj.items()) {
      (void)value;
      if (!m_known.count(key)) fail(key, "unknown field; expected one of: " + known_list);
    }
  }

 private:
  const json& m_obj;
  std::string m_file, m_path;
  std::set<std::string> m_known;
};

std::string resolve_path(const std::string& file, const std::string& relative) {
  const std::filesystem::path p(relative);
  if (p.is_absolute() || file.empty()) return relative;
  return (std::filesystem::path(file).parent_path() / p).lexically_normal().string();
}

LinearRingMap read_linear_map(ObjectReader& r) {
  LinearRingMap m;
  m.qx = r.number("qx");
  m.qy = r.number("qy");
  m.beta_x = r.positive("beta_x");
  m.beta_y = r.positive("beta_y");
  m.alpha_x = r.number("alpha_x", 0.0);
  m.alpha_y = r.number("alpha_y", 0.0);
  m.qs = r.non_negative("qs", 0.0);
  if (m.qs >= 0.5) r.fail("qs", fmt::format("must be below 0.5 (a stable synchrotron rotation), got {}", m.qs));
  m.beta_s = r.has("beta_s") ? r.positive("beta_s") : 0.0;
  m.chroma_x = r.number("chroma_x", 0.0);
  m.chroma_y = r.number("chroma_y", 0.0);
  m.circumference = r.non_negative("circumference", 0.0);
  r.finish("qx, qy, beta_x, beta_y, alpha_x, alpha_y, qs, beta_s, chroma_x, chroma_y, circumference");
  return m;
}

ColliderBunches read_bunches(ObjectReader& r) {
  ColliderBunches b;
  b.count = static_cast<int>(r.integer("count", 1, 100000, 1));
  b.intensity = r.positive("intensity");
  b.macroparticles = static_cast<size_t>(r.integer("macroparticles", 1, int64_t(1) << 40));
  if (r.has("particles_file")) {
    b.particles_file = resolve_path(r.file(), r.string("particles_file"));
  }
  b.emittance_nx = r.positive("emittance_nx");
  b.emittance_ny = r.positive("emittance_ny");
  b.sigma_zeta = r.positive("sigma_zeta");
  b.sigma_delta = r.non_negative("sigma_delta", 0.0);
  b.seed = static_cast<uint64_t>(r.integer("seed", 0, std::numeric_limits<int64_t>::max(), 1));
  r.finish("count, intensity, macroparticles, emittance_nx, emittance_ny, sigma_zeta, sigma_delta, seed, "
           "particles_file");
  return b;
}

ColliderBeam read_beam(const json& doc, const std::string& file, int index) {
  ObjectReader r(doc, file, fmt::format("beams[{}]", index));
  ColliderBeam beam;
  beam.name = r.string("name", fmt::format("b{}", index + 1));
  const bool has_lattice = r.has("lattice"), has_map = r.has("linear_map");
  // A lattice ring brings its reference particle (a reference given here must equal it).
  if (r.has("reference") || !has_lattice)
    beam.reference = reference_from_json(r.at("reference"), file, r.field("reference"));
  if (has_lattice == has_map)
    r.fail("", "give the ring as exactly one of \"lattice\" (a lattice file) or \"linear_map\" (a one-turn map)");
  if (has_lattice) beam.lattice_file = resolve_path(file, r.string("lattice"));
  if (has_map) {
    ObjectReader m(r.at("linear_map"), file, r.field("linear_map"));
    beam.linear_map = read_linear_map(m);
  }
  ObjectReader b(r.at("bunches"), file, r.field("bunches"));
  beam.bunches = read_bunches(b);
  if (beam.linear_map && beam.linear_map->qs > 0 && beam.linear_map->beta_s == 0.0) {
    if (!(beam.bunches.sigma_delta > 0))
      r.fail("linear_map.beta_s", "is needed (or bunches.sigma_delta > 0, beta_s = sigma_zeta / sigma_delta) when qs > 0");
    beam.linear_map->beta_s = beam.bunches.sigma_zeta / beam.bunches.sigma_delta;
  }
  r.finish("name, reference, lattice, linear_map, bunches");
  return beam;
}

InteractionPoint read_ip(ObjectReader& r) {
  InteractionPoint ip;
  ip.phi = r.number("half_crossing_angle", 0.0);
  if (!(std::fabs(ip.phi) < 1.0)) r.fail("half_crossing_angle", fmt::format("must be below 1 rad, got {}", ip.phi));
  ip.alpha = r.number("crossing_plane", 0.0);
  const std::string model = r.string("model", "6d");
  if (model != "6d" && model != "4d")
    r.fail("model", fmt::format("must be \"6d\" (slices, synchro-beam map) or \"4d\" (one slice), got \"{}\"", model));
  ip.six_d = model == "6d";
  ip.slices = static_cast<int>(r.integer("slices", 1, 100000, ip.six_d ? 21 : 1));
  if (!ip.six_d && ip.slices != 1) r.fail("slices", "the 4d model uses one slice (the whole bunch)");
  ip.slice_range = r.positive("slice_range_sigmas", ip.slice_range);
  ip.moment_range = r.positive("moment_range_sigmas", ip.moment_range);
  if (ip.moment_range < ip.slice_range)
    r.fail("moment_range_sigmas", fmt::format("must be at least slice_range_sigmas ({})", ip.slice_range));
  ip.min_slice_macroparticles = static_cast<int>(r.integer("min_slice_macroparticles", 2, 1000000, 10));
  r.finish("half_crossing_angle, crossing_plane, model, slices, slice_range_sigmas, moment_range_sigmas, "
           "min_slice_macroparticles");
  return ip;
}

}  // namespace

ColliderSetup collider_setup_from_json(const json& doc, const std::string& file) {
  ObjectReader top(doc, file, "");
  ColliderSetup setup;
  setup.file = file;
  const std::string format = top.string("fusetrack_collider");
  if (format != "1") top.fail("fusetrack_collider", fmt::format("unsupported version \"{}\" (this build reads \"1\")", format));
  top.string("description", "");
  const json& beams = top.at("beams");
  if (!beams.is_array() || beams.size() != 2) top.fail("beams", "expected an array of exactly two beams");
  for (int j = 0; j < 2; ++j) setup.beams[static_cast<size_t>(j)] = read_beam(beams.at(static_cast<size_t>(j)), file, j);
  ObjectReader ip(top.at("ip"), file, "ip");
  setup.ip = read_ip(ip);
  const std::string mode = top.string("mode", "strong-strong");
  if (mode == "strong-strong") {
    setup.frozen_beam = -1;
  } else if (mode == "weak-strong") {
    setup.frozen_beam = static_cast<int>(top.integer("strong_beam", 1, 2, 2)) - 1;
  } else {
    top.fail("mode", fmt::format("must be \"strong-strong\" or \"weak-strong\", got \"{}\"", mode));
  }
  if (mode != "weak-strong" && top.has("strong_beam")) top.fail("strong_beam", "is only for mode \"weak-strong\"");
  top.finish("fusetrack_collider, description, beams, ip, mode, strong_beam");
  return setup;
}

ColliderSetup read_collider_setup(const std::string& path) {
  return collider_setup_from_json(parse_json_file(path), path);
}

BunchPlacement parse_bunch_placement(const std::string& text, const std::string& option) {
  if (text == "block") return BunchPlacement::block;
  if (text == "round-robin") return BunchPlacement::round_robin;
  InputLocation at;
  at.field = option;
  throw InputError(at, fmt::format("must be \"block\" or \"round-robin\", got \"{}\"", text));
}

}  // namespace ft
