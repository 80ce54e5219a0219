// Bytes libtorch itself holds on the CPU, live and at their peak: a wrapper
// around the default CPU allocator installed with c10::SetCPUAllocator. The
// process's resident set would say little (glibc keeps freed memory
// resident), and libtorch keeps no CPU statistics of its own.
//
// Blocks are allocated exactly as the default allocator would (the same
// sizes: a size header in front of the data made large blocks cost ~6 % of
// a CPU step, measured), and each block's size is kept in a map under a
// mutex for the raw deleter, which gets only the data pointer. Tensors
// allocate a few hundred blocks a step, so the lock is cheap.
#include <ATen/ATen.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/csrc/autograd/autograd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "shim.h"

namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
c10::Allocator* g_inner = nullptr;
std::mutex g_mutex;
std::unordered_map<void*, int64_t>* g_sizes = nullptr;  // never freed: frees may come at exit

void raise_peak(int64_t now) {
  int64_t p = g_peak.load(std::memory_order_relaxed);
  while (now > p && !g_peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
}

void counted_free(void* data) {
  if (data == nullptr) return;
  int64_t n = 0;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_sizes->find(data);
    if (it != g_sizes->end()) {
      n = it->second;
      g_sizes->erase(it);
    }
  }
  g_live.fetch_sub(n, std::memory_order_relaxed);
  g_inner->raw_deleter()(data);
}

struct CountingAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* data = g_inner->raw_allocate(n);
    if (data != nullptr) {
      std::lock_guard<std::mutex> lock(g_mutex);
      (*g_sizes)[data] = static_cast<int64_t>(n);
    }
    raise_peak(g_live.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed) + static_cast<int64_t>(n));
    return {data, data, &counted_free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counted_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

CountingAllocator g_counting;

}  // namespace

extern "C" {

// Installs the counting allocator (once; later calls do nothing). Blocks
// allocated before keep their own deleter and are not counted.
char* gb_cpu_memory_install() {
  GB_TRY
  if (g_inner != nullptr) return nullptr;
  g_inner = c10::GetDefaultCPUAllocator();
  g_sizes = new std::unordered_map<void*, int64_t>();
  if (g_inner == nullptr || g_inner->raw_deleter() == nullptr)
    throw std::runtime_error("the default CPU allocator has no raw deleter to wrap");
  // Above the default's priority 0, so that libtorch keeps ours.
  c10::SetCPUAllocator(&g_counting, /*priority=*/1);
  GB_CATCH
}

// Live and peak bytes counted since the install; the peak restarts from the
// live bytes when `reset` is set (after reading).
void gb_cpu_memory(int64_t* live, int64_t* peak, int reset) {
  if (live) *live = g_live.load(std::memory_order_relaxed);
  if (peak) *peak = g_peak.load(std::memory_order_relaxed);
  if (reset) g_peak.store(g_live.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

// Back-propagates `grad` from `output`: the vector-Jacobian product that
// activation checkpointing runs per stage, without the full-size product
// tensor that sum(output * grad).backward() would make first.
char* gb_backward_from(void* output, void* grad) {
  GB_TRY
  if (output == nullptr || grad == nullptr) throw std::invalid_argument("gb_backward_from: null argument");
  const auto& y = *static_cast<const at::Tensor*>(output);
  const auto& g = *static_cast<const at::Tensor*>(grad);
  torch::autograd::backward({y}, {g});
  GB_CATCH
}

}  // extern "C"
