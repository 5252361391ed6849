// Import of trackcpp / AT flat lattice files (the text format trackcpp's read_flat_file reads and
// write_flat_file writes, as used for the SIRIUS storage ring) into fusetrack's lattice JSON.
//
// The file is read as trackcpp's reader (read_flat_file_trackcpp) reads it:
//  - header lines "% KEY VALUE": energy [eV] (the first word after the key; "eV" follows),
//    harmonic_number, cavity_on and vchamber_on (true only for the word "true"), radiation_on (a
//    number, or "true" = 1; any other word is 0), lattice_version (one word). The key is the word
//    after a lone '%': trackcpp ignores a glued "%energy" line, and so does the import (with a
//    warning). Other header keys are ignored (with a warning). Every header value is optional but
//    the energy (trackcpp's default, the electron rest energy, is no beam).
//    TrackcppImportOptions::header replaces any of them without editing the file.
//  - one block per element, started by "fam_name NAME", then "KEY VALUE..." lines. EVERY element
//    field is optional, with the default of trackcpp's Element (elements.h): length 0, pass_method
//    drift_pass, nr_steps 1, polynom_a / polynom_b 0, vchamber 0 (rectangle), hmin / vmin -DBL_MAX,
//    hmax / vmax DBL_MAX, hkick, vkick, angle, angle_in, angle_out, gap, fint_in, fint_out, voltage,
//    frequency, phase_lag 0, rescale_kicks 1, t_in / t_out 0, r_in / r_out the identity. trackcpp's
//    writer leaves out every field at its default except fam_name, length and pass_method.
//  - polynom_a / polynom_b: "ORDER VALUE" pairs. trackcpp's loop drops a pair whose value ends the
//    line, so a line without trailing whitespace loses its last pair (the writer ends every pair
//    with a space); the import drops it too, with a warning. A second polynom line adds its pairs.
//  - hmin / vmin: an hmax line sets hmin = -hmax unless an hmin line came since the last hmax line,
//    which may be in an earlier element (trackcpp does not reset that state at fam_name); the import
//    follows, with a warning where an earlier element's hmin keeps hmin unlimited. Likewise vmin.
//  - a field given twice: the last value counts (with a warning); words after the values trackcpp
//    reads are ignored (with a warning).
//  - a key trackcpp does not know is warned about once per key, with the file, the line and the
//    element, and ignored (trackcpp's reader would stop reading there).
//  - lines whose first word starts with '#' are comments.
// Deliberate differences, errors naming the file, the element, the field and the line: a value
// that is not a number (trackcpp reads 0, or loops for ever in a polynom line), a field without a
// value, polynom words that are not pairs, a field before the first fam_name line, a fam_name line
// without exactly one name.
//
// Pass methods and the fusetrack elements they become (AT's PolynomB[n] = k_n / n!, per metre):
//   identity_pass                 Marker
//   drift_pass                    Drift (trackcpp's expanded drift)
//   drift_g2l_pass                Drift with its misalignment
//   str_mpole_symplectic4_pass    ThickMultipole, kn[n] = n! polynom_b[n], ks[n] = n! polynom_a[n],
//                                 Forest-Ruth integrator with num_slices = nr_steps
//   bnd_mpole_symplectic4_pass    Bend (model 0, Forest-Ruth, num_slices = nr_steps), h = angle /
//                                 length, k1 = polynom_b[1], k2 = 2 polynom_b[2], ..., edge angles
//                                 angle_in / angle_out, hgap = gap / 2, fint_in / fint_out
//   corrector_pass                Corrector (hkick, vkick over the length)
//   cavity_pass, cavity_0_pass    Cavity (thin; a thick one is Drift(L/2), Cavity, Drift(L/2)):
//                                 voltage, frequency, phase = pi - phase_lag, lag = 0 (below); with
//                                 "cavity_on false" trackcpp tracks a drift, and so does the import
// Everything else (kicktable_pass, matrix_pass, thinquad_pass, thinsext_pass, cavity_1comp_pass,
// cavity_1frac_pass, cavity_2_pass, ...) is refused, listing every such element.
//
// Coordinates: trackcpp tracks (rx, px, ry, py, de, dl) with px, py = P_x/P0, P_y/P0 and
// de = (P - P0)/P0, as fusetrack's px, py, delta; dl is the path lengthening (a late particle has
// dl > 0) computed with velocity c for every particle, so zeta = -dl where beta0 = 1. fusetrack
// tracks the time of flight with the particle's own velocity (zeta = s - beta0 c t): the two differ
// by terms of order delta / gamma0^2 per metre (3e-8 at 3 GeV). The cavity kick of trackcpp,
// de += -(V/E0) sin(2 pi f dl / c - phase_lag), is fusetrack's dE/E0 = (V/E0) sin(phi - k zeta)
// with phi = pi - phase_lag (sin(a) = sin(pi - a)); fusetrack adds the energy (ptau), trackcpp adds
// to de directly: again equal up to 1/gamma0^2.
//
// Known differences from trackcpp, written in the warnings where they occur:
//  - the edge kicks of a Bend are xtrack's linear edges (px += h tan(e) x); trackcpp divides them
//    by (1 + de) (a chromatic difference);
//  - for a bend with polynom_b[0] != 0 the Bend's Hamiltonian has the curvature term h (h + b0) x
//    where trackcpp has h^2 x, and its edges use h + b0 where trackcpp uses h;
//  - apertures: trackcpp loses a particle on the boundary of a rectangle, fusetrack keeps it.
//
// Apertures (when "vchamber_on true"): trackcpp checks hmin/hmax/vmin/vmax after every element, in
// the line's frame; the import puts a limit after the element: vchamber 0 LimitRect, 2 LimitEllipse
// (moved to the centre of the box with shift_x/shift_y), 1 (rhombus) a four-vertex LimitPolygon;
// other p-norm shapes are refused. hmin and vmin are those trackcpp's reader gives (above).
//
// Misalignments: trackcpp applies pos += t_in, pos = r_in pos at the entry and pos = r_out pos,
// pos += t_out at the exit. Where t_in = (-dx, 0, -dy, 0, 0, 0), t_out = -t_in and r_in is a
// rotation by psi about s in (x, y) and (px, py) with r_out its inverse, that is a shift of the
// element by (dx, dy) and a tilt psi in its local frames. Straight elements take the generic fields
// shift_x = dx, shift_y = dy, rot_s_rad = psi (the same operations in the same order); bends and
// thick cavities get explicit XYShift and SRotation elements around them (the generic fields would
// move a curved element rigidly, which is not what trackcpp does). Anything else is refused.
// identity_pass and drift_pass ignore t_in/r_in in trackcpp, and so does the import (with a
// warning).
//
// Sources: trackcpp src/flat_file.cpp (read_flat_file_trackcpp, write_flat_file_trackcpp),
// include/trackcpp/elements.h (defaults), passmethods.hpp, tracking.hpp (check_particle_loss),
// auxiliary.h (pass method names, VChamberShape); AT atintegrators/BndMPoleSymplectic4Pass.c,
// StrMPoleSymplectic4Pass.c.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ft {

