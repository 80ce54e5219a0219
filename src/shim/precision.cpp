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

}  // extern "C"
