// Import of Xsuite line JSON (xtrack Line.to_dict()) into fusetrack's lattice format.
//
// Facts about the Xsuite format used here (xsuite/xtrack @ 858ffc69, the version the shared test
// lattices come from):
//  - xobjects' HybridClass.to_dict stores a scalar field only when it differs from the field's
//    default, which is 0 except where a class declares another one (LimitRect and
//    LimitRacetrack: min_x/min_y = -1e10, max_x/max_y = +1e10, xtrack's UNLIMITED). Fields that
//    xtrack renames (Cavity frequency/harmonic/lag, DipoleEdge k/e1/..., model, integrator,
//    order, isthick, the alignment shifts) may appear with or without a leading underscore.
//  - Line.from_dict accepts `elements` as a list (the old Line.to_dict) with one entry per
//    element_names entry, zipped into a dict (the last entry of a repeated name wins).
//  - `particle_ref` may be the name of an entry of `env_particles`.
//  - `config` replaces the tracker flags when present (absent keys are then undefined); without
//    it a Line has XTRACK_GLOBAL_XY_LIMIT = 1.0 and XTRACK_MULTIPOLE_NO_SYNRAD set.
//  - Cavity is thick: drift(L/2), kick, drift(L/2) with expanded drifts for its default model;
//    the kick is |q0| V sin(lag pi/180 + phase - 2 pi f zeta / (beta0 c)).
#include "fusetrack/xsuite_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "core/math_helpers.hpp"
#include "fusetrack/error.h"
#include "fusetrack/lattice.h"
#include "fusetrack/transform.h"

