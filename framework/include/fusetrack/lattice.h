// A lattice: the reference particle, named element definitions (type + packed parameters)
// and the sequence of element instances that make one turn.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "fusetrack/device/particle.h"
#include "fusetrack/registry.h"
#include "fusetrack/transform.h"

namespace ft {

/// The most element passes one turn may hold after the lines of a lattice file are expanded. A
/// larger sequence (a line repeated 10^12 times, lines nested three deep with 1000 repetitions
/// each) is refused when the file loads, before anything is allocated, with an error naming the
/// line, its repeat count and the size it would expand to. At the limit the sequence alone takes
/// 1.6 GB (16 bytes per entry) and loading takes about a second (bench/HISTORY.md,
/// bench/cpu/lattice_loading.py); real rings have 10^4 to 10^6 entries.
inline constexpr uint64_t kMaxSequenceLength = 100'000'000;

/// The reference particle (MAD-X/Xsuite): rest energy, charge and momentum.
struct ReferenceParticle {
  double mass0 = 0.0;  // rest energy [eV]
  double q0 = 1.0;     // charge [e]
  double p0c = 0.0;    // momentum times c [eV]

  double energy0() const;  // total energy [eV]
  double gamma0() const;
  double beta0() const;
  ft_reference to_abi(double circumference) const;
};

/// A named element definition. Several sequence entries may share one definition.
struct ElementDefinition {
  std::string name;
  const ElementType* type = nullptr;
  uint32_t param_offset = 0;  // bytes into Lattice::param_bytes()
  std::string json;           // collective elements: the definition as given (host-only fields too)
  int32_t transform = -1;     // index of its transformation (shift_x, ..., rot_s_rad), -1: none
};

/// One entry of the sequence.
struct SequenceEntry {
  uint32_t definition = 0;  // index into Lattice::definitions()
  double s = 0.0;           // longitudinal position of the entrance [m]
};

class Lattice {
 public:
  Lattice() = default;
  explicit Lattice(ReferenceParticle reference) : m_reference(reference) {}

  /// Defines an element from a JSON object of field values (the same validation as for lattice
  /// files). Returns the definition index. `where` locates errors.
  uint32_t define(const std::string& name, const ElementType& type, const nlohmann::ordered_json& fields,
                  const InputLocation& where);
  /// Appends an instance of a definition to the sequence.
  void append(uint32_t definition);
  /// Reserves room for definitions and sequence entries (loading large lattices).
  void reserve(size_t definitions, size_t sequence_entries);
  /// Appends a definition by name.
  void append(const std::string& definition_name);
  /// A copy of a definition (parameters, transformation) under a new name; returns its index.
  uint32_t duplicate_definition(uint32_t definition, const std::string& new_name);
  /// Makes sequence entry `e` an instance of `definition` (of the same type as before).
  void set_sequence_definition(size_t e, uint32_t definition);
  /// Sets one field of a definition (programmatic knobs and tests; no range checks beyond type).
  void set_field(uint32_t definition, const std::string& field, double value, unsigned index = 0);
  double field(uint32_t definition, const std::string& field, unsigned index = 0) const;
  /// Sets the transformation (misalignment) of a definition; all zero removes it.
  void set_transform(uint32_t definition, const ElementTransformInput& transform);
  /// The transformation of a definition, or nullptr when it has none.
  const ElementTransformInput* transform(uint32_t definition) const;
  /// The transformation's parameter block (fusetrack/device/transform.h), computed by prepare(),
  /// or nullptr when the definition has none.
  const std::vector<uint64_t>* transform_block(uint32_t definition) const;
  /// True when any definition used by the sequence has a transformation.
  bool has_transforms() const;

  /// Computes s positions and circumference and runs every definition's prepare(). Call after
  /// the sequence is complete and after changing fields. Throws InputError naming the element.
  void prepare();

