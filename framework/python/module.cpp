// The fusetrack Python module (pybind11): a thin layer over the library API that the command line
// uses (fusetrack/session.h and the headers it names). Python-facing docs and conveniences are in
// fusetrack/__init__.py; this file binds the C++ objects.
//
// Memory: Particles arrays are NumPy views of the C++ vectors (zero-copy, kept alive by the
// Particles object); the tracker works on those vectors in place (on a GPU: copied to the device
// and back into the same vectors).
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <atomic>
#include <cmath>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusetrack/bunch_train.h"
#include "fusetrack/collider.h"
#include "fusetrack/cuda_device.h"
#include "fusetrack/da.h"
#include "fusetrack/error.h"
#include "fusetrack/lattice.h"
#include "fusetrack/longitudinal.h"
#include "fusetrack/monitor.h"
#include "fusetrack/optics.h"
#include "fusetrack/output_files.h"
#include "fusetrack/parallel.h"
#include "fusetrack/particle_files.h"
#include "fusetrack/particles.h"
#include "fusetrack/registry.h"
#include "fusetrack/session.h"
#include "fusetrack/space_charge_install.h"
#include "fusetrack/variants.h"

namespace py = pybind11;
using json = nlohmann::ordered_json;

namespace {

// ---------------------------------------------------------------------------------------------
// Registry and lattices

/// The registry every lattice of the module uses: the default plugins, then those loaded by
/// fusetrack.load_plugin(). Lattices hold it (their element types live in it).
std::shared_ptr<ft::ElementRegistry>& default_registry() {
  static std::shared_ptr<ft::ElementRegistry> registry;
  if (!registry) {
    registry = std::make_shared<ft::ElementRegistry>();
    registry->load_default_plugins();
    if (!registry->load_warnings().empty()) {
      auto warn = py::module_::import("warnings").attr("warn");
      for (const auto& w : registry->load_warnings()) warn("plugin skipped: " + w);
    }
  }
  return registry;
}

/// A lattice with the registry its types come from, and a revision counter that field changes
/// advance (trackers refresh their kernel parameters when it moved).
struct LatticeHandle {
  std::shared_ptr<ft::ElementRegistry> registry;
  ft::Lattice lattice;
  uint64_t revision = 0;
};
using LatticePtr = std::shared_ptr<LatticeHandle>;

LatticePtr make_handle(ft::Lattice lattice) {
  auto h = std::make_shared<LatticeHandle>();
  h->registry = default_registry();
  h->lattice = std::move(lattice);
  return h;
}

json to_json(const py::handle& obj) {
  const std::string text = py::str(py::module_::import("json").attr("dumps")(obj));
  return json::parse(text);
}
py::object from_json(const json& doc) { return py::module_::import("json").attr("loads")(doc.dump()); }

/// A bad argument of a Python call: InputError naming the argument (as the CLI names its option).
[[noreturn]] void argument_error(const char* field, const std::string& what) {
  ft::InputLocation at;
  at.field = field;
  throw ft::InputError(at, what);
}

/// The enumerator named `value` among `choices`; an InputError listing them otherwise.
template <class Enum>
Enum choice(const char* field, const std::string& value, std::initializer_list<std::pair<const char*, Enum>> choices) {
  std::string names;
  for (const auto& [name, e] : choices) {
    if (value == name) return e;
    names += names.empty() ? name : std::string(" or ") + name;
  }
  argument_error(field, fmt::format("'{}': expected {}", value, names));
}

ft::InputLocation element_location(const LatticeHandle& h, uint32_t definition, const std::string& field) {
  ft::InputLocation at{h.lattice.source_file()};
  const ft::ElementDefinition& def = h.lattice.definitions()[definition];
  at.element_name = def.name;
  at.element_type = def.type->name;
  at.field = field;
  return at;
}

uint32_t definition_index(const LatticeHandle& h, const std::string& name) {
  const int d = h.lattice.find_definition(name);
  if (d < 0) {
    ft::InputLocation at{h.lattice.source_file()};
    at.element_name = name;
    throw py::key_error(ft::InputError(at, "no element of this name in the lattice").what());
  }
  return static_cast<uint32_t>(d);
}

/// One element definition, read and written by field name (several sequence entries may share it).
struct ElementRef {
  LatticePtr handle;
  uint32_t definition = 0;

  const ft::ElementDefinition& def() const { return handle->lattice.definitions()[definition]; }

  const ft::FieldInfo& field_info(const std::string& field, bool for_writing) const {
    const ft::FieldInfo* f = def().type->find_field(field);
    if (!f || (for_writing && f->derived) || f->host_only()) {
      std::string names;
      for (const auto& fi : def().type->fields)
        if (!fi.derived && !fi.host_only()) names += (names.empty() ? "" : ", ") + fi.name;
      const std::string problem =
          !f ? fmt::format("{} has no field '{}'; its fields are: {}", def().type->name, field, names)
          : f->derived ? "a derived field (computed from the others) cannot be set"
                       : "a host-only field (JSON) cannot be read or set here: use Lattice.to_dict / from_dict";
      throw ft::InputError(element_location(*handle, definition, field), problem);
    }
    return *f;
  }

  py::object get(const std::string& field) const {
    const ft::FieldInfo& f = field_info(field, false);
    if (f.count == 1) return py::float_(handle->lattice.field(definition, field));
    py::array_t<double> a(f.count);
    for (unsigned k = 0; k < f.count; ++k) a.mutable_at(k) = handle->lattice.field(definition, field, k);
    return std::move(a);
  }

  /// Validated as a lattice file's definition is (ft::Lattice::define on the element's fields
  /// with this one replaced: the same checks and messages), then written, and the lattice
  /// prepared again (derived fields, lengths, s positions).
  void set(const std::string& field, const py::object& value) {
    const ft::FieldInfo& f = field_info(field, true);
    json fields = json::object();
    for (const auto& fi : def().type->fields) {
      if (fi.derived || fi.host_only()) continue;
      auto current = [&](unsigned k) {  // integer fields as JSON integers (as lattice_to_json writes them)
        const double v = handle->lattice.field(definition, fi.name, k);
        return fi.type == FT_FIELD_INT32 ? json(static_cast<int32_t>(v)) : json(v);
      };
      if (fi.count == 1) {
        fields[fi.name] = current(0);
      } else {
        json a = json::array();
        for (unsigned k = 0; k < fi.count; ++k) a.push_back(current(k));
        fields[fi.name] = a;
      }
    }
    const py::object values = py::module_::import("numpy").attr("asarray")(value);
    if (py::isinstance<py::array>(values) && values.attr("dtype").attr("kind").cast<std::string>() == "f" &&
        !py::module_::import("numpy").attr("isfinite")(values).attr("all")().cast<bool>())
      throw ft::InputError(element_location(*handle, definition, field),
                           fmt::format("expected finite numbers, got {}", py::str(value).cast<std::string>()));
    const json given = to_json(values.attr("tolist")());
    fields[f.name] = given;
    ft::Lattice scratch(handle->lattice.reference());
    const ft::ElementDefinition& d = def();
    const uint32_t index = scratch.define(d.name, *d.type, fields, element_location(*handle, definition, ""));
    for (unsigned k = 0; k < f.count; ++k)
      handle->lattice.set_field(definition, f.name, scratch.field(index, f.name, k), k);
    handle->lattice.prepare();
    ++handle->revision;
  }

