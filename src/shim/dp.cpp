// DataParallel's replicate on CUDA, coalesced as torch.nn.DataParallel's
// Broadcast is: the master's tensors are packed into large buffers, copied
// once per device and unpacked there (torch::cuda::broadcast_coalesced),
// and each replica's variables take the copies' storage (set_data), so a
// step costs a few copies per device instead of one per tensor.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <stdexcept>
#include <vector>

#include "shim.h"

#ifdef GPUBENCH_CUDA
#include <torch/csrc/cuda/comm.h>
#endif

extern "C" {

// src: the master's n tensors; dst: n tensors per other replica, replica by
// replica (n * replicas pointers), each replica's on its own device.
char* gb_broadcast_coalesced_into(void** src, size_t n, void** dst, size_t replicas) {
  GB_TRY
#ifdef GPUBENCH_CUDA
  if (n == 0 || replicas == 0) return nullptr;
  std::vector<at::Tensor> tensors;
  tensors.reserve(n);
  for (size_t i = 0; i < n; i++) tensors.push_back(*static_cast<at::Tensor*>(src[i]));
  std::vector<int64_t> devices{tensors[0].get_device()};
  for (size_t r = 0; r < replicas; r++) devices.push_back(static_cast<at::Tensor*>(dst[r * n])->get_device());
  // PyTorch's default bucket for Broadcast: 10 MiB.
  auto out = torch::cuda::broadcast_coalesced(tensors, devices, 10 * 1024 * 1024);
  torch::autograd::AutoGradMode no_grad(false);
  for (size_t r = 0; r < replicas; r++)
    for (size_t i = 0; i < n; i++) static_cast<at::Tensor*>(dst[r * n + i])->set_data(out[r + 1][i]);
#else
  (void)src;
  (void)n;
  (void)dst;
  (void)replicas;
  throw std::runtime_error("gpubench was built without the CUDA shim: no coalesced broadcast");
#endif
  GB_CATCH
}

}  // extern "C"
