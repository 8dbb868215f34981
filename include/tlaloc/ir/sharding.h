// Meshes (named axes over devices) and per-tensor shardings, stored in the IR the way Shardy
// writes them, so the StableHLO printer emits what XLA's partitioner reads:
//   sdy.mesh @mesh = <["data"=2, "model"=2]>                      (module level)
//   %arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}
//   %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"model"}]> : tensor<8x16xf32>
// A sharding lists, per tensor dimension, the mesh axes that split it (major first); a
// dimension with no axes is replicated over the mesh. See docs/SHARDING.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/ir/ir.h"

namespace tlaloc {

struct MeshAxis {
  std::string name;
  int64_t size = 1;
};

class Mesh {
 public:
  Mesh() = default;
  // Axes from "data=2,model=2" (spaces allowed). With num_devices > 0 the sizes must multiply
  // to it. Errors name the text and the offending axis.
  static StatusOr<Mesh> Parse(std::string_view text, int64_t num_devices = 0);
  // Checks names (identifiers, unique) and sizes (>= 1).
  static StatusOr<Mesh> Make(std::vector<MeshAxis> axes, int64_t num_devices = 0);
  // Shardy's mesh body: <["data"=2, "model"=2]>.
  static StatusOr<Mesh> FromSdy(std::string_view text);

  const std::vector<MeshAxis>& axes() const { return axes_; }
  int64_t num_devices() const;
  // Position of axis `name`, or -1.
  int AxisIndex(std::string_view name) const;
  // Device d's coordinate along each axis; the last axis varies fastest.
  std::vector<int64_t> Coordinates(int64_t device) const;
  std::string ToSdy() const;
  // "data=2,model=2"
  std::string ToString() const;

 private:
  std::vector<MeshAxis> axes_;
};

struct Sharding {
  std::string mesh = "mesh";                   // the sdy.mesh symbol
  std::vector<std::vector<std::string>> dims;  // per dimension, the axes splitting it
  std::vector<std::string> replicated;         // axes written as replicated={...}

  static Sharding Replicated(int64_t rank, std::string mesh = "mesh");
  // #sdy.sharding<@mesh, [{"data"}, {}]> (also takes the bare <@mesh, [...]> body).
  static StatusOr<Sharding> FromSdy(std::string_view text);

  // The rank matches, every axis exists in `mesh` and is used once, and every dimension
  // divides by the product of its axes; errors name the dimension and the axis.
  Status Check(const Mesh& mesh, const TensorType& type) const;
  // The shape each device holds.
  StatusOr<TensorType> LocalType(const Mesh& mesh, const TensorType& type) const;
  // "<@mesh, [{"data"}, {}]>" and "#sdy.sharding<...>".
  std::string ToSdyBody() const;
  std::string ToSdy() const { return "#sdy.sharding" + ToSdyBody(); }
  bool operator==(const Sharding& o) const = default;
};

// The attribute names used in the IR: function argument and result attributes hold
// "sdy.sharding"; the module's meshes live in its "sdy.meshes" attribute (a dictionary of
// name -> <[...]>), which the printer writes as sdy.mesh ops and the parser reads back.
inline constexpr char kShardingAttr[] = "sdy.sharding";
inline constexpr char kMeshesAttr[] = "sdy.meshes";

void AddMesh(Module& module, const std::string& name, const Mesh& mesh);
StatusOr<Mesh> FindMesh(const Module& module, const std::string& name);
void SetArgSharding(Function& fn, int i, const Sharding& sharding);
void SetResultSharding(Function& fn, int i, const Sharding& sharding);
// The sharding of an argument (result), nullopt when it has none.
StatusOr<std::optional<Sharding>> ArgSharding(const Function& fn, int i);
StatusOr<std::optional<Sharding>> ResultSharding(const Function& fn, int i);
// Checks every argument and result sharding of `fn` against its mesh and type.
Status CheckShardings(const Module& module, const Function& fn);

}  // namespace tlaloc
