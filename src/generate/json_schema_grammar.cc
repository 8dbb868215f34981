// JSON schemas (the subset json_constraint.h lists) compiled to the nodes the JSON automaton
// matches, and OpenAI's response_format read into a grammar.
#include <algorithm>
#include <map>
#include <set>

#include "tlaloc/generate/json_constraint.h"

namespace tlaloc::generate {

namespace {

using nlohmann::json;

constexpr int64_t kUnreachable = int64_t{1} << 40;

// The nodes every grammar starts with: "any value" and its parts.
enum FixedNode : int { kAnyValue, kAnyObject, kAnyArray, kAnyString, kAnyNumber, kAnyLiteral };

const std::set<std::string>& Annotations() {
  static const std::set<std::string> names = {"title",   "description", "default", "examples",
                                              "$schema", "$id",         "$comment"};
  return names;
}

const std::set<std::string>& Keywords() {
  static const std::set<std::string> names = {
      "type",  "properties", "required", "additionalProperties", "items", "enum", "const",
      "anyOf", "$ref",       "$defs",    "definitions"};
  return names;
}

std::string SupportedList() {
  std::string s;
  for (const auto& k : Keywords()) s += (s.empty() ? "" : ", ") + k;
  return s + " (and the annotations title, description, default, examples)";
}

// Pointer text for a key: "/" + the key with ~ and / escaped (RFC 6901).
std::string PointerPart(const std::string& key) {
  std::string out = "/";
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string At(const std::string& pointer) { return pointer.empty() ? "/" : pointer; }

}  // namespace

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& root) : root_(root) {
    auto& n = g_.nodes_;
    n.resize(6);
    n[kAnyValue].kind = JsonKind::kAnyOf;
    n[kAnyValue].options = {kAnyObject, kAnyArray, kAnyString, kAnyNumber, kAnyLiteral};
    n[kAnyObject].kind = JsonKind::kObject;
    n[kAnyObject].additional = kAnyValue;
    n[kAnyArray].kind = JsonKind::kArray;
    n[kAnyArray].items = kAnyValue;
    n[kAnyString].kind = JsonKind::kString;
    n[kAnyNumber].kind = JsonKind::kNumber;
    n[kAnyLiteral].kind = JsonKind::kLiterals;
    n[kAnyLiteral].literals = {"false", "null", "true"};
  }

  StatusOr<JsonGrammar> Compile(std::optional<int> root) {
    if (root) {
      g_.root_ = *root;
    } else {
      TL_ASSIGN_OR_RETURN(g_.root_, Node(root_, ""));
    }
    FlattenAnyOf();
    TL_RETURN_IF_ERROR(MinLengths());
    return std::move(g_);
  }

 private:
  Status Refuse(const std::string& pointer, const std::string& why) {
    return InvalidArgument("response_format: the schema at " + At(pointer) + " " + why);
  }

  int Add(JsonNode node) {
    g_.nodes_.push_back(std::move(node));
    return static_cast<int>(g_.nodes_.size()) - 1;
  }

  StatusOr<int> Node(const json& s, const std::string& pointer) {
    if (++depth_ > 64) return Refuse(pointer, "nests more than 64 schemas deep");
    auto result = NodeBody(s, pointer);
    --depth_;
    return result;
  }

