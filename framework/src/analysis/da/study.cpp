// DA studies: one scan over the variants of a lattice, summarised over the variants and written per variant.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "analysis/da/results.hpp"
#include "analysis/da/scan_frame.hpp"
#include "fusetrack/da.h"
#include "fusetrack/error.h"
#include "fusetrack/npy.h"
#include "fusetrack/output_files.h"
#include "fusetrack/parallel.h"

namespace ft {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

DaScan make_da_study(const std::vector<const Lattice*>& lattices, const std::vector<std::string>& names,
                     const DaConfig& config, Communicator* ranks) {
  if (lattices.empty()) throw Error("a DA study needs at least one lattice");
  if (names.size() != lattices.size()) throw Error("a DA study needs one name per lattice");
  const size_t n = lattices.size();
  const int n_ranks = ranks ? ranks->size() : 1, rank = ranks ? ranks->rank() : 0;
  // Each variant's closed orbit and optics (its frame) on its own thread (independent lattices; the
  // CPU work of a study's set-up, 45 s one after the other for 60 seeds of the CLIC damping ring),
  // and over MPI ranks each rank those of its share of the variants, exchanged after.
  const Share mine = share_of(n, rank, n_ranks);
  std::vector<da_detail::DaFrame> frames(n);
  std::vector<std::string> failures(n);
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t v = mine.begin; v < mine.end; ++v) {
    try {
      frames[v] = da_detail::da_frame(*lattices[v], config);
    } catch (const std::exception& ex) {  // e.g. no closed orbit: name the variant (an error seed without correction)
      failures[v] = fmt::format("DA study, variant '{}': {}", names[v], ex.what());
    }
  }
  if (n_ranks > 1) {
    // The ranks agree first on the first variant that failed (every rank throws its message: no
    // rank waits in a later exchange), then exchange the frames as bit patterns: each word is
    // summed from its owner's value and zeros, which is exact.
    std::vector<uint64_t> first(static_cast<size_t>(n_ranks), 0);
    first[static_cast<size_t>(rank)] = n;
    for (size_t v = mine.begin; v < mine.end; ++v)
      if (!failures[v].empty()) {
        first[static_cast<size_t>(rank)] = v;
        break;
      }
    ranks->allreduce_sum(first.data(), first.size());
    const size_t failed = static_cast<size_t>(*std::min_element(first.begin(), first.end()));
    if (failed < n) {
      const std::string& own = failures[failed];  // empty except on the rank that computed it
      uint64_t length = own.size();
      ranks->allreduce_sum(&length, 1);
      std::vector<uint64_t> words((length + 7) / 8, 0);
      std::memcpy(words.data(), own.data(), own.size());
      ranks->allreduce_sum(words.data(), words.size());
      throw Error(std::string(reinterpret_cast<const char*>(words.data()), length));
    }
    std::vector<uint64_t> words(n * da_detail::kFrameWords, 0);
    for (size_t v = mine.begin; v < mine.end; ++v)
      da_detail::frame_to_words(frames[v], &words[v * da_detail::kFrameWords]);
    ranks->allreduce_sum(words.data(), words.size());
    for (size_t v = 0; v < n; ++v) frames[v] = da_detail::frame_from_words(&words[v * da_detail::kFrameWords]);
  }
  for (const std::string& f : failures)
    if (!f.empty()) throw Error(f);
  std::vector<DaScan> scans(n);
  for (size_t v = 0; v < n; ++v) scans[v] = da_detail::da_scan_in_frame(frames[v], config);
  DaScan study = std::move(scans[0]);
  study.variant.assign(study.particles.size(), 0);
  auto frame_of = [&](const DaScan& s, size_t v) {
    DaScan::VariantFrame f;
    f.name = names[v];
    f.sigma_x = s.sigma_x;
    f.sigma_y = s.sigma_y;
    std::copy(s.closed_orbit, s.closed_orbit + 6, f.closed_orbit);
    return f;
  };
  study.variants.push_back(frame_of(study, 0));
  for (size_t v = 1; v < lattices.size(); ++v) {
    const DaScan& s = scans[v];
    study.variants.push_back(frame_of(s, v));
    auto add = [](auto& to, const auto& from) { to.insert(to.end(), from.begin(), from.end()); };
    add(study.amplitude, s.amplitude);
    add(study.angle, s.angle);
    add(study.grid_x, s.grid_x);
    add(study.grid_y, s.grid_y);
    add(study.delta_index, s.delta_index);
    append_particles(study.initial, s.initial);
    append_particles(study.particles, s.particles);
    study.variant.insert(study.variant.end(), s.particles.size(), static_cast<int32_t>(v));
  }
  return study;
}

