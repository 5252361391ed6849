// Loading a lattice file in any format fusetrack reads (fusetrack/lattice_file.h), one way: read
// the text once, tell the format apart by the content, let the importer write a fusetrack
// document, build the Lattice with the one parser (lattice_from_json). The JSON reader lives
// here, with the other readers of files, so that core/lattice.cpp is entered once, at the end.
#include "fusetrack/lattice_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fusetrack/error.h"

namespace ft {

using json = nlohmann::ordered_json;

namespace {

/// Builds an ordered_json document from the parser's SAX events in time linear in the input.
/// nlohmann's own DOM builder inserts each object key with ordered_map::operator[], which searches
/// the object's vector of keys: quadratic in the size of an object (a 10^5-element "elements" takes
/// tens of seconds). Here keys are appended, and each object is checked for repeated keys once,
/// when it is complete, with a hash set (a repeated key is an error: JSON leaves its meaning open,
/// and nlohmann would silently keep the last value).
class JsonBuilder {
 public:
  JsonBuilder(json& root, const std::string& file) : m_root(root), m_file(file) {}

  bool null() { return value(nullptr); }
  bool boolean(bool v) { return value(v); }
  bool number_integer(json::number_integer_t v) { return value(v); }
  bool number_unsigned(json::number_unsigned_t v) { return value(v); }
  bool number_float(json::number_float_t v, const json::string_t& /*text*/) { return value(v); }
  bool string(json::string_t& v) { return value(std::move(v)); }
  bool binary(json::binary_t& v) { return value(json::binary(std::move(v))); }
  bool start_object(std::size_t /*size*/) {
    m_stack.push_back(place(json(json::value_t::object)));
    return true;
  }
  bool key(json::string_t& k) {
    auto& items = static_cast<json::object_t::Container&>(m_stack.back()->get_ref<json::object_t&>());
    items.emplace_back(std::move(k), nullptr);
    m_member = &items.back().second;
    return true;
  }
  bool end_object() {
    check_unique_keys();
    m_stack.pop_back();
    return true;
  }
  bool start_array(std::size_t /*size*/) {
    m_stack.push_back(place(json(json::value_t::array)));
    return true;
  }
  bool end_array() {
    m_stack.pop_back();
    return true;
  }
  template <class Exception>
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/, const Exception& ex) {
    throw ex;  // the concrete type (parse_error, out_of_range) is what parse_json_file catches
  }

 private:
  bool value(json&& v) {
    place(std::move(v));
    return true;
  }
  template <class V>
  bool value(V&& v) {
    place(json(std::forward<V>(v)));
    return true;
  }
  json* place(json&& v) {
    if (m_stack.empty()) {
      m_root = std::move(v);
      return &m_root;
    }
    json& parent = *m_stack.back();
    if (parent.is_array()) {
      auto& a = parent.get_ref<json::array_t&>();
      a.push_back(std::move(v));
      return &a.back();
    }
    *m_member = std::move(v);
    return m_member;
  }

  void check_unique_keys() const {
    const auto& items = static_cast<const json::object_t::Container&>(m_stack.back()->get_ref<const json::object_t&>());
    const std::string* repeated = nullptr;
    if (items.size() <= 16) {
      for (size_t i = 1; i < items.size() && !repeated; ++i)
        for (size_t j = 0; j < i; ++j)
          if (items[i].first == items[j].first) {
            repeated = &items[i].first;
            break;
          }
    } else {
      // Open addressing over item indices (no allocation per key, unlike std::unordered_set).
      size_t n = 32;
      while (n < 2 * items.size()) n *= 2;
      std::vector<uint32_t> slots(n, 0);  // item index + 1; 0 when empty
      const size_t mask = n - 1;
      for (size_t k = 0; k < items.size() && !repeated; ++k) {
        for (size_t i = std::hash<std::string_view>{}(items[k].first) & mask;; i = (i + 1) & mask) {
          if (!slots[i]) {
            slots[i] = static_cast<uint32_t>(k + 1);
            break;
          }
          if (items[slots[i] - 1].first == items[k].first) {
            repeated = &items[k].first;
            break;
          }
        }
      }
    }
    if (!repeated) return;
    // The path of the object: the key (or index) of each open container in its parent.
    std::string path;
    for (size_t level = 1; level < m_stack.size(); ++level) {
      const json& parent = *m_stack[level - 1];
      if (parent.is_array())
        path += fmt::format("[{}]", parent.size() - 1);
      else
        path += (path.empty() ? "" : ".") +
                static_cast<const json::object_t::Container&>(parent.get_ref<const json::object_t&>()).back().first;
    }
    InputLocation where{m_file};
    if (path == "elements") {
      where.element_name = *repeated;
      throw InputError(where, "element name is defined twice (a JSON object's keys must be unique)");
    }
    where.field = path.empty() ? *repeated : path + "." + *repeated;
    throw InputError(where, fmt::format("key '{}' appears twice in {} (a JSON object's keys must be unique)", *repeated,
                                        path.empty() ? "the top-level object" : "'" + path + "'"));
  }