  py::dict fields() const {
    py::dict out;
    for (const auto& fi : def().type->fields)
      if (!fi.host_only()) out[py::str(fi.name)] = get(fi.name);
    return out;
  }
};

// ---------------------------------------------------------------------------------------------
// Particles: NumPy views of the vectors

template <typename T>
py::array view_of(std::vector<T>& v, const py::object& owner, bool writable) {
  py::array_t<T> a({v.size()}, {sizeof(T)}, v.data(), owner);
  if (!writable) a.attr("setflags")(py::arg("write") = false);
  return std::move(a);
}

void copy_into(std::vector<double>& dst, const py::array_t<double, py::array::forcecast>& src, const char* name) {
  if (src.ndim() != 1 || static_cast<size_t>(src.shape(0)) != dst.size())
    throw py::value_error(fmt::format("{}: expected a 1-D array of {} values", name, dst.size()));
  auto r = src.unchecked<1>();
  for (size_t i = 0; i < dst.size(); ++i) dst[i] = r(static_cast<py::ssize_t>(i));
}

ft::Particles particles_from_arrays(double beta0, const py::dict& arrays) {
  static const char* names[6] = {"x", "px", "y", "py", "zeta", "delta"};
  std::vector<double> columns[6];
  size_t n = 0;
  bool sized = false;
  for (int k = 0; k < 6; ++k) {
    if (!arrays.contains(names[k]) || arrays[names[k]].is_none()) continue;
    auto a = py::array_t<double, py::array::forcecast>::ensure(arrays[names[k]]);
    if (!a || a.ndim() != 1) throw py::value_error(fmt::format("{}: expected a 1-D array", names[k]));
    if (sized && static_cast<size_t>(a.shape(0)) != n)
      throw py::value_error(fmt::format("{}: {} values, the other arrays have {}", names[k], a.shape(0), n));
    n = static_cast<size_t>(a.shape(0));
    sized = true;
    columns[k].assign(a.data(), a.data() + n);
  }
  for (auto& c : columns) c.resize(n, 0.0);
  ft::Particles p(n, beta0);
  for (size_t i = 0; i < n; ++i)
    p.set(i, columns[0][i], columns[1][i], columns[2][i], columns[3][i], columns[4][i], columns[5][i]);
  return p;
}

// ---------------------------------------------------------------------------------------------
// Tracker and monitor

struct Monitor {
  int64_t every = 1;
  int64_t profile_every = 0;
  std::unique_ptr<ft::BunchMonitor> result;
};

py::dict npy_arrays(const std::vector<std::pair<std::string, ft::NpyArray>>& members) {
  py::dict out;
  for (const auto& [name, a] : members) {
    const py::dtype dtype(a.dtype);
    std::vector<py::ssize_t> shape(a.shape.begin(), a.shape.end());
    py::array arr(dtype, shape);
    std::memcpy(arr.mutable_data(), a.data.data(), a.data.size());
    out[py::str(name)] = arr;
  }
  return out;
}

py::dict snapshot_dict(const ft::CollectiveSnapshot& s) {
  py::dict d;
  d["element"] = s.element_name;
  d["sequence_index"] = s.sequence_index;
  d["zeta_min"] = s.grid.zeta_min;
  d["zeta_max"] = s.grid.zeta_max;
  d["n_slices"] = s.grid.n_slices;
  d["counts"] = py::array_t<uint64_t>(s.counts.size(), s.counts.data());
  d["field"] = py::array_t<double>(s.field.size(), s.field.data());
  return d;
}

ft::Dispatch dispatch_from_name(const std::string& name) {
  ft::Dispatch d = ft::Dispatch::Auto;
  if (ft::parse_dispatch(name, d)) return d;
  argument_error("dispatch", fmt::format("'{}' is not a kernel form: expected auto, switch, baked or staged", name));
}

class Tracker {
 public:
  Tracker(LatticePtr lattice, const std::string& device, const std::string& fma, int threads,
          const std::string& dispatch, const std::string& kernel_cache, const std::vector<std::string>& variants)
      : m_lattice(std::move(lattice)), m_fma(ft::parse_fma_mode(fma, "fma")), m_threads(threads) {
    if (threads < 0) {
      argument_error("threads", fmt::format("must not be negative, got {}", threads));
    }
    ft::BackendChoice choice;
    choice.device = device;
    choice.dispatch = dispatch_from_name(dispatch);
    choice.cache_dir = kernel_cache;
    if (!variants.empty()) m_variants = ft::load_variants(m_lattice->lattice, variants, *m_lattice->registry);
    m_backend = ft::make_backend(tracked(), choice, &m_notices);
    if (!variants.empty()) m_backend->set_variants(m_variants.pointers());
    m_revision = m_lattice->revision;
  }

  /// The lattice the backend tracks: the first variant with variants (their lattices are fixed
  /// when the tracker is made), else the handle's.
  const ft::Lattice& tracked() const { return m_variants.lattices.empty() ? m_lattice->lattice : m_variants.lattices[0]; }
  std::vector<std::string> variant_names() const { return m_variants.names; }

  py::dict track(ft::Particles& particles, int64_t turns, Monitor* monitor, const std::string& progress,
                 int64_t space_charge_update, const py::object& space_charge_intensity) {
    if (turns < 1) {
      argument_error("turns", fmt::format("must be positive, got {}", turns));
    }
    if (progress != "auto" && progress != "on" && progress != "off") {
      argument_error("progress", fmt::format("'{}': expected auto, on or off", progress));
    }
    if (m_lattice->revision != m_revision) {  // fields changed since the last track
      if (!m_variants.lattices.empty())
        throw ft::Error("the lattice changed after the tracker was made with variants: make a new Tracker");
      m_backend->parameters_changed();
      m_revision = m_lattice->revision;
    }
    ft::TrackRunOptions o;
    o.turns = turns;
    o.threads = m_threads;
    o.fma = m_fma;
    o.progress = progress;
    if (monitor) {
      o.monitor = true;
      o.monitor_every = monitor->every;
      o.profile_every = monitor->profile_every;
    }
    // Frozen space charge that follows the beam (the lattice's SpaceChargeBiGaussian fields change).
    const bool follow = space_charge_update != 0;
    if (follow) {
      if (!m_variants.lattices.empty())
        argument_error("space_charge_update", "does not mix with a Tracker made with variants");
      o.space_charge.every = space_charge_update;
      o.space_charge.lattice = &m_lattice->lattice;
      o.space_charge.intensity = space_charge_intensity.is_none() ? -1.0 : space_charge_intensity.cast<double>();
      if (!space_charge_intensity.is_none() && !(o.space_charge.intensity >= 0.0))
        argument_error("space_charge_intensity", fmt::format("must be >= 0, got {}", o.space_charge.intensity));
      o.space_charge.label = "space_charge_update";
    }
    ft::TrackRun run;
    try {
      py::gil_scoped_release release;
      run = ft::run_tracking(tracked(), *m_backend, particles, o);
    } catch (...) {
      if (follow) ++m_lattice->revision;  // other trackers of this lattice take what changed
      throw;
    }
    if (follow) {
      ++m_lattice->revision;  // this tracker's backend has the new values already
      m_revision = m_lattice->revision;
    }
    if (monitor) monitor->result = std::move(run.monitor);
    py::dict out;
    out["seconds"] = run.seconds;
    out["backend"] = run.backend;
    py::list collective;
    for (const auto& s : run.collective) collective.append(snapshot_dict(s));
    out["collective"] = collective;
    if (follow) {
      py::list updates;
      for (const ft::SpaceChargeUpdate& u : run.space_charge_updates) {
        py::dict d;
        d["turn"] = u.turn;
        d["alive"] = u.alive;
        d["emittance_x"] = u.emittance_x;
        d["emittance_y"] = u.emittance_y;
        d["rms_delta"] = u.rms_delta;
        d["rms_zeta"] = u.rms_zeta;
        d["mean_zeta"] = u.mean_zeta;
        d["mean_sigma_x"] = u.mean_sigma_x;
        d["mean_sigma_y"] = u.mean_sigma_y;
        std::vector<double> sx, sy;
        for (const ft::SpaceChargeSizes& z : u.sizes) sx.push_back(z.sigma_x), sy.push_back(z.sigma_y);
        d["sigma_x"] = py::array_t<double>(sx.size(), sx.data());
        d["sigma_y"] = py::array_t<double>(sy.size(), sy.data());
        d["number_of_particles"] = u.sizes.empty() ? 0.0 : u.sizes.front().number_of_particles;
        updates.append(d);
      }
      py::list names;
      for (const auto& e : run.space_charge_elements) names.append(tracked().element(e.sequence_index).name);
      out["space_charge_elements"] = names;
      out["space_charge"] = updates;
    }
    return out;
  }

