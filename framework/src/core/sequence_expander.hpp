// The sequence of a lattice file and the lines it uses ("lines": {NAME: [...]}, entries that are
// element or line names or {"line": NAME, "repeat": N}), resolved to definition and line indices
// with the number of element passes each expands to. Everything is counted, and checked against
// kMaxSequenceLength, before the expanded sequence is allocated.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fusetrack/error.h"
#include "fusetrack/lattice.h"

namespace ft {

class SequenceExpander {
 public:
  using json = nlohmann::ordered_json;

  /// `lines`: the file's "lines" object, or nullptr when it has none.
  SequenceExpander(const json* lines, const std::string& file, const Lattice& lattice);

  /// Resolves and counts the sequence; throws InputError for bad or oversized input.
  void resolve(const json& sequence);
  /// The number of element passes per turn (valid after resolve()).
  size_t size() const { return static_cast<size_t>(m_top_size); }
  /// Appends the expanded sequence to `lattice`.
  void expand(Lattice& lattice) const { emit(m_top, lattice); }

 private:
  enum class State { unvisited, in_progress, done };
  struct Item {
    bool is_line = false;
    uint32_t index = 0;  // definition or line
    uint64_t repeat = 1;
  };
  struct Line {
    std::string name;
    const json* body = nullptr;
    std::vector<Item> items;
    double size = 0.0;  // element passes of one repetition (exact below 2^53, far above the limit)
    State state = State::unvisited;
  };
  /// One entry of a sequence or line as written: the name and the repeat count.
  struct Entry {
    const std::string* name = nullptr;
    uint64_t repeat = 1;
  };
  static constexpr int kMaxDepth = 1000;  // nesting of lines (the expansion recurses)

  InputLocation at(const std::string& field) const;
  /// Resolves the items of the sequence or of a line (`context`: "sequence" or "lines.NAME", the
  /// field prefix; `what`: "the sequence" or "line 'NAME'"); sets `size` to its element passes.
  std::vector<Item> compile(const json& items, const std::string& context, const std::string& what, double& size,
                            int depth);
  /// The name and repeat count of `entry` (a name, or {"line": name, "repeat": n}).
  Entry read_entry(const json& entry, const std::string& field) const;
  /// A repeat count: a positive integer (the size it gives is checked by the caller).
  uint64_t read_repeat(const json& v, const std::string& name, const std::string& field) const;
  /// The element or line `name` stands for.
  Item resolve_name(const std::string& name, uint64_t repeat, const std::string& field) const;
  /// The element passes of one repetition of line `index`, resolving it first if needed.
  double line_size(uint32_t index, const std::string& field, int depth);
  /// Refuses an entry or a running total beyond kMaxSequenceLength.
  void check_size(const Entry& entry, bool is_line, double once, const std::string& entry_field,
                  const std::string& repeat_field) const;
  void emit(const std::vector<Item>& items, Lattice& lattice) const;

  const std::string& m_file;
  const Lattice& m_lattice;
  std::vector<Line> m_lines;
  std::unordered_map<std::string_view, uint32_t> m_line_index;
  std::vector<const std::string*> m_stack;  // lines being resolved, outermost first
  std::vector<Item> m_top;
  double m_top_size = 0.0;
};

}  // namespace ft
