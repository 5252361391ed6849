// Host models of the slice-moment elements TransverseWake and TransverseDamper (elements/
// transverse_wake.h, transverse_damper.h): the JSON sources are checked field by field and handed to
// the framework as ft_wake_source records (the framework builds the wake library's sources from them
// and reads the tables). Compiled into the built-in plugin.
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "transverse_damper.h"
#include "transverse_wake.h"

namespace {

constexpr double kElementaryCharge = 1.602176634e-19;  // [C]
constexpr double kPi = 3.14159265358979323846;

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.12g", v);
  return buf;
}

[[noreturn]] void fail(const std::string& field, const std::string& problem) {
  throw std::invalid_argument("field '" + field + "': " + problem);
}

/// The plugin's state of one model: the sources and the strings they point to.
struct WakeModelState {
  std::deque<std::string> strings;  // stable addresses
  std::vector<ft_wake_source> sources;
};

void destroy_state(void* state) { delete static_cast<WakeModelState*>(state); }

void check_slicing(int n_slices, double zeta_min, double zeta_max, double range_xy, double range_pxy) {
  if (n_slices < 1) fail("n_slices", "at least 1 slice is needed, got " + std::to_string(n_slices));
  if (n_slices > (1 << 20)) fail("n_slices", "at most 2^20 slices, got " + std::to_string(n_slices));
  if (!std::isfinite(zeta_min) || !std::isfinite(zeta_max) || !(zeta_max > zeta_min))
    fail("zeta_max", "the cuts must be finite with zeta_min < zeta_max, got [" + number(zeta_min) + ", " +
                         number(zeta_max) + "] m");
  if (!(range_xy > 0.0) || !std::isfinite(range_xy))
    fail("moment_range_xy", "must be finite and > 0, got " + number(range_xy) + " m");
  if (!(range_pxy > 0.0) || !std::isfinite(range_pxy))
    fail("moment_range_pxy", "must be finite and > 0, got " + number(range_pxy));
}

/// A train of n_bunches bunches spaced by `spacing` [m] in zeta (n_bunches 1: a single bunch, the spacing
/// unused): the bunches' cuts must not overlap and the spacing must be a whole number of slice widths (the
/// framework's slice grid covers the train with one uniform slicing).
void check_train(int n_bunches, double spacing, int n_slices, double zeta_min, double zeta_max) {
  if (n_bunches < 1 || n_bunches > 100000)
    fail("n_bunches", "must be in [1, 100000], got " + std::to_string(n_bunches));
  if (n_bunches == 1) return;
  const double length = zeta_max - zeta_min, dz = length / n_slices;
  if (!std::isfinite(spacing) || !(spacing >= length))
    fail("bunch_spacing", "a train needs a finite spacing >= the cut length zeta_max - zeta_min = " + number(length) +
                              " m (bunches must not overlap), got " + number(spacing) + " m");
  const double k = spacing / dz;
  if (std::fabs(k - std::round(k)) > 1e-6 * std::max(1.0, k))
    fail("bunch_spacing", "must be a whole number of slice widths (zeta_max - zeta_min) / n_slices = " + number(dz) +
                              " m, got " + number(spacing) + " m = " + number(k) + " slice widths");
  if (std::round(k) * (n_bunches - 1) + n_slices > double(1 << 24))
    fail("bunch_spacing", "the train's slice grid (n_bunches - 1) * bunch_spacing / slice width + n_slices = " +
                              number(std::round(k) * (n_bunches - 1) + n_slices) + " slices is more than 2^24");
}

void check_switch(const char* field, int value) {
  if (value != 0 && value != 1) fail(field, "must be 0 or 1, got " + std::to_string(value));
}

double positive_number(const nlohmann::json& src, const std::string& at, const char* key, const char* unit,
                       bool allow_zero = false) {
  if (!src.contains(key)) fail(at + "." + key, std::string("is required (") + unit + ")");
  const nlohmann::json& v = src.at(key);
  if (!v.is_number()) fail(at + "." + key, "expected a number [" + std::string(unit) + "], got " + v.dump());
  const double d = v.get<double>();
  if (!std::isfinite(d) || (allow_zero ? d < 0.0 : !(d > 0.0)))
    fail(at + "." + key, std::string("must be finite and ") + (allow_zero ? ">= 0" : "> 0") + ", got " + number(d) +
                             " " + unit);
  return d;
}