namespace ft {

namespace {

using json = nlohmann::ordered_json;

constexpr double kUnlimited = 1e10;    // xtrack's UNLIMITED aperture (apertures/_aperture_common.py)
constexpr int kMaxMultipoleOrder = 5;  // FT_MULTIPOLE_MAX_ORDER (elements/multipole.h)

bool is_complex(const json& v) { return v.is_object() && v.size() == 1 && v.contains("__complex__"); }

/// The real value of a number or of {"__complex__": [re, im]} with im == 0; throws otherwise.
/// `where` is a callable returning the InputLocation, built only for an error.
template <class Where>
double real_number(const json& v, const Where& where) {
  if (v.is_number()) {
    const double x = v.get<double>();
    if (!std::isfinite(x)) throw InputError(where(), fmt::format("value {} is not a finite number", v.dump()));
    return x;
  }
  if (is_complex(v)) {
    const json& c = v.at("__complex__");
    if (!c.is_array() || c.size() != 2 || !c[0].is_number() || !c[1].is_number())
      throw InputError(where(), fmt::format("expected {{\"__complex__\": [real, imaginary]}}, got {}", v.dump()));
    const double re = c[0].get<double>(), im = c[1].get<double>();
    if (!std::isfinite(re) || !std::isfinite(im))
      throw InputError(where(), fmt::format("complex value {} is not finite", c.dump()));
    if (im != 0.0)
      throw InputError(where(), fmt::format("complex value {} + {}j has a non-zero imaginary part; a real number is "
                                            "expected here",
                                            re, im));
    return re;
  }
  throw InputError(where(), fmt::format("expected a number, got {}", json_type_name(v)));
}

double real_number(const json& v, const InputLocation& at) {
  return real_number(v, [&] { return at; });
}

/// True for values that mean "nothing": 0, false, null, "", empty or all-zero arrays, 0 + 0j.
bool is_zero_like(const json& v) {
  if (v.is_null()) return true;
  if (v.is_boolean()) return !v.get<bool>();
  if (v.is_number()) return v.get<double>() == 0.0;
  if (v.is_string()) return v.get<std::string>().empty();
  if (v.is_array()) return std::all_of(v.begin(), v.end(), [](const json& e) { return is_zero_like(e); });
  if (is_complex(v)) {
    const json& c = v.at("__complex__");
    return c.is_array() &&
           std::all_of(c.begin(), c.end(), [](const json& e) { return e.is_number() && e.get<double>() == 0.0; });
  }
  return v.is_object() && v.empty();
}

std::string short_dump(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

/// Xsuite's tracker flags that matter to the conversion (xtrack TrackerConfig).
struct XsuiteConfig {
  bool present = false;
  double global_xy_limit = 1.0;        // <= 0: disabled
  bool no_synrad = true;               // XTRACK_MULTIPOLE_NO_SYNRAD
  bool exact_drifts = false;           // XTRACK_USE_EXACT_DRIFTS
  bool cavity_preserve_angle = false;  // XTRACK_CAVITY_PRESERVE_ANGLE
};

/// A problem that makes the line unconvertible, collected over all elements and reported at once.
struct Problem {
  long count = 0;         // sequence entries affected
  long first_index = -1;  // first sequence index
  std::string first_name;
  std::string cls;
  std::string field;
  std::string value;
  std::string reason;
  bool has_length = false;  // unknown class: some of its elements have a non-zero "length"
};

struct Converter {
  std::string file;
  const XsuiteImportOptions& options;
  XsuiteConfig config;
  std::vector<std::string> warnings;

  // Keyed by class (unknown classes) or by "Class.field" (unsupported fields); ordered by first
  // appearance through `order`.
  std::map<std::string, Problem> unknown_classes, unsupported_fields;
  std::vector<std::string> unknown_order, field_order;
  // Notes that become one warning each, with the number of elements concerned.
  std::map<std::string, long> notes;
  std::vector<std::string> note_order;

  Converter(std::string file_, const XsuiteImportOptions& o) : file(std::move(file_)), options(o) {}

  InputLocation at(const std::string& field) const {
    InputLocation w{file};
    w.field = field;
    return w;
  }

  void note(const std::string& message, long count) {
    if (!notes.count(message)) note_order.push_back(message);
    notes[message] += count;
  }
};

/// One Xsuite element: typed access to its fields, remembering which were read so that the
/// others can be checked (a non-zero field nobody read is reported, never silently dropped).
class XElement {
 public:
  XElement(Converter& cv, const json& obj, long index, std::string name, std::string cls, long uses,
           std::string field_prefix = "")
      : m_cv(cv),
        m_obj(obj),
        m_index(index),
        m_name(std::move(name)),
        m_cls(std::move(cls)),
        m_uses(uses),
        m_prefix(std::move(field_prefix)) {}

  /// An object nested in field f (xfields keeps a SpaceChargeBiGaussian's field map and profile so, an
  /// xobjects `cls`), read with the same checks; its fields are named "f.field" in messages. nullptr if absent.
  std::unique_ptr<XElement> nested(const std::string& f, const std::string& cls) {
    const json* v = get(f);
    if (!v || v->is_null()) return nullptr;
    if (!v->is_object())
      throw InputError(at(key(f)), fmt::format("expected an object ({}), got {}", cls, json_type_name(*v)));
    return std::make_unique<XElement>(m_cv, *v, m_index, m_name, m_cls, m_uses, m_prefix + key(f) + ".");
  }

  const std::string& cls() const { return m_cls; }
  const std::string& name() const { return m_name; }

  InputLocation at(const std::string& field) const {
    InputLocation w{m_cv.file};
    w.element_index = m_index;
    w.element_name = m_name;
    w.element_type = m_cls;
    w.field = m_prefix + field;
    return w;
  }

  /// The value of field f (also spelt _f), or nullptr; marks it as read.
  const json* get(const std::string& f) {
    const json* v = nullptr;
    for (const std::string& key : {f, "_" + f}) {
      auto it = m_obj.find(key);
      if (it == m_obj.end()) continue;
      m_used.insert(key);
      if (!v) {
        v = &*it;
        m_key[f] = key;
      }
    }
    return v;
  }

  std::string key(const std::string& f) const {
    auto it = m_key.find(f);
    return it == m_key.end() ? f : it->second;
  }

  double num(const std::string& f, double default_value = 0.0) {
    const json* v = get(f);
    if (!v || v->is_null()) return default_value;
    return real_number(*v, [&] { return at(key(f)); });
  }

  /// An integer-valued field (Xsuite Int64 flags: also true/false, or a float with an integral value).
  long long integer(const std::string& f, long long default_value = 0) {
    const json* v = get(f);
    if (!v || v->is_null()) return default_value;
    if (v->is_boolean()) return v->get<bool>() ? 1 : 0;
    const double x = real_number(*v, [&] { return at(key(f)); });
    if (x != std::floor(x) || std::fabs(x) > 9e15)
      throw InputError(at(key(f)), fmt::format("expected an integer, got {}", v->dump()));
    return static_cast<long long>(x);
  }

  std::vector<double> array(const std::string& f) {
    const json* v = get(f);
    std::vector<double> out;
    if (!v || v->is_null()) return out;
    if (!v->is_array()) {  // a scalar where xtrack keeps an array: one entry
      out.push_back(real_number(*v, [&] { return at(key(f)); }));
      return out;
    }
    for (size_t k = 0; k < v->size(); ++k)
      out.push_back(real_number((*v)[k], [&] { return at(fmt::format("{}[{}]", key(f), k)); }));
    return out;
  }

  /// An enumerated setting given as a string or as xtrack's integer index; returns its index.
  long long choice(const std::string& f, const std::map<std::string, long long>& names, long long default_value = 0) {
    const json* v = get(f);
    if (!v || v->is_null()) return default_value;
    if (v->is_string()) {
      auto it = names.find(v->get<std::string>());
      if (it == names.end()) {
        std::string valid;
        for (const auto& [n, i] : names) valid += (valid.empty() ? "" : ", ") + fmt::format("'{}'", n);
        throw InputError(at(key(f)), fmt::format("unknown value {}; Xsuite's values are {}", v->dump(), valid));
      }
      return it->second;
    }
    return integer(f, default_value);
  }

  /// Records field f as unsupported (it would change the tracking), with the reason.
  void unsupported(const std::string& f, const std::string& reason) {
    const std::string k = m_cls + "." + m_prefix + f;
    const json* v = m_obj.contains(key(f)) ? &m_obj.at(key(f)) : nullptr;
    auto [it, inserted] = m_cv.unsupported_fields.try_emplace(k);
    Problem& p = it->second;
    if (inserted) {
      m_cv.field_order.push_back(k);
      p.first_index = m_index;
      p.first_name = m_name;
      p.cls = m_cls;
      p.field = m_prefix + key(f);
      p.value = v ? short_dump(*v) : "";
      p.reason = reason;
    }
    p.count += m_uses;
  }

  /// Field f must be zero (or absent): otherwise it is reported as unsupported.
  void require_zero(const std::string& f, const std::string& reason) {
    const json* v = get(f);
    if (v && !is_zero_like(*v)) {
      if (v->is_number() || is_complex(*v)) (void)num(f);  // a malformed complex is an error of its own
      unsupported(f, reason);
    }
  }

  void ignore(const std::string& f) { (void)get(f); }

  /// Xsuite's element alignment (BeamElement shift_x, shift_y, shift_s, rot_x_rad, rot_y_rad,
  /// rot_s_rad, rot_s_rad_no_frame, rot_shift_anchor; and the legacy _sin_rot_s/_cos_rot_s pair,
  /// rot_s_rad = atan2(sin, cos), where _sin_rot_s < -2 means "not set"), kept as fusetrack's
  /// generic transformation fields (fusetrack/transform.h) that convert_element adds to the
  /// definition. Xsuite applies them to any element class that allows them; fusetrack does the
  /// same with the same conventions.
  void read_alignment() {
    for (const char* f : kTransformFieldNames) {
      if (!get(f)) continue;
      const double v = num(f);
      if (v != 0.0) m_alignment[f] = v;
    }
    const json* s = get("sin_rot_s");
    const json* c = get("cos_rot_s");
    if (s || c) {
      const double sin_r = s ? num("sin_rot_s") : 0.0;
      const double cos_r = c ? num("cos_rot_s") : 0.0;
      if (!(sin_r < -2.0)) {
        const double rot = std::atan2(sin_r, cos_r);
        if (get("rot_s_rad")) {  // xtrack BeamElement.xoinitialize: both given must agree
          const double given = num("rot_s_rad");
          if (!(std::fabs(given - rot) <= 1e-14 + 1e-14 * std::fabs(rot)))
            throw InputError(
                at(key("rot_s_rad")),
                fmt::format("rot_s_rad = {:.17g} disagrees with atan2(_sin_rot_s, _cos_rot_s) = {:.17g}", given, rot));
        } else if (rot != 0.0) {
          m_alignment["rot_s_rad"] = rot;
        }
      }
    }
  }
  /// The same as read_alignment (the name the converters use).
  void require_no_alignment() { read_alignment(); }
  /// The non-zero transformation fields read by read_alignment.
  const json& alignment() const { return m_alignment; }

  /// Every field not read so far must be zero-like; metadata keys are ignored.
  void check_rest() {
    static const std::set<std::string> metadata = {"__class__", "name_associated_aperture", "extra", "prototype",
                                                   "_dummy",    "_internal_record_id"};
    for (const auto& [k, v] : m_obj.items()) {
      if (metadata.count(k) || m_used.count(k) || is_zero_like(v)) continue;
      m_key[k] = k;
      unsupported(k, "the importer does not know what this field does");
    }
  }

 private:
  Converter& m_cv;
  const json& m_obj;
  long m_index;
  std::string m_name;
  std::string m_cls;
  long m_uses;
  std::set<std::string> m_used;
  std::map<std::string, std::string> m_key;  // field -> the key found in the object
  json m_alignment = json::object();
  std::string m_prefix;  // "fieldmap." for a nested object's fields
};

// ------------------------------------------------------------------------------------------------
// Element classes

/// The converted element: a fusetrack definition, and for a thick Xsuite Cavity the drift of half
/// its length that goes on each side of the kick.
struct Converted {
  json def;
  double half_drift = 0.0;
  bool half_drift_exact = false;
};

const std::map<std::string, long long> kDriftModels = {{"adaptive", 0}, {"expanded", 1}, {"exact", 2}};
// _INDEX_TO_MODEL_CURVED/STRAIGHT/RF of xtrack/beam_elements/_common.py (+ 'expanded' -> 4)
const std::map<std::string, long long> kMagnetModels = {{"adaptive", 0},
                                                        {"full", 1},
                                                        {"bend-kick-bend", 2},
                                                        {"rot-kick-rot", 3},
                                                        {"mat-kick-mat", 4},
                                                        {"expanded", 4},
                                                        {"drift-kick-drift-exact", 5},
                                                        {"drift-kick-drift-expanded", 6},
                                                        {"rot-kick-rot-low-order", 7},
                                                        {"rot-kick-rot-high-order", 8}};
const std::map<std::string, long long> kIntegrators = {{"adaptive", 0}, {"teapot", 1}, {"yoshida4", 2}, {"uniform", 3}};
const std::map<std::string, long long> kEdgeModels = {
    {"linear", 0}, {"full", 1}, {"dipole-only", 2}, {"suppressed", -1}};
const std::map<std::string, long long> kRBendModels = {{"adaptive", 0}, {"curved-body", 1}, {"straight-body", 2}};
const std::map<std::string, long long> kEdgeSides = {{"entry", 0}, {"exit", 1}};

/// xtrack's radiation_flag (0 off, 1 mean, 2 quantum) as the element's `radiation` field
/// (elements/radiation.h) where the fusetrack type radiates (def given: Bend, Multipole,
/// ThickMultipole); refused elsewhere. Radiation (and the tapering that goes with it) is compiled
/// out by XTRACK_MULTIPOLE_NO_SYNRAD.
void import_radiation(XElement& e, const Converter& cv, json* def) {
  if (cv.config.no_synrad) {
    e.ignore("radiation_flag");
    e.ignore("delta_taper");
    return;
  }
  if (!def) {
    e.require_zero("radiation_flag", "synchrotron radiation is modelled in Bend, Multipole and Octupole only");
    return;
  }
  const long long flag = e.integer("radiation_flag");
  if (flag == 0) return;
  if (flag != 1 && flag != 2) {
    e.unsupported("radiation_flag", "expected 0 (off), 1 (mean) or 2 (quantum)");
    return;
  }
  e.require_zero("delta_taper", "tapering (delta_taper) is not modelled");
  (*def)["radiation"] = static_cast<int>(flag);
}

Converted convert_drift(XElement& e, Converter& cv, bool exact_class) {
  Converted out;
  const double length = e.num("length");
  bool exact = exact_class;
  if (!exact_class) {
    const long long model = e.choice("model", kDriftModels);
    if (model < 0 || model > 2) throw InputError(e.at(e.key("model")), fmt::format("unknown drift model {}", model));
    exact = model == 2 || cv.config.exact_drifts;  // XTRACK_USE_EXACT_DRIFTS overrides the model
  }
  out.def = {{"type", exact ? "DriftExact" : "Drift"}, {"length", length}};
  return out;
}

Converted convert_multipole(XElement& e, Converter& cv) {
  Converted out;
  std::vector<double> knl = e.array("knl");
  std::vector<double> ksl = e.array("ksl");
  const long long given_order = e.integer("order");
  // xtrack _prepare_multipolar_params: order = max(order, len(knl) - 1, len(ksl) - 1).
  const long long order = std::max<long long>(
      {given_order, static_cast<long long>(knl.size()) - 1, static_cast<long long>(ksl.size()) - 1, 0});
  if (order > kMaxMultipoleOrder) {
    const std::string field = static_cast<long long>(knl.size()) - 1 == order   ? "knl"
                              : static_cast<long long>(ksl.size()) - 1 == order ? "ksl"
                                                                                : "order";
    throw InputError(e.at(e.key(field)),
                     fmt::format("multipole order {} (knl has {} entries, ksl {}) exceeds fusetrack's maximum order "
                                 "{}; Xsuite sums all {} terms (zeros included), so the kick cannot be reproduced",
                                 order, knl.size(), ksl.size(), kMaxMultipoleOrder, order + 1));
  }
  knl.resize(static_cast<size_t>(order + 1), 0.0);
  ksl.resize(static_cast<size_t>(order + 1), 0.0);
  const double hxl = e.num("hxl");
  const double length = e.num("length");
  e.require_zero("hyl", "hyl (vertical bending) is not supported, by Xsuite either");
  e.require_zero("bal", "'bal' is not supported");
  e.require_zero("knl_rel", "relative multipole strengths (knl_rel) are not supported");
  e.require_zero("ksl_rel", "relative multipole strengths (ksl_rel) are not supported");
  e.ignore("main_order");  // only used with knl_rel/ksl_rel
  e.ignore("main_is_skew");
  e.ignore("inv_factorial_order");  // derived from the order
  e.require_zero("isthick", "a thick Multipole (isthick = true) is not supported; only the thin kick is");
  // A thin multipole is always "kick only" (xtrack multipole.h): these settings do not apply.
  e.ignore("model");
  e.ignore("integrator");
  e.ignore("num_multipole_kicks");
  e.require_no_alignment();
  out.def = {{"type", "Multipole"}, {"knl", knl},       {"ksl", ksl},
             {"hxl", hxl},          {"length", length}, {"order", static_cast<int>(order)}};
  import_radiation(e, cv, &out.def);
  return out;
}

Converted convert_cavity(XElement& e, Converter& cv) {
  Converted out;
  const double voltage = e.num("voltage");
  const double frequency = e.num("frequency");
  const double harmonic = e.num("harmonic");
  double lag = e.num("lag");
  double phase = e.num("phase");
  const double length = e.num("length");
  // xtrack track_rf.h: lag += lag_taper, phase += phase_taper unless XTRACK_MULTIPOLE_NO_SYNRAD.
  const double lag_taper = e.num("lag_taper");
  const double phase_taper = e.num("phase_taper");
  if (!cv.config.no_synrad) {
    lag += lag_taper;
    phase += phase_taper;
  } else if (lag_taper != 0.0 || phase_taper != 0.0) {
    cv.note("Cavity lag_taper/phase_taper ignored, as Xsuite does with XTRACK_MULTIPOLE_NO_SYNRAD set", 1);
  }
  e.require_zero("absolute_time", "RF phase from absolute time (absolute_time = 1) is not modelled");
  if (e.integer("num_kicks") > 1) e.unsupported("num_kicks", "more than one RF kick is not modelled");
  const long long integrator = e.choice("integrator", kIntegrators);
  if (integrator == 2)
    e.unsupported("integrator", "the Yoshida integrator is not modelled (one kick only)");
  else if (integrator < 0 || integrator > 3)
    throw InputError(e.at(e.key("integrator")), fmt::format("unknown integrator {}", integrator));
  const long long model = e.choice("model", kMagnetModels);
  if (length != 0.0) {
    // xtrack track_rf.h, uniform integrator with one kick: drift(L/2) kick drift(L/2); model 6
    // (the default) uses expanded drifts, model 5 exact ones.
    if (model == 0 || model == 6) {
      out.half_drift_exact = false;
    } else if (model == 5) {
      out.half_drift_exact = true;
    } else {
      e.unsupported("model", "only the drift-kick-drift models of a thick Cavity are supported");
    }
    out.half_drift = 0.5 * length;
  }
  if (cv.config.cavity_preserve_angle && voltage != 0.0)
    e.unsupported("voltage", "XTRACK_CAVITY_PRESERVE_ANGLE (px, py scaled by the energy kick) is not modelled");
  e.require_no_alignment();
  out.def = {{"type", "Cavity"}, {"voltage", voltage}, {"frequency", frequency},
             {"lag", lag},       {"phase", phase},     {"harmonic", harmonic}};
  return out;
}

Converted convert_dipole_edge(XElement& e, Converter& cv) {
  Converted out;
  const json* h = e.get("h");  // the old name of k (xtrack DipoleEdge.__init__)
  const double k = e.get("k") ? e.num("k") : (h ? e.num("h") : 0.0);
  const double e1 = e.num("e1");
  const double hgap = e.num("hgap");
  const double fint = e.num("fint");
  const double e1_fd = e.num("e1_fd");
  const long long model = e.choice("model", kEdgeModels);
  e.choice("side", kEdgeSides);  // only used by the non-linear model
  if (cv.config.no_synrad) {
    e.ignore("delta_taper");
  } else {
    e.require_zero("delta_taper", "tapering (r21, r43 scaled by 1 + delta_taper) is not modelled");
  }
  // r21, r43 are derived (DipoleEdge._update_r21_r43); values given that do not follow from k, e1,
  // ... (old dicts could set them directly) are reported.
  const double corr = 2.0 * k * hgap * fint;
  const double r21 = k * std::tan(e1);
  const double e1_v = e1 + e1_fd;
  const double sin_e1_v = std::sin(e1_v);
  const double r43 = -k * std::tan(e1_v - corr / std::cos(e1_v) * (1.0 + sin_e1_v * sin_e1_v));
  for (const auto& [f, expected] : {std::pair<const char*, double>{"r21", r21}, {"r43", r43}}) {
    if (!e.get(f)) continue;
    const double given = e.num(f);
    if (!(std::fabs(given - expected) <= 1e-12 * std::max(std::fabs(given), std::fabs(expected)) + 1e-300))
      e.unsupported(f, fmt::format("{} is given directly and does not follow from k, e1, e1_fd, hgap, fint "
                                   "(which give {:.17g})",
                                   f, expected));
  }
  if (model == -1) {  // 'suppressed': the element does nothing
    cv.note("DipoleEdge with model 'suppressed' has no effect and is written as a Marker", 1);
    out.def = {{"type", "Marker"}};
    return out;
  }
  if (model != 0) e.unsupported("model", "only the linear DipoleEdge model is supported");
  e.require_no_alignment();
  out.def = {{"type", "DipoleEdge"}, {"k", k}, {"e1", e1}, {"hgap", hgap}, {"fint", fint}, {"e1_fd", e1_fd}};
  return out;
}

Converted convert_limit_rect(XElement& e) {
  Converted out;
  out.def = {{"type", "LimitRect"},
             {"min_x", e.num("min_x", -kUnlimited)},
             {"max_x", e.num("max_x", kUnlimited)},
             {"min_y", e.num("min_y", -kUnlimited)},
             {"max_y", e.num("max_y", kUnlimited)}};
  e.require_no_alignment();
  return out;
}

Converted convert_limit_racetrack(XElement& e) {
  Converted out;
  out.def = {{"type", "LimitRacetrack"},
             {"min_x", e.num("min_x", -kUnlimited)},
             {"max_x", e.num("max_x", kUnlimited)},
             {"min_y", e.num("min_y", -kUnlimited)},
             {"max_y", e.num("max_y", kUnlimited)},
             {"a", e.num("a")},
             {"b", e.num("b")}};
  e.require_no_alignment();
  return out;
}

/// A semi-axis of xtrack's ellipse apertures: `name` (a, b) if given, else sqrt(`squ`) (a_squ,
/// b_squ), else UNLIMITED (LimitEllipse.__init__, LimitRectEllipse.__init__).
double ellipse_semi_axis(XElement& e, const char* name, const char* squ) {
  if (e.get(name)) return e.num(name);
  if (e.get(squ)) {
    const double s = e.num(squ);
    if (!(s > 0.0)) throw InputError(e.at(e.key(squ)), fmt::format("{} must be positive, got {}", squ, s));
    return std::sqrt(s);
  }
  return kUnlimited;
}

Converted convert_limit_ellipse(XElement& e) {
  // xtrack stores a_squ, b_squ (and a_b_squ) and writes a = sqrt(a_squ), b = sqrt(b_squ) too;
  // LimitEllipse.__init__ prefers a, b; with neither, the axis is UNLIMITED.
  Converted out;
  const double a = ellipse_semi_axis(e, "a", "a_squ");
  const double b = ellipse_semi_axis(e, "b", "b_squ");
  e.ignore("a_squ");
  e.ignore("b_squ");
  e.ignore("a_b_squ");  // derived
  out.def = {{"type", "LimitEllipse"}, {"a", a}, {"b", b}};
  e.require_no_alignment();
  return out;
}

Converted convert_srotation(XElement& e) {
  // xtrack SRotation: `angle` in degrees; the element keeps cos_z, sin_z (anglerad = angle / 180 * pi).
  // A dict has angle (and cos_z), or, older, only cos_z and sin_z: angle = atan2(sin_z, cos_z) in
  // degrees, as xtrack's SRotation.angle property computes it.
  Converted out;
  const bool has_angle = e.get("angle") != nullptr;
  const bool has_cos = e.get("cos_z") != nullptr;
  const bool has_sin = e.get("sin_z") != nullptr;
  double angle = 0.0;
  if (has_angle) {
    angle = e.num("angle");
    const double anglerad = angle / 180.0 * kPi;
    for (const auto& [f, expected] :
         {std::pair<const char*, double>{"cos_z", std::cos(anglerad)}, {"sin_z", std::sin(anglerad)}}) {
      if (!e.get(f)) continue;
      const double given = e.num(f);
      if (!(std::fabs(given - expected) <= 1e-13))  // xtrack: np.isclose(..., atol=1e-13)
        throw InputError(e.at(e.key(f)), fmt::format("{} = {:.17g} does not match angle = {:.17g} deg (expected "
                                                     "{:.17g})",
                                                     f, given, angle, expected));
    }
  } else if (has_cos || has_sin) {
    const double c = e.num("cos_z");
    const double s = e.num("sin_z");
    if (!(std::fabs(s * s + c * c - 1.0) <= 1e-13))
      throw InputError(
          e.at(e.key(has_cos ? "cos_z" : "sin_z")),
          fmt::format("cos_z = {:.17g} and sin_z = {:.17g} are not the cosine and sine of one angle", c, s));
    angle = std::atan2(s, c) * (180.0 / kPi);
  }
  out.def = {{"type", "SRotation"}, {"angle", angle}};
  return out;
}

Converted convert_rf_multipole(XElement& e) {
  // xtrack RFMultipole (rf_multipole.py, rfmultipole.h): knl, ksl, pn, ps, phase_n, phase_s up
  // to `order` (the largest of order and the arrays' lengths - 1), voltage, frequency, lag, phase.
  Converted out;
  const char* const arrays[] = {"knl", "ksl", "pn", "ps", "phase_n", "phase_s"};
  std::vector<std::vector<double>> values;
  long long order = std::max<long long>(e.integer("order"), 0);
  for (const char* a : arrays) {
    values.push_back(e.array(a));
    order = std::max<long long>(order, static_cast<long long>(values.back().size()) - 1);
  }
  if (order > kMaxMultipoleOrder) {
    for (size_t k = 0; k < values.size(); ++k)
      for (size_t n = kMaxMultipoleOrder + 1; n < values[k].size(); ++n)
        if (values[k][n] != 0.0)
          throw InputError(
              e.at(fmt::format("{}[{}]", e.key(arrays[k]), n)),
              fmt::format("RF multipole order {} exceeds fusetrack's maximum order {}", n, kMaxMultipoleOrder));
    order = kMaxMultipoleOrder;  // only zeros above: they add nothing to the kick
  }
  e.ignore("inv_factorial_order");
  e.require_zero("absolute_time", "RF phase from absolute time (absolute_time = 1) is not modelled");
  e.read_alignment();
  out.def = {{"type", "RFMultipole"}, {"voltage", e.num("voltage")}, {"frequency", e.num("frequency")},
             {"lag", e.num("lag")},   {"phase", e.num("phase")},     {"order", static_cast<int>(order)}};
  for (size_t k = 0; k < values.size(); ++k) {
    values[k].resize(static_cast<size_t>(order + 1), 0.0);
    out.def[arrays[k]] = values[k];
  }
  return out;
}

Converted convert_limit_rect_ellipse(XElement& e) {
  // xtrack LimitRectEllipse: max_x, max_y (default UNLIMITED) and the ellipse as a_squ, b_squ
  // (or a, b; UNLIMITED when neither is given).
  Converted out;
  const double a = ellipse_semi_axis(e, "a", "a_squ");
  const double b = ellipse_semi_axis(e, "b", "b_squ");
  e.ignore("a_b_squ");  // derived
  out.def = {{"type", "LimitRectEllipse"},
             {"max_x", e.num("max_x", kUnlimited)},
             {"max_y", e.num("max_y", kUnlimited)},
             {"a", a},
             {"b", b}};
  e.read_alignment();
  return out;
}

Converted convert_limit_polygon(XElement& e) {
  // xtrack LimitPolygon: x_vertices, y_vertices (closed automatically); x_normal, y_normal and
  // resc_fac only serve xtrack's loss location refinement, not the tracking.
  constexpr size_t kMaxVertices = 64;  // FT_LIMIT_POLYGON_MAX_VERTICES (elements/limit_polygon.h)
  Converted out;
  const std::vector<double> xs = e.array("x_vertices");
  const std::vector<double> ys = e.array("y_vertices");
  if (xs.size() != ys.size())
    throw InputError(e.at(e.key("y_vertices")), fmt::format("{} y_vertices for {} x_vertices", ys.size(), xs.size()));
  if (xs.size() < 3)
    throw InputError(e.at(e.key("x_vertices")), fmt::format("a polygon needs at least 3 vertices, got {}", xs.size()));
  if (xs.size() > kMaxVertices)
    throw InputError(e.at(e.key("x_vertices")),
                     fmt::format("{} vertices; fusetrack's LimitPolygon takes at most {}", xs.size(), kMaxVertices));
  for (const char* f : {"x_normal", "y_normal", "resc_fac"}) e.ignore(f);
  e.read_alignment();
  out.def = {
      {"type", "LimitPolygon"}, {"n_vertices", static_cast<int>(xs.size())}, {"x_vertices", xs}, {"y_vertices", ys}};
  return out;
}

Converted convert_xyshift(XElement& e) {
  Converted out;
  out.def = {{"type", "XYShift"}, {"dx", e.num("dx")}, {"dy", e.num("dy")}};
  return out;
}

/// Common checks of xtrack's straight thick magnets (Quadrupole, Sextupole) whose default model
/// fusetrack implements; returns the number of kicks.
int thick_magnet_kicks(XElement& e, Converter& cv, long long default_model, const char* model_name) {
  const long long model = e.choice("model", kMagnetModels);
  if (model != 0 && model != default_model)
    e.unsupported("model", fmt::format("only Xsuite's default model '{}' is supported", model_name));
  const long long integrator = e.choice("integrator", kIntegrators);
  if (integrator != 0 && integrator != 3) e.unsupported("integrator", "only the uniform integrator is supported");
  for (const char* f : {"knl", "ksl"})
    e.require_zero(f, "additional multipole components (knl, ksl) are not supported");
  for (const char* f : {"knl_rel", "ksl_rel"}) e.require_zero(f, "relative multipole strengths are not supported");
  e.ignore("order");
  e.ignore("inv_factorial_order");
  e.ignore("main_order");
  e.ignore("main_is_skew");
  for (const char* f : {"edge_entry_active", "edge_exit_active"}) e.require_zero(f, "fringe fields are not modelled");
  import_radiation(e, cv, nullptr);
  e.require_no_alignment();
  const long long kicks = e.integer("num_multipole_kicks");
  if (kicks < 0 || kicks > 100000)
    throw InputError(e.at(e.key("num_multipole_kicks")), fmt::format("invalid number of kicks {}", kicks));
  return kicks == 0 ? 1 : static_cast<int>(kicks);  // 0: automatic, one kick for a straight magnet
}

Converted convert_quadrupole(XElement& e, Converter& cv) {
  Converted out;
  const double length = e.num("length"), k1 = e.num("k1"), k1s = e.num("k1s");
  const int kicks = thick_magnet_kicks(e, cv, 4, "mat-kick-mat");
  out.def = {{"type", "Quadrupole"}, {"length", length}, {"k1", k1}, {"k1s", k1s}, {"num_slices", kicks}};
  return out;
}

Converted convert_sextupole(XElement& e, Converter& cv) {
  Converted out;
  const double length = e.num("length"), k2 = e.num("k2"), k2s = e.num("k2s");
  const int kicks = thick_magnet_kicks(e, cv, 6, "drift-kick-drift-expanded");
  out.def = {{"type", "Sextupole"}, {"length", length}, {"k2", k2}, {"k2s", k2s}, {"num_slices", kicks}};
  return out;
}

/// The extra integrated multipoles (knl, ksl) of a thick magnet, at most fusetrack's order 5.
void thick_magnet_multipoles(XElement& e, std::vector<double>& knl, std::vector<double>& ksl) {
  knl = e.array("knl");
  ksl = e.array("ksl");
  for (auto* v : {&knl, &ksl}) {
    while (!v->empty() && v->back() == 0.0) v->pop_back();  // trailing zeros do not change the kick
    if (v->size() > static_cast<size_t>(kMaxMultipoleOrder + 1))
      throw InputError(e.at(e.key(v == &knl ? "knl" : "ksl")),
                       fmt::format("{} non-zero terms up to order {} exceed fusetrack's maximum order {} of a thick "
                                   "magnet",
                                   v == &knl ? "knl" : "ksl", v->size() - 1, kMaxMultipoleOrder));
    v->resize(static_cast<size_t>(kMaxMultipoleOrder + 1), 0.0);
  }
  for (const char* f : {"knl_rel", "ksl_rel"}) e.require_zero(f, "relative multipole strengths are not supported");
  e.ignore("order");
  e.ignore("inv_factorial_order");
  e.ignore("main_order");
  e.ignore("main_is_skew");
}

/// xtrack's integrator of a thick magnet as fusetrack's (the same indices 1..3; 'adaptive' is
/// the class default) and its number of kicks (0: xtrack's automatic count, also fusetrack's).
void thick_magnet_integrator(XElement& e, long long class_default, json& def) {
  long long integrator = e.choice("integrator", kIntegrators);
  if (integrator < 0 || integrator > 3)
    throw InputError(e.at(e.key("integrator")), fmt::format("unknown integrator {}", integrator));
  if (integrator == 0) integrator = class_default;
  const long long kicks = e.integer("num_multipole_kicks");
  if (kicks < 0 || kicks > 1000000)
    throw InputError(e.at(e.key("num_multipole_kicks")), fmt::format("invalid number of kicks {}", kicks));
  def["integrator"] = static_cast<int>(integrator);
  def["num_slices"] = static_cast<int>(kicks);
}

/// xtrack Bend and RBend (curved body) as fusetrack's Bend with xtrack's models.
Converted convert_bend(XElement& e, Converter& cv, bool rbend) {
  Converted out;
  double angle = e.num("angle");
  double length = 0.0;
  double entry_extra = 0.0, exit_extra = 0.0;  // RBend: the edge angles of the curved body
  if (rbend) {
    // xtrack RBend._update_rbend_h_length_k0: the arc length from the straight length.
    const double length_straight = e.num("length_straight");
    const double angle_diff = e.num("rbend_angle_diff");
    const double theta_in = 0.5 * angle - angle_diff / 2, theta_out = 0.5 * angle + angle_diff / 2;
    e.ignore("length");  // derived from length_straight (xtrack RBend.from_dict drops it)
    if (std::fabs(angle) < 1e-10) {
      length = length_straight;
    } else if (std::fabs(length_straight) < 1e-10) {
      length = 0.0;
    } else {
      length = angle / ((std::sin(theta_in) + std::sin(theta_out)) / length_straight);
    }
    const long long rbend_model = e.choice("rbend_model", kRBendModels);
    if (rbend_model == 2)
      e.unsupported("rbend_model", "only the curved-body RBend model is supported ('straight-body' is not)");
    else if (rbend_model < 0 || rbend_model > 2)
      throw InputError(e.at(e.key("rbend_model")), fmt::format("unknown rbend_model {}", rbend_model));
    e.ignore("rbend_shift");  // straight body only
    e.ignore("rbend_compensate_sagitta");
    entry_extra = theta_in;
    exit_extra = theta_out;
  } else {
    length = e.num("length");
    if (!e.get("angle") && e.get("h")) angle = e.num("h") * length;  // older dicts: h instead of angle
  }
  e.ignore("h");  // derived: angle / length
  if (length == 0.0)
    throw InputError(e.at(e.key(rbend ? "length_straight" : "length")),
                     "a thick bend of zero length cannot be converted (fusetrack's Bend needs a length)");
  // k0: a number, or "from_h" (also the default), or the older k0_from_h flag.
  bool from_h = true;
  double k0 = 0.0;
  const json* k0_flag = e.get("k0_from_h");
  const json* k0_value = e.get("k0");
  if (k0_flag && !k0_flag->is_null() && !is_zero_like(*k0_flag)) {
    from_h = true;
  } else if (k0_value && k0_value->is_string()) {
    if (k0_value->get<std::string>() != "from_h")
      throw InputError(e.at(e.key("k0")), fmt::format("expected a number or \"from_h\", got {}", k0_value->dump()));
  } else if (k0_value && !k0_value->is_null()) {
    from_h = false;
    k0 = e.num("k0");
  } else if (k0_flag && !k0_flag->is_null()) {
    from_h = false;  // k0_from_h = false with no k0: xtrack sets k0 = 0
  }
  std::vector<double> knl, ksl;
  thick_magnet_multipoles(e, knl, ksl);
  json def = {{"type", "Bend"}, {"length", length}, {"angle", angle}, {"k0_from_h", from_h ? 1 : 0}};
  if (!from_h) def["k0"] = k0;
  def["k1"] = e.num("k1");
  def["k2"] = e.num("k2");
  def["knl"] = knl;
  def["ksl"] = ksl;
  // xtrack's body models: rot-kick-rot (the default; 'full' is its old name), mat-kick-mat.
  const long long model = e.choice("model", kMagnetModels);
  if (model == 0 || model == 1 || model == 3)
    def["model"] = 1;
  else if (model == 4)
    def["model"] = 2;
  else
    e.unsupported("model", "only xtrack's bend models 'rot-kick-rot' (the default) and 'mat-kick-mat' are supported");
  thick_magnet_integrator(e, 2, def);  // BEND_DEFAULT_INTEGRATOR: yoshida4
  for (const char* side : {"entry", "exit"}) {
    const std::string pre = fmt::format("edge_{}_", side);
    const bool entry = side[1] == 'n';
    long long active = e.integer(pre + "active", 1);
    const long long edge_model = e.choice(pre + "model", kEdgeModels);
    if (edge_model == -1)
      active = 0;  // 'suppressed'
    else if (edge_model != 0 && active)
      e.unsupported(pre + "model", "only the linear edge model is supported");
    def[pre + "active"] = active ? 1 : 0;
    def[pre + "angle"] = e.num(pre + "angle") + (entry ? entry_extra : exit_extra);
    def[pre + "angle_fdown"] = e.num(pre + "angle_fdown");
    def[pre + "hgap"] = e.num(pre + "hgap");
    def[pre + "fint"] = e.num(pre + "fint");
  }
  import_radiation(e, cv, &def);
  e.require_no_alignment();
  out.def = std::move(def);
  return out;
}

/// xtrack Octupole as fusetrack's ThickMultipole with xtrack's integrators (drift-kick-drift-expanded).
Converted convert_octupole(XElement& e, Converter& cv) {
  Converted out;
  const double length = e.num("length");
  std::vector<double> knl, ksl;
  thick_magnet_multipoles(e, knl, ksl);
  std::vector<double> kn(kMaxMultipoleOrder + 1, 0.0), ks(kMaxMultipoleOrder + 1, 0.0);
  for (int n = 0; n <= kMaxMultipoleOrder; ++n) {
    if ((knl[n] != 0.0 || ksl[n] != 0.0) && length == 0.0)
      e.unsupported("knl", "integrated multipoles of an Octupole of zero length are not supported");
    kn[n] = length != 0.0 ? knl[n] / length : 0.0;
    ks[n] = length != 0.0 ? ksl[n] / length : 0.0;
  }
  kn[3] += e.num("k3");
  ks[3] += e.num("k3s");
  const long long model = e.choice("model", kMagnetModels);
  if (model != 0 && model != 6)
    e.unsupported("model", "only xtrack's default Octupole model 'drift-kick-drift-expanded' is supported");
  for (const char* f : {"edge_entry_active", "edge_exit_active"}) e.require_zero(f, "fringe fields are not modelled");
  json def = {{"type", "ThickMultipole"}, {"length", length}, {"kn", kn}, {"ks", ks}};
  thick_magnet_integrator(e, 3, def);  // OCTUPOLE_DEFAULT_INTEGRATOR: uniform
  import_radiation(e, cv, &def);
  e.require_no_alignment();
  out.def = std::move(def);
  return out;
}

/// xfields SpaceChargeBiGaussian (frozen space charge; xfields/beam_elements/spacecharge.py): the Gaussian
/// field map ("fieldmap": BiGaussianFieldMap mean_x, mean_y, sigma_x, sigma_y, min_sigma_diff) and the
/// line density ("longitudinal_profile": LongitudinalProfileQGaussian number_of_particles, _sigma_z, _z0,
/// _q_param) become fusetrack's SpaceChargeBiGaussian (elements/space_charge_bigaussian.h). Only the
/// Gaussian profile (q = 1 within its q_tol) with unlimited support and no longitudinal kick
/// (z_kick_num_integ_per_sigma = 0) is modelled. The copies xfields' to_dict adds at the top level for
/// ducktrack (number_of_particles, bunchlength_rms, sigma_x, sigma_y, x_co, y_co) must agree with them.
Converted convert_space_charge_bigaussian(XElement& e) {
  Converted out;
  const double length = e.num("length");
  e.require_zero("z_kick_num_integ_per_sigma", "the longitudinal kick of frozen space charge is not modelled");
  std::unique_ptr<XElement> map = e.nested("fieldmap", "BiGaussianFieldMap");
  std::unique_ptr<XElement> profile = e.nested("longitudinal_profile", "LongitudinalProfileQGaussian");
  if (!map) throw InputError(e.at("fieldmap"), "required field is missing (the BiGaussianFieldMap of the beam)");
  if (!profile)
    throw InputError(e.at("longitudinal_profile"),
                     "required field is missing (the LongitudinalProfileQGaussian of the bunch)");
  json def = {{"type", "SpaceChargeBiGaussian"}, {"length", length}};
  def["number_of_particles"] = profile->num("number_of_particles");
  def["sigma_z"] = profile->num("sigma_z");
  def["z0"] = profile->num("z0");
  const double q = profile->num("q_param", 1.0);
  const double q_tol = profile->num("q_tol", 1e-6);
  if (!(std::fabs(q - 1.0) < q_tol))
    profile->unsupported("q_param", "only the Gaussian profile (q = 1) is modelled, not a q-Gaussian");
  const double z_min = profile->num("support_min", -kUnlimited);
  const double z_max = profile->num("support_max", kUnlimited);
  if (z_min > -0.1 * kUnlimited || z_max < 0.1 * kUnlimited)
    profile->unsupported(z_min > -0.1 * kUnlimited ? "support_min" : "support_max",
                         "a line density cut to a finite zeta range is not modelled");
  for (const char* derived : {"cq_param", "beta_param", "sqrt_beta_param", "z_min", "z_max"}) profile->ignore(derived);
  profile->check_rest();
  for (const char* f : {"mean_x", "mean_y", "sigma_x", "sigma_y", "min_sigma_diff"}) def[f] = map->num(f);
  map->ignore("updatable");
  map->check_rest();
  // The ducktrack copies of the same values (xfields to_dict): they must agree.
  const std::pair<const char*, const char*> copies[] = {{"number_of_particles", "number_of_particles"},
                                                        {"bunchlength_rms", "sigma_z"},
                                                        {"sigma_x", "sigma_x"},
                                                        {"sigma_y", "sigma_y"},
                                                        {"x_co", "mean_x"},
                                                        {"y_co", "mean_y"}};
  for (const auto& [top, field] : copies) {
    if (!e.get(top)) continue;
    const double v = e.num(top);
    const double w = def.at(field).get<double>();
    if (!(std::fabs(v - w) <= 1e-12 * std::fabs(w)))
      throw InputError(e.at(e.key(top)),
                       fmt::format("{} = {:.17g} disagrees with the element's {} = {:.17g}", top, v, field, w));
  }
  e.require_no_alignment();
  out.def = std::move(def);
  return out;
}

/// xfields BeamBeamBiGaussian2D (weak-strong beam-beam, 4D; xfields/beam_elements/beambeam2d.py) into
/// fusetrack's element of the same name and fields (elements/beambeam_bigaussian_2d.h). to_dict omits
/// fields equal to their xobjects default, 0 for every field of the class: an absent scale_strength is 0
/// (the lens switched off), an absent size or other_beam_beta0 is 0 and refused by the element, naming it.
Converted convert_beambeam_2d(XElement& e) {
  Converted out;
  json def = {{"type", "BeamBeamBiGaussian2D"}};
  for (const char* f : {"other_beam_num_particles", "other_beam_q0", "other_beam_Sigma_11", "other_beam_Sigma_13",
                        "other_beam_Sigma_33", "ref_shift_x", "ref_shift_y", "other_beam_shift_x", "other_beam_shift_y",
                        "post_subtract_px", "post_subtract_py", "min_sigma_diff"})
    def[f] = e.num(f);
  def["scale_strength"] = e.num("scale_strength");
  def["other_beam_beta0"] = e.num("other_beam_beta0");
  e.require_no_alignment();
  out.def = std::move(def);
  return out;
}

/// xfields BeamBeamBiGaussian3D (weak-strong beam-beam, 6D synchro-beam map; xfields/beam_elements/beambeam3d.py)
/// into fusetrack's element of the same name (elements/beambeam_bigaussian_3d.h). The crossing is stored by
/// xfields as _sin_phi, _cos_phi, _tan_phi, _sin_alpha, _cos_alpha: phi = atan2(sin, cos), with the tangent
/// checked against them. Every slice array must hold num_slices_other_beam entries. Beamstrahlung, Bhabha
/// scattering and the luminosity record are not modelled: their flags must be 0.
Converted convert_beambeam_3d(XElement& e) {
  constexpr long long kMaxSlices = 32;  // FT_BEAMBEAM_3D_MAX_SLICES (elements/beambeam_bigaussian_3d.h)
  Converted out;
  json def = {{"type", "BeamBeamBiGaussian3D"}};
  const auto angle = [&](const char* sin_name, const char* cos_name) {
    const double s = e.num(sin_name), c = e.num(cos_name, 1.0);
    if (!(std::isfinite(s) && std::isfinite(c) && (s != 0.0 || c != 0.0)))
      throw InputError(e.at(e.key(cos_name)), fmt::format("{} = {:.17g} and {} = {:.17g} give no angle",
                                                          e.key(sin_name), s, e.key(cos_name), c));
    if (!(std::fabs(s * s + c * c - 1.0) <= 1e-12))
      throw InputError(e.at(e.key(sin_name)),
                       fmt::format("{}^2 + {}^2 = {:.17g}, not 1", e.key(sin_name), e.key(cos_name), s * s + c * c));
    return std::atan2(s, c);
  };
  const double phi = angle("sin_phi", "cos_phi");
  const double alpha = angle("sin_alpha", "cos_alpha");
  if (e.get("tan_phi")) {
    const double t = e.num("tan_phi");
    if (!(std::fabs(t - std::tan(phi)) <= 1e-12 * (1.0 + std::fabs(t))))
      throw InputError(e.at(e.key("tan_phi")),
                       fmt::format("{} = {:.17g} disagrees with tan(atan2(_sin_phi, _cos_phi)) = {:.17g}",
                                   e.key("tan_phi"), t, std::tan(phi)));
  }
  def["phi"] = phi;
  def["alpha"] = alpha;
  def["other_beam_q0"] = e.num("other_beam_q0");
  def["scale_strength"] = e.num("scale_strength");  // absent: xobjects' default 0, the lens switched off
  for (const char* c : {"x", "px", "y", "py", "zeta", "pzeta"})
    for (const char* group : {"ref_shift_", "other_beam_shift_", "post_subtract_"})
      def[std::string(group) + c] = e.num(std::string(group) + c);
  def["min_sigma_diff"] = e.num("min_sigma_diff", 1e-10);
  def["threshold_singular"] = e.num("threshold_singular", 1e-28);
  const long long n = e.integer("num_slices_other_beam");
  if (n < 1 || n > kMaxSlices)
    throw InputError(e.at(e.key("num_slices_other_beam")),
                     fmt::format("{} slices; fusetrack's BeamBeamBiGaussian3D takes 1 to {}", n, kMaxSlices));
  def["num_slices_other_beam"] = static_cast<int>(n);
  for (const char* f :
       {"slices_other_beam_num_particles", "slices_other_beam_x_center_star", "slices_other_beam_px_center_star",
        "slices_other_beam_y_center_star", "slices_other_beam_py_center_star", "slices_other_beam_zeta_center_star",
        "slices_other_beam_Sigma_11_star", "slices_other_beam_Sigma_12_star", "slices_other_beam_Sigma_13_star",
        "slices_other_beam_Sigma_14_star", "slices_other_beam_Sigma_22_star", "slices_other_beam_Sigma_23_star",
        "slices_other_beam_Sigma_24_star", "slices_other_beam_Sigma_33_star", "slices_other_beam_Sigma_34_star",
        "slices_other_beam_Sigma_44_star"}) {
    if (!e.get(f))
      throw InputError(e.at(f), fmt::format("required field is missing (num_slices_other_beam = {} entries)", n));
    std::vector<double> v = e.array(f);
    if (static_cast<long long>(v.size()) != n)
      throw InputError(e.at(e.key(f)), fmt::format("{} entries, but num_slices_other_beam = {}", v.size(), n));
    def[f] = std::move(v);
  }
  // The partner slices' pzeta serves only xfields' Bhabha scattering; the beamstrahlung slice widths and
  // sigma_55 only its beamstrahlung (refused below when switched on).
  e.ignore("slices_other_beam_pzeta_center_star");
  const bool beamstrahlung = e.integer("flag_beamstrahlung") != 0;
  if (beamstrahlung) e.unsupported("flag_beamstrahlung", "beamstrahlung is not modelled");
  for (const char* f : {"slices_other_beam_zeta_bin_width_star_beamstrahlung", "other_beam_sigma_55_star_beamstrahlung",
                        "slices_other_beam_sqrtSigma_11_beamstrahlung", "slices_other_beam_sqrtSigma_33_beamstrahlung",
                        "slices_other_beam_sqrtSigma_55_beamstrahlung"})
    if (!beamstrahlung)
      e.require_zero(f, "beamstrahlung is not modelled");
    else
      e.ignore(f);
  e.require_zero("flag_bhabha", "Bhabha scattering is not modelled");
  e.require_zero("flag_luminosity", "the luminosity record is not modelled");
  e.require_zero("flag_beamsize_effect", "Bhabha scattering is not modelled");
  for (const char* f : {"compt_x_min", "compt_scale"}) e.ignore(f);  // parameters of Bhabha scattering only
  e.require_no_alignment();
  out.def = std::move(def);
  return out;
}

/// Converts a known class; returns false for an unknown one.
bool convert_element(XElement& e, Converter& cv, Converted& out) {
  const std::string& c = e.cls();
  if (c == "Marker") {
    out.def = {{"type", "Marker"}};
  } else if (c == "Drift") {
    out = convert_drift(e, cv, false);
  } else if (c == "DriftExact") {
    out = convert_drift(e, cv, true);
  } else if (c == "Multipole") {
    out = convert_multipole(e, cv);
  } else if (c == "Cavity") {
    out = convert_cavity(e, cv);
  } else if (c == "DipoleEdge") {
    out = convert_dipole_edge(e, cv);
  } else if (c == "LimitRect") {
    out = convert_limit_rect(e);
  } else if (c == "LimitEllipse") {
    out = convert_limit_ellipse(e);
  } else if (c == "LimitRacetrack") {
    out = convert_limit_racetrack(e);
  } else if (c == "SRotation") {
    out = convert_srotation(e);
  } else if (c == "XYShift") {
    out = convert_xyshift(e);
  } else if (c == "RFMultipole") {
    out = convert_rf_multipole(e);
  } else if (c == "LimitRectEllipse") {
    out = convert_limit_rect_ellipse(e);
  } else if (c == "LimitPolygon") {
    out = convert_limit_polygon(e);
  } else if (c == "Quadrupole") {
    out = convert_quadrupole(e, cv);
  } else if (c == "Sextupole") {
    out = convert_sextupole(e, cv);
  } else if (c == "Bend" || c == "RBend") {
    out = convert_bend(e, cv, c == "RBend");
  } else if (c == "Octupole") {
    out = convert_octupole(e, cv);
  } else if (c == "SpaceChargeBiGaussian") {
    out = convert_space_charge_bigaussian(e);
  } else if (c == "BeamBeamBiGaussian2D") {
    out = convert_beambeam_2d(e);
  } else if (c == "BeamBeamBiGaussian3D") {
    out = convert_beambeam_3d(e);
  } else {
    return false;
  }
  e.check_rest();
  // Alignment: generic fields of the definition, applied around it by the framework.
  if (!e.alignment().empty()) {
    if (out.half_drift != 0.0)
      e.unsupported(e.alignment().begin().key(),
                    "a misaligned thick Cavity is not modelled (its drift-kick-drift would have to move as one)");
    else
      for (const auto& [k, v] : e.alignment().items()) out.def[k] = v;
  }
  return true;
}

// ------------------------------------------------------------------------------------------------
// Line-level parts

XsuiteConfig read_config(const json& config_doc, const std::string& where_field, Converter& cv) {
  XsuiteConfig c;
  if (config_doc.is_null()) return c;  // a Line's defaults
  if (!config_doc.is_object())
    throw InputError(cv.at(where_field), fmt::format("expected an object, got {}", json_type_name(config_doc)));
  c.present = true;
  // With a config, a flag is defined only when present and not false/null (xtrack TrackerConfig).
  auto flag = [&](const char* key) {
    if (!config_doc.contains(key)) return false;
    const json& v = config_doc.at(key);
    return !(v.is_null() || (v.is_boolean() && !v.get<bool>()));
  };
  c.no_synrad = flag("XTRACK_MULTIPOLE_NO_SYNRAD");
  c.exact_drifts = flag("XTRACK_USE_EXACT_DRIFTS");
  c.cavity_preserve_angle = flag("XTRACK_CAVITY_PRESERVE_ANGLE");
  if (flag("XTRACK_GLOBAL_XY_LIMIT")) {
    const json& v = config_doc.at("XTRACK_GLOBAL_XY_LIMIT");
    const double lim = real_number(v, cv.at(where_field + ".XTRACK_GLOBAL_XY_LIMIT"));
    if (!(lim > 0.0))
      throw InputError(cv.at(where_field + ".XTRACK_GLOBAL_XY_LIMIT"),
                       fmt::format("must be positive, got {}", v.dump()));
    c.global_xy_limit = lim;
  } else {
    c.global_xy_limit = 0.0;
  }
  return c;
}

json read_reference(const json& doc, const json& line, Converter& cv) {
  std::string field;
  const json* p = nullptr;
  for (const auto& [holder, key, prefix] : {std::tuple<const json*, const char*, const char*>{&doc, "particle_ref", ""},
                                            {&doc, "particle", ""},
                                            {&line, "particle_ref", "line."}}) {
    if (holder->is_object() && holder->contains(key) && !holder->at(key).is_null()) {
      p = &holder->at(key);
      field = std::string(prefix) + key;
      break;
    }
  }
  if (!p)
    throw InputError(
        cv.at("particle_ref"),
        "the reference particle is missing (Xsuite \"particle_ref\", or \"particle\" in the older layout)");
  if (p->is_string()) {  // a name of env_particles
    const std::string name = p->get<std::string>();
    const json* env = doc.contains("env_particles") ? &doc.at("env_particles") : nullptr;
    if (!env || !env->is_object() || !env->contains(name))
      throw InputError(cv.at(field), fmt::format("names '{}', which is not in \"env_particles\"", name));
    p = &env->at(name);
    field = "env_particles." + name;
  }
  if (!p->is_object()) throw InputError(cv.at(field), fmt::format("expected an object, got {}", json_type_name(*p)));
  auto get = [&](const char* key) {
    const std::string f = field + "." + key;
    if (!p->contains(key)) throw InputError(cv.at(f), "required field is missing");
    const json* v = &p->at(key);
    if (v->is_array()) {
      if (v->empty()) throw InputError(cv.at(f), "the array is empty");
      v = &(*v)[0];
    }
    return real_number(*v, cv.at(f));
  };
  const double mass0 = get("mass0");
  const double q0 = get("q0");
  const double p0c = get("p0c");
  if (!(mass0 > 0.0)) throw InputError(cv.at(field + ".mass0"), fmt::format("must be positive, got {} eV", mass0));
  if (q0 == 0.0) throw InputError(cv.at(field + ".q0"), "must be non-zero");
  if (!(p0c > 0.0)) throw InputError(cv.at(field + ".p0c"), fmt::format("must be positive, got {} eV", p0c));
  return json{{"mass0", mass0}, {"q0", q0}, {"p0c", p0c}};
}

std::string problem_list(const std::map<std::string, Problem>& problems, const std::vector<std::string>& order,
                         bool with_fields) {
  std::string s;
  for (const std::string& k : order) {
    const Problem& p = problems.at(k);
    if (!s.empty()) s += ", ";
    if (with_fields)
      s += fmt::format("{}.{} = {} ({}; {}, first #{} '{}')", p.cls, p.field, p.value, p.reason,
                       p.count == 1 ? std::string("1 element") : fmt::format("{} elements", p.count), p.first_index,
                       p.first_name);
    else
      s += fmt::format("{} ({})", p.cls, p.count);
  }
  return s;
}

// ---- the steps of xsuite_to_fusetrack ----

/// The parts of the line in either layout: {"elements", "element_names", ...} or
/// {"line": {...}, "particle": {...}}.
struct LineLayout {
  const json* line = nullptr;
  const json* elements = nullptr;
  const json* names = nullptr;
  std::string prefix;  // "line." in the older layout: the path of the fields in the file
};

LineLayout read_layout(const json& doc, Converter& cv) {
  if (!doc.is_object()) throw InputError(InputLocation{cv.file}, "an Xsuite line must be a JSON object");
  LineLayout l;
  const bool old_layout = !doc.contains("element_names") && doc.contains("line");
  l.line = old_layout ? &doc.at("line") : &doc;
  l.prefix = old_layout ? "line." : "";
  if (!l.line->is_object())
    throw InputError(cv.at("line"), fmt::format("expected an object, got {}", json_type_name(*l.line)));
  for (const char* key : {"elements", "element_names"})
    if (!l.line->contains(key)) throw InputError(cv.at(l.prefix + key), "required field of an Xsuite line is missing");
  l.elements = &l.line->at("elements");
  l.names = &l.line->at("element_names");
  if (!l.names->is_array())
    throw InputError(cv.at(l.prefix + "element_names"),
                     fmt::format("expected an array of names, got {}", json_type_name(*l.names)));
  if (l.names->empty()) throw InputError(cv.at(l.prefix + "element_names"), "the line is empty");
  return l;
}

/// The sequence of names, with the number of uses of each.
struct NameSequence {
  std::vector<std::string> names;
  std::unordered_map<std::string, long> uses;
};

NameSequence read_sequence(const LineLayout& l, Converter& cv) {
  NameSequence s;
  s.names.reserve(l.names->size());
  for (size_t i = 0; i < l.names->size(); ++i) {
    const json& n = (*l.names)[i];
    if (!n.is_string())
      throw InputError(cv.at(fmt::format("{}element_names[{}]", l.prefix, i)),
                       fmt::format("expected an element name, got {}", json_type_name(n)));
    s.names.push_back(n.get_ref<const std::string&>());
    ++s.uses[s.names.back()];
  }
  return s;
}

/// name -> element object. A list (older dicts) is zipped with element_names like xtrack
/// Line.from_dict does: for a repeated name the last entry wins.
std::unordered_map<std::string, const json*> elements_by_name(const LineLayout& l, const NameSequence& sequence,
                                                              Converter& cv) {
  std::unordered_map<std::string, const json*> by_name;
  const json& elements = *l.elements;
  if (elements.is_object()) {
    for (auto it = elements.begin(); it != elements.end(); ++it) by_name[it.key()] = &it.value();
    return by_name;
  }
  if (!elements.is_array())
    throw InputError(
        cv.at(l.prefix + "elements"),
        fmt::format("expected an object mapping names to elements (or a list), got {}", json_type_name(elements)));
  if (elements.size() != sequence.names.size())
    throw InputError(cv.at(l.prefix + "elements"),
                     fmt::format("a list of elements must have one entry per element_names entry: {} elements for "
                                 "{} names",
                                 elements.size(), sequence.names.size()));
  long differing = 0;
  for (size_t i = 0; i < elements.size(); ++i) {
    auto [it, inserted] = by_name.emplace(sequence.names[i], &elements[i]);
    if (!inserted) {
      if (*it->second != elements[i]) ++differing;
      it->second = &elements[i];
    }
  }
  if (differing)
    cv.warnings.push_back(
        fmt::format("{} entries of the element list repeat a name with different contents; as in "
                    "Xsuite, the last entry of each name is used",
                    differing));
  return by_name;
}

/// The element object of `name`, through Replica chains ({"__class__": "Replica", "parent_name": ...}).
const json& resolve_element(const std::string& name, size_t index, const std::string& prefix,
                            const std::unordered_map<std::string, const json*>& by_name, const std::string& file) {
  InputLocation where{file};
  where.element_index = static_cast<long>(index);
  where.element_name = name;
  auto found = by_name.find(name);
  if (found == by_name.end()) {
    where.field = fmt::format("{}element_names[{}]", prefix, index);
    throw InputError(where, fmt::format("'{}' is not defined in \"elements\"", name));
  }
  const json* obj = found->second;
  std::set<std::string> visited{name};
  for (;;) {
    if (!obj->is_object() || !obj->contains("__class__") || !obj->at("__class__").is_string()) {
      where.field = "__class__";
      throw InputError(where, "an Xsuite element must be an object with a \"__class__\" string");
    }
    if (obj->at("__class__") != "Replica") return *obj;
    where.element_type = "Replica";
    where.field = "parent_name";
    if (!obj->contains("parent_name") || !obj->at("parent_name").is_string())
      throw InputError(where, "a Replica needs a \"parent_name\" string");
    const std::string parent = obj->at("parent_name").get<std::string>();
    if (!visited.insert(parent).second)
      throw InputError(where, fmt::format("Replica chain through '{}' is circular", parent));
    auto p = by_name.find(parent);
    if (p == by_name.end()) throw InputError(where, fmt::format("parent '{}' is not defined in \"elements\"", parent));
    obj = p->second;
  }
}

/// Each definition converted once, in order of first use (unknown classes counted in cv, and
/// replaced by markers if the options say so).
struct ConvertedDefinitions {
  std::vector<std::string> order;
  std::unordered_map<std::string, Converted> by_name;
};

ConvertedDefinitions convert_definitions(const NameSequence& sequence, const LineLayout& l,
                                         const std::unordered_map<std::string, const json*>& by_name, Converter& cv,
                                         const XsuiteImportOptions& options) {
  ConvertedDefinitions result;
  std::set<std::string> seen;
  for (size_t i = 0; i < sequence.names.size(); ++i) {
    const std::string& name = sequence.names[i];
    if (!seen.insert(name).second) continue;
    const long index = static_cast<long>(i);
    const json& obj = resolve_element(name, i, l.prefix, by_name, cv.file);
    const std::string cls = obj.at("__class__").get<std::string>();
    XElement e(cv, obj, index, name, cls, sequence.uses.at(name));
    Converted out;
    if (!convert_element(e, cv, out)) {
      auto [it, inserted] = cv.unknown_classes.try_emplace(cls);
      if (inserted) {
        cv.unknown_order.push_back(cls);
        it->second.first_index = index;
        it->second.first_name = name;
        it->second.cls = cls;
      }
      it->second.count += sequence.uses.at(name);
      if (obj.contains("length") && !is_zero_like(obj.at("length"))) it->second.has_length = true;
      if (!options.replace_unknown_with_markers) continue;
      out.def = {{"type", "Marker"}};
    }
    result.order.push_back(name);
    result.by_name.emplace(name, std::move(out));
  }
  return result;
}

/// Throws, listing them all and locating the first, if there are unknown classes (not replaced)
/// or unsupported fields.
void refuse_problems(const Converter& cv, const XsuiteImportOptions& options) {
  const bool refuse_unknown = !cv.unknown_classes.empty() && !options.replace_unknown_with_markers;
  if (!refuse_unknown && cv.unsupported_fields.empty()) return;
  InputLocation where{cv.file};
  long first = std::numeric_limits<long>::max();
  auto consider = [&](const Problem& p) {
    if (p.first_index < first) {
      first = p.first_index;
      where.element_index = p.first_index;
      where.element_name = p.first_name;
      where.element_type = p.cls;
      where.field = p.field;
    }
  };
  std::string message;
  if (refuse_unknown) {
    for (const auto& [k, p] : cv.unknown_classes) consider(p);
    std::string firsts;
    for (const std::string& k : cv.unknown_order) {
      const Problem& p = cv.unknown_classes.at(k);
      firsts += fmt::format("{}#{} '{}' ({})", firsts.empty() ? "" : ", ", p.first_index, p.first_name, p.cls);
    }
    message = fmt::format(
        "unsupported Xsuite element classes: {} (first: {}); fusetrack has no such element "
        "types (replace them by markers with --replace-unknown-with-markers, which changes the "
        "physics)",
        problem_list(cv.unknown_classes, cv.unknown_order, false), firsts);
  }
  if (!cv.unsupported_fields.empty()) {
    for (const auto& [k, p] : cv.unsupported_fields) consider(p);
    message += fmt::format(
        "{}unsupported Xsuite element fields (they change the tracking and fusetrack cannot "
        "reproduce them): {}",
        message.empty() ? "" : "; ", problem_list(cv.unsupported_fields, cv.field_order, true));
  }
  throw InputError(where, message);
}

/// fusetrack's "elements" and "sequence": each thick cavity between two half drifts (named
/// NAME/half_drift, unique among all names of the line).
struct FusetrackLine {
  json elements = json::object();
  json sequence = json::array();
  long thick_cavities = 0;  // uses of thick cavities in the sequence
};

FusetrackLine assemble_line(ConvertedDefinitions& definitions, const NameSequence& sequence,
                            const std::unordered_map<std::string, const json*>& by_name) {
  FusetrackLine out;
  std::set<std::string> taken(sequence.names.begin(), sequence.names.end());
  for (const auto& [n, v] : by_name) {
    (void)v;
    taken.insert(n);
  }
  std::unordered_map<std::string, std::string> half_drift_name;
  // ordered_json's operator[] searches linearly: append to the underlying vector (names unique).
  auto& element_list = static_cast<json::object_t::Container&>(out.elements.get_ref<json::object_t&>());
  element_list.reserve(2 * definitions.order.size());
  for (const std::string& name : definitions.order) {
    Converted& c = definitions.by_name.at(name);
    if (c.half_drift != 0.0) {
      std::string dn = name + "/half_drift";
      while (taken.count(dn)) dn += "_";
      taken.insert(dn);
      half_drift_name[name] = dn;
      element_list.emplace_back(dn,
                                json{{"type", c.half_drift_exact ? "DriftExact" : "Drift"}, {"length", c.half_drift}});
      out.thick_cavities += sequence.uses.at(name);
    }
    element_list.emplace_back(name, std::move(c.def));
  }
  for (const std::string& name : sequence.names) {
    auto h = half_drift_name.find(name);
    if (h != half_drift_name.end()) out.sequence.push_back(h->second);
    out.sequence.push_back(name);
    if (h != half_drift_name.end()) out.sequence.push_back(h->second);
  }
  return out;
}

/// The warnings of the whole conversion, in the order the user reads them.
void emit_warnings(Converter& cv, long thick_cavities, const XsuiteImportOptions& options) {
  for (const std::string& cls : cv.unknown_order) {
    const Problem& p = cv.unknown_classes.at(cls);
    cv.warnings.push_back(
        fmt::format("{} Xsuite element{} of unsupported class {} replaced by markers (first: #{} '{}'){}", p.count,
                    p.count == 1 ? "" : "s", cls, p.first_index, p.first_name,
                    p.has_length ? "; their non-zero lengths are dropped from the ring" : ""));
  }
  if (thick_cavities)
    cv.warnings.push_back(fmt::format(
        "{} thick Xsuite Cavit{} (non-zero length) written as drift(L/2), kick, "
        "drift(L/2), as Xsuite tracks {}: the sequence has {} more entries than "
        "element_names",
        thick_cavities, thick_cavities == 1 ? "y" : "ies", thick_cavities == 1 ? "it" : "them", 2 * thick_cavities));
  for (const std::string& n : cv.note_order) cv.warnings.push_back(fmt::format("{} ({})", n, cv.notes.at(n)));
  if (cv.config.global_xy_limit <= 0.0)
    cv.warnings.push_back(
        "the line's config has no XTRACK_GLOBAL_XY_LIMIT, so Xsuite applies no global aperture; "
        "fusetrack's is set to the largest finite value");
  if (options.warnings)
    for (const std::string& w : cv.warnings) options.warnings->push_back(w);
}

}  // namespace

bool is_xsuite_line(const nlohmann::ordered_json& doc) {
  if (!doc.is_object()) return false;
  if (doc.contains("element_names")) return true;
  if (doc.contains("line") && doc.at("line").is_object() && doc.at("line").contains("element_names")) return true;
  return doc.contains("line") && doc.contains("particle");
}

nlohmann::ordered_json xsuite_to_fusetrack(const nlohmann::ordered_json& doc, const std::string& file,
                                           const XsuiteImportOptions& options) {
  Converter cv(file, options);
  const LineLayout layout = read_layout(doc, cv);
  const json null_value;
  const json& line = *layout.line;
  const json& config_doc =
      line.contains("config") ? line.at("config") : (doc.contains("config") ? doc.at("config") : null_value);
  cv.config = read_config(config_doc, line.contains("config") ? layout.prefix + "config" : "config", cv);
  const json reference = read_reference(doc, line, cv);

  const NameSequence sequence = read_sequence(layout, cv);
  const auto by_name = elements_by_name(layout, sequence, cv);
  ConvertedDefinitions definitions = convert_definitions(sequence, layout, by_name, cv, options);
  refuse_problems(cv, options);
  FusetrackLine converted = assemble_line(definitions, sequence, by_name);
  emit_warnings(cv, converted.thick_cavities, options);

  const double limit = cv.config.global_xy_limit > 0.0 ? cv.config.global_xy_limit : std::numeric_limits<double>::max();
  json result;
  result["fusetrack_lattice"] = 1;
  result["description"] = fmt::format("converted from the Xsuite line {} ({} elements)", file, sequence.names.size());
  result["reference"] = reference;
  result["global_aperture"] = {{"x", limit}, {"y", limit}};
  result["elements"] = std::move(converted.elements);
  result["sequence"] = std::move(converted.sequence);
  return result;
}

}  // namespace ft