  StatusOr<int> NodeBody(const json& s, const std::string& pointer) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return kAnyValue;
      return Refuse(pointer, "is false: no value matches it");
    }
    if (!s.is_object())
      return Refuse(pointer, "must be an object or a boolean, got " + std::string(s.type_name()));
    for (const auto& [key, value] : s.items())
      if (!Keywords().count(key) && !Annotations().count(key) && key != "strict")
        return Unimplemented("response_format: the schema keyword '" + key + "' (at " +
                             At(pointer + PointerPart(key)) +
                             ") is not supported; supported: " + SupportedList());
    if (auto ref = s.find("$ref"); ref != s.end()) {
      for (const auto& [key, value] : s.items())
        if (Keywords().count(key) && key != "$ref" && key != "$defs" && key != "definitions")
          return Refuse(pointer, "combines $ref with '" + key + "': not supported");
      return Ref(*ref, pointer + "/$ref");
    }
    if (auto any = s.find("anyOf"); any != s.end()) {
      for (const char* other : {"type", "properties", "items", "enum", "const"})
        if (s.contains(other))
          return Refuse(pointer, std::string("combines anyOf with '") + other +
                                     "': not supported (put it inside each alternative)");
      if (!any->is_array() || any->empty())
        return Refuse(pointer + "/anyOf", "must be a non-empty array of schemas");
      JsonNode node;
      node.kind = JsonKind::kAnyOf;
      for (size_t i = 0; i < any->size(); ++i) {
        TL_ASSIGN_OR_RETURN(int option, Node((*any)[i], pointer + "/anyOf/" + std::to_string(i)));
        node.options.push_back(option);
      }
      return Add(std::move(node));
    }
    if (s.contains("const") || s.contains("enum")) {
      JsonNode node;
      node.kind = JsonKind::kLiterals;
      std::vector<json> values;
      if (s.contains("const")) values.push_back(s["const"]);
      if (auto e = s.find("enum"); e != s.end()) {
        if (!e->is_array() || e->empty())
          return Refuse(pointer + "/enum", "must be a non-empty array");
        if (s.contains("const")) return Refuse(pointer, "has both const and enum");
        values.assign(e->begin(), e->end());
      }
      std::set<std::string> texts;
      for (const json& v : values)
        texts.insert(v.dump(-1, ' ', false, json::error_handler_t::strict));
      node.literals.assign(texts.begin(), texts.end());
      return Add(std::move(node));
    }
    auto type = s.find("type");
    if (type == s.end()) {
      if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties"))
        return Typed(s, "object", pointer);
      if (s.contains("items")) return Typed(s, "array", pointer);
      return kAnyValue;
    }
    if (type->is_string()) return Typed(s, type->get<std::string>(), pointer);
    if (!type->is_array() || type->empty())
      return Refuse(pointer + "/type", "must be a type name or a non-empty array of them");
    JsonNode node;
    node.kind = JsonKind::kAnyOf;
    for (const json& t : *type) {
      if (!t.is_string()) return Refuse(pointer + "/type", "must hold type names");
      TL_ASSIGN_OR_RETURN(int option, Typed(s, t.get<std::string>(), pointer));
      node.options.push_back(option);
    }
    return Add(std::move(node));
  }

  StatusOr<int> Typed(const json& s, const std::string& type, const std::string& pointer) {
    if (type == "string") return kAnyString;
    if (type == "number") return kAnyNumber;
    if (type == "integer") {
      JsonNode node;
      node.kind = JsonKind::kInteger;
      return Add(std::move(node));
    }
    if (type == "boolean" || type == "null") {
      JsonNode node;
      node.kind = JsonKind::kLiterals;
      node.literals = type == "null" ? std::vector<std::string>{"null"}
                                     : std::vector<std::string>{"false", "true"};
      return Add(std::move(node));
    }
    if (type == "array") {
      JsonNode node;
      node.kind = JsonKind::kArray;
      node.items = kAnyValue;
      if (auto it = s.find("items"); it != s.end()) {
        TL_ASSIGN_OR_RETURN(node.items, Node(*it, pointer + "/items"));
      }
      return Add(std::move(node));
    }
    if (type != "object")
      return Refuse(pointer + "/type", "names the type '" + type +
                                           "': expected object, array, string, number, integer, "
                                           "boolean or null");
    JsonNode node;
    node.kind = JsonKind::kObject;
    node.additional = kAnyValue;
    std::map<std::string, const json*> props;  // escaped name -> schema (sorted by escaped text)
    std::map<std::string, std::string> escaped_of;
    if (auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) return Refuse(pointer + "/properties", "must be an object");
      for (const auto& [name, schema] : it->items()) {
        const std::string text = json(name).dump();
        const std::string esc = text.substr(1, text.size() - 2);
        props[esc] = &schema;
        escaped_of[name] = esc;
      }
    }
    if (props.size() > 64) return Refuse(pointer + "/properties", "has more than 64 properties");
    for (const auto& [esc, schema] : props) {
      node.names.push_back(esc);
      node.values.push_back(-1);
    }
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) return Refuse(pointer + "/required", "must be an array of names");
      for (const json& r : *it) {
        if (!r.is_string()) return Refuse(pointer + "/required", "must hold strings");
        auto e = escaped_of.find(r.get<std::string>());
        if (e == escaped_of.end())
          return Refuse(pointer + "/required", "names '" + r.get<std::string>() +
                                                   "', which is not in 'properties' (required "
                                                   "names must be listed there)");
        const size_t i =
            std::find(node.names.begin(), node.names.end(), e->second) - node.names.begin();
        node.required |= uint64_t{1} << i;
      }
    }
    if (auto it = s.find("additionalProperties"); it != s.end()) {
      if (it->is_boolean()) {
        node.additional = it->get<bool>() ? kAnyValue : -1;
      } else {
        TL_ASSIGN_OR_RETURN(node.additional, Node(*it, pointer + "/additionalProperties"));
      }
    }
    const int index = Add(node);
    size_t i = 0;
    for (const auto& [esc, schema] : props) {
      std::string name;
      for (const auto& [raw, e] : escaped_of)
        if (e == esc) name = raw;
      TL_ASSIGN_OR_RETURN(int value, Node(*schema, pointer + "/properties" + PointerPart(name)));
      g_.nodes_[index].values[i++] = value;
    }
    return index;
  }

  StatusOr<int> Ref(const json& ref, const std::string& pointer) {
    if (!ref.is_string()) return Refuse(pointer, "must be a string");
    const std::string text = ref.get<std::string>();
    if (auto it = refs_.find(text); it != refs_.end()) return it->second;
    std::string section, name;
    for (const char* prefix : {"#/$defs/", "#/definitions/"})
      if (text.rfind(prefix, 0) == 0) {
        section = std::string(prefix).substr(2, std::string(prefix).size() - 3);
        name = text.substr(std::string(prefix).size());
      }
    if (section.empty() || name.find('/') != std::string::npos ||
        name.find('~') != std::string::npos)
      return Refuse(pointer, "is '" + text +
                                 "': only references to \"#/$defs/NAME\" or \"#/definitions/NAME\" "
                                 "are supported");
    auto defs = root_.find(section);
    if (defs == root_.end() || !defs->is_object() || !defs->contains(name))
      return Refuse(pointer, "is '" + text + "', which the schema does not define");
    // A placeholder anyOf of one option breaks cycles: recursive schemas refer to it.
    JsonNode holder;
    holder.kind = JsonKind::kAnyOf;
    const int index = Add(holder);
    refs_[text] = index;
    TL_ASSIGN_OR_RETURN(int target, Node((*defs)[name], "/" + section + PointerPart(name)));
    g_.nodes_[index].options = {target};
    return index;
  }

  // anyOf options that are anyOfs themselves are replaced by their options (cycles dropped), so
  // the automaton's expansion of an anyOf ends after one level.
  void FlattenAnyOf() {
    auto& nodes = g_.nodes_;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].kind != JsonKind::kAnyOf) continue;
      std::vector<int> out, stack(nodes[i].options.rbegin(), nodes[i].options.rend());
      std::set<int> visited = {static_cast<int>(i)};
      while (!stack.empty()) {
        const int o = stack.back();
        stack.pop_back();
        if (!visited.insert(o).second) continue;
        if (nodes[o].kind == JsonKind::kAnyOf) {
          stack.insert(stack.end(), nodes[o].options.rbegin(), nodes[o].options.rend());
        } else {
          out.push_back(o);
        }
      }
      nodes[i].options = std::move(out);
    }
  }

  // Bytes of each node's shortest value, to a fixed point (recursive schemas through $ref).
  Status MinLengths() {
    auto& nodes = g_.nodes_;
    for (auto& n : nodes) n.min_len = kUnreachable;
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& n : nodes) {
        int64_t len = kUnreachable;
        switch (n.kind) {
          case JsonKind::kString:
            len = 2;
            break;
          case JsonKind::kNumber:
          case JsonKind::kInteger:
            len = 1;
            break;
          case JsonKind::kArray:
            len = 2;
            break;
          case JsonKind::kLiterals:
            for (const auto& l : n.literals) len = std::min<int64_t>(len, l.size());
            break;
          case JsonKind::kAnyOf:
            for (int o : n.options) len = std::min(len, nodes[o].min_len);
            break;
          case JsonKind::kObject: {
            len = 2;
            int count = 0;
            for (size_t i = 0; i < n.names.size(); ++i)
              if (n.required >> i & 1) {
                len += static_cast<int64_t>(n.names[i].size()) + 3 + nodes[n.values[i]].min_len;
                ++count;
              }
            if (count > 1) len += count - 1;
            len = std::min(len, kUnreachable);
            break;
          }
        }
        if (len < n.min_len) {
          n.min_len = len;
          changed = true;
        }
      }
    }
    // Alternatives and other keys without a finite value are never chosen.
    for (auto& n : nodes) {
      std::erase_if(n.options, [&](int o) { return nodes[o].min_len >= kUnreachable; });
      if (n.additional >= 0 && nodes[n.additional].min_len >= kUnreachable) n.additional = -1;
    }
    if (nodes[g_.root_].min_len >= kUnreachable)
      return InvalidArgument(
          "response_format: the schema has no finite value (its required properties refer to "
          "themselves without end)");
    return OkStatus();
  }

  const json& root_;
  JsonGrammar g_;
  std::map<std::string, int> refs_;
  int depth_ = 0;
};

