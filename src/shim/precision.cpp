// Precision and algorithm knobs that tch does not expose: autocast with a
// chosen dtype on CPU or CUDA (tch's own autocast is fp16/CUDA only), TF32,
// determinism, and the channels-last memory format.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/autocast_mode.h>

#include "shim.h"

extern "C" {

// Enters (enabled=1) or leaves (enabled=0) autocast on this thread, as
// torch.autocast's __enter__/__exit__ do: the state is thread-local, and the
// cast cache is cleared when the outermost region is left.
char* gb_autocast(int cuda, int bf16, int enabled) {
  GB_TRY
  const auto dev = cuda ? at::kCUDA : at::kCPU;
  if (enabled) {
    at::autocast::set_autocast_dtype(dev, bf16 ? at::kBFloat16 : at::kHalf);
    at::autocast::set_autocast_enabled(dev, true);
    at::autocast::increment_nesting();
  } else {
    at::autocast::set_autocast_enabled(dev, false);
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  }
  GB_CATCH
}

// TF32 for cuBLAS matmuls and cuDNN convolutions.
char* gb_set_tf32(int on) {
  GB_TRY
  at::globalContext().setAllowTF32CuBLAS(on != 0);
  at::globalContext().setAllowTF32CuDNN(on != 0);
  GB_CATCH
}

// Deterministic algorithms (errors on ops that have none) and deterministic
// cuDNN with autotuning off.
char* gb_set_deterministic(int on) {
  GB_TRY
  at::globalContext().setDeterministicAlgorithms(on != 0, false);
  at::globalContext().setDeterministicCuDNN(on != 0);
  if (on) at::globalContext().setBenchmarkCuDNN(false);
  GB_CATCH
}

// Re-lays a 4-D tensor's data out as NHWC in place, keeping its identity
// (parameters stay the optimizer's parameters).
char* gb_channels_last_(void* t) {
  GB_TRY
  auto* x = static_cast<at::Tensor*>(t);
  if (x->dim() == 4) {
    at::NoGradGuard g;
    x->set_data(x->contiguous(at::MemoryFormat::ChannelsLast));
  }
  GB_CATCH
}

int gb_is_channels_last(void* t) {
  auto* x = static_cast<at::Tensor*>(t);
  return x->dim() == 4 && x->is_contiguous(at::MemoryFormat::ChannelsLast) ? 1 : 0;
}

// torch.amp.GradScaler's two fused steps: unscale every gradient in place
// and flag any non-finite value in found_inf (one kernel per device, no host
// sync), then grow or back off the scale on the device.
char* gb_amp_unscale(void** grads, size_t n, void* found_inf, void* inv_scale) {
  GB_TRY
  std::vector<at::Tensor> g;
  g.reserve(n);
  for (size_t i = 0; i < n; i++) g.push_back(*static_cast<at::Tensor*>(grads[i]));
  at::_amp_foreach_non_finite_check_and_unscale_(g, *static_cast<at::Tensor*>(found_inf),
                                                 *static_cast<at::Tensor*>(inv_scale));
  GB_CATCH
}

char* gb_amp_update_scale(void* scale, void* growth_tracker, void* found_inf, double growth, double backoff,
                          long interval) {
  GB_TRY
  at::_amp_update_scale_(*static_cast<at::Tensor*>(scale), *static_cast<at::Tensor*>(growth_tracker),
                         *static_cast<at::Tensor*>(found_inf), growth, backoff, interval);
  GB_CATCH
}

}  // extern "C"
