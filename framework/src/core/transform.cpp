// Host side of the element transformations: the entry and exit frame changes of a misaligned
// element, computed once per element definition with Xsuite's formulas
// (xtrack/beam_elements/elements_src/track_misalignments.h: track_misalignment_entry_straight,
// _exit_straight, _entry_curved, _exit_curved; the same expressions in the same order, so that the
// values equal xtrack's on the same C library). The device applies them
// (fusetrack/device/transform.h).
#include "fusetrack/transform.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "fusetrack/device/transform.h"

namespace ft {

bool ElementTransformInput::active() const {
  return shift_x != 0.0 || shift_y != 0.0 || shift_s != 0.0 || rot_x_rad != 0.0 || rot_y_rad != 0.0 ||
         rot_s_rad != 0.0 || rot_s_rad_no_frame != 0.0;
}

int transform_field_index(const std::string& name) {
  for (int i = 0; i < 8; ++i)
    if (name == kTransformFieldNames[i]) return i;
  return -1;
}

double& transform_field(ElementTransformInput& t, int index) {
  double* fields[8] = {&t.shift_x,   &t.shift_y,   &t.shift_s,          &t.rot_x_rad,
                       &t.rot_y_rad, &t.rot_s_rad, &t.rot_s_rad_no_frame, &t.rot_shift_anchor};
  return *fields[index];
}

double transform_field(const ElementTransformInput& t, int index) {
  return transform_field(const_cast<ElementTransformInput&>(t), index);
}

namespace {

using Matrix = double[4][4];

/// One list of operations (entry or exit) being written.
struct OperationList {
  unsigned long long kinds = 0;
  int count = 0;
  std::vector<double> values;

  void add(unsigned kind, std::initializer_list<double> v) {
    if (count >= kTransformMaxOperations) throw std::logic_error("transform: too many operations");
    kinds |= static_cast<unsigned long long>(kind) << (4 * count);
    ++count;
    values.insert(values.end(), v);
  }
  // xtrack's macros of track_misalignments.h (IF_NONZERO for all but the transverse shift).
  void xy_shift(double dx, double dy) { add(kTransformShiftXY, {dx, dy}); }
  void s_shift(double ds) {
    if (ds != 0.0) add(kTransformShiftS, {ds});
  }
  void y_rotate(double theta) {
    if (theta != 0.0) add(kTransformRotateY, {std::sin(theta), std::cos(theta), std::tan(theta)});
  }
  void x_rotate(double phi) {  // signs flipped to follow the MAD-X survey convention, as xtrack does
    if (phi != 0.0) add(kTransformRotateX, {-std::sin(phi), std::cos(phi), -std::tan(phi)});
  }
  void s_rotate(double psi) {
    if (psi != 0.0) add(kTransformRotateS, {std::sin(psi), std::cos(psi)});
  }
};

void multiply(const Matrix a, const Matrix b, Matrix r) {
  for (int i = 0; i < 4; i++) {
    r[i][0] = a[i][0] * b[0][0] + a[i][1] * b[1][0] + a[i][2] * b[2][0] + a[i][3] * b[3][0];
    r[i][1] = a[i][0] * b[0][1] + a[i][1] * b[1][1] + a[i][2] * b[2][1] + a[i][3] * b[3][1];
    r[i][2] = a[i][0] * b[0][2] + a[i][1] * b[1][2] + a[i][2] * b[2][2] + a[i][3] * b[3][2];
    r[i][3] = a[i][0] * b[0][3] + a[i][1] * b[1][3] + a[i][2] * b[2][3] + a[i][3] * b[3][3];
  }
}

/// Inverse of a rigid affine map: transposed rotation, translation -R^T t.
void rigid_inverse(const Matrix m, Matrix inv) {
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) inv[i][j] = m[j][i];
  for (int i = 0; i < 3; ++i) inv[i][3] = -m[0][i] * m[0][3] - m[1][i] * m[1][3] - m[2][i] * m[2][3];
  inv[3][0] = inv[3][1] = inv[3][2] = 0.0;
  inv[3][3] = 1.0;
}

/// The misalignment as a rigid map (rotations theta about y, phi about x, psi about s; shift d).
void misalignment_matrix(const ElementTransformInput& t, Matrix m) {
  const double s_phi = std::sin(t.rot_x_rad), c_phi = std::cos(t.rot_x_rad);
  const double s_theta = std::sin(t.rot_y_rad), c_theta = std::cos(t.rot_y_rad);
  const double s_psi = std::sin(t.rot_s_rad_no_frame), c_psi = std::cos(t.rot_s_rad_no_frame);
  const double r[4][4] = {
      {-s_phi * s_psi * s_theta + c_psi * c_theta, -c_psi * s_phi * s_theta - c_theta * s_psi, c_phi * s_theta,
       t.shift_x},
      {c_phi * s_psi, c_phi * c_psi, s_phi, t.shift_y},
      {-c_theta * s_phi * s_psi - c_psi * s_theta, -c_psi * c_theta * s_phi + s_psi * s_theta, c_phi * c_theta,
       t.shift_s},
      {0, 0, 0, 1}};
  std::memcpy(m, r, sizeof(r));
}

/// The map along an arc of angle `part_angle` (curvature h) in the plane tilted by `tilt`.
void arc_matrix(double part_angle, double h, double tilt, Matrix m) {
  const double sa = std::sin(part_angle), ca = std::cos(part_angle);
  const double st = std::sin(tilt), ct = std::cos(tilt);
  const double r[4][4] = {{(ca - 1) * (ct * ct) + 1, (ca - 1) * ct * st, ct * -sa, (ca - 1) * ct / h},
                          {(ca - 1) * ct * st, (ca - 1) * (st * st) + 1, -sa * st, (ca - 1) * st / h},
                          {ct * sa, sa * st, ca, sa / h},
                          {0, 0, 0, 1}};
  std::memcpy(m, r, sizeof(r));
}

/// The shift and the three rotations of a rigid map, as xtrack extracts them.
void decompose(const Matrix m, double& x, double& y, double& s, double& theta, double& phi, double& psi) {
  x = m[0][3];
  y = m[1][3];
  s = m[2][3];
  theta = std::atan2(m[0][2], m[2][2]);
  phi = std::atan2(m[1][2], std::sqrt(m[1][0] * m[1][0] + m[1][1] * m[1][1]));
  psi = std::atan2(m[1][0], m[1][1]);
}

}  // namespace