std::shared_ptr<const JsonGrammar> JsonGrammar::AnyObject() {
  static const std::shared_ptr<const JsonGrammar> any = [] {
    const json empty = json::object();
    SchemaCompiler c(empty);
    return std::make_shared<const JsonGrammar>(*c.Compile(kAnyObject));
  }();
  return any;
}

StatusOr<std::shared_ptr<const JsonGrammar>> JsonGrammar::FromSchema(const json& schema) {
  SchemaCompiler c(schema);
  TL_ASSIGN_OR_RETURN(JsonGrammar g, c.Compile(std::nullopt));
  return std::make_shared<const JsonGrammar>(std::move(g));
}

StatusOr<std::shared_ptr<const JsonGrammar>> GrammarOfResponseFormat(const json& format) {
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string())
    return InvalidArgument(
        "response_format must be an object with a string 'type' (text, json_object or "
        "json_schema)");
  const std::string type = format["type"].get<std::string>();
  if (type == "text") return std::shared_ptr<const JsonGrammar>();
  if (type == "json_object") return JsonGrammar::AnyObject();
  if (type != "json_schema")
    return InvalidArgument("response_format.type is '" + type +
                           "': expected text, json_object or json_schema");
  auto js = format.find("json_schema");
  if (js == format.end() || !js->is_object())
    return InvalidArgument(
        "response_format.json_schema must be an object {\"name\", \"schema\", \"strict\"}");
  auto schema = js->find("schema");
  if (schema == js->end() || schema->is_null()) return JsonGrammar::FromSchema(json::object());
  return JsonGrammar::FromSchema(*schema);
}

}  // namespace tlaloc::generate