  json& m_root;
  const std::string& m_file;
  std::vector<json*> m_stack;  // open objects and arrays
  json* m_member = nullptr;    // the value slot of the last key of the innermost object
};

/// The whole file as text (one read; a stream when the size is unknown).
std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(InputLocation{path}, "cannot open file");
  std::string text;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size > 0) {
    text.resize(static_cast<size_t>(size));
    in.read(text.data(), size);
    text.resize(static_cast<size_t>(in.gcount()));
  } else {  // not seekable: read as a stream
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  return text;
}

}  // namespace

json parse_json_text(const std::string& text, const std::string& path) {
  try {
    json doc;
    JsonBuilder builder(doc, path);
    json::sax_parse(text, &builder);
    return doc;
  } catch (const json::out_of_range& e) {
    // A number literal that does not fit a double (e.g. 1e999): not finite. Locate it to name
    // the field and the element that hold it.
    const std::string msg = e.what();
    const size_t q1 = msg.find('\''), q2 = msg.rfind('\'');
    const std::string token = (q1 != std::string::npos && q2 > q1) ? msg.substr(q1 + 1, q2 - q1 - 1) : "";
    InputLocation where{path};
    const size_t at = token.empty() ? std::string::npos : text.find(token);
    if (at == std::string::npos) throw InputError(where, std::string("invalid number: ") + msg);
    auto key_before = [&](size_t pos) {
      const size_t colon = text.rfind(':', pos);
      const size_t close = colon == std::string::npos ? colon : text.rfind('"', colon);
      const size_t open = close == std::string::npos || close == 0 ? std::string::npos : text.rfind('"', close - 1);
      return open == std::string::npos ? std::string() : text.substr(open + 1, close - open - 1);
    };
    where.field = key_before(at);
    // The enclosing object's key is the element name (for definitions in "elements").
    int depth = 0;
    for (size_t k = at; k-- > 0;) {
      if (text[k] == '}' || text[k] == ']') ++depth;
      if (text[k] == '{' || text[k] == '[') {
        if (depth == 0) {
          where.element_name = key_before(k);
          break;
        }
        --depth;
      }
    }
    size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
    throw InputError(where, fmt::format("value {} at line {} is not a finite number", token, line));
  } catch (const json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character.
    size_t line = 1, column = 1;
    const size_t end = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    for (size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string what = e.what();
    if (auto pos = what.find("syntax error"); pos != std::string::npos) what = what.substr(pos);
    throw InputError(InputLocation{path}, fmt::format("invalid JSON at line {}, column {}: {}", line, column, what));
  }
}

json parse_json_file(const std::string& path) { return parse_json_text(read_text_file(path), path); }

bool looks_like_json(const std::string& text) {
  // A JSON document starts with '{'; a trackcpp / AT flat file with header lines or fam_name.
  const size_t first = text.find_first_not_of(" \t\r\n");
  return (first != std::string::npos && text[first] == '{') || !is_trackcpp_flat_file(text);
}

LatticeDocument read_lattice_document(const std::string& path, const LatticeFileOptions& options) {
  return lattice_document_from_text(read_text_file(path), path, options);
}

LatticeDocument lattice_document_from_text(const std::string& text, const std::string& path,
                                           const LatticeFileOptions& options) {
  LatticeDocument result;
  if (!looks_like_json(text)) {
    result.format = LatticeFileFormat::trackcpp_flat_file;
    result.document = trackcpp_to_fusetrack(text, path, options.trackcpp);
    std::istringstream lines(text);
    for (std::string line, word; std::getline(lines, line);)
      if (std::istringstream(line) >> word && word == "fam_name") ++result.source_elements;
    return result;
  }
  json doc = parse_json_text(text, path);
  if (!is_xsuite_line(doc)) {
    result.document = std::move(doc);
    return result;
  }
  result.format = LatticeFileFormat::xsuite_line;
  const json& names = doc.contains("element_names") ? doc.at("element_names") : doc.at("line").at("element_names");
  result.source_elements = names.is_array() ? names.size() : 0;
  result.document = xsuite_to_fusetrack(doc, path, options.xsuite);
  return result;
}

Lattice load_lattice(const std::string& path, ElementRegistry& registry, const LatticeFileOptions& options) {
  const LatticeDocument lattice_document = read_lattice_document(path, options);
  return lattice_from_json(lattice_document.document, path, registry);
}

Lattice load_lattice(const std::string& path, ElementRegistry& registry) {
  return load_lattice(path, registry, LatticeFileOptions{});
}

}  // namespace ft
