// The globals a chat template sees besides its context, as transformers sets them: range,
// namespace (mutable attributes, none starting with '_'), dict, raise_exception(msg) and
// strftime_now(fmt) (local time, as datetime.now()).
#include <cmath>
#include <ctime>

#include "jinja_internal.h"

namespace tlaloc::jinja {

namespace {

bool ToIndex(const Value& v, int64_t* out) {
  if (v.kind() != Value::kInt && v.kind() != Value::kBool) return false;
  *out = v.as_int();
  return true;
}

}  // namespace

StatusOr<Value> GlobalValue(const std::string& name) {
  if (name == "range") {
    return Value::MakeCallable("range", [](Renderer& r, CallArgs& a) -> StatusOr<Value> {
      int64_t v[3] = {0, 0, 1};
      if (a.pos.empty() || a.pos.size() > 3)
        return InvalidArgument("range expects 1 to 3 integers");
      for (size_t i = 0; i < a.pos.size(); ++i) {
        if (!ToIndex(a.pos[i], &v[a.pos.size() == 1 ? 1 : i]))
          return InvalidArgument("range expects integers, found " + a.pos[i].TypeName());
      }
      if (v[2] == 0) return InvalidArgument("range() arg 3 must not be zero");
      const double count = std::max(0.0, std::ceil((static_cast<double>(v[1]) - v[0]) / v[2]));
      if (count > static_cast<double>(r.limits().max_loop_iterations)) return r.CountIterations(-1);
      TL_RETURN_IF_ERROR(r.CountIterations(static_cast<int64_t>(count)));
      List out;
      for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2])
        out.push_back(Value::Int(i));
      return Value::MakeList(std::move(out));
    });
  }
  if (name == "namespace" || name == "dict") {
    const bool ns = name == "namespace";
    return Value::MakeCallable(name, [ns](Renderer& r, CallArgs& a) -> StatusOr<Value> {
      Dict d;
      for (const Value& p : a.pos) {
        if (!p.is_dict()) return InvalidArgument("namespace()/dict() takes a mapping or keywords");
        for (const auto& kv : p.dict()) d.push_back(kv);
      }
      for (const auto& kv : a.kw) {
        if (ns && !kv.first.empty() && kv.first[0] == '_')
          return InvalidArgument("a namespace attribute cannot start with '_': " + kv.first);
        d.push_back(kv);
      }
      Value v = Value::MakeDict(std::move(d), ns);
      // Namespaces are the one mutable object, so every reference cycle runs through one;
      // RenderProgram empties them all at the end.
      if (ns) r.namespaces_.push_back(v);
      return v;
    });
  }
  if (name == "raise_exception") {
    return Value::MakeCallable(name, [](Renderer&, CallArgs& a) -> StatusOr<Value> {
      std::string msg = a.pos.empty() ? "" : a.pos[0].ToString();
      return InvalidArgument("raise_exception: " + msg);
    });
  }
  if (name == "strftime_now") {
    return Value::MakeCallable(name, [](Renderer&, CallArgs& a) -> StatusOr<Value> {
      if (a.pos.empty() || !a.pos[0].is_string())
        return InvalidArgument("strftime_now expects a format string");
      std::time_t now = std::time(nullptr);
      std::tm tm{};
      localtime_r(&now, &tm);
      char buf[512];
      size_t n = std::strftime(buf, sizeof(buf), a.pos[0].str().c_str(), &tm);
      return Value::String(std::string(buf, n));
    });
  }
  return Value::Undefined("'" + name + "' is undefined");
}

}  // namespace tlaloc::jinja