  std::string backend_name() const { return m_backend->name(); }
  const std::vector<std::string>& notices() const { return m_notices; }
  LatticePtr lattice() const { return m_lattice; }

 private:
  LatticePtr m_lattice;
  ft::FmaMode m_fma;
  int m_threads;
  ft::LatticeVariants m_variants;  // Tracker(variants=...): every particle tracked through its variant
  std::unique_ptr<ft::Backend> m_backend;
  std::vector<std::string> m_notices;
  uint64_t m_revision = 0;
};

// ---------------------------------------------------------------------------------------------
// Optics, DA, repro

template <typename T>
py::array_t<T> copy_array(const std::vector<T>& v) {
  return py::array_t<T>(v.size(), v.data());
}

template <size_t N>
py::array_t<double> array_of(const std::array<double, N>& a) {
  return py::array_t<double>(N, a.data());
}

py::array_t<double> matrix_of(const ft::Matrix6& m) {
  py::array_t<double> a({6, 6});
  for (size_t i = 0; i < 6; ++i)
    for (size_t j = 0; j < 6; ++j) a.mutable_at(i, j) = m[i][j];
  return a;
}

py::dict optics_dict(const LatticeHandle& h, bool force_4d, double delta0, int64_t tracking_turns, int threads) {
  if (tracking_turns > 0 && tracking_turns < 16) {
    argument_error("tracking_turns", fmt::format("needs 0 (no tracking) or at least 16 turns, got {}", tracking_turns));
  }
  ft::OpticsOptions options;
  options.force_4d = force_4d;
  options.delta0 = delta0;
  options.threads = threads;
  ft::LinearOptics o;
  ft::TrackedTunes tracked;
  {
    py::gil_scoped_release release;
    o = ft::compute_linear_optics(h.lattice, options);
    if (tracking_turns > 0) tracked = ft::tunes_by_tracking(h.lattice, o, tracking_turns, options);
  }
  py::dict d;
  d["circumference"] = o.circumference;
  d["beta0"] = o.beta0;
  d["gamma0"] = o.gamma0;
  d["six_d"] = o.six_d;
  d["method"] = o.mode_reason;
  d["closed_orbit"] = array_of(o.closed_orbit);
  d["matrix"] = matrix_of(o.map.matrix);
  d["matrix_4d"] = matrix_of(o.map_4d.matrix);
  // qx, qy as the CLI's JSON: the method's map (6D eigen-tunes in 6D); qx_4d, qy_4d: the 4D map.
  const double qx = o.six_d ? o.qx_6d : o.qx, qy = o.six_d ? o.qy_6d : o.qy;
  d["tunes"] = array_of(std::array<double, 3>{qx, qy, o.qs});
  for (const auto& [k, v] : std::vector<std::pair<const char*, double>>{
           {"qx", qx},            {"qy", qy},            {"qs", o.qs},           {"beta_x", o.beta_x},
           {"alpha_x", o.alpha_x}, {"gamma_x", o.gamma_x}, {"beta_y", o.beta_y},   {"alpha_y", o.alpha_y},
           {"gamma_y", o.gamma_y}, {"beta_s", o.beta_s},   {"alpha_s", o.alpha_s}, {"dx", o.dx},
           {"dpx", o.dpx},         {"dy", o.dy},           {"dpy", o.dpy},         {"dqx", o.dqx},
           {"dqy", o.dqy},         {"eta", o.eta},         {"alpha_c", o.alpha_c}, {"gamma_tr", o.gamma_tr},
           {"qx_6d", o.qx_6d},     {"qy_6d", o.qy_6d},     {"qx_4d", o.qx},        {"qy_4d", o.qy}})
    d[k] = v;
  d["residual"] = o.map.residual;
  d["iterations"] = o.map.iterations;
  if (tracking_turns > 0)
    d["tunes_from_tracking"] = array_of(std::array<double, 3>{tracked.qx, tracked.qy, tracked.qs});
  return d;
}


/// Optics at every element (ft::compute_twiss_table): NumPy columns by name.
py::dict twiss_dict(const LatticeHandle& h, bool force_4d, double delta0, int threads) {
  ft::OpticsOptions options;
  options.force_4d = force_4d;
  options.delta0 = delta0;
  options.threads = threads;
  ft::TwissTable t;
  {
    py::gil_scoped_release release;
    t = ft::compute_twiss_table(h.lattice, options);
  }
  py::dict d;
  d["name"] = t.name;
  d["type"] = t.type;
  for (const auto& [name, column] : t.numeric_columns()) d[py::str(name)] = copy_array(*column);
  d["circumference"] = t.circumference;
  d["six_d"] = t.six_d;
  d["method"] = t.mode_reason;
  d["q1"] = t.q1;
  d["q2"] = t.q2;
  d["qx_total"] = t.qx_total;
  d["qy_total"] = t.qy_total;
  d["max_coupling"] = t.max_coupling;
  return d;
}

/// A study's results (DaJob::study_summary) as NumPy: names, per row the statistics, per variant the DA.
py::dict study_dict(const ft::DaStudySummary& st, const ft::DaScan& scan) {
  py::dict d;
  d["names"] = st.names;
  std::vector<double> delta, angle, lo, mean, sd, hi;
  py::array_t<double> per({st.rows.size(), st.names.size()});
  for (size_t r = 0; r < st.rows.size(); ++r) {
    const ft::DaStudyRow& row = st.rows[r];
    delta.push_back(row.delta);
    angle.push_back(row.angle);
    lo.push_back(row.min);
    mean.push_back(row.mean);
    sd.push_back(row.std);
    hi.push_back(row.max);
    for (size_t v = 0; v < row.per_variant.size(); ++v) per.mutable_at(r, v) = row.per_variant[v];
  }
  d["delta"] = copy_array(delta);
  d[scan.config.grid == ft::DaGrid::Cartesian ? "x" : "angle"] = copy_array(angle);
  d["min"] = copy_array(lo);
  d["mean"] = copy_array(mean);
  d["std"] = copy_array(sd);
  d["max"] = copy_array(hi);
  d["per_variant"] = per;
  std::vector<double> da_min;
  for (const ft::DaSummary& s : st.per_variant) da_min.push_back(s.da_min);
  d["da_min_per_variant"] = copy_array(da_min);
  d["variant"] = copy_array(scan.variant);
  return d;
}

// Space charge: install/remove frozen or PIC elements (fusetrack/space_charge_install.h) and tune footprints.
py::dict install_space_charge(const LatticePtr& h, int64_t elements, const std::vector<double>& positions,
                              double intensity, double eps_nx, double eps_ny, double sigma_zeta, double delta_rms,
                              const py::object& z0, const std::string& prefix, bool force_4d, int threads,
                              const std::string& model, const std::string& pic_model, const std::vector<int>& nodes,
                              double extent_sigmas, double fixed_grid_sigmas) {
  ft::SpaceChargeInstallOptions o;
  o.elements = elements;
  o.positions = positions;
  o.intensity = intensity;
  o.eps_nx = eps_nx;
  o.eps_ny = eps_ny;
  o.sigma_zeta = sigma_zeta;
  o.delta_rms = delta_rms;
  if (!z0.is_none()) o.z0 = z0.cast<double>();
  o.prefix = prefix;
  o.optics.force_4d = force_4d;
  o.optics.threads = threads;
  if (model != "frozen" && model != "pic") argument_error("model", "frozen or pic");
  if (nodes.size() != 3) argument_error("nodes", "expects three values: nodes in x, y and zeta");
  o.pic = model == "pic";
  o.pic_model = pic_model;
  o.pic_nodes = {nodes[0], nodes[1], nodes[2]};
  o.pic_extent_sigmas = extent_sigmas;
  o.pic_fixed_sigmas = fixed_grid_sigmas;
  ft::InstalledSpaceCharge sc;
  {
    py::gil_scoped_release release;
    sc = ft::install_space_charge(h->lattice, o, *h->registry, h->lattice.source_file());
  }
  py::list kicks;
  for (const ft::SpaceChargeKick& k : sc.kicks) {
    py::dict e;
    e["name"] = k.name;
    e["s"] = k.s;
    e["length"] = k.length;
    e["beta_x"] = k.beta_x;
    e["beta_y"] = k.beta_y;
    e["dx"] = k.dx;
    e["dy"] = k.dy;
    e["sigma_x"] = k.sigma_x;
    e["sigma_y"] = k.sigma_y;
    kicks.append(e);
  }
  py::dict d;
  d["lattice"] = make_handle(ft::lattice_from_json(sc.lattice, h->lattice.source_file() + " + space charge", *h->registry));
  d["kicks"] = kicks;
  d["laslett_dqx"] = sc.laslett_dqx;
  d["laslett_dqy"] = sc.laslett_dqy;
  return d;
}

py::dict tune_footprint(const LatticePtr& h, double eps_nx, double eps_ny, double max_sigma, int amplitudes,
                        int angles, int64_t turns, double zeta, double delta, const std::string& device,
                        const std::string& fma, int threads) {
  ft::FootprintOptions o;
  o.emittance_nx = eps_nx;
  o.emittance_ny = eps_ny;
  o.max_sigma = max_sigma;
  o.amplitudes = amplitudes;
  o.angles = angles;
  o.turns = turns;
  o.zeta_offset = zeta;
  o.delta_offset = delta;
  o.threads = threads;
  o.fma = ft::parse_fma_mode(fma, "fma");
  ft::BackendChoice choice;
  choice.device = device;
  ft::TuneFootprint fp;
  ft::LinearOptics optics;
  std::string backend_name;
  {
    py::gil_scoped_release release;
    // As the command line does: beam sizes and reference tunes of the ring without its frozen
    // space-charge elements.
    size_t removed = 0;
    const nlohmann::ordered_json bare = ft::remove_space_charge(h->lattice, h->lattice.source_file(), &removed);
    ft::OpticsOptions oo;
    oo.threads = threads;
    optics = removed > 0 ? ft::compute_linear_optics(ft::lattice_from_json(bare, "bare", *h->registry), oo)
                         : ft::compute_linear_optics(h->lattice, oo);
    auto backend = ft::make_backend(h->lattice, choice, nullptr);
    backend_name = backend->name();
    fp = ft::tune_footprint(h->lattice, optics, *backend, o);
  }
  py::dict d;
  d["backend"] = backend_name;
  d["amplitude_x"] = copy_array(fp.amplitude_x);
  d["amplitude_y"] = copy_array(fp.amplitude_y);
  d["qx"] = copy_array(fp.qx);
  d["qy"] = copy_array(fp.qy);
  d["lost_turn"] = copy_array(fp.lost_turn);
  d["qx0"] = optics.qx;
  d["qy0"] = optics.qy;
  d["sigma_x"] = fp.sigma_x;
  d["sigma_y"] = fp.sigma_y;
  return d;
}

py::dict da_scan(const LatticePtr& h, const ft::DaConfig& config, const std::string& device, const std::string& fma,
                 int threads, const std::string& dispatch, const std::string& output, int64_t checkpoint_every,
                 const std::vector<std::string>& variant_files) {
  // The scan sets the lattice's per-turn limits: it works on a copy.
  ft::Lattice lattice = h->lattice;
  ft::LatticeVariants variants;
  if (!variant_files.empty()) variants = ft::load_variants(lattice, variant_files, *h->registry);
  ft::DaJobOptions jo;
  jo.lattice_file = h->lattice.source_file();
  jo.output = output;
  jo.checkpoint_every = checkpoint_every;
  jo.fma = ft::parse_fma_mode(fma, "fma");
  jo.threads = threads;
  ft::BackendChoice choice;
  choice.device = device;
  choice.dispatch = dispatch_from_name(dispatch);
  ft::DaJobStatus status;
  std::unique_ptr<ft::DaJob> job;
  std::string backend_name;
  {
    py::gil_scoped_release release;
    job = variant_files.empty() ? std::make_unique<ft::DaJob>(lattice, config, jo)
                                : std::make_unique<ft::DaJob>(variants, config, jo);
    auto backend = ft::make_backend(variant_files.empty() ? lattice : variants.lattices[0], choice, nullptr);
    backend_name = backend->name();
    status = job->run(*backend);
  }
  if (status != ft::DaJobStatus::Finished) throw ft::Error("the DA scan stopped before its last turn");
  const ft::DaScan& scan = job->scan();
  const ft::DaSummary& summary = job->summary();
  py::dict d;
  d["backend"] = backend_name;
  d["turns"] = scan.config.turns;
  d["amplitude"] = copy_array(scan.amplitude);
  d["angle"] = copy_array(scan.angle);
  d["grid_x"] = copy_array(scan.grid_x);
  d["grid_y"] = copy_array(scan.grid_y);
  d["delta_index"] = copy_array(scan.delta_index);
  d["initial"] = scan.initial;
  d["final"] = scan.particles;
  d["lost_turn"] = copy_array(scan.particles.lost_turn);
  d["survived"] = [&] {
    std::vector<uint8_t> alive(scan.particles.size());
    for (size_t i = 0; i < alive.size(); ++i) alive[i] = scan.particles.state[i] > 0;
    return py::array_t<bool>(alive.size(), reinterpret_cast<const bool*>(alive.data()));
  }();
  std::vector<double> a_delta, a_angle, first, last, refined;
  for (const auto& r : summary.per_angle) {
    a_delta.push_back(r.delta);
    a_angle.push_back(r.angle);
    first.push_back(r.da_first_loss);
    last.push_back(r.da_last_stable);
    refined.push_back(r.da_refined);
  }
  py::dict per_angle;
  per_angle["delta"] = copy_array(a_delta);
  per_angle["angle"] = copy_array(a_angle);
  per_angle["da_first_loss"] = copy_array(first);
  per_angle["da_last_stable"] = copy_array(last);
  per_angle["da_refined"] = copy_array(refined);
  d["per_angle"] = per_angle;
  d["da_min"] = summary.da_min;
  d["da_mean"] = summary.da_mean;
  d["da_max"] = summary.da_max;
  d["turn_checkpoints"] = copy_array(summary.turn_checkpoints);
  py::array_t<double> vs({summary.da_vs_turns.size(), summary.turn_checkpoints.size()});
  for (size_t i = 0; i < summary.da_vs_turns.size(); ++i)
    for (size_t j = 0; j < summary.da_vs_turns[i].size() && j < summary.turn_checkpoints.size(); ++j)
      vs.mutable_at(i, j) = summary.da_vs_turns[i][j];
  d["da_vs_turns"] = vs;
  d["closed_orbit"] = py::array_t<double>(6, scan.closed_orbit);
  if (job->study()) d["study"] = study_dict(job->study_summary(), scan);
  return d;
}

py::dict repro(const LatticePtr& h, const ft::Particles& initial, int64_t turns, const std::string& fma, int threads,
               const std::string& kernel_cache) {
  ft::ReproOptions o;
  o.turns = turns;
  o.fma = ft::parse_fma_mode(fma, "fma");
  o.threads = threads;
  o.cache_dir = kernel_cache;
  ft::ReproResult r;
  {
    py::gil_scoped_release release;
    r = ft::run_repro(h->lattice, initial, o);
  }
  py::dict d;
  d["identical"] = r.identical;
  d["gpu"] = r.gpu_name;
  d["coordinates"] = r.comparison.coordinates;
  d["bitwise_equal"] = r.comparison.bitwise_equal;
  d["state_mismatches"] = r.comparison.state_mismatches;
  d["max_ulp"] = r.comparison.max_ulp;
  d["max_relative"] = r.comparison.max_relative;
  d["first_differing"] = r.comparison.first_differing;
  d["cpu_particles"] = r.cpu;
  d["gpu_particles"] = r.gpu;
  d["cpu_seconds"] = r.cpu_seconds;
  d["gpu_kernel_seconds"] = r.gpu_stats.kernel_seconds;
  py::list collective;
  for (const auto& c : r.collective) {
    py::dict cd;
    cd["element"] = c.element_name;
    cd["counts_identical"] = c.counts_identical;
    cd["field_equal"] = c.field_equal;
    cd["field_size"] = c.field_size;
    cd["max_difference"] = c.max_difference;
    collective.append(cd);
  }
  d["collective"] = collective;
  if (r.divergence.found) {
    py::dict dv;
    dv["turn"] = r.divergence.turn;
    dv["element"] = r.divergence.element;
    dv["element_name"] = r.divergence.element_name;
    dv["element_type"] = r.divergence.element_type;
    d["divergence"] = dv;
  } else {
    d["divergence"] = py::none();
  }
  return d;
}

py::dict matched_report(const ft::MatchedBunchReport& r) {
  py::dict d;
  d["distribution"] = r.distribution;
  d["eta"] = r.bucket.eta;
  d["zeta_s"] = r.bucket.zeta_s;
  d["bucket"] = py::make_tuple(r.bucket.zeta_left, r.bucket.zeta_right);
  d["bucket_height"] = r.bucket_height;
  d["qs0"] = r.qs0;
  d["qs"] = r.qs;
  d["sigma_zeta"] = r.sigma_zeta;
  d["sigma_zeta_rf"] = r.sigma_zeta_rf;
  d["sigma_delta"] = r.sigma_delta;
  d["potential_well"] = r.potential_well;
  d["converged"] = r.converged;
  d["iterations"] = r.iterations;
  d["residual"] = r.residual;
  d["zeta"] = copy_array(r.zeta);
  d["line_density"] = copy_array(r.line_density);
  return d;
}

// ---------------------------------------------------------------------------------------------
// Colliders

/// The records as NumPy columns, one per CrossingRecord field (beam 1 or 2, as bunches.csv).
py::dict crossing_record_columns(const std::vector<ft::CrossingRecord>& records) {
  const size_t n = records.size();
  std::vector<int64_t> slot(n), turn(n);
  std::vector<int32_t> beam(n), bunch(n), partner(n);
  static const char* kMeanNames[6] = {"x", "px", "y", "py", "zeta", "delta"};
  static const char* kDoubleNames[] = {"alive",       "luminosity",  "sigma_x",     "sigma_y",  "sigma_zeta",
                                       "sigma_delta", "emittance_x", "emittance_y", "coupling", "unused_charge"};
  std::vector<std::vector<double>> means(6, std::vector<double>(n));
  std::vector<std::vector<double>> doubles(std::size(kDoubleNames), std::vector<double>(n));
  for (size_t i = 0; i < n; ++i) {
    const ft::CrossingRecord& r = records[i];
    slot[i] = r.slot, turn[i] = r.turn;
    beam[i] = r.beam + 1, bunch[i] = r.bunch, partner[i] = r.partner;
    for (size_t k = 0; k < 6; ++k) means[k][i] = r.mean[k];
    const double values[] = {r.alive,       r.luminosity,  r.sigma_x,     r.sigma_y,  r.sigma_zeta,
                             r.sigma_delta, r.emittance_x, r.emittance_y, r.coupling, r.unused_charge};
    for (size_t k = 0; k < std::size(kDoubleNames); ++k) doubles[k][i] = values[k];
  }
  py::dict out;
  out["slot"] = copy_array(slot);
  out["beam"] = copy_array(beam);
  out["bunch"] = copy_array(bunch);
  out["partner"] = copy_array(partner);
  out["turn"] = copy_array(turn);
  for (size_t k = 0; k < std::size(kDoubleNames); ++k) out[py::str(kDoubleNames[k])] = copy_array(doubles[k]);
  for (size_t k = 0; k < 6; ++k) out[py::str(kMeanNames[k])] = copy_array(means[k]);
  return out;
}

/// A collider run (ft::run_collide on ft::world(), as `fusetrack collide`). `setup`: a set-up
/// file's path, or its document (a dict; "<dict>" in messages, relative paths from the working
/// directory).
py::dict collide(const py::object& setup_arg, int64_t turns, int threads, const std::string& placement,
                 const std::string& output_dir, const std::string& device, const std::string& fma) {
  if (threads < 0) argument_error("threads", fmt::format("must not be negative, got {}", threads));
  const ft::ColliderSetup setup = py::isinstance<py::dict>(setup_arg)
                                      ? ft::collider_setup_from_json(to_json(setup_arg), "<dict>")
                                      : ft::read_collider_setup(setup_arg.cast<std::string>());
  ft::CollideOptions o;
  o.turns = turns;
  o.threads = threads;
  o.placement = ft::parse_bunch_placement(placement, "placement");
  ft::check_device_name(device, "device");
  o.backend.device = device;
  o.fma = ft::parse_fma_mode(fma, "fma");
  o.output_dir = output_dir;
  ft::Communicator& comm = ft::world();
  if (!output_dir.empty() && comm.is_root()) ft::check_output_directory(output_dir, "output_dir");
  ft::CollideResult r;
  {
    py::gil_scoped_release release;
    r = ft::run_collide(setup, *default_registry(), o, comm);
  }
  const auto pairs = [](const std::array<std::array<double, 2>, 2>& v) {
    py::array_t<double> a({2, 2});
    for (size_t beam = 0; beam < 2; ++beam)
      for (size_t plane = 0; plane < 2; ++plane) a.mutable_at(beam, plane) = v[beam][plane];
    return a;
  };
  py::dict d;
  d["records"] = crossing_record_columns(r.records);
  d["summary"] = from_json(ft::collide_summary_json(setup, o, r));
  d["xi"] = pairs(r.xi);
  d["tunes"] = pairs(r.tunes);
  d["sigma_mode"] = array_of(r.sigma_mode);
  d["pi_mode"] = array_of(r.pi_mode);
  d["luminosity"] = r.luminosity;
  d["crossing_frequency"] = r.crossing_frequency;
  d["output_files"] = r.output_files;
  d["device"] = r.device;  // where the linear-map bunches ran ("CPU" or "GPU i (name)")
  return d;
}

}  // namespace

