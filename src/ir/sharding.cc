#include "tlaloc/ir/sharding.h"

#include <algorithm>
#include <cctype>

namespace tlaloc {

namespace {

bool IsAxisName(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

// A character scanner over Shardy's attribute text.
class Scanner {
 public:
  Scanner(std::string_view text, std::string what) : text_(text), what_(std::move(what)) {}
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Optional(std::string_view token) {
    SkipSpace();
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }
  Status Expect(std::string_view token) {
    if (Optional(token)) return OkStatus();
    return Error("expected '" + std::string(token) + "'");
  }
  StatusOr<std::string> String() {
    SkipSpace();
    if (pos_ >= text_.size() || text_[pos_] != '"') return Error("expected a quoted axis name");
    size_t end = text_.find('"', pos_ + 1);
    if (end == std::string_view::npos) return Error("unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }
  StatusOr<std::string> Symbol() {
    SkipSpace();
    if (pos_ >= text_.size() || text_[pos_] != '@') return Error("expected a mesh symbol (@name)");
    size_t start = ++pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      ++pos_;
    if (pos_ == start) return Error("expected a mesh name after '@'");
    return std::string(text_.substr(start, pos_ - start));
  }
  StatusOr<int64_t> Integer() {
    SkipSpace();
    size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (pos_ == start || pos_ - start > 15) return Error("expected an axis size");
    return std::stoll(std::string(text_.substr(start, pos_ - start)));
  }
  Status End() {
    SkipSpace();
    return pos_ == text_.size() ? OkStatus() : Error("unexpected text");
  }
  Status Error(const std::string& message) const {
    return InvalidArgument(what_ + " '" + std::string(text_) + "': " + message + " at offset " +
                           std::to_string(pos_));
  }

 private:
  std::string_view text_;
  std::string what_;
  size_t pos_ = 0;
};

// `{"a", "b"}` into `axes`.
Status ReadAxisSet(Scanner& s, std::vector<std::string>& axes) {
  TL_RETURN_IF_ERROR(s.Expect("{"));
  if (s.Optional("}")) return OkStatus();
  do {
    if (s.Optional("?"))
      return s.Error("open dimensions ('?') are not supported; Tlaloc writes closed shardings");
    TL_ASSIGN_OR_RETURN(std::string a, s.String());
    if (s.Optional(":")) return s.Error("sub-axes are not supported");
    axes.push_back(std::move(a));
  } while (s.Optional(","));
  return s.Expect("}");
}

}  // namespace

// ---- Mesh -------------------------------------------------------------------------------------

StatusOr<Mesh> Mesh::Make(std::vector<MeshAxis> axes, int64_t num_devices) {
  Mesh m;
  std::string text;
  for (const MeshAxis& a : axes)
    text += (text.empty() ? "" : ",") + a.name + "=" + std::to_string(a.size);
  const std::string where = "mesh '" + text + "'";
  for (size_t i = 0; i < axes.size(); ++i) {
    if (!IsAxisName(axes[i].name))
      return InvalidArgument(where + ": axis name '" + axes[i].name +
                             "' is not an identifier (letters, digits, '_')");
    if (axes[i].size < 1)
      return InvalidArgument(where + ": axis '" + axes[i].name + "' has size " +
                             std::to_string(axes[i].size) + ", expected >= 1");
    for (size_t j = 0; j < i; ++j)
      if (axes[j].name == axes[i].name)
        return InvalidArgument(where + ": axis '" + axes[i].name + "' appears twice");
  }
  m.axes_ = std::move(axes);
  if (num_devices > 0 && m.num_devices() != num_devices)
    return InvalidArgument(where + ": the axis sizes multiply to " +
                           std::to_string(m.num_devices()) + ", the run has " +
                           std::to_string(num_devices) + " device(s)");
  return m;
}

StatusOr<Mesh> Mesh::Parse(std::string_view text, int64_t num_devices) {
  std::vector<MeshAxis> axes;
  const std::string where = "mesh '" + std::string(text) + "'";
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view part =
        text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    auto trim = [](std::string_view s) {
      while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
      while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
      return s;
    };
    part = trim(part);
    size_t eq = part.find('=');
    if (eq == std::string_view::npos)
      return InvalidArgument(where + ": expected NAME=SIZE, got '" + std::string(part) + "'");
    std::string name(trim(part.substr(0, eq)));
    std::string size(trim(part.substr(eq + 1)));
    if (size.empty() || size.size() > 9 ||
        !std::all_of(size.begin(), size.end(), [](char c) { return std::isdigit(c); }))
      return InvalidArgument(where + ": the size of axis '" + name + "' is '" + size +
                             "', expected a positive integer");
    axes.push_back({name, std::stoll(size)});
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  auto m = Make(std::move(axes), num_devices);
  if (!m.ok()) {
    std::string msg = m.status().message();
    return InvalidArgument(where + msg.substr(msg.find(':')));
  }
  return m;
}

StatusOr<Mesh> Mesh::FromSdy(std::string_view text) {
  Scanner s(text, "sdy mesh");
  std::vector<MeshAxis> axes;
  TL_RETURN_IF_ERROR(s.Expect("<"));
  TL_RETURN_IF_ERROR(s.Expect("["));
  if (!s.Optional("]")) {
    do {
      MeshAxis a;
      TL_ASSIGN_OR_RETURN(a.name, s.String());
      TL_RETURN_IF_ERROR(s.Expect("="));
      TL_ASSIGN_OR_RETURN(a.size, s.Integer());
      axes.push_back(std::move(a));
    } while (s.Optional(","));
    TL_RETURN_IF_ERROR(s.Expect("]"));
  }
  if (s.Optional(",")) return s.Error("device_ids are not supported");
  TL_RETURN_IF_ERROR(s.Expect(">"));
  TL_RETURN_IF_ERROR(s.End());
  return Make(std::move(axes));
}

int64_t Mesh::num_devices() const {
  int64_t n = 1;
  for (const MeshAxis& a : axes_) n *= a.size;
  return n;
}

int Mesh::AxisIndex(std::string_view name) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].name == name) return static_cast<int>(i);
  return -1;
}

std::vector<int64_t> Mesh::Coordinates(int64_t device) const {
  std::vector<int64_t> c(axes_.size());
  for (size_t i = axes_.size(); i-- > 0;) {
    c[i] = device % axes_[i].size;
    device /= axes_[i].size;
  }
  return c;
}

std::string Mesh::ToSdy() const {
  std::string s = "<[";
  for (size_t i = 0; i < axes_.size(); ++i)
    s += (i ? ", " : "") + Quote(axes_[i].name) + "=" + std::to_string(axes_[i].size);
  return s + "]>";
}

std::string Mesh::ToString() const {
  std::string s;
  for (size_t i = 0; i < axes_.size(); ++i)
    s += (i ? "," : "") + axes_[i].name + "=" + std::to_string(axes_[i].size);
  return s;
}

// ---- Sharding ---------------------------------------------------------------------------------

Sharding Sharding::Replicated(int64_t rank, std::string mesh) {
  Sharding s;
  s.mesh = std::move(mesh);
  s.dims.resize(static_cast<size_t>(rank));
  return s;
}

StatusOr<Sharding> Sharding::FromSdy(std::string_view text) {
  Scanner s(text, "sdy sharding");
  s.Optional("#sdy.sharding");
  Sharding out;
  out.dims.clear();
  TL_RETURN_IF_ERROR(s.Expect("<"));
  TL_ASSIGN_OR_RETURN(out.mesh, s.Symbol());
  TL_RETURN_IF_ERROR(s.Expect(","));
  TL_RETURN_IF_ERROR(s.Expect("["));
  if (!s.Optional("]")) {
    do {
      out.dims.emplace_back();
      TL_RETURN_IF_ERROR(ReadAxisSet(s, out.dims.back()));
      if (s.Optional("p")) return s.Error("priorities are not supported");
    } while (s.Optional(","));
    TL_RETURN_IF_ERROR(s.Expect("]"));
  }
  if (s.Optional(",")) {
    TL_RETURN_IF_ERROR(s.Expect("replicated"));
    TL_RETURN_IF_ERROR(s.Expect("="));
    TL_RETURN_IF_ERROR(ReadAxisSet(s, out.replicated));
  }
  TL_RETURN_IF_ERROR(s.Expect(">"));
  TL_RETURN_IF_ERROR(s.End());
  return out;
}

Status Sharding::Check(const Mesh& mesh, const TensorType& type) const {
  const std::string where = "sharding " + ToSdy() + " of " + type.ToString();
  if (static_cast<int64_t>(dims.size()) != type.rank())
    return InvalidArgument(where + ": it names " + std::to_string(dims.size()) +
                           " dimension(s), the tensor has " + std::to_string(type.rank()));
  std::vector<std::string> used;
  auto use = [&](const std::string& axis, const std::string& context) -> Status {
    if (mesh.AxisIndex(axis) < 0)
      return InvalidArgument(where + ": " + context + " names axis '" + axis + "', which mesh @" +
                             this->mesh + " (" + mesh.ToString() + ") does not have");
    if (std::find(used.begin(), used.end(), axis) != used.end())
      return InvalidArgument(where + ": axis '" + axis + "' is used twice");
    used.push_back(axis);
    return OkStatus();
  };
  for (size_t d = 0; d < dims.size(); ++d) {
    int64_t split = 1;
    for (const std::string& axis : dims[d]) {
      TL_RETURN_IF_ERROR(use(axis, "dimension " + std::to_string(d)));
      split *= mesh.axes()[mesh.AxisIndex(axis)].size;
      if (type.dims[d] % split != 0)
        return InvalidArgument(where + ": dimension " + std::to_string(d) + " (size " +
                               std::to_string(type.dims[d]) + ") does not divide by axis '" + axis +
                               "' (" + std::to_string(split) + " shard(s) in all)");
    }
  }
  for (const std::string& axis : replicated) TL_RETURN_IF_ERROR(use(axis, "replicated"));
  return OkStatus();
}

StatusOr<TensorType> Sharding::LocalType(const Mesh& mesh, const TensorType& type) const {
  TL_RETURN_IF_ERROR(Check(mesh, type));
  TensorType local = type;
  for (size_t d = 0; d < dims.size(); ++d)
    for (const std::string& axis : dims[d]) local.dims[d] /= mesh.axes()[mesh.AxisIndex(axis)].size;
  return local;
}

std::string Sharding::ToSdyBody() const {
  auto set = [](const std::vector<std::string>& axes) {
    std::string s = "{";
    for (size_t i = 0; i < axes.size(); ++i) s += (i ? ", " : "") + Quote(axes[i]);
    return s + "}";
  };
  std::string s = "<@" + mesh + ", [";
  for (size_t d = 0; d < dims.size(); ++d) s += (d ? ", " : "") + set(dims[d]);
  s += "]";
  if (!replicated.empty()) s += ", replicated=" + set(replicated);
  return s + ">";
}

// ---- In the IR --------------------------------------------------------------------------------

void AddMesh(Module& module, const std::string& name, const Mesh& mesh) {
  AttrDict meshes;
  if (const Attribute* a = FindAttr(module.attrs(), kMeshesAttr);
      a && a->kind() == Attribute::Kind::kDict)
    meshes = a->as_dict();
  meshes[name] = Attribute::Opaque(mesh.ToSdy());
  module.attrs()[kMeshesAttr] = Attribute::Dict(std::move(meshes));
}

StatusOr<Mesh> FindMesh(const Module& module, const std::string& name) {
  const Attribute* a = FindAttr(module.attrs(), kMeshesAttr);
  const Attribute* m =
      a && a->kind() == Attribute::Kind::kDict ? FindAttr(a->as_dict(), name) : nullptr;
  if (!m) return NotFound("the module has no mesh @" + name);
  return Mesh::FromSdy(m->as_string());
}

void SetArgSharding(Function& fn, int i, const Sharding& sharding) {
  fn.arg_attrs(i)[kShardingAttr] = Attribute::Opaque(sharding.ToSdy());
}

void SetResultSharding(Function& fn, int i, const Sharding& sharding) {
  fn.result_attrs(i)[kShardingAttr] = Attribute::Opaque(sharding.ToSdy());
}

namespace {
StatusOr<std::optional<Sharding>> ShardingIn(const AttrDict& attrs) {
  const Attribute* a = FindAttr(attrs, kShardingAttr);
  if (!a) return std::optional<Sharding>();
  TL_ASSIGN_OR_RETURN(Sharding s, Sharding::FromSdy(a->as_string()));
  return std::optional<Sharding>(std::move(s));
}
}  // namespace

StatusOr<std::optional<Sharding>> ArgSharding(const Function& fn, int i) {
  return ShardingIn(fn.arg_attrs(i));
}

StatusOr<std::optional<Sharding>> ResultSharding(const Function& fn, int i) {
  return ShardingIn(fn.result_attrs(i));
}

Status CheckShardings(const Module& module, const Function& fn) {
  auto check = [&](const AttrDict& attrs, const Type& type, const std::string& what) -> Status {
    TL_ASSIGN_OR_RETURN(auto s, ShardingIn(attrs));
    if (!s) return OkStatus();
    TL_ASSIGN_OR_RETURN(Mesh mesh, FindMesh(module, s->mesh));
    if (!type.is_tensor()) return InvalidArgument(what + " is not a tensor but has a sharding");
    Status st = s->Check(mesh, type.tensor);
    return st.ok() ? st : st.WithContext(what);
  };
  for (int i = 0; i < fn.num_arguments(); ++i)
    TL_RETURN_IF_ERROR(check(fn.arg_attrs(i), fn.argument_types()[i],
                             "argument " + std::to_string(i) + " of @" + fn.name()));
  for (size_t i = 0; i < fn.result_types().size(); ++i)
    TL_RETURN_IF_ERROR(check(fn.result_attrs(static_cast<int>(i)), fn.result_types()[i],
                             "result " + std::to_string(i) + " of @" + fn.name()));
  return OkStatus();
}

}  // namespace tlaloc