/// Component factors of an analytic source: "chamber" round (0|1, 1, 1, 0, 0; the longitudinal factor 1,
/// used only when the element asks for it) or flat (Yokoya: pi^2/24, pi^2/12, -pi^2/24, pi^2/24).
void chamber_factors(const nlohmann::json& src, const std::string& at, double factors[5]) {
  std::string chamber = "round";
  if (src.contains("chamber")) {
    if (!src.at("chamber").is_string()) fail(at + ".chamber", "expected \"round\" or \"flat\"");
    chamber = src.at("chamber").get<std::string>();
  }
  if (chamber == "round") {
    const double f[5] = {1.0, 1.0, 1.0, 0.0, 0.0};
    for (int c = 0; c < 5; ++c) factors[c] = f[c];
  } else if (chamber == "flat") {  // K. Yokoya, Part. Accel. 41 (1993) 221
    const double p = kPi * kPi;
    const double f[5] = {1.0, p / 24.0, p / 12.0, -p / 24.0, p / 24.0};
    for (int c = 0; c < 5; ++c) factors[c] = f[c];
  } else {
    fail(at + ".chamber", "unknown chamber '" + chamber + "'; known: \"round\", \"flat\"");
  }
}

}  // namespace

void TransverseWake_create_moments(const TransverseWake& e, const char* json_definition, const char* base_directory,
                                   const ft_reference& reference, ft_moments_model& model) {
  using nlohmann::json;
  check_slicing(e.n_slices, e.zeta_min, e.zeta_max, e.moment_range_xy, e.moment_range_pxy);
  if (!(e.intensity >= 0.0) || !std::isfinite(e.intensity))
    fail("intensity", "must be finite and >= 0, got " + number(e.intensity));
  check_train(e.n_bunches, e.bunch_spacing, e.n_slices, e.zeta_min, e.zeta_max);
  if (e.memory_turns < 0 || e.memory_turns > 100000)
    fail("memory_turns", "must be in [0, 100000], got " + std::to_string(e.memory_turns));
  const int switches[5] = {e.longitudinal, e.dipolar_x, e.dipolar_y, e.quadrupolar_x, e.quadrupolar_y};
  const char* switch_names[5] = {"longitudinal", "dipolar_x", "dipolar_y", "quadrupolar_x", "quadrupolar_y"};
  for (int c = 0; c < 5; ++c) check_switch(switch_names[c], switches[c]);

  const json def = json::parse(json_definition);
  if (!def.contains("sources") || !def.at("sources").is_array() || def.at("sources").empty())
    fail("sources", "expected a non-empty list of wake sources (Resonator, ResistiveWall, WakeTable)");
  auto state = std::make_unique<WakeModelState>();
  const json& list = def.at("sources");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = "sources[" + std::to_string(i) + "]";
    const json& src = list[i];
    if (!src.is_object() || !src.contains("type") || !src.at("type").is_string())
      fail(at, "expected an object with a \"type\" (Resonator, ResistiveWall, WakeTable), got " + src.dump());
    const std::string type = src.at("type").get<std::string>();
    ft_wake_source s{};
    if (type == "Resonator") {
      s.type = FT_WAKE_RESONATOR;
      chamber_factors(src, at, s.factors);
      if (!src.contains("r_shunt") || !src.at("r_shunt").is_number())
        fail(at + ".r_shunt", "a number is required (R_perp [Ohm/m])");
      s.r_shunt = src.at("r_shunt").get<double>();
      if (!std::isfinite(s.r_shunt)) fail(at + ".r_shunt", "must be finite");
      s.quality_factor = positive_number(src, at, "q", "1");
      s.frequency = positive_number(src, at, "frequency", "Hz");
    } else if (type == "ResistiveWall") {
      s.type = FT_WAKE_RESISTIVE_WALL;
      chamber_factors(src, at, s.factors);
      s.radius = positive_number(src, at, "radius", "m");
      s.length = positive_number(src, at, "length", "m");
      s.conductivity = positive_number(src, at, "conductivity", "S/m");
    } else if (type == "WakeTable") {
      for (int c = 0; c < 5; ++c) s.factors[c] = 1.0;
      if (!src.contains("file") || !src.at("file").is_string() || src.at("file").get<std::string>().empty())
        fail(at + ".file", "the table's path (relative to the lattice file) is required");
      std::string path = src.at("file").get<std::string>();
      if (path[0] != '/' && base_directory && base_directory[0]) path = std::string(base_directory) + "/" + path;
      state->strings.push_back(path);
      s.table_path = state->strings.back().c_str();
      std::string format = "pyheadtail";
      if (src.contains("format")) {
        if (!src.at("format").is_string()) fail(at + ".format", "expected \"pyheadtail\" or \"xsuite\"");
        format = src.at("format").get<std::string>();
      }
      if (format == "pyheadtail") {
        s.type = FT_WAKE_TABLE_PYHEADTAIL;
        if (!src.contains("columns") || !src.at("columns").is_array() || src.at("columns").empty())
          fail(at + ".columns", "a PyHEADTAIL table needs its column names, e.g. [\"time\", \"dipole_x\", \"dipole_y\"]");
        std::string columns;
        for (const json& c : src.at("columns")) {
          if (!c.is_string()) fail(at + ".columns", "column names must be strings, got " + c.dump());
          columns += c.get<std::string>() + " ";
        }
        state->strings.push_back(columns);
        s.table_columns = state->strings.back().c_str();
      } else if (format == "xsuite") {
        s.type = FT_WAKE_TABLE_XSUITE;
      } else {
        fail(at + ".format", "unknown table format '" + format + "'; known: \"pyheadtail\", \"xsuite\"");
      }
    } else {
      fail(at + ".type", "unknown wake source '" + type + "'; known: Resonator, ResistiveWall, WakeTable");
    }
    state->sources.push_back(s);
  }

  int32_t convolution = FT_WAKE_CONVOLUTION_DIRECT;
  if (def.contains("convolution")) {
    const json& c = def.at("convolution");
    const std::string name = c.is_string() ? c.get<std::string>() : c.dump();
    if (name == "fft")
      convolution = FT_WAKE_CONVOLUTION_FFT;
    else if (name != "direct")
      fail("convolution", "unknown convolution " + name + "; known: \"direct\" (default, reproducible), \"fft\"");
  }

  model = ft_moments_model{};
  model.grid = ft_profile_grid{e.n_slices, 0, e.zeta_min, e.zeta_max};
  model.ranges[0] = model.ranges[2] = e.moment_range_xy;
  model.ranges[1] = model.ranges[3] = e.moment_range_pxy;
  model.bunch_charge = reference.q0 * kElementaryCharge * e.intensity;
  model.convolution = convolution;
  for (int c = 0; c < 5; ++c) model.components[c] = switches[c];
  model.memory_turns = e.memory_turns;
  model.n_bunches = e.n_bunches;
  model.bunch_spacing = e.bunch_spacing;
  model.source_count = static_cast<int32_t>(state->sources.size());
  model.sources = state->sources.data();
  model.destroy = &destroy_state;
  model.state = state.release();
}

