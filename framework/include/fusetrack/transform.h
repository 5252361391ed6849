// Element transformations (misalignments): generic fields any element definition of a lattice may
// carry, applied by the framework around the element (fusetrack/device/transform.h), with
// Xsuite's names and conventions (xtrack BeamElement shift_x, ..., rot_shift_anchor).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ft {

struct ElementTransformInput {
  double shift_x = 0.0;             // [m] the element is displaced by +shift_x (particles see x - shift_x)
  double shift_y = 0.0;             // [m]
  double shift_s = 0.0;             // [m] longitudinal displacement (an exact drift in, the opposite out)
  double rot_x_rad = 0.0;           // [rad] rotation about x (pitch, MAD-X survey sign)
  double rot_y_rad = 0.0;           // [rad] rotation about y (yaw)
  double rot_s_rad = 0.0;           // [rad] rotation about s with the element's frame (tilt, MAD-X TILT)
  double rot_s_rad_no_frame = 0.0;  // [rad] roll about s applied before the tilt (xtrack)
  double rot_shift_anchor = 0.0;    // [m] point, from the entry, about which rotations act

  /// True when any displacement or rotation is non-zero (the anchor alone changes nothing).
  bool active() const;
};

/// The lattice-format field names, in ElementTransformInput's order.
inline constexpr const char* kTransformFieldNames[8] = {"shift_x",   "shift_y",   "shift_s",
                                                        "rot_x_rad", "rot_y_rad", "rot_s_rad",
                                                        "rot_s_rad_no_frame", "rot_shift_anchor"};
/// The index of `name` in kTransformFieldNames, or -1.
int transform_field_index(const std::string& name);
double& transform_field(ElementTransformInput& t, int index);
double transform_field(const ElementTransformInput& t, int index);

/// The parameter block of fusetrack/device/transform.h for an element of `length` [m] (0 for a
/// thin element) that bends the reference frame by `angle` [rad] (0 for a straight one), as
/// xtrack computes its entry and exit frame changes. Throws std::invalid_argument naming the
/// field for what cannot be represented (a thin element with a bending angle).
std::vector<uint64_t> transform_block(const ElementTransformInput& t, double length, double angle);

/// A readable list of the operations of a block (tests, generated-source comments).
std::string describe_transform_block(const std::vector<uint64_t>& block);

}  // namespace ft
