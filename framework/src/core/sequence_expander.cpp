#include "sequence_expander.hpp"

#include <fmt/format.h>

namespace ft {

namespace {

std::string count_text(double n) {
  return n < 9.0e15 ? fmt::format("{}", static_cast<uint64_t>(n)) : fmt::format("{:.3e}", n);
}

std::string limit_text() {
  return fmt::format("the limit is {} element passes per turn (each pass is a {}-byte sequence entry)",
                     count_text(static_cast<double>(kMaxSequenceLength)), sizeof(SequenceEntry));
}

}  // namespace

SequenceExpander::SequenceExpander(const json* lines, const std::string& file, const Lattice& lattice)
    : m_file(file), m_lattice(lattice) {
  if (!lines) return;
  for (auto it = lines->begin(); it != lines->end(); ++it) {
    m_line_index.emplace(std::string_view(it.key()), static_cast<uint32_t>(m_lines.size()));
    m_lines.push_back(Line{it.key(), &it.value(), {}, 0.0, State::unvisited});
  }
}

void SequenceExpander::resolve(const json& sequence) {
  m_top = compile(sequence, "sequence", "the sequence", m_top_size, 0);
}

InputLocation SequenceExpander::at(const std::string& field) const {
  InputLocation w{m_file};
  w.field = field;
  return w;
}

std::vector<SequenceExpander::Item> SequenceExpander::compile(const json& items, const std::string& context,
                                                              const std::string& what, double& size, int depth) {
  if (!items.is_array())
    throw InputError(at(context),
                     fmt::format("{} must be an array of element or line names, got {}", what, json_type_name(items)));
  std::vector<Item> out;
  out.reserve(items.size());
  size = 0.0;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string field = fmt::format("{}[{}]", context, i);
    const Entry entry = read_entry(items[i], field);
    const Item item = resolve_name(*entry.name, entry.repeat, field);
    const double once = item.is_line ? line_size(item.index, field, depth) : 1.0;
    check_size(entry, item.is_line, once, field, items[i].is_string() ? field : field + ".repeat");
    size += static_cast<double>(entry.repeat) * once;
    if (size > static_cast<double>(kMaxSequenceLength))
      throw InputError(at(context), fmt::format("{} expands to more than {} element passes per turn (at least {} "
                                                "after entry [{}]); {}",
                                                what, count_text(static_cast<double>(kMaxSequenceLength)),
                                                count_text(size), i, limit_text()));
    out.push_back(item);
  }
  return out;
}

SequenceExpander::Entry SequenceExpander::read_entry(const json& entry, const std::string& field) const {
  Entry e;
  if (entry.is_string()) {
    e.name = &entry.get_ref<const std::string&>();
    return e;
  }
  if (!entry.is_object() || !entry.contains("line"))
    throw InputError(at(field),
                     fmt::format("expected an element or line name, or {{\"line\": name, \"repeat\": n}}, got {}",
                                 entry.is_object() ? "an object without \"line\"" : json_type_name(entry)));
  for (const auto& [key, v] : entry.items()) {
    (void)v;
    if (key != "line" && key != "repeat")
      throw InputError(at(field + "." + key), "unknown field; a repeated entry is {\"line\": name, \"repeat\": count}");
  }
  const json& l = entry.at("line");
  if (!l.is_string())
    throw InputError(at(field + ".line"), fmt::format("expected a line or element name, got {}", json_type_name(l)));
  e.name = &l.get_ref<const std::string&>();
  if (entry.contains("repeat")) e.repeat = read_repeat(entry.at("repeat"), *e.name, field + ".repeat");
  return e;
}

uint64_t SequenceExpander::read_repeat(const json& v, const std::string& name, const std::string& field) const {
  if (!v.is_number())
    throw InputError(
        at(field), fmt::format("the repeat count of '{}' must be a positive integer, got {}", name, json_type_name(v)));
  if (!v.is_number_integer())
    throw InputError(at(field),
                     fmt::format("the repeat count of '{}' must be a positive integer, got {}", name, v.dump()));
  if (v.is_number_unsigned() ? v.get<uint64_t>() == 0 : v.get<int64_t>() <= 0)
    throw InputError(at(field), fmt::format("the repeat count of '{}' must be a positive integer, got {}{}", name,
                                            v.dump(), v.dump() == "0" ? " (leave the entry out instead)" : ""));
  return v.is_number_unsigned() ? v.get<uint64_t>() : static_cast<uint64_t>(v.get<int64_t>());
}

SequenceExpander::Item SequenceExpander::resolve_name(const std::string& name, uint64_t repeat,
                                                      const std::string& field) const {
  const int def = m_lattice.find_definition(name);
  const auto line = m_line_index.find(name);
  const bool is_line = line != m_line_index.end();
  if (def >= 0 && is_line) throw InputError(at(field), fmt::format("'{}' names both an element and a line", name));
  if (def < 0 && !is_line)
    throw InputError(at(field), fmt::format("'{}' is neither a defined element nor a line", name));
  Item item;
  item.is_line = is_line;
  item.index = is_line ? line->second : static_cast<uint32_t>(def);
  item.repeat = repeat;
  return item;
}

double SequenceExpander::line_size(uint32_t index, const std::string& field, int depth) {
  Line& sub = m_lines[index];
  if (sub.state == State::in_progress) {
    std::string chain;
    for (const std::string* n : m_stack) chain += (chain.empty() ? "'" : " -> '") + *n + "'";
    throw InputError(at(field), fmt::format("line '{}' contains itself ({} -> '{}')", sub.name, chain, sub.name));
  }
  if (sub.state == State::unvisited) {
    if (depth + 1 > kMaxDepth) throw InputError(at(field), fmt::format("lines nest more than {} deep", kMaxDepth));
    sub.state = State::in_progress;
    m_stack.push_back(&sub.name);
    double sub_size = 0.0;
    std::vector<Item> sub_items =
        compile(*sub.body, "lines." + sub.name, "line '" + sub.name + "'", sub_size, depth + 1);
    m_stack.pop_back();
    sub.items = std::move(sub_items);  // m_lines is never resized after construction: `sub` stays valid
    sub.size = sub_size;
    sub.state = State::done;
  }
  return sub.size;
}

void SequenceExpander::check_size(const Entry& entry, bool is_line, double once, const std::string& entry_field,
                                  const std::string& repeat_field) const {
  const double passes = static_cast<double>(entry.repeat) * once;
  if (passes > static_cast<double>(kMaxSequenceLength))
    throw InputError(at(repeat_field),
                     fmt::format("{} '{}' repeated {} times expands to {} element passes per turn ({} per "
                                 "repetition); {}",
                                 is_line ? "line" : "element", *entry.name, entry.repeat, count_text(passes),
                                 count_text(once), limit_text()));
  if (entry.repeat > kMaxSequenceLength)  // an empty line repeated absurdly often
    throw InputError(at(entry_field + ".repeat"),
                     fmt::format("the repeat count {} of '{}' is larger than the whole sequence may be (it expands to "
                                 "{} element passes); {}",
                                 entry.repeat, *entry.name, count_text(passes), limit_text()));
}

void SequenceExpander::emit(const std::vector<Item>& items, Lattice& lattice) const {
  for (const Item& item : items) {
    if (item.is_line) {
      for (uint64_t r = 0; r < item.repeat; ++r) emit(m_lines[item.index].items, lattice);
    } else {
      for (uint64_t r = 0; r < item.repeat; ++r) lattice.append(item.index);
    }
  }
}

}  // namespace ft
