// The tpu_custom_call a kernelized layer becomes, and adapters for Mosaic kernels whose operands
// are not the layer's (jax's paged attention): internal to src/kernels.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tlaloc/ir/ir.h"
#include "tlaloc/kernels/repository.h"

namespace tlaloc::kernels {

// operand_layouts / result_layouts for a tpu_custom_call: each value major-to-minor, as jax
// writes them.
Attribute MajorToMinorLayouts(const std::vector<Type>& types);

// The attributes of a tpu_custom_call carrying `payload` for `kernel_layer`.
AttrDict TpuCustomCallAttrs(const std::string& payload, const std::string& kernel_layer,
                            const std::vector<Type>& operand_types,
                            const std::vector<Type>& result_types);

// Whether `p.adapter` is one kernelize knows, and its declared types fit it (at Create, before any
// program is touched).
Status CheckTpuAdapter(const LayerSpec& layer, const TpuPayload& p, const std::string& where);

// Adds private function `fn_name` to `module`: the call site's operands (`site_in`) -> the
// layer's results (`site_out`, the first one or all), computed by the adapter's mapping onto the
// kernel's operands, the tpu_custom_call, and the mapping of its results back.
Status AddTpuAdapterFunction(Module& module, const std::string& fn_name, const TpuPayload& p,
                             const std::string& payload_text, const std::string& kernel_layer,
                             const std::vector<Type>& site_in, const std::vector<Type>& site_out,
                             const std::map<std::string, double>& attrs);

}  // namespace tlaloc::kernels