/// Header values (trackcpp's header keys) that the import uses instead of the file's; those not
/// set keep the file's value.
struct TrackcppHeaderValues {
  std::optional<double> energy;  ///< total energy of an electron [eV]
  std::optional<long> harmonic_number;
  std::optional<bool> cavity_on;     ///< false: cavities tracked as drifts
  std::optional<long> radiation_on;  ///< 0 off, 1 damping ("radiation": "mean"), 2 full ("quantum")
  std::optional<bool> vchamber_on;   ///< false: the elements' apertures are ignored
};

/// Sets one header value from "KEY=VALUE" (KEY one of energy, harmonic_number, cavity_on,
/// radiation_on, vchamber_on; booleans true/false, radiation_on 0/1/2). An unknown key or a
/// malformed value is an InputError naming `origin` (e.g. "--trackcpp-header") and the key.
void set_trackcpp_header_value(TrackcppHeaderValues& values, const std::string& assignment, const std::string& origin);

struct TrackcppImportOptions {
  /// Import a file with "radiation_on" set without radiation (a warning says so); without it the
  /// lattice radiates: radiation_on 1 sets the document's "radiation" to "mean", 2 to "quantum"
  /// (elements/radiation.h).
  bool ignore_radiation = false;
  /// Header values that replace the file's (cavity_on, vchamber_on, ...).
  TrackcppHeaderValues header;
  /// Receives warnings (ignored fields, known model differences); may be null.
  std::vector<std::string>* warnings = nullptr;
};

/// True if the text looks like a trackcpp flat file: its first line that is neither blank nor a
/// '#' comment starts with '%' (a header line) or with "fam_name".
bool is_trackcpp_flat_file(const std::string& text);

/// Converts the text of a trackcpp flat file to fusetrack's lattice format. Throws InputError
/// naming the file, the element (index in the file and fam_name), the pass method and the field,
/// with the line number, for anything it cannot convert.
nlohmann::ordered_json trackcpp_to_fusetrack(const std::string& text, const std::string& file,
                                             const TrackcppImportOptions& options);

/// Reads `path` and converts it (trackcpp_to_fusetrack); a file that cannot be read is an
/// InputError.
nlohmann::ordered_json import_trackcpp_file(const std::string& path, const TrackcppImportOptions& options);

}  // namespace ft