DaScan da_variant_scan(const DaScan& study, size_t v) {
  if (study.variants.empty()) {
    if (v != 0) throw Error("a scan of one lattice has only variant 0");
    return study;
  }
  if (v >= study.variants.size()) throw Error(fmt::format("variant {} of a study of {}", v, study.variants.size()));
  // A variant's particles are consecutive (make_da_study; shares and parts keep the order).
  size_t begin = 0;
  while (begin < study.variant.size() && study.variant[begin] != static_cast<int32_t>(v)) ++begin;
  size_t end = begin;
  while (end < study.variant.size() && study.variant[end] == static_cast<int32_t>(v)) ++end;
  DaScan scan = slice_da_scan(study, begin, end);
  scan.variants.clear();
  scan.variant.clear();
  const DaScan::VariantFrame& f = study.variants[v];
  scan.sigma_x = f.sigma_x;
  scan.sigma_y = f.sigma_y;
  std::copy(f.closed_orbit, f.closed_orbit + 6, scan.closed_orbit);
  return scan;
}

namespace {

/// The DA a variant's summary gives for one row: polar, last stable (refined when refined);
/// cartesian, the vertical border min(|y_high|, |y_low|) (NaN when the start is lost).
double row_da(const DaSummary& s, size_t row, bool cartesian) {
  if (cartesian) {
    const DaColumnResult& c = s.per_column[row];
    return std::min(std::fabs(c.y_high), std::fabs(c.y_low));
  }
  const DaAngleResult& r = s.per_angle[row];
  return std::isnan(r.da_refined) ? r.da_last_stable : r.da_refined;
}

/// min, mean, population standard deviation, max of the finite values; the index of the minimum.
void statistics(const std::vector<double>& v, double& min, double& mean, double& std, double& max, size_t& arg_min) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  min = mean = std = max = nan;
  arg_min = 0;
  double sum = 0.0;
  size_t n = 0;
  for (size_t k = 0; k < v.size(); ++k) {
    if (std::isnan(v[k])) continue;
    if (n == 0 || v[k] < min) min = v[k], arg_min = k;
    if (n == 0 || v[k] > max) max = v[k];
    sum += v[k];
    ++n;
  }
  if (n == 0) return;
  mean = sum / static_cast<double>(n);
  double squares = 0.0;
  for (double x : v)
    if (!std::isnan(x)) squares += (x - mean) * (x - mean);
  std = std::sqrt(squares / static_cast<double>(n));
}

json nullable(double v) { return std::isnan(v) ? json(nullptr) : json(v); }

std::string directory_name(size_t v, const std::string& name) {
  std::string safe;
  for (char c : name)
    safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return fmt::format("{:03d}_{}", v, safe);
}

}  // namespace

DaStudySummary summarize_da_study(const DaScan& study, std::vector<DaSummary> per_variant) {
  DaStudySummary out;
  const size_t n_variants = std::max<size_t>(1, study.variants.size());
  if (per_variant.size() != n_variants) throw Error("summarize_da_study: one summary per variant expected");
  for (size_t v = 0; v < n_variants; ++v) out.names.push_back(study.variants.empty() ? "base" : study.variants[v].name);
  out.per_variant = std::move(per_variant);
  const bool cartesian = study.config.grid == DaGrid::Cartesian;
  const size_t rows = cartesian ? out.per_variant[0].per_column.size() : out.per_variant[0].per_angle.size();
  for (size_t r = 0; r < rows; ++r) {
    DaStudyRow row;
    row.delta = cartesian ? out.per_variant[0].per_column[r].delta : out.per_variant[0].per_angle[r].delta;
    row.angle = cartesian ? out.per_variant[0].per_column[r].x : out.per_variant[0].per_angle[r].angle;
    for (const DaSummary& s : out.per_variant) row.per_variant.push_back(row_da(s, r, cartesian));
    statistics(row.per_variant, row.min, row.mean, row.std, row.max, row.worst_variant);
    out.rows.push_back(std::move(row));
  }
  std::vector<double> minima;
  for (const DaSummary& s : out.per_variant) minima.push_back(s.da_min);
  statistics(minima, out.da_min, out.da_mean, out.da_std, out.da_max, out.worst_variant);
  return out;
}

DaStudySummary summarize_da_study(const DaScan& study) {
  std::vector<DaSummary> per_variant;
  for (size_t v = 0; v < std::max<size_t>(1, study.variants.size()); ++v)
    per_variant.push_back(summarize_da(da_variant_scan(study, v)));
  return summarize_da_study(study, std::move(per_variant));
}