std::vector<uint64_t> transform_block(const ElementTransformInput& t, double length, double angle) {
  const double dx = t.shift_x, dy = t.shift_y, ds = t.shift_s;
  const double theta = t.rot_y_rad, phi = t.rot_x_rad, psi_no_frame = t.rot_s_rad_no_frame;
  const double psi = t.rot_s_rad, anchor = t.rot_shift_anchor;
  OperationList entry, exit;
  if (angle == 0.0) {
    // Straight (also a curved element type with no bending, as xtrack does for length != 0).
    const double in_x = dx - anchor * std::cos(phi) * std::sin(theta);
    const double in_y = dy - anchor * std::sin(phi);
    const double in_s = ds - anchor * (std::cos(phi) * std::cos(theta) - 1);
    entry.xy_shift(in_x, in_y);
    entry.s_shift(in_s);
    entry.y_rotate(theta);
    entry.x_rotate(phi);
    entry.s_rotate(psi_no_frame);
    entry.s_rotate(psi);

    const double neg_part_length = anchor - length;
    const double out_x = neg_part_length * std::cos(phi) * std::sin(theta) - dx;
    const double out_y = neg_part_length * std::sin(phi) - dy;
    const double out_s = neg_part_length * (std::cos(phi) * std::cos(theta) - 1) - ds;
    exit.s_rotate(-psi);
    exit.s_rotate(-psi_no_frame);
    exit.x_rotate(-phi);
    exit.y_rotate(-theta);
    exit.s_shift(out_s);
    exit.xy_shift(out_x, out_y);
  } else {
    if (length == 0.0)
      throw std::invalid_argument(
          "transformations of a thin element with a bending angle are not supported");
    const double h = angle / length;
    Matrix mis, first, inv_first, temp, in_map;
    misalignment_matrix(t, mis);
    arc_matrix(anchor * h, h, psi, first);  // entry -> anchor
    rigid_inverse(first, inv_first);
    multiply(first, mis, temp);
    multiply(temp, inv_first, in_map);
    double x, y, s, r_theta, r_phi, r_psi;
    decompose(in_map, x, y, s, r_theta, r_phi, r_psi);
    entry.xy_shift(x, y);
    entry.s_shift(s);
    entry.y_rotate(r_theta);
    entry.x_rotate(r_phi);
    entry.s_rotate(r_psi);
    entry.s_rotate(psi);

    Matrix inv_mis, second, inv_second, realign;
    rigid_inverse(mis, inv_mis);
    arc_matrix(angle - h * anchor, h, psi, second);  // anchor -> exit
    rigid_inverse(second, inv_second);
    multiply(inv_second, inv_mis, temp);
    multiply(temp, second, realign);
    decompose(realign, x, y, s, r_theta, r_phi, r_psi);
    exit.s_rotate(-psi);
    exit.xy_shift(x, y);
    exit.s_shift(s);
    exit.y_rotate(r_theta);
    exit.x_rotate(r_phi);
    exit.s_rotate(r_psi);
  }
  const size_t words = 1 + entry.values.size() + exit.values.size();
  std::vector<uint64_t> block(words, 0);
  block[0] = entry.kinds | exit.kinds << 24 | static_cast<uint64_t>(words) << 48;
  std::memcpy(block.data() + 1, entry.values.data(), 8 * entry.values.size());
  std::memcpy(block.data() + 1 + entry.values.size(), exit.values.data(), 8 * exit.values.size());
  return block;
}

std::string describe_transform_block(const std::vector<uint64_t>& block) {
  if (block.empty()) return "(none)";
  static const char* const names[] = {"", "shift_xy", "shift_s", "rotate_y", "rotate_x", "rotate_s"};
  std::string s;
  const double* v = reinterpret_cast<const double*>(block.data() + 1);
  for (int part = 0; part < 2; ++part) {
    s += part == 0 ? "entry:" : " exit:";
    for (unsigned long long ops = (block[0] >> (24 * part)) & 0xffffffull; ops; ops >>= 4) {
      const unsigned k = static_cast<unsigned>(ops & 15ull);
      s += fmt::format(" {}(", names[k]);
      for (int i = 0; i < transform_value_count(k); ++i) s += fmt::format("{}{:.17g}", i ? ", " : "", *v++);
      s += ")";
    }
  }
  return s;
}

}  // namespace ft
