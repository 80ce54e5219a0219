// The SGD step over every parameter at once, as torch.optim.SGD does with
// foreach=True or fused=True; tch wraps neither the _foreach_* ops nor
// _fused_sgd_. The arithmetic is torch.optim.SGD's (no dampening, no
// Nesterov): d = grad + wd * p; buf = d on the first step, else
// momentum * buf + d; p -= lr * buf.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <stdexcept>
#include <vector>

#include "shim.h"

extern "C" {

// impl 1: _foreach_* ops (a few multi-tensor kernels); impl 2: _fused_sgd_
// (one). params and bufs: n tensors each, bufs zero-filled by the caller in
// the parameters' shapes; the gradients are the parameters' own. A
// parameter without a gradient is skipped, as torch.optim does.
char* gb_sgd_step(int impl, void* const* params, void* const* bufs, size_t n, double lr, double momentum,
                  double weight_decay, int first_step) {
  GB_TRY
  if ((params == nullptr || bufs == nullptr) && n > 0) throw std::invalid_argument("gb_sgd_step: null argument");
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> ps, gs, bs;
  ps.reserve(n);
  gs.reserve(n);
  bs.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const auto& p = *static_cast<const at::Tensor*>(params[i]);
    const auto& g = p.grad();
    if (!g.defined()) continue;
    ps.push_back(p);
    gs.push_back(g);
    bs.push_back(*static_cast<const at::Tensor*>(bufs[i]));
  }
  if (ps.empty()) return nullptr;
  const bool first = first_step != 0;
  if (impl == 2) {
    at::_fused_sgd_(ps, gs, bs, weight_decay, momentum, lr, /*dampening=*/0.0, /*nesterov=*/false,
                    /*maximize=*/false, first);
    return nullptr;
  }
  if (impl != 1) throw std::invalid_argument("gb_sgd_step: impl is 1 (foreach) or 2 (fused)");
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
