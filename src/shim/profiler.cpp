// PyTorch's own profiler (Kineto) from C++, for `run --profile`: the same
// prepare / enable / disable sequence torch.profiler drives, the Chrome
// trace saved by libtorch itself, the `distributedInfo` metadata Holistic
// Trace Analysis needs, and named ranges through RecordFunction (what
// torch.profiler.record_function opens).
#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <memory>
#include <set>
#include <string>

#include "shim.h"

// NVTX3 is header-only (Nsight Systems injects itself at run time); its
// headers come with the CUDA wheels of a CUDA build.
#if defined(GPUBENCH_CUDA) && __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define GB_HAS_NVTX 1
#endif

namespace torch::autograd::profiler {
// Declared in kineto_shim.h, which needs Kineto's own headers.
TORCH_API void addMetadataJson(const std::string& key, const std::string& value);
}  // namespace torch::autograd::profiler

extern "C" {

// Starts tracing CPU ops (and CUDA kernels when cuda != 0) on every thread:
// dp's replica threads are profiled too.
char* gb_profiler_start(int cuda) {
  GB_TRY
  namespace p = torch::profiler::impl;
  p::ExperimentalConfig exp({}, false, false, {}, false, false, false, /*profile_all_threads=*/true);
  p::ProfilerConfig cfg(p::ProfilerState::KINETO, false, false, false, false, false, exp);
  std::set<p::ActivityType> acts = {p::ActivityType::CPU};
  if (cuda) acts.insert(p::ActivityType::CUDA);
  torch::autograd::profiler::prepareProfiler(cfg, acts);
  torch::autograd::profiler::enableProfiler(cfg, acts);
  GB_CATCH
}

// Adds top-level metadata to the trace being recorded (JSON value).
char* gb_profiler_metadata(const char* key, const char* json) {
  GB_TRY
  if (key == nullptr || json == nullptr) throw std::invalid_argument("gb_profiler_metadata: null argument");
  torch::autograd::profiler::addMetadataJson(key, json);
  GB_CATCH
}

// Stops tracing and writes the Chrome trace to `path`.
char* gb_profiler_stop(const char* path) {
  GB_TRY
  if (path == nullptr) throw std::invalid_argument("gb_profiler_stop: null argument");
  auto result = torch::autograd::profiler::disableProfiler();
  if (!result) throw std::runtime_error("the profiler returned no result (was it started?)");
  result->save(path);
  GB_CATCH
}

// Opens a named range on this thread; gb_range_end closes it. Returns NULL
// when nothing records (the profiler is off): then there is nothing to close.
void* gb_range_begin(const char* name) {
  try {
    auto rf = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
    if (!rf->isActive()) return nullptr;
    rf->before(name);
    return rf.release();
  } catch (...) {
    return nullptr;
  }
}

void gb_range_end(void* handle) {
  try {
    delete static_cast<at::RecordFunction*>(handle);  // the destructor ends the range
  } catch (...) {
  }
}

// NVTX ranges for Nsight Systems (`--nvtx`); no-ops without NVTX headers.
int gb_nvtx_available() {
#ifdef GB_HAS_NVTX
  return 1;
#else
  return 0;
#endif
}

void gb_nvtx_push(const char* name) {
#ifdef GB_HAS_NVTX
  nvtxRangePushA(name);
#else
  (void)name;
#endif
}

void gb_nvtx_pop() {
#ifdef GB_HAS_NVTX
  nvtxRangePop();
#endif
}

}  // extern "C"