  const ReferenceParticle& reference() const { return m_reference; }
  void set_reference(const ReferenceParticle& r) { m_reference = r; }
  const std::vector<ElementDefinition>& definitions() const { return m_definitions; }
  const std::vector<SequenceEntry>& sequence() const { return m_sequence; }
  const ElementDefinition& element(size_t sequence_index) const {
    return m_definitions[m_sequence[sequence_index].definition];
  }
  const unsigned char* params(uint32_t definition) const {
    return param_bytes() + m_definitions[definition].param_offset;
  }
  const unsigned char* param_bytes() const { return reinterpret_cast<const unsigned char*>(m_params.data()); }
  size_t param_byte_count() const { return m_params.size() * sizeof(uint64_t); }
  double circumference() const { return m_circumference; }
  int find_definition(const std::string& name) const;

  GlobalLimits limits() const { return m_limits; }
  void set_limits(const GlobalLimits& l) { m_limits = l; }
  const std::string& source_file() const { return m_source_file; }
  void set_source_file(const std::string& f) { m_source_file = f; }
  /// True when the sequence holds a collective element (one that needs the whole bunch).
  bool has_collective() const;
  /// The directory of the lattice file (for files that elements name), or "." without a file.
  std::string base_directory() const;
  /// Element types used by the lattice, in order of first use.
  std::vector<const ElementType*> types_used() const;

 private:
  unsigned char* mutable_params(uint32_t definition) {
    return reinterpret_cast<unsigned char*>(m_params.data()) + m_definitions[definition].param_offset;
  }

  ReferenceParticle m_reference;
  std::vector<ElementDefinition> m_definitions;
  // name -> definition: open addressing, each slot (hash >> 32) << 32 | (index + 1), 0 when empty;
  // a power of two in size, at most half full. No allocation per name, and a lookup touches the
  // slot and the one definition it names (this is most of the loading time of a 10^6-element
  // lattice with a node-based map).
  std::vector<uint64_t> m_name_slots;
  bool index_name(uint32_t definition);  // false if the name is taken
  std::vector<SequenceEntry> m_sequence;
  std::vector<uint64_t> m_params;  // 8-byte aligned storage for every definition's struct
  std::vector<ElementTransformInput> m_transforms;       // by ElementDefinition::transform
  std::vector<std::vector<uint64_t>> m_transform_blocks;  // prepared by prepare(), same index
  GlobalLimits m_limits{1.0, 1.0, {0, 0, 0, 0, 0, 0}};
  double m_circumference = 0.0;
  std::string m_source_file;
};

/// Loads a lattice file: fusetrack's own format, an Xsuite line JSON or a trackcpp / AT flat file
/// (converted on the fly; `fusetrack import` shows the converters' warnings).
/// Loads the plugins the file lists (relative to the file) into `registry`.
Lattice load_lattice(const std::string& path, ElementRegistry& registry);

/// The reference particle of a JSON object {mass0 [eV], q0 [e], p0c [eV]}, as lattice files give it;
/// errors name `file` and `field` (e.g. "beams[1].reference.p0c").
ReferenceParticle reference_from_json(const nlohmann::ordered_json& r, const std::string& file,
                                      const std::string& field = "reference");

/// Builds a lattice from fusetrack-format JSON; `file` is used in error messages and to resolve
/// plugin paths.
Lattice lattice_from_json(const nlohmann::ordered_json& doc, const std::string& file, ElementRegistry& registry);

/// Writes a lattice in fusetrack's format (definitions with their input fields, and the sequence).
nlohmann::ordered_json lattice_to_json(const Lattice& lattice);

/// "a number", "a string", ...: the kind of a JSON value, for error messages.
const char* json_type_name(const nlohmann::ordered_json& value);

/// Parses JSON text; a syntax error becomes an InputError with line and column.
nlohmann::ordered_json parse_json_file(const std::string& path);
/// The same for JSON text of the file `path` (named in the messages).
nlohmann::ordered_json parse_json_text(const std::string& text, const std::string& path);

}  // namespace ft
