// A small JSON Schema checker for tool arguments: the subset tool schemas
// use. Unknown keywords are ignored (permissive), so a richer schema never
// makes a valid call fail.
#include <string>

#include "agentloop/tool.h"

namespace agentloop {
namespace {

std::string TypeOf(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number_float()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

bool TypeMatches(const Json& v, const std::string& type) {
  if (type == "number") return v.is_number();
  if (type == "integer") {
    if (v.is_number_integer() || v.is_number_unsigned()) return true;
    if (v.is_number_float()) {
      double d = v.get<double>();
      return d == static_cast<double>(static_cast<int64_t>(d));
    }
    return false;
  }
  return TypeOf(v) == type;
}

std::string Where(const std::string& path) { return path.empty() ? "arguments" : path; }

Status Check(const Json& v, const Json& schema, const std::string& path) {
  if (!schema.is_object()) return Status::Ok();
  if (auto t = schema.find("type"); t != schema.end()) {
    bool ok = false;
    std::string expected;
    if (t->is_string()) {
      expected = t->get<std::string>();
      ok = TypeMatches(v, expected);
    } else if (t->is_array()) {
      for (const auto& one : *t) {
        if (!one.is_string()) continue;
        if (!expected.empty()) expected += " or ";
        expected += one.get<std::string>();
        ok = ok || TypeMatches(v, one.get<std::string>());
      }
    } else {
      ok = true;
    }
    if (!ok) return InvalidArgument(Where(path) + ": expected " + expected + ", got " + TypeOf(v));
  }
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
    bool found = false;
    for (const auto& allowed : *e) found = found || allowed == v;
    if (!found) return InvalidArgument(Where(path) + ": must be one of " + e->dump());
  }
  if (v.is_string()) {
    auto len = static_cast<int64_t>(v.get_ref<const std::string&>().size());
    if (auto m = schema.find("minLength");
        m != schema.end() && m->is_number() && len < m->get<int64_t>())
      return InvalidArgument(Where(path) + ": shorter than " + m->dump() + " characters");
    if (auto m = schema.find("maxLength");
        m != schema.end() && m->is_number() && len > m->get<int64_t>())
      return InvalidArgument(Where(path) + ": longer than " + m->dump() + " characters");
  }
  if (v.is_number()) {
    double d = v.get<double>();
    if (auto m = schema.find("minimum");
        m != schema.end() && m->is_number() && d < m->get<double>())
      return InvalidArgument(Where(path) + ": must be >= " + m->dump());
    if (auto m = schema.find("maximum");
        m != schema.end() && m->is_number() && d > m->get<double>())
      return InvalidArgument(Where(path) + ": must be <= " + m->dump());
  }
  if (v.is_object()) {
    const Json* props = nullptr;
    if (auto p = schema.find("properties"); p != schema.end() && p->is_object()) props = &*p;
    if (auto r = schema.find("required"); r != schema.end() && r->is_array()) {
      for (const auto& name : *r) {
        if (name.is_string() && !v.contains(name.get<std::string>())) {
          std::string p =
              path.empty() ? name.get<std::string>() : path + "." + name.get<std::string>();
          return InvalidArgument(p + ": required field is missing");
        }
      }
    }
    bool closed = false;
    if (auto a = schema.find("additionalProperties"); a != schema.end() && a->is_boolean())
      closed = !a->get<bool>();
    for (auto it = v.begin(); it != v.end(); ++it) {
      std::string p = path.empty() ? it.key() : path + "." + it.key();
      if (props != nullptr && props->contains(it.key())) {
        AL_RETURN_IF_ERROR(Check(it.value(), (*props)[it.key()], p));
      } else if (closed) {
        return InvalidArgument(p + ": unknown field");
      }
    }
  }
  if (v.is_array()) {
    if (auto items = schema.find("items"); items != schema.end() && items->is_object()) {
      for (size_t i = 0; i < v.size(); ++i) {
        AL_RETURN_IF_ERROR(Check(v[i], *items, Where(path) + "[" + std::to_string(i) + "]"));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateAgainstSchema(const Json& input, const Json& schema) {
  return Check(input, schema, "");
}

}  // namespace agentloop
