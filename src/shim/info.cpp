// Versions, CUDA device properties and caching-allocator statistics.
// The CUDA parts compile only with GPUBENCH_CUDA (CUDA headers present); the
// fallbacks say why the figure is unavailable.
#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/headeronly/version.h>
#include <c10/util/Logging.h>

#include <cstdint>
#include <cstdio>

#include "shim.h"

#ifdef GPUBENCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
namespace torch::cuda::nccl {
std::uint64_t version();  // exported by libtorch_cuda
}
#endif

extern "C" {

void gb_free_error(char* e) { std::free(e); }

// Applies TORCH_CPP_LOG_LEVEL, as `import torch` does; libtorch alone never
// reads it, and its c10d warnings would otherwise print stack traces.
void gb_init_logging() { c10::initLogging(); }

void gb_libtorch_version(char* buf, size_t len) { std::snprintf(buf, len, "%s", TORCH_VERSION); }

int gb_built_with_cuda() {
#ifdef GPUBENCH_CUDA
  return 1;
#else
  return 0;
#endif
}

// CUDA runtime, cuDNN and NCCL versions as libtorch reports them; 0 when absent.
void gb_cuda_versions(long* cudart, long* cudnn, std::uint64_t* nccl) {
  *cudart = 0;
  *cudnn = 0;
  *nccl = 0;
  try {
    const auto& hooks = at::detail::getCUDAHooks();
    if (!hooks.hasCUDART()) return;
    *cudart = hooks.versionCUDART();
    if (hooks.hasCuDNN()) *cudnn = hooks.versionCuDNN();
#ifdef GPUBENCH_CUDA
    *nccl = torch::cuda::nccl::version();
#endif
  } catch (...) {
  }
}

// The CUDA runtime version gpubench's shim was compiled against (0 without
// CUDA), and libtorch's CUDA configuration text (architecture flags included;
// empty without libtorch_cuda). `buf` gets at most `len` - 1 bytes.
void gb_cuda_build(long* shim_cudart, char* buf, size_t len) {
#ifdef GPUBENCH_CUDA
  *shim_cudart = CUDART_VERSION;
#else
  *shim_cudart = 0;
#endif
  if (len > 0) buf[0] = '\0';
  try {
    const auto& hooks = at::detail::getCUDAHooks();
    std::snprintf(buf, len, "%s", hooks.showConfig().c_str());
  } catch (...) {
    // No driver: libtorch cannot report; the caller falls back.
  }
}

// Makes `dev` this thread's current CUDA device, so that no call without a
// device guard of its own creates a context on GPU 0 (gpu-audit F15).
char* gb_cuda_set_device(int dev) {
  GB_TRY
#ifdef GPUBENCH_CUDA
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(dev));
#else
  (void)dev;
#endif
  GB_CATCH
}

// Properties of CUDA device `dev`. `name` gets the device name, `pci` the
// PCI bus id as NVML prints it (domain:bus:device.0).
char* gb_cuda_device_props(int dev, char* name, size_t name_len, char* pci, size_t pci_len,
                           std::uint64_t* total_mem, int* major, int* minor, int* sm_count) {
#ifdef GPUBENCH_CUDA
  GB_TRY
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(dev));
  std::snprintf(name, name_len, "%s", p->name);
  std::snprintf(pci, pci_len, "%08x:%02x:%02x.0", p->pciDomainID, p->pciBusID, p->pciDeviceID);
  *total_mem = p->totalGlobalMem;
  *major = p->major;
  *minor = p->minor;
  *sm_count = p->multiProcessorCount;
  GB_CATCH
#else
  return gb_strdup("gpubench was built without the CUDA shim");
#endif
}

// Caching-allocator bytes on `dev`: current and peak, allocated and reserved;
// then the process's cudaMalloc retries (the allocator freed its cache and
// tried again) and out-of-memory errors so far.
char* gb_cuda_memory_stats(int dev, std::int64_t out[6]) {
#ifdef GPUBENCH_CUDA
  GB_TRY
  using namespace c10::cuda::CUDACachingAllocator;
  auto s = getDeviceStats(static_cast<c10::DeviceIndex>(dev));
  const size_t agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  out[0] = s.allocated_bytes[agg].current;
  out[1] = s.allocated_bytes[agg].peak;
  out[2] = s.reserved_bytes[agg].current;
  out[3] = s.reserved_bytes[agg].peak;
  out[4] = s.num_alloc_retries;
  out[5] = s.num_ooms;
  GB_CATCH
#else
  (void)dev;
  (void)out;
  return gb_strdup("gpubench was built without the CUDA shim");
#endif
}

// At the end of warm-up: the peaks, and the accumulated counters (cudaMalloc
// retries, OOMs), so that both describe the timed window. Warm-up's first
// steps are where cuDNN tries workspaces and the allocator grows.
char* gb_cuda_reset_peak_memory(int dev) {
#ifdef GPUBENCH_CUDA
  GB_TRY
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(dev));
  c10::cuda::CUDACachingAllocator::resetAccumulatedStats(static_cast<c10::DeviceIndex>(dev));
  GB_CATCH
#else
  (void)dev;
  return gb_strdup("gpubench was built without the CUDA shim");
#endif
}

}  // extern "C"
