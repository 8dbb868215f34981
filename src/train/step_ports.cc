// Training programs' ports (see step_ports.h).
#include "tlaloc/train/step_ports.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace tlaloc::train {

std::string_view PortName(Port port) {
  switch (port) {
    case Port::kParams:
      return "params";
    case Port::kGrads:
      return "grads";
    case Port::kM:
      return "m";
    case Port::kV:
      return "v";
    case Port::kStep:
      return "step";
    case Port::kInputIds:
      return "input_ids";
    case Port::kLabels:
      return "labels";
    case Port::kLoss:
      return "loss";
    case Port::kTokens:
      return "tokens";
    case Port::kGradNorm:
      return "grad_norm";
    case Port::kLr:
      return "lr";
  }
  return "?";
}

bool IsPerWeight(Port port) {
  return port == Port::kParams || port == Port::kGrads || port == Port::kM || port == Port::kV;
}

PortList::PortList(std::initializer_list<Port> order, size_t weights)
    : order_(order), weights_(weights) {
  for (Port p : order_) {
    first_.push_back(size_);
    size_ += IsPerWeight(p) ? static_cast<int>(weights_) : 1;
  }
}

int PortList::operator()(Port port, size_t i) const {
  auto it = std::find(order_.begin(), order_.end(), port);
  // A port the program does not have, or a weight past the end, is a bug in the caller.
  if (it == order_.end() || i >= (IsPerWeight(port) ? weights_ : 1)) {
    std::fprintf(stderr, "tlaloc: train program port %s[%zu] out of range\n",
                 std::string(PortName(port)).c_str(), i);
    std::abort();
  }
  return first_[it - order_.begin()] + static_cast<int>(i);
}

bool PortList::has(Port port) const {
  return std::find(order_.begin(), order_.end(), port) != order_.end();
}

std::vector<std::pair<Port, size_t>> PortList::Each() const {
  std::vector<std::pair<Port, size_t>> out;
  for (Port p : order_)
    for (size_t i = 0; i < (IsPerWeight(p) ? weights_ : 1); ++i) out.emplace_back(p, i);
  return out;
}

StepPorts StepPorts::TrainStep(size_t n) {
  using enum Port;
  return {PortList({kParams, kM, kV, kStep, kInputIds, kLabels}, n),
          PortList({kParams, kM, kV, kLoss, kTokens, kGradNorm, kLr}, n)};
}

StepPorts StepPorts::Grads(size_t n) {
  using enum Port;
  return {PortList({kParams, kInputIds, kLabels}, n), PortList({kLoss, kTokens, kGrads}, n)};
}

StepPorts StepPorts::Eval(size_t n) {
  using enum Port;
  return {PortList({kParams, kInputIds, kLabels}, n), PortList({kLoss, kTokens}, n)};
}

StepPorts StepPorts::AdamW(size_t n) {
  using enum Port;
  return {PortList({kParams, kGrads, kM, kV, kStep}, n),
          PortList({kParams, kM, kV, kGradNorm, kLr}, n)};
}

void StepPorts::SetAliases(Function& fn) const {
  for (auto [port, i] : args.Each()) {
    if (!IsPerWeight(port) || !results.has(port)) continue;
    fn.arg_attrs(args(port, i))["tf.aliasing_output"] =
        Attribute::Int(results(port, i), ElementType::kS32);
  }
}

}  // namespace tlaloc::train