void write_da_study_results(const DaScan& study, const DaStudySummary& s, const std::string& directory,
                            const std::string& lattice_file) {
  fs::create_directories(directory);
  const DaConfig& c = study.config;
  const bool cartesian = c.grid == DaGrid::Cartesian;
  const char* unit = c.units == DaUnits::Sigma ? "sigma" : "m";
  json j;
  j["lattice"] = lattice_file;
  j["study"] = true;
  j["variants"] = s.names;
  j["turns"] = c.turns;
  j["grid"] = cartesian ? "cartesian" : "polar";
  j["amplitude_unit"] = unit;
  j["deltas"] = c.deltas;
  j["particles"] = study.particles.size();
  j["survivors"] = study.particles.alive_count();
  j["definition"] = cartesian ? "per x column and variant, the vertical border min(|y_high|, |y_low|) of the stable "
                                "region; across variants min, mean, std (population), max"
                              : "per angle and variant, the DA (largest amplitude below the first loss on the ray that "
                                "survived, refined when refinement is on); across variants min, mean, std "
                                "(population), max";
  j["da_min_over_variants"] = nullable(s.da_min);
  j["da_min_mean"] = nullable(s.da_mean);
  j["da_min_std"] = nullable(s.da_std);
  j["da_min_max"] = nullable(s.da_max);
  j["worst_variant"] = s.names[s.worst_variant];
  json rows = json::array();
  for (const DaStudyRow& r : s.rows) {
    json per = json::array();
    for (double v : r.per_variant) per.push_back(nullable(v));
    rows.push_back({{"delta", r.delta},
                    {cartesian ? "x" : "angle_deg", r.angle},
                    {"min", nullable(r.min)},
                    {"mean", nullable(r.mean)},
                    {"std", nullable(r.std)},
                    {"max", nullable(r.max)},
                    {"worst_variant", s.names[r.worst_variant]},
                    {"per_variant", per}});
  }
  j[cartesian ? "per_column" : "per_angle"] = rows;
  json vs = json::array();
  for (size_t v = 0; v < s.names.size(); ++v) {
    const DaSummary& d = s.per_variant[v];
    vs.push_back({{"name", s.names[v]},
                  {"directory", "variants/" + directory_name(v, s.names[v])},
                  {"da_min", d.da_min},
                  {"da_mean", d.da_mean},
                  {"da_max", d.da_max}});
  }
  j["per_variant"] = vs;
  write_file_atomically((fs::path(directory) / "summary.json").string(), j.dump(2) + "\n");
  write_file_atomically((fs::path(directory) / "summary.csv").string(), [&](std::ostream& csv) {
    csv << (cartesian ? "delta,x,min,mean,std,max,worst_variant" : "delta,angle_deg,min,mean,std,max,worst_variant");
    for (const std::string& name : s.names) csv << ",\"" << name << "\"";
    csv << "\n";
    for (const DaStudyRow& r : s.rows) {
      csv << fmt::format("{:.10g},{:.10g},{:.10g},{:.10g},{:.10g},{:.10g},\"{}\"", r.delta, r.angle, r.min, r.mean,
                         r.std, r.max, s.names[r.worst_variant]);
      for (double v : r.per_variant) csv << fmt::format(",{:.10g}", v);
      csv << "\n";
    }
  });
  std::vector<DaScan> scans;  // each variant's own scan, made once
  for (size_t v = 0; v < s.names.size(); ++v) scans.push_back(da_variant_scan(study, v));
  write_file_atomically((fs::path(directory) / "variants.csv").string(), [&](std::ostream& csv) {
    csv << "variant,name,da_min,da_mean,da_max,particles,survivors\n";
    for (size_t v = 0; v < s.names.size(); ++v)
      csv << fmt::format("{},\"{}\",{:.10g},{:.10g},{:.10g},{},{}\n", v, s.names[v], s.per_variant[v].da_min,
                         s.per_variant[v].da_mean, s.per_variant[v].da_max, scans[v].particles.size(),
                         scans[v].particles.alive_count());
  });
  for (size_t v = 0; v < s.names.size(); ++v)
    write_da_results(scans[v], s.per_variant[v],
                     (fs::path(directory) / "variants" / directory_name(v, s.names[v])).string(),
                     fmt::format("{} (variant '{}')", lattice_file, s.names[v]));
  write_npz((fs::path(directory) / "da.npz").string(), da_detail::da_npz_members(study));
}

}  // namespace ft