PYBIND11_MODULE(_fusetrack, m) {
  m.doc() = "fusetrack's C++ library (see the fusetrack package for documentation)";

  // Errors: the C++ messages unchanged (file, element, field).
  static py::exception<ft::Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<ft::InputError> input_error(m, "InputError", error.ptr());
  static py::exception<ft::PluginError> plugin_error(m, "PluginError", error.ptr());
  static py::exception<ft::DeviceError> device_error(m, "DeviceError", error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ft::InputError& e) {
      input_error(e.what());
    } catch (const ft::PluginError& e) {
      plugin_error(e.what());
    } catch (const ft::DeviceError& e) {
      device_error(e.what());
    } catch (const ft::Error& e) {
      error(e.what());
    }
  });

  // Registry
  m.def("load_plugin", [](const std::string& path) { return default_registry()->load_plugin(path).file(); },
        py::arg("path"));
  m.def("plugins", [] {
    py::list out;
    for (const auto& p : default_registry()->plugins()) {
      py::dict d;
      d["name"] = p->name();
      d["file"] = p->file();
      d["abi_version"] = p->abi_version();
      out.append(d);
    }
    return out;
  });
  m.def("plugin_search_path", [] { return default_registry()->searched_directories(); });
  m.def("element_types", [] {
    py::list out;
    for (const ft::ElementType* t : default_registry()->types()) {
      py::dict d;
      d["name"] = t->name;
      d["doc"] = t->doc;
      d["kind"] = t->is_collective() ? "collective" : (t->thick ? "thick" : "thin");
      d["plugin"] = t->plugin ? t->plugin->file() : std::string();
      py::list fields;
      for (const auto& f : t->fields) {
        py::dict fd;
        fd["name"] = f.name;
        fd["unit"] = f.unit;
        fd["doc"] = f.doc;
        fd["type"] = f.type_name();
        fd["count"] = f.count;
        fd["required"] = f.required;
        fd["derived"] = f.derived;
        fd["default"] = (f.required || f.derived || f.host_only()) ? py::object(py::none())
                                                                    : py::object(py::float_(f.default_value));
        fields.append(fd);
      }
      d["fields"] = fields;
      out.append(d);
    }
    return out;
  });
  m.def("gpu_unavailable_reason", &ft::gpu_unavailable_reason);
  m.def("gpus", [] {
    py::list out;
    for (const auto& g : ft::list_gpus()) {
      py::dict d;
      d["index"] = g.index;
      d["name"] = g.name;
      d["arch"] = g.arch;
      d["memory"] = g.total_memory;
      d["multiprocessors"] = g.multiprocessors;
      out.append(d);
    }
    return out;
  });

  // Lattice
  py::class_<ElementRef>(m, "Element")
      .def_property_readonly("name", [](const ElementRef& e) { return e.def().name; })
      .def_property_readonly("type", [](const ElementRef& e) { return e.def().type->name; })
      .def("__getitem__", &ElementRef::get)
      .def("__setitem__", &ElementRef::set)
      .def("fields", &ElementRef::fields)
      .def("__repr__", [](const ElementRef& e) {
        return fmt::format("<fusetrack.Element '{}' ({})>", e.def().name, e.def().type->name);
      });

  py::class_<LatticeHandle, LatticePtr>(m, "Lattice")
      .def_static(
          "_from_file",
          [](const std::string& path) { return make_handle(ft::load_lattice(path, *default_registry())); },
          py::arg("path"))
      .def_static(
          "_from_json",
          [](const py::object& doc, const std::string& file) {
            return make_handle(ft::lattice_from_json(to_json(doc), file, *default_registry()));
          },
          py::arg("doc"), py::arg("file"))
      .def("_to_json", [](const LatticeHandle& h) { return from_json(ft::lattice_to_json(h.lattice)); })
      .def("__getitem__",
           [](const LatticePtr& h, const std::string& name) { return ElementRef{h, definition_index(*h, name)}; })
      .def("__contains__", [](const LatticeHandle& h, const std::string& name) {
        return h.lattice.find_definition(name) >= 0;
      })
      .def("__len__", [](const LatticeHandle& h) { return h.lattice.sequence().size(); })
      .def_property_readonly("element_names",
                             [](const LatticeHandle& h) {
                               std::vector<std::string> names;
                               for (const auto& d : h.lattice.definitions()) names.push_back(d.name);
                               return names;
                             })
      .def_property_readonly("sequence",
                             [](const LatticeHandle& h) {
                               std::vector<std::string> names;
                               names.reserve(h.lattice.sequence().size());
                               for (const auto& e : h.lattice.sequence())
                                 names.push_back(h.lattice.definitions()[e.definition].name);
                               return names;
                             })
      .def_property_readonly("s",
                             [](const LatticeHandle& h) {
                               std::vector<double> s;
                               for (const auto& e : h.lattice.sequence()) s.push_back(e.s);
                               return copy_array(s);
                             })
      .def_property_readonly("circumference", [](const LatticeHandle& h) { return h.lattice.circumference(); })
      .def_property_readonly("has_collective", [](const LatticeHandle& h) { return h.lattice.has_collective(); })
      .def_property_readonly("source_file", [](const LatticeHandle& h) { return h.lattice.source_file(); })
      .def_property_readonly("reference", [](const LatticeHandle& h) {
        const ft::ReferenceParticle& r = h.lattice.reference();
        py::dict d;
        d["mass0"] = r.mass0;
        d["q0"] = r.q0;
        d["p0c"] = r.p0c;
        d["beta0"] = r.beta0();
        d["gamma0"] = r.gamma0();
        d["energy0"] = r.energy0();
        return d;
      });

  // Particles
  py::class_<ft::Particles>(m, "Particles")
      .def(py::init<>())
      .def_static("_from_arrays", &particles_from_arrays, py::arg("beta0"), py::arg("arrays"))
      .def_static(
          "_grid",
          [](const LatticeHandle& h, double x_min, double x_max, size_t nx, double y_min, double y_max, size_t ny,
             double delta) {
            return ft::make_grid(h.lattice.reference().beta0(), x_min, x_max, nx, y_min, y_max, ny, delta);
          })
      .def_static("_matched_gaussian",
                  [](const LatticeHandle& h, size_t n, double enx, double eny, double sz, double sd, uint64_t seed) {
                    ft::GaussianBunchSpec spec;
                    spec.count = n;
                    spec.emittance_nx = enx;
                    spec.emittance_ny = eny;
                    spec.sigma_zeta = sz;
                    spec.sigma_delta = sd;
                    spec.seed = seed;
                    py::gil_scoped_release release;
                    return ft::make_matched_gaussian(h.lattice, spec);
                  })
      .def_static("_matched_bunch",
                  [](const LatticeHandle& h, size_t n, double sigma_zeta, const std::string& distribution, double mu,
                     bool potential_well, uint64_t seed, const std::string& fma, int threads) {
                    ft::MatchedBunchOptions o;
                    o.distribution = distribution;
                    o.mu = mu;
                    o.sigma_zeta = sigma_zeta;
                    o.potential_well = potential_well;
                    o.seed = seed;
                    o.fma = ft::parse_fma_mode(fma, "fma");
                    o.bucket.threads = threads;
                    ft::MatchedBunch b;
                    {
                      py::gil_scoped_release release;
                      b = ft::generate_matched_bunch(h.lattice, n, o);
                    }
                    return py::make_tuple(std::move(b.particles), matched_report(b.report));
                  })
      .def_static("_repro_particles",
                  [](const LatticeHandle& h, size_t n, double amplitude, double delta) {
                    return ft::make_repro_particles(h.lattice, n, amplitude, delta);
                  })
      .def_static("_read", [](const std::string& path, double beta0) { return ft::read_particles(path, beta0); })
      .def("_write", [](const ft::Particles& p, const std::string& path) { ft::write_particles(path, p); })
      .def("copy", [](const ft::Particles& p) { return ft::Particles(p); }, "An independent copy.")
      .def("__len__", &ft::Particles::size)
      .def_readonly("beta0", &ft::Particles::beta0)
      .def_property_readonly("alive_count", &ft::Particles::alive_count)
      .def("_view",
           [](py::object self, const std::string& name) -> py::array {
             ft::Particles& p = self.cast<ft::Particles&>();
             if (name == "x") return view_of(p.x, self, true);
             if (name == "px") return view_of(p.px, self, true);
             if (name == "y") return view_of(p.y, self, true);
             if (name == "py") return view_of(p.py, self, true);
             if (name == "zeta") return view_of(p.zeta, self, true);
             if (name == "delta") return view_of(p.delta, self, false);
             if (name == "ptau") return view_of(p.ptau, self, false);
             if (name == "rpp") return view_of(p.rpp, self, false);
             if (name == "rvv") return view_of(p.rvv, self, false);
             if (name == "state") return view_of(p.state, self, false);
             if (name == "lost_turn") return view_of(p.lost_turn, self, false);
             if (name == "lost_element") return view_of(p.lost_element, self, false);
             if (name == "id") return view_of(p.id, self, false);
             if (name == "variant") {  // lattice variants: all 0 until assigned
               if (p.variant.empty()) p.variant.assign(p.size(), 0);
               return view_of(p.variant, self, false);
             }
             throw py::attribute_error(name);
           })
      .def("_assign_variant",
           [](ft::Particles& p, const py::array_t<int64_t, py::array::forcecast>& v) {
             if (static_cast<size_t>(v.size()) != p.size())
               argument_error("variant", fmt::format("needs {} entries (one per particle), got {}", p.size(), v.size()));
             p.variant.resize(p.size());
             for (size_t i = 0; i < p.size(); ++i) {
               const int64_t k = v.at(static_cast<py::ssize_t>(i));
               if (k < 0 || k > INT32_MAX) argument_error("variant", fmt::format("entry {} is {}", i, k));
               p.variant[i] = static_cast<int32_t>(k);
             }
           })
      .def("_assign",
           [](ft::Particles& p, const std::string& name, const py::array_t<double, py::array::forcecast>& v) {
             if (name == "x") return copy_into(p.x, v, "x");
             if (name == "px") return copy_into(p.px, v, "px");
             if (name == "y") return copy_into(p.y, v, "y");
             if (name == "py") return copy_into(p.py, v, "py");
             if (name == "zeta") return copy_into(p.zeta, v, "zeta");
             if (name == "delta") {  // ptau, rpp, rvv follow (xtrack's update_delta)
               std::vector<double> d(p.size());
               copy_into(d, v, "delta");
               for (size_t i = 0; i < p.size(); ++i) {
                 ft::ParticleView view = p.view(i);
                 view.update_delta(d[i]);
                 p.store(i, view);
               }
               return;
             }
             throw py::attribute_error(name + " cannot be assigned (only x, px, y, py, zeta, delta)");
           })
      .def("_data_pointer", [](ft::Particles& p, const std::string& name) -> uintptr_t {
        if (name == "x") return reinterpret_cast<uintptr_t>(p.x.data());
        if (name == "delta") return reinterpret_cast<uintptr_t>(p.delta.data());
        if (name == "state") return reinterpret_cast<uintptr_t>(p.state.data());
        throw py::attribute_error(name);
      });

  // Tracking
  py::class_<Monitor>(m, "_Monitor")
      .def(py::init([](int64_t every, int64_t profile_every) {
             auto mon = std::make_unique<Monitor>();
             mon->every = every;
             mon->profile_every = profile_every;
             return mon;
           }),
           py::arg("every") = 1, py::arg("profile_every") = 0)
      .def_readonly("every", &Monitor::every)
      .def_readonly("profile_every", &Monitor::profile_every)
      .def("_arrays", [](const Monitor& mon) {
        if (!mon.result) throw ft::Error("the monitor has recorded nothing yet: pass it to Tracker.track");
        return npy_arrays(mon.result->arrays());
      })
      .def("_write", [](const Monitor& mon, const std::string& path) {
        if (!mon.result) throw ft::Error("the monitor has recorded nothing yet: pass it to Tracker.track");
        mon.result->write(path);
      });

  py::class_<Tracker>(m, "_Tracker")
      .def(py::init<LatticePtr, const std::string&, const std::string&, int, const std::string&,
                    const std::string&, const std::vector<std::string>&>(),
           py::arg("lattice"), py::arg("device") = "auto", py::arg("fma") = "off", py::arg("threads") = 0,
           py::arg("dispatch") = "auto", py::arg("kernel_cache") = "", py::arg("variants") = std::vector<std::string>{})
      .def_property_readonly("variant_names", &Tracker::variant_names)
      .def("track", &Tracker::track, py::arg("particles"), py::arg("turns"), py::arg("monitor") = nullptr,
           py::arg("progress") = "off", py::arg("space_charge_update") = 0,
           py::arg("space_charge_intensity") = py::none())
      .def_property_readonly("backend", &Tracker::backend_name)
      .def_property_readonly("notices", &Tracker::notices)
      .def_property_readonly("lattice", &Tracker::lattice);

  // Optics, DA, repro
  m.def(
      "_optics",
      [](const LatticeHandle& h, bool force_4d, double delta0, int64_t tracking_turns, int threads) {
        return optics_dict(h, force_4d, delta0, tracking_turns, threads);
      },
      py::arg("lattice"), py::arg("force_4d") = false, py::arg("delta0") = 0.0, py::arg("tracking_turns") = 0,
      py::arg("threads") = 0);

  m.def(
      "_twiss_table",
      [](const LatticeHandle& h, bool force_4d, double delta0, int threads) {
        return twiss_dict(h, force_4d, delta0, threads);
      },
      py::arg("lattice"), py::arg("force_4d") = false, py::arg("delta0") = 0.0, py::arg("threads") = 0);

  py::class_<ft::DaConfig>(m, "_DaConfig")
      .def(py::init<>())
      .def_readwrite("turns", &ft::DaConfig::turns)
      .def_property(
          "grid", [](const ft::DaConfig& c) { return c.grid == ft::DaGrid::Cartesian ? "cartesian" : "polar"; },
          [](ft::DaConfig& c, const std::string& g) {
            c.grid = choice<ft::DaGrid>("grid", g, {{"polar", ft::DaGrid::Polar}, {"cartesian", ft::DaGrid::Cartesian}});
          })
      .def_property(
          "units", [](const ft::DaConfig& c) { return c.units == ft::DaUnits::Sigma ? "sigma" : "m"; },
          [](ft::DaConfig& c, const std::string& u) {
            c.units = choice<ft::DaUnits>("units", u, {{"m", ft::DaUnits::Metres}, {"sigma", ft::DaUnits::Sigma}});
          })
      .def_readwrite("angles", &ft::DaConfig::angles)
      .def_readwrite("angle_min", &ft::DaConfig::angle_min)
      .def_readwrite("angle_max", &ft::DaConfig::angle_max)
      .def_readwrite("amplitudes", &ft::DaConfig::amplitudes)
      .def_readwrite("amplitude_min", &ft::DaConfig::amplitude_min)
      .def_readwrite("amplitude_max", &ft::DaConfig::amplitude_max)
      .def_readwrite("nx", &ft::DaConfig::nx)
      .def_readwrite("ny", &ft::DaConfig::ny)
      .def_readwrite("x_min", &ft::DaConfig::x_min)
      .def_readwrite("x_max", &ft::DaConfig::x_max)
      .def_readwrite("y_min", &ft::DaConfig::y_min)
      .def_readwrite("y_max", &ft::DaConfig::y_max)
      .def_readwrite("emittance_nx", &ft::DaConfig::emittance_nx)
      .def_readwrite("emittance_ny", &ft::DaConfig::emittance_ny)
      .def_readwrite("px0", &ft::DaConfig::px0)
      .def_readwrite("py0", &ft::DaConfig::py0)
      .def_readwrite("zeta0", &ft::DaConfig::zeta0)
      .def_readwrite("deltas", &ft::DaConfig::deltas)
      .def_readwrite("around_closed_orbit", &ft::DaConfig::around_closed_orbit)
      .def_property(
          "turn_limits", [](const ft::DaConfig& c) { return std::vector<double>(c.turn_limits, c.turn_limits + 6); },
          [](ft::DaConfig& c, const std::vector<double>& v) {
            if (v.size() != 6) {
              argument_error("limits", "expects six values: x px y py zeta delta (0: no limit)");
            }
            std::copy(v.begin(), v.end(), c.turn_limits);
          })
      .def_readwrite("refine_resolution", &ft::DaConfig::refine_resolution);

  m.def("_install_space_charge", &install_space_charge, py::arg("lattice"), py::arg("elements"),
        py::arg("positions"), py::arg("intensity"), py::arg("eps_nx"), py::arg("eps_ny"), py::arg("sigma_zeta"),
        py::arg("delta_rms"), py::arg("z0"), py::arg("prefix"), py::arg("force_4d"), py::arg("threads"),
        py::arg("model"), py::arg("pic_model"), py::arg("nodes"), py::arg("extent_sigmas"), py::arg("fixed_grid_sigmas"));
  // Frozen space charge that follows the beam: update() changes the lattice's fields (a Tracker of
  // that lattice re-uploads them at its next track()).
  struct SpaceChargeBeamSizes {
    LatticePtr lattice;
    ft::SpaceChargeBeamSizes sizes;
  };
  py::class_<SpaceChargeBeamSizes>(m, "_SpaceChargeBeamSizes")
      .def(py::init([](const LatticePtr& h) { return SpaceChargeBeamSizes{h, ft::SpaceChargeBeamSizes(h->lattice)}; }),
           py::arg("lattice"))
      .def("update",
           [](SpaceChargeBeamSizes& s, const ft::Particles& particles, double intensity) {
             s.sizes.update(s.lattice->lattice, particles, intensity);
             ++s.lattice->revision;
           },
           py::arg("particles"), py::arg("intensity"))
      .def_property_readonly("elements", [](const SpaceChargeBeamSizes& s) { return s.sizes.elements(); });
  m.def(
      "_remove_space_charge",
      [](const LatticePtr& h) {
        return make_handle(ft::lattice_from_json(ft::remove_space_charge(h->lattice, h->lattice.source_file()),
                                                 h->lattice.source_file(), *h->registry));
      },
      py::arg("lattice"));
  m.def("_tune_footprint", &tune_footprint, py::arg("lattice"), py::arg("eps_nx"), py::arg("eps_ny"),
        py::arg("max_sigma"), py::arg("amplitudes"), py::arg("angles"), py::arg("turns"), py::arg("zeta"),
        py::arg("delta"), py::arg("device"), py::arg("fma"), py::arg("threads"));
  m.def("_da_scan", &da_scan, py::arg("lattice"), py::arg("config"), py::arg("device"), py::arg("fma"),
        py::arg("threads"), py::arg("dispatch"), py::arg("output"), py::arg("checkpoint_every"),
        py::arg("variants"));
  m.def("_collide", &collide, py::arg("setup"), py::arg("turns"), py::arg("threads"), py::arg("placement"),
        py::arg("output_dir"), py::arg("device"), py::arg("fma"));
  m.def("_repro", &repro, py::arg("lattice"), py::arg("particles"), py::arg("turns"), py::arg("fma"),
        py::arg("threads"), py::arg("kernel_cache"));
  // Bunch trains (fusetrack/bunch_train.h).
  m.def(
      "_declared_train",
      [](const LatticePtr& h) {
        const ft::BunchTrain t = ft::declared_train(h->lattice);
        py::dict d;
        d["bunches"] = t.bunches;
        d["spacing"] = t.spacing;
        d["centre"] = t.centre;
        d["element"] = t.declared_by;
        return d;
      },
      py::arg("lattice"));
  m.def(
      "_make_train",
      [](const std::vector<ft::Particles>& bunches, double spacing) {
        if (bunches.empty()) argument_error("bunches", "a train needs at least one bunch");
        for (const ft::Particles& b : bunches)
          if (b.beta0 != bunches.front().beta0) argument_error("bunches", "the bunches have different beta0");
        return ft::make_bunch_train(static_cast<int>(bunches.size()), spacing,
                                    [&](int b) { return bunches[static_cast<size_t>(b)]; });
      },
      py::arg("bunches"), py::arg("spacing"));
  m.def(
      "_bunch_moments",
      [](const ft::Particles& p, int bunches, double spacing, double centre, size_t total, int threads) {
        ft::BunchTrain t;
        t.bunches = bunches;
        t.spacing = spacing;
        t.centre = centre;
        const ft::TrainMoments moments = ft::bunch_moments(p, t, total == 0 ? p.size() : total, nullptr, threads);
        const char* names[6] = {"mean_x", "mean_px", "mean_y", "mean_py", "mean_zeta", "mean_delta"};
        py::dict d;
        d["macroparticles"] = py::array_t<double>(moments.macroparticles.size(), moments.macroparticles.data());
        for (size_t c = 0; c < 6; ++c) {
          std::vector<double> v;
          for (const auto& u : moments.mean) v.push_back(u[c]);
          d[names[c]] = py::array_t<double>(v.size(), v.data());
        }
        d["emittance_x"] = py::array_t<double>(moments.emittance_x.size(), moments.emittance_x.data());
        d["emittance_y"] = py::array_t<double>(moments.emittance_y.size(), moments.emittance_y.data());
        d["out_of_range"] = moments.out_of_range;
        return d;
      },
      py::arg("particles"), py::arg("bunches"), py::arg("spacing"), py::arg("centre"), py::arg("total"),
      py::arg("threads"));
}