void TransverseDamper_create_moments(const TransverseDamper& e, const char* /*json_definition*/,
                                     const char* /*base_directory*/, const ft_reference& /*reference*/,
                                     ft_moments_model& model) {
  check_slicing(e.n_slices, e.zeta_min, e.zeta_max, e.moment_range_xy, e.moment_range_pxy);
  if (!(e.gain_turns > 1.0) || !std::isfinite(e.gain_turns))
    fail("gain_turns", "the damping time must be finite and longer than 1 turn (gain 2/n_d < 2), got " +
                           number(e.gain_turns) + " turns");
  check_switch("plane_x", e.plane_x);
  check_switch("plane_y", e.plane_y);
  if (!(e.bandwidth >= 0.0) || !std::isfinite(e.bandwidth))
    fail("bandwidth", "must be finite and >= 0 (0: an ideal damper), got " + number(e.bandwidth) + " Hz");
  if (e.delay < 0 || e.delay > 100000)
    fail("delay", "the pickup-to-kicker delay must be in [0, 100000] turns, got " + std::to_string(e.delay));
  check_train(e.n_bunches, e.bunch_spacing, e.n_slices, e.zeta_min, e.zeta_max);
  model = ft_moments_model{};
  model.feedback_bandwidth = e.bandwidth;
  model.feedback_delay = e.delay;
  model.n_bunches = e.n_bunches;
  model.bunch_spacing = e.bunch_spacing;
  model.grid = ft_profile_grid{e.n_slices, 0, e.zeta_min, e.zeta_max};
  model.ranges[0] = model.ranges[2] = e.moment_range_xy;
  model.ranges[1] = model.ranges[3] = e.moment_range_pxy;
}
