// The SGD and AdamW steps over every parameter at once, as torch.optim does
// with foreach=True or fused=True; tch wraps neither the _foreach_* ops nor
// the _fused_* kernels. SGD's arithmetic is torch.optim.SGD's (no dampening,
// no Nesterov): d = grad + wd * p; buf = d on the first step, else
// momentum * buf + d; p -= lr * buf. AdamW's is torch.optim.AdamW's.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <vector>

#include "shim.h"

namespace {

// The parameters that have a gradient, their gradients, and the same entries
// of each list of per-parameter state (n tensors each): torch.optim skips a
// parameter without a gradient, and so do both steps here.
struct WithGrads {
  std::vector<at::Tensor> params, grads;
  std::vector<std::vector<at::Tensor>> state;
};

WithGrads with_grads(void* const* params, size_t n, std::initializer_list<void* const*> state) {
  WithGrads w;
  w.state.resize(state.size());
  for (size_t i = 0; i < n; ++i) {
    const auto& p = *static_cast<const at::Tensor*>(params[i]);
    const auto& g = p.grad();
    if (!g.defined()) continue;
    w.params.push_back(p);
    w.grads.push_back(g);
    size_t k = 0;
    for (void* const* list : state) w.state[k++].push_back(*static_cast<const at::Tensor*>(list[i]));
  }
  return w;
}

}  // namespace

extern "C" {

// impl 1: _foreach_* ops (a few multi-tensor kernels); impl 2: _fused_sgd_
// (one). params and bufs: n tensors each, bufs zero-filled by the caller in
// the parameters' shapes; the gradients are the parameters' own. A
// parameter without a gradient is skipped, as torch.optim does.
// found_inf (may be null; fused only): a one-element float tensor on the
// parameters' device; where it is non-zero the kernel leaves everything as
// it was, so fp16's skipped step needs no host sync (`--cuda-graphs`).
char* gb_sgd_step(int impl, void* const* params, void* const* bufs, size_t n, double lr, double momentum,
                  double weight_decay, int first_step, void* found_inf) {
  GB_TRY
  if ((params == nullptr || bufs == nullptr) && n > 0) throw std::invalid_argument("gb_sgd_step: null argument");
  at::NoGradGuard no_grad;
  auto w = with_grads(params, n, {bufs});
  auto &ps = w.params, &gs = w.grads, &bs = w.state[0];
  if (ps.empty()) return nullptr;
  const bool first = first_step != 0;
  std::optional<at::Tensor> inf;
  if (found_inf != nullptr) inf = *static_cast<const at::Tensor*>(found_inf);
  if (impl == 2) {
    at::_fused_sgd_(ps, gs, bs, weight_decay, momentum, lr, /*dampening=*/0.0, /*nesterov=*/false,
                    /*maximize=*/false, first, std::nullopt, inf);
    return nullptr;
  }
  if (impl != 1) throw std::invalid_argument("gb_sgd_step: impl is 1 (foreach) or 2 (fused)");
  if (inf) throw std::invalid_argument("gb_sgd_step: a device-side skip (found_inf) needs the fused kernel");
  std::vector<at::Tensor> d = weight_decay != 0.0 ? at::_foreach_add(gs, ps, weight_decay) : gs;
  if (momentum != 0.0) {
    if (first) {
      at::_foreach_copy_(bs, d);
    } else {
      at::_foreach_mul_(bs, momentum);
      at::_foreach_add_(bs, d);
    }
    at::_foreach_add_(ps, bs, -lr);
  } else {
    at::_foreach_add_(ps, d, -lr);
  }
  GB_CATCH
}

// AdamW, torch.optim.AdamW's arithmetic without amsgrad: p *= 1 - lr * wd;
// m = lerp(m, g, 1 - beta1); v = beta2 * v + (1 - beta2) * g * g;
// p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
// impl 1: _foreach_* ops, t = `step` (already counted for this step);
// impl 2: _fused_adamw_, which counts each parameter's `steps` scalar
// (float, on the parameter's device) itself after the caller's increment, as
// torch.optim does. A parameter without a gradient is skipped. found_inf:
// as for gb_sgd_step (fused only); a skipped step's counts are taken back,
// as torch.optim's fused AdamW does.
char* gb_adamw_step(int impl, void* const* params, void* const* exp_avgs, void* const* exp_avg_sqs,
                    void* const* steps, size_t n, double lr, double beta1, double beta2, double weight_decay,
                    double eps, int64_t step, void* found_inf) {
  GB_TRY
  if ((params == nullptr || exp_avgs == nullptr || exp_avg_sqs == nullptr || steps == nullptr) && n > 0)
    throw std::invalid_argument("gb_adamw_step: null argument");
  at::NoGradGuard no_grad;
  auto w = with_grads(params, n, {exp_avgs, exp_avg_sqs, steps});
  auto &ps = w.params, &gs = w.grads, &ms = w.state[0], &vs = w.state[1], &ts = w.state[2];
  if (ps.empty()) return nullptr;
  std::optional<at::Tensor> inf;
  if (found_inf != nullptr) inf = *static_cast<const at::Tensor*>(found_inf);
  if (inf && impl != 2) throw std::invalid_argument("gb_adamw_step: a device-side skip (found_inf) needs the fused kernel");
  at::_foreach_add_(ts, 1.0);
  if (impl == 2) {
    at::_fused_adamw_(ps, gs, ms, vs, std::vector<at::Tensor>{}, ts, lr, beta1, beta2, weight_decay, eps,
                      /*amsgrad=*/false, /*maximize=*/false, std::nullopt, inf);
    if (inf) at::_foreach_sub_(ts, inf->reshape({}));
    return nullptr;
  }
  if (impl != 1) throw std::invalid_argument("gb_adamw_step: impl is 1 (foreach) or 2 (fused)");
  if (step < 1) throw std::invalid_argument("gb_adamw_step: step counts from 1");
  if (weight_decay != 0.0) at::_foreach_mul_(ps, 1.0 - lr * weight_decay);
  at::_foreach_lerp_(ms, gs, 1.0 - beta1);
  at::_foreach_mul_(vs, beta2);
  at::_foreach_addcmul_(vs, gs, gs, 1.0 - beta2);
  const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  auto denom = at::_foreach_sqrt(vs);
  at::_foreach_div_(denom, std::sqrt(bc2));
  at::_foreach_add_(denom, eps);
  at::_foreach_addcdiv_(ps, ms, denom, -lr / bc1);
  GB_CATCH
}

// Every gradient of the n parameters dropped (set to None), as
// optimizer.zero_grad() does by default in PyTorch and in libtorch's C++
// optimizers: the next backward writes fresh gradients, no memset launched.
// (ddp zeroes its bucket views in place instead: dist::zero_grads_in_place.)
char* gb_zero_grads(void* const* params, size_t n) {
  GB_TRY
  if (params == nullptr && n > 0) throw std::invalid_argument("gb_zero_grads: null argument");
  for (size_t i = 0; i < n; ++i) static_cast<at::Tensor*>(params[i])->mutable_grad() = at::Tensor();
  GB_CATCH
}

}  // extern "C"
