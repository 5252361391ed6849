// Marker: does nothing to the particle (xtrack Marker, elements_src/marker.h).
// The X-macro contract needs at least one field (an empty field table would be a zero-size
// array), so Marker carries an unused integer tag, as xtrack's Marker carries `_dummy`.
#pragma once
#include "fusetrack/device/element.h"

// `int` is int32_t on every host and device target (see the note in multipole.h).
#define FT_MARKER_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED) \
  PARAM(int, tag, 0, "1", "user tag, unused by tracking")

FT_ELEMENT_STRUCT(Marker, FT_MARKER_FIELDS)

FT_FUNCTION void Marker_track(const Marker& /*e*/, ft::ParticleView& /*p*/) {}

FT_ELEMENT_COORDINATES(Marker, 0, 0)
FT_REGISTER_ELEMENT(Marker, FT_MARKER_FIELDS, FT_THIN, FT_NO_PREPARE, "Marker, no effect (xtrack Marker)")
