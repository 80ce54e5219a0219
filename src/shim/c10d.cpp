// DDP engine access: a thin C API over libtorch's own c10d (TCPStore,
// PrefixStore, ProcessGroupGloo, ProcessGroupNCCL, Reducer, Logger).
//
// Nothing here reimplements a collective or the gradient bucketing: the
// Reducer is libtorch's c10d::Reducer, set up and driven in the order that
// torch/nn/parallel/distributed.py (torch 2.11) uses:
//
//   construction (DistributedDataParallel.__init__):
//     verify_params_across_processes(pg, params)
//     broadcast_coalesced(pg, params [+ buffers], 250 MiB, src 0)
//     compute_bucket_assignment_by_size(params, limits) -> reversed buckets
//       limits = [SIZE_MAX] (one bucket for iteration 1) unless
//       find_unused_parameters, then [1 MiB, cap] (or [cap] for a non-default cap)
//     Reducer(params, buckets, pg, ..., first_bucket_bytes_cap, ...)
//     Logger(reducer); reducer.set_logger(logger); logger.set_construction_data_and_log
//   every iteration (DDP._pre_forward / _post_forward):
//     logger.set_runtime_stats_and_log(); reducer.prepare_for_forward()
//     reducer.rebuild_buckets()            (true once, in iteration 2)
//     broadcast_coalesced(buffers) if broadcast_buffers
//     forward (caller)
//     reducer.prepare_for_backward(outputs if find_unused else [])
//     loss.backward() (caller): the Reducer's autograd hooks all-reduce buckets
//
// Every fallible function returns NULL or a malloc'd error message (free it
// with gb_free_error); C++ exceptions never leave this file.
#include <ATen/ATen.h>
#include <c10/util/Logging.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/logger.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <stdexcept>
#include <string>
#include <vector>

#include "shim.h"

#ifdef GPUBENCH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

// GB_CATCH, but c10::Error (and c10d's DistError family) without the C++
// backtrace that its what() appends.
#define GB_CATCH_C10                                          \
  }                                                           \
  catch (const c10::Error& e) {                               \
    return gb_strdup(e.what_without_backtrace());             \
  }                                                           \
  catch (const std::exception& e) {                           \
    return gb_strdup(e.what());                               \
  }                                                           \
  catch (...) {                                               \
    return gb_strdup("unknown C++ exception");                \
  }                                                           \
  return nullptr;

namespace {

// DDP's broadcast bucket for parameter/buffer sync (self.broadcast_bucket_size).
constexpr size_t kBroadcastBucketBytes = 250u * 1024u * 1024u;

std::chrono::milliseconds ms(int timeout_ms) {
  return std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 30 * 60 * 1000);
}

std::vector<at::Tensor> tensors_from(void* const* ts, size_t n) {
  std::vector<at::Tensor> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (ts[i] == nullptr) throw std::invalid_argument("null tensor pointer at index " + std::to_string(i));
    out.push_back(*static_cast<at::Tensor*>(ts[i]));
  }
  return out;
}

std::vector<at::Tensor> detached(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(t.detach());
  return out;
}

}  // namespace

// Opaque handles. The C++ objects are reference counted (intrusive_ptr /
// shared_ptr): a process group keeps its store alive, a reducer keeps its
// process group alive, whatever order the handles are freed in.
struct gb_store {
  c10::intrusive_ptr<c10d::Store> store;
  std::string host;
  int rank;
  int world;
  // Process groups created on this store, to name them deterministically
  // ("0", "1", ... in creation order, as torch.distributed does), so that
  // every rank's n-th group uses the same key prefix.
  int groups_created = 0;
};

struct gb_pg {
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  int cuda_device;  // -1: CPU (gloo)
  bool nccl;
};

// When each gradient was ready on the device (gb_reducer_time_ready_on_device):
// a timing event per parameter, recorded on the gradient's stream after the
// Reducer has copied it into its bucket, and one at prepare_backward. Shared
// with the hooks, which stay on the parameters' accumulators.
struct ReadyEvents {
  std::unique_ptr<c10::Event> start;
  std::vector<std::unique_ptr<c10::Event>> ready;
};

struct gb_reducer {
  std::shared_ptr<ReadyEvents> ready_events;  // null unless asked for
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  std::vector<at::Tensor> params;  // as given, to name the Reducer's buckets' members
  std::shared_ptr<c10d::Reducer> reducer;
  std::shared_ptr<c10d::Logger> logger;
  std::vector<at::Tensor> buffers;  // detached views of the module buffers
  bool broadcast_buffers;
  bool find_unused;
  int sample_rate = c10d::kDDPRuntimeLoggingSampleRate;
  // Iterations started (== Reducer::num_iterations_) and the last one whose
  // timer the Logger has read (see gb_reducer_stats).
  int64_t iteration = 0;
  int64_t harvested = 0;
};

// Statistics of the reducer's last iteration. Times in milliseconds, -1 when
// unavailable; see gb_reducer_stats for when they are measured.
struct gb_reducer_stats {
  int64_t iteration;        // iterations started so far (prepare_forward calls)
  int64_t timed_iteration;  // iteration the *_ms fields describe; -1: none
  double forward_compute_ms;
  double backward_compute_ms;
  double backward_comm_ms;
  double backward_overlap_ms;
  double avg_forward_compute_ms;  // averages over all timed iterations so far
  double avg_backward_compute_ms;
  double avg_backward_comm_ms;
  double avg_backward_overlap_ms;
  int64_t num_buckets;
  int64_t has_rebuilt_buckets;
  int64_t total_parameter_bytes;
  int64_t sample_rate;
};

namespace {

bool sampled(int64_t iteration, int rate) {
  // Reducer::should_collect_runtime_stats(): the first 10 iterations, then
  // every `rate`-th.
  return iteration > 0 && (iteration <= 10 || iteration % rate == 0);
}

// Let the Logger read the Reducer's timer for the current iteration, once.
// The Logger averages over the iterations it has read, so reading the same
// iteration twice would skew the averages.
void harvest(gb_reducer* r) {
  if (r->iteration > r->harvested) {
    r->logger->set_runtime_stats_and_log();
    r->harvested = r->iteration;
  }
}

std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& host) {
  // As torch.distributed does: GLOO_SOCKET_IFNAME (comma separated) wins.
  // Otherwise bind to the store's host: on one machine that is loopback,
  // which always works and needs no hostname resolution. If that address is
  // not local (another node's store), use gloo's default device: this
  // machine's hostname, or loopback if the hostname does not resolve.
  std::string errors;
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    std::string first(ifname);
    first = first.substr(0, first.find(','));
    return c10d::ProcessGroupGloo::createDeviceForInterface(first);
  }
  if (!host.empty()) {
    try {
      return c10d::ProcessGroupGloo::createDeviceForHostname(host);
    } catch (const std::exception& e) {
      errors += std::string("createDeviceForHostname(") + host + "): " + e.what() + "; ";
    }
  }
  try {
    return c10d::ProcessGroupGloo::createDefaultDevice();
  } catch (const std::exception& e) {
    errors += std::string("createDefaultDevice: ") + e.what() + "; ";
  }
  try {
    return c10d::ProcessGroupGloo::createDeviceForInterface("lo");
  } catch (const std::exception& e) {
    errors += std::string("createDeviceForInterface(lo): ") + e.what();
  }
  throw std::runtime_error("no usable gloo device: " + errors);
}

std::vector<uint64_t> all_ranks(int world) {
  std::vector<uint64_t> r(static_cast<size_t>(world));
  for (int i = 0; i < world; ++i) r[static_cast<size_t>(i)] = static_cast<uint64_t>(i);
  return r;
}

}  // namespace

extern "C" {

// ---------------------------------------------------------------- store ----

// TCPStore rendezvous. Rank 0 (is_server != 0) hosts the server on host:port
// and waits, up to timeout_ms, until all `world` ranks have connected; the
// others connect to it (retrying until timeout_ms).
char* gb_store_new(const char* host, int port, int rank, int world, int is_server, int timeout_ms,
                   gb_store** out) {
  GB_TRY
  if (host == nullptr || out == nullptr) throw std::invalid_argument("gb_store_new: null argument");
  if (port < 0 || port > 65535) throw std::invalid_argument("gb_store_new: port out of range");
  if (world < 1 || rank < 0 || rank >= world)
    throw std::invalid_argument("gb_store_new: need 0 <= rank < world");
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(port);
  opts.isServer = is_server != 0;
  opts.numWorkers = static_cast<size_t>(world);
  opts.waitWorkers = true;
  opts.timeout = ms(timeout_ms);
  auto store = c10::make_intrusive<c10d::TCPStore>(std::string(host), opts);
  *out = new gb_store{store, std::string(host), rank, world};
  GB_CATCH_C10
}

// A second client of a running store, for a thread of its own (the
// liveness heartbeat): it never counts as a worker, and each of its
// operations gives up after timeout_ms, so a lost store host is noticed
// within that bound instead of the run's collective timeout.
char* gb_store_client(const char* host, int port, int rank, int world, int timeout_ms, gb_store** out) {
  GB_TRY
  if (host == nullptr || out == nullptr) throw std::invalid_argument("gb_store_client: null argument");
  if (port < 0 || port > 65535) throw std::invalid_argument("gb_store_client: port out of range");
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(port);
  opts.isServer = false;
  opts.waitWorkers = false;
  opts.timeout = ms(timeout_ms);
  auto store = c10::make_intrusive<c10d::TCPStore>(std::string(host), opts);
  *out = new gb_store{store, std::string(host), rank, world};
  GB_CATCH_C10
}

void gb_store_free(gb_store* s) {
  try {
    delete s;
  } catch (...) {
  }
}

char* gb_store_set(gb_store* s, const char* key, const uint8_t* data, size_t len) {
  GB_TRY
  if (s == nullptr || key == nullptr || (data == nullptr && len > 0))
    throw std::invalid_argument("gb_store_set: null argument");
  s->store->set(std::string(key), std::vector<uint8_t>(data, data + len));
  GB_CATCH_C10
}

// Blocks until `key` exists (up to the store's timeout). *data is malloc'd
// (free with gb_free_bytes); it may be NULL when len is 0.
char* gb_store_get(gb_store* s, const char* key, uint8_t** data, size_t* len) {
  GB_TRY
  if (s == nullptr || key == nullptr || data == nullptr || len == nullptr)
    throw std::invalid_argument("gb_store_get: null argument");
  std::vector<uint8_t> v = s->store->get(std::string(key));
  uint8_t* buf = nullptr;
  if (!v.empty()) {
    buf = static_cast<uint8_t*>(std::malloc(v.size()));
    if (buf == nullptr) throw std::bad_alloc();
    std::memcpy(buf, v.data(), v.size());
  }
  *data = buf;
  *len = v.size();
  GB_CATCH_C10
}

// Whether `key` exists, without waiting.
char* gb_store_check(gb_store* s, const char* key, int* exists) {
  GB_TRY
  if (s == nullptr || key == nullptr || exists == nullptr)
    throw std::invalid_argument("gb_store_check: null argument");
  *exists = s->store->check({std::string(key)}) ? 1 : 0;
  GB_CATCH_C10
}

// Atomic counter: adds `delta` to the integer at `key` (0 if absent) and
// returns the new value.
char* gb_store_add(gb_store* s, const char* key, int64_t delta, int64_t* out) {
  GB_TRY
  if (s == nullptr || key == nullptr || out == nullptr)
    throw std::invalid_argument("gb_store_add: null argument");
  *out = s->store->add(std::string(key), delta);
  GB_CATCH_C10
}

void gb_free_bytes(uint8_t* p) { std::free(p); }

// ------------------------------------------------------- process group ----

// A c10d::ProcessGroup as torch.distributed builds it: the group's keys live
// under PrefixStore("<n>/", store) and the backend's under "<device>/" below
// that; the backend is registered with setBackend / setDefaultBackend and
// the group named with setGroupName. backend: "gloo" (CPU and, where gloo
// has CUDA support, CUDA tensors) or "nccl" (CUDA; cuda_device is set as the
// current device first).
char* gb_pg_new(gb_store* s, const char* backend, int rank, int world, int cuda_device, int timeout_ms,
                gb_pg** out) {
  GB_TRY
  if (s == nullptr || backend == nullptr || out == nullptr) throw std::invalid_argument("gb_pg_new: null argument");
  if (world < 1 || rank < 0 || rank >= world) throw std::invalid_argument("gb_pg_new: need 0 <= rank < world");
  const std::string be(backend);
  const bool nccl = be == "nccl";
  if (!nccl && be != "gloo") throw std::invalid_argument("unknown backend '" + be + "' (expected gloo or nccl)");
#ifndef GPUBENCH_CUDA
  if (nccl) throw std::runtime_error("gpubench was built without CUDA: NCCL unavailable");
#endif
  const std::string name = std::to_string(s->groups_created);
  auto group_store = c10::make_intrusive<c10d::PrefixStore>(name + "/", s->store);
  auto pg = c10::make_intrusive<c10d::ProcessGroup>(group_store, rank, world);
  if (!nccl) {
    auto backend_store = c10::make_intrusive<c10d::PrefixStore>("cpu/", group_store);
    auto opts = c10d::ProcessGroupGloo::Options::create(ms(timeout_ms));
    opts->devices.push_back(gloo_device(s->host));
    opts->group_name = name;
    opts->global_ranks_in_group = all_ranks(world);
    auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(backend_store, rank, world, opts);
    gloo->setSequenceNumberForGroup();
    pg->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
    pg->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
    pg->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, gloo);
  } else {
#ifdef GPUBENCH_CUDA
    const int n = static_cast<int>(c10::cuda::device_count());
    if (n == 0)
      throw std::runtime_error("NCCL backend needs a CUDA GPU, but this machine has none visible");
    if (cuda_device < 0 || cuda_device >= n)
      throw std::invalid_argument("NCCL backend: cuda device " + std::to_string(cuda_device) + " requested, but " +
                                  std::to_string(n) + " CUDA device(s) are visible");
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(cuda_device));
    auto backend_store = c10::make_intrusive<c10d::PrefixStore>("cuda/", group_store);
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->is_high_priority_stream = false;
    opts->timeout = ms(timeout_ms);
    opts->group_name = name;
    opts->global_ranks_in_group = all_ranks(world);
    auto nc = c10::make_intrusive<c10d::ProcessGroupNCCL>(backend_store, rank, world, opts);
    nc->setSequenceNumberForGroup();
    pg->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
    pg->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nc);
#endif
  }
  pg->setGroupName(name);
  s->groups_created++;
  *out = new gb_pg{pg, nccl ? cuda_device : -1, nccl};
  GB_CATCH_C10
}

void gb_pg_free(gb_pg* p) {
  try {
    delete p;
  } catch (...) {
  }
}

char* gb_pg_barrier(gb_pg* p) {
  GB_TRY
  if (p == nullptr) throw std::invalid_argument("gb_pg_barrier: null argument");
  // Straight to the backend: ProcessGroup::barrier keeps its dummy tensor in a
  // function-level static, which races when several groups live in one
  // process (ranks as threads).
  c10d::BarrierOptions opts;
  if (p->nccl) opts.device_ids = {p->cuda_device};
  p->pg->getDefaultBackend()->barrier(opts)->wait();
  GB_CATCH_C10
}

// In-place sum across the group; waits for completion (for CUDA tensors:
// until the collective is enqueued on the current stream).
char* gb_pg_allreduce_sum(gb_pg* p, void* t) {
  GB_TRY
  if (p == nullptr || t == nullptr) throw std::invalid_argument("gb_pg_allreduce_sum: null argument");
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> v{static_cast<at::Tensor*>(t)->detach()};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  p->pg->allreduce(v, opts)->wait();
  GB_CATCH_C10
}

// Overwrites ts on every rank with root's values (coalesced, as DDP's
// parameter and buffer sync does); waits.
char* gb_pg_broadcast(gb_pg* p, void* const* ts, size_t n, int root) {
  GB_TRY
  if (p == nullptr || (ts == nullptr && n > 0)) throw std::invalid_argument("gb_pg_broadcast: null argument");
  if (root < 0 || root >= p->pg->getSize()) throw std::invalid_argument("gb_pg_broadcast: root out of range");
  if (n == 0) return nullptr;
  at::NoGradGuard no_grad;
  auto v = detached(tensors_from(ts, n));
  c10d::broadcast_coalesced(p->pg, v, kBroadcastBucketBytes, root);
  GB_CATCH_C10
}

char* gb_pg_rank_size(gb_pg* p, int* rank, int* size) {
  GB_TRY
  if (p == nullptr || rank == nullptr || size == nullptr) throw std::invalid_argument("gb_pg_rank_size: null argument");
  *rank = p->pg->getRank();
  *size = p->pg->getSize();
  GB_CATCH_C10
}

// -------------------------------------------------------------- reducer ----

// DistributedDataParallel's constructor, minus the module: `params` are the
// trainable parameters (leaf tensors requiring grad, same order on every
// rank), `buffers` the module buffers (BatchNorm statistics) that DDP
// broadcasts from rank 0 when broadcast_buffers is set.
//
// bucket_cap_bytes <= 0 means DDP's default (bucket_cap_mb=None: 25 MiB, and
// a 1 MiB first bucket). A positive cap is DDP's explicit bucket_cap_mb:
// then the first bucket gets the same cap, as in torch 2.11, unless
// first_bucket_cap_bytes > 0 overrides it.
char* gb_reducer_new(gb_pg* p, void* const* params, size_t n_params, void* const* buffers, size_t n_buffers,
                     int64_t bucket_cap_bytes, int64_t first_bucket_cap_bytes, int find_unused,
                     int grad_as_bucket_view, int broadcast_buffers, gb_reducer** out) {
  GB_TRY
  if (p == nullptr || out == nullptr || (params == nullptr && n_params > 0) || (buffers == nullptr && n_buffers > 0))
    throw std::invalid_argument("gb_reducer_new: null argument");
  if (n_params == 0) throw std::invalid_argument("gb_reducer_new: no parameters");
  std::vector<at::Tensor> ps = tensors_from(params, n_params);
  for (size_t i = 0; i < ps.size(); ++i) {
    if (!ps[i].defined() || !ps[i].requires_grad() || !ps[i].is_leaf())
      throw std::invalid_argument("gb_reducer_new: parameter " + std::to_string(i) +
                                  " is not a leaf tensor that requires grad");
  }
  std::vector<at::Tensor> bufs = detached(tensors_from(buffers, n_buffers));

  const bool cap_default = bucket_cap_bytes <= 0;
  const int64_t cap = cap_default ? int64_t{c10d::kDefaultBucketBytesCap} : bucket_cap_bytes;
  const int64_t first_cap = first_bucket_cap_bytes > 0
                                ? first_bucket_cap_bytes
                                : (cap_default ? int64_t{c10d::kDefaultFirstBucketBytes} : cap);

  // 1. Same number, shapes, dtypes and layouts of parameters on every rank.
  c10d::verify_params_across_processes(p->pg, ps, std::nullopt);

  // 2. _sync_module_states: parameters (then buffers) from rank 0.
  {
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> states = detached(ps);
    if (broadcast_buffers) states.insert(states.end(), bufs.begin(), bufs.end());
    c10d::broadcast_coalesced(p->pg, states, kBroadcastBucketBytes, 0);
  }

  // 3. _ddp_init_helper: initial buckets. Without find_unused_parameters,
  // DDP 2.11 puts everything into one bucket for the first iteration (the
  // parameter order need not match the backward order); rebuild_buckets
  // then splits by gradient-ready order with [first_cap, cap] after it.
  std::vector<size_t> limits;
  if (!find_unused) {
    limits = {std::numeric_limits<size_t>::max()};
  } else if (cap_default) {
    limits = {static_cast<size_t>(c10d::kDefaultFirstBucketBytes), static_cast<size_t>(cap)};
  } else {
    limits = {static_cast<size_t>(cap)};
  }
  auto assignment = c10d::compute_bucket_assignment_by_size(ps, limits, std::vector<bool>(ps.size(), false));
  std::vector<std::vector<size_t>> buckets = std::get<0>(assignment);
  std::reverse(buckets.begin(), buckets.end());

  auto reducer = std::make_shared<c10d::Reducer>(
      ps, std::move(buckets), p->pg, std::vector<bool>(ps.size(), false), cap, find_unused != 0,
      grad_as_bucket_view != 0, std::unordered_map<size_t, std::string>{}, first_cap,
      /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
      /*bucket_bytes_cap_list=*/std::vector<int64_t>{});
  auto logger = std::make_shared<c10d::Logger>(reducer);
  reducer->set_logger(logger);
  std::vector<int> device_ids;
  if (ps[0].is_cuda()) device_ids.push_back(ps[0].get_device());
  logger->set_construction_data_and_log("gpubench", device_ids, device_ids.empty() ? -1 : device_ids[0],
                                        broadcast_buffers != 0, /*has_sync_bn=*/false, /*static_graph=*/false);

  auto* r = new gb_reducer();
  r->pg = p->pg;
  r->params = ps;
  r->reducer = std::move(reducer);
  r->logger = std::move(logger);
  r->buffers = std::move(bufs);
  r->broadcast_buffers = broadcast_buffers != 0;
  r->find_unused = find_unused != 0;
  *out = r;
  GB_CATCH_C10
}

void gb_reducer_free(gb_reducer* r) {
  if (r == nullptr) return;
  // ~Logger and ~Reducer are noexcept(false); nothing may escape into Rust.
  try {
    r->logger.reset();
  } catch (...) {
  }
  try {
    r->reducer.reset();
  } catch (...) {
  }
  try {
    delete r;
  } catch (...) {
  }
}

// DDP's gradient compression. bf16 has no builtin in libtorch 2.11 (only
// FP16_COMPRESS), so it is written here with the same contract as PyTorch's
// bf16_compress_hook: the bucket, cast to bfloat16 and divided by the world
// size, is summed over ranks, and the result is cast back into the bucket.
class Bf16CompressHook : public c10d::CppCommHookInterface<c10::intrusive_ptr<c10d::ProcessGroup>> {
 public:
  explicit Bf16CompressHook(const c10::intrusive_ptr<c10d::ProcessGroup>& pg)
      : c10d::CppCommHookInterface<c10::intrusive_ptr<c10d::ProcessGroup>>(pg) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    at::Tensor full = bucket.getBufferRef();
    at::Tensor half = full.to(at::kBFloat16).div_(state_->getSize());
    std::vector<at::Tensor> tensors = {half};
    auto reduced = state_->allreduce(tensors)->getFuture();
    return reduced->then(
        [full, half](c10::ivalue::Future&) {
          full.copy_(half);
          return c10::IValue(full);
        },
        c10::TensorType::get());
  }
};

// kind: 1 = fp16 (libtorch's builtin FP16_COMPRESS), 2 = bf16 (above).
// Registered before the first iteration, as DDP.register_comm_hook requires.
char* gb_reducer_comm_hook(gb_reducer* r, int kind) {
  GB_TRY
  if (r == nullptr) throw std::invalid_argument("gb_reducer_comm_hook: null argument");
  switch (kind) {
    case 1:
      r->reducer->register_builtin_comm_hook(c10d::BuiltinCommHookType::FP16_COMPRESS);
      break;
    case 2:
      r->reducer->register_comm_hook(std::make_unique<Bf16CompressHook>(r->pg));
      break;
    default:
      throw std::invalid_argument("gb_reducer_comm_hook: unknown hook " + std::to_string(kind));
  }
  GB_CATCH_C10
}

// How often the Reducer times an iteration: the first 10, then every
// `rate`-th (DDP's default is 100; 1 times every iteration).
char* gb_reducer_set_sample_rate(gb_reducer* r, int rate) {
  GB_TRY
  if (r == nullptr) throw std::invalid_argument("gb_reducer_set_sample_rate: null argument");
  if (rate < 1) throw std::invalid_argument("sample rate must be >= 1");
  r->reducer->set_ddp_runtime_logging_sample_rate(rate);
  r->sample_rate = rate;
  GB_CATCH_C10
}

// DDP._pre_forward: log the previous iteration's runtime stats (unless
// gb_reducer_stats already did), prepare_for_forward (starts this
// iteration's forward timer), rebuild_buckets (does something once, at the
// start of iteration 2: rebuilds the buckets in the gradient-ready order seen
// in iteration 1 and broadcasts the assignment from rank 0), then broadcast
// the buffers from rank 0 if broadcast_buffers. Call it before the forward
// pass of every iteration that should synchronise gradients.
char* gb_reducer_prepare_forward(gb_reducer* r) {
  GB_TRY
  if (r == nullptr) throw std::invalid_argument("gb_reducer_prepare_forward: null argument");
  harvest(r);
  r->reducer->prepare_for_forward();
  r->iteration++;
  r->reducer->rebuild_buckets();
  if (r->broadcast_buffers && !r->buffers.empty()) {
    at::NoGradGuard no_grad;
    c10d::broadcast_coalesced(r->pg, r->buffers, kBroadcastBucketBytes, 0);
  }
  GB_CATCH_C10
}

// The buffer broadcast of DDP's forward alone, for the micro-batches of a
// gradient accumulation that are not Reducer iterations (no_sync): DDP still
// broadcasts buffers before each such forward when broadcast_buffers is set.
char* gb_reducer_broadcast_buffers(gb_reducer* r) {
  GB_TRY
  if (r == nullptr) throw std::invalid_argument("gb_reducer_broadcast_buffers: null argument");
  if (r->broadcast_buffers && !r->buffers.empty()) {
    at::NoGradGuard no_grad;
    c10d::broadcast_coalesced(r->pg, r->buffers, kBroadcastBucketBytes, 0);
  }
  GB_CATCH_C10
}

// DDP._post_forward: prepare_for_backward with the forward outputs when
// find_unused_parameters (they seed the search for unused parameters), else
// with no tensors, as DDP does. Call after the forward pass, before backward.
char* gb_reducer_prepare_backward(gb_reducer* r, void* const* outputs, size_t n) {
  GB_TRY
  if (r == nullptr || (outputs == nullptr && n > 0))
    throw std::invalid_argument("gb_reducer_prepare_backward: null argument");
  if (r->find_unused) {
    r->reducer->prepare_for_backward(tensors_from(outputs, n));
  } else {
    r->reducer->prepare_for_backward({});
  }
  if (r->ready_events) {
    const auto dev = r->params[0].device();
    r->ready_events->start->record(c10::impl::VirtualGuardImpl(dev.type()).getStream(dev));
  }
  GB_CATCH_C10
}

// From the next backward on, records when each gradient is ready on the
// device. The Reducer's own ready times (get_backward_stats) are host times
// of its autograd hook, which on a GPU is when the gradient's kernels were
// queued, not when they finished: the GPU lags the host, so they would make
// buckets look ready early and overlap look better than it is (gpu-audit
// G4). The hooks are added after the Reducer's, so they run after it has
// copied the gradient into its bucket, on the autograd engine's thread for
// that device, whose current stream is the gradient's.
char* gb_reducer_time_ready_on_device(gb_reducer* r) {
  GB_TRY
  if (r == nullptr) throw std::invalid_argument("gb_reducer_time_ready_on_device: null argument");
  if (!r->params[0].is_cuda())
    throw std::invalid_argument("device ready times need CUDA parameters (on the CPU the host clock is right)");
  auto ev = std::make_shared<ReadyEvents>();
  ev->start = std::make_unique<c10::Event>(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
  for (size_t i = 0; i < r->params.size(); ++i) {
    ev->ready.push_back(std::make_unique<c10::Event>(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT));
  }
  for (size_t i = 0; i < r->params.size(); ++i) {
    const auto dev = r->params[i].device();
    std::weak_ptr<ReadyEvents> weak = ev;
    torch::autograd::impl::grad_accumulator(r->params[i])
        ->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [weak, i, dev](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
              if (auto e = weak.lock()) e->ready[i]->record(c10::impl::VirtualGuardImpl(dev.type()).getStream(dev));
              return outputs;
            }));
  }
  r->ready_events = std::move(ev);
  GB_CATCH_C10
}

// The last backward's device ready time of each parameter, in ms after
// prepare_backward; -1 where none was recorded. Waits for the events.
char* gb_reducer_device_ready_ms(gb_reducer* r, double* out, size_t n) {
  GB_TRY
  if (r == nullptr || out == nullptr) throw std::invalid_argument("gb_reducer_device_ready_ms: null argument");
  if (!r->ready_events) throw std::invalid_argument("gb_reducer_device_ready_ms: not asked for");
  if (n != r->params.size()) throw std::invalid_argument("gb_reducer_device_ready_ms: wrong parameter count");
  auto& e = *r->ready_events;
  if (!e.start->was_marked_for_recording()) throw std::invalid_argument("gb_reducer_device_ready_ms: no backward yet");
  e.start->synchronize();
  for (size_t i = 0; i < n; ++i) {
    if (!e.ready[i]->was_marked_for_recording()) {
      out[i] = -1;
      continue;
    }
    e.ready[i]->synchronize();
    out[i] = e.start->elapsedTime(*e.ready[i]);
  }
  GB_CATCH_C10
}

// Runtime statistics of the Reducer, as DDP's Logger records them.
//
// The Reducer times an iteration only when it is sampled: iterations 1..10,
// then every sample_rate-th (default 100, see gb_reducer_set_sample_rate).
// In a sampled iteration it records, with a CPU clock for CPU parameters and
// CUDA events on the current stream for CUDA parameters:
//   forward start         prepare_for_forward
//   backward compute start prepare_for_backward
//   backward comm start   first bucket all-reduce launched (during backward)
//   backward compute end  end of the autograd pass (engine callback)
//   backward comm end     all bucket all-reduces waited for (finalize)
// and the Logger derives forward compute = bwd compute start - fwd start
// (so it includes rebuild_buckets and the buffer broadcast, as in DDP),
// backward compute = compute end - compute start, backward comm = comm end -
// comm start, overlap = compute end - comm start.
//
// DDP reads the timer at the start of the next forward; here the first of
// gb_reducer_stats and the next gb_reducer_prepare_forward reads it, once per
// iteration, so call this after loss.backward() has returned to get the
// iteration that just finished. For CUDA parameters that read synchronises
// with the recorded events. timed_iteration == iteration when the last
// iteration was sampled and its *_ms fields are valid; otherwise they are -1.
char* gb_reducer_stats(gb_reducer* r, gb_reducer_stats* out) {
  GB_TRY
  if (r == nullptr || out == nullptr) throw std::invalid_argument("gb_reducer_stats: null argument");
  harvest(r);
  at::DDPLoggingData d = r->logger->get_ddp_logging_data();
  auto get = [&d](const char* k) -> int64_t {
    auto it = d.ints_map.find(k);
    return it == d.ints_map.end() ? -1 : it->second;
  };
  auto to_ms = [](int64_t ns) { return ns > 0 ? static_cast<double>(ns) / 1e6 : -1.0; };
  const bool timed = sampled(r->iteration, r->sample_rate) && get("iteration") == r->iteration;
  out->iteration = r->iteration;
  out->timed_iteration = timed ? r->iteration : -1;
  out->forward_compute_ms = timed ? to_ms(get("forward_compute_time")) : -1.0;
  out->backward_compute_ms = timed ? to_ms(get("backward_compute_time")) : -1.0;
  out->backward_comm_ms = timed ? to_ms(get("backward_comm_time")) : -1.0;
  out->backward_overlap_ms = timed ? to_ms(get("backward_compute_comm_overlap_time")) : -1.0;
  out->avg_forward_compute_ms = to_ms(get("avg_forward_compute_time"));
  out->avg_backward_compute_ms = to_ms(get("avg_backward_compute_time"));
  out->avg_backward_comm_ms = to_ms(get("avg_backward_comm_time"));
  out->avg_backward_overlap_ms = to_ms(get("avg_backward_compute_comm_overlap_time"));
  out->num_buckets = static_cast<int64_t>(r->logger->get_bucket_sizes().size());
  out->has_rebuilt_buckets = get("has_rebuilt_buckets");
  out->total_parameter_bytes = get("total_parameter_size_bytes");
  out->sample_rate = r->sample_rate;
  GB_CATCH_C10
}

// Current bucket sizes in bytes, in reduction order (the first bucket is
// reduced first, i.e. holds the parameters whose gradients are ready first).
// Writes min(cap, count) entries to out and the count to *n.
char* gb_reducer_bucket_sizes(gb_reducer* r, int64_t* out, size_t cap, size_t* n) {
  GB_TRY
  if (r == nullptr || n == nullptr || (out == nullptr && cap > 0))
    throw std::invalid_argument("gb_reducer_bucket_sizes: null argument");
  std::vector<int64_t> sizes = r->logger->get_bucket_sizes();
  for (size_t i = 0; i < sizes.size() && i < cap; ++i) out[i] = sizes[i];
  *n = sizes.size();
  GB_CATCH_C10
}

// Per parameter, in the order given to gb_reducer_new: the index of the
// bucket the Reducer holds it in now (after the rebuild that follows the
// first iteration), and when its gradient became ready in the last sampled
// backward pass, in ns after prepare_for_backward (get_backward_stats; -1
// when unknown). What `gpubench predict` simulates the all-reduces from.
char* gb_reducer_param_layout(gb_reducer* r, int64_t* bucket_of, int64_t* ready_ns, size_t n) {
  GB_TRY
  if (r == nullptr || bucket_of == nullptr || ready_ns == nullptr)
    throw std::invalid_argument("gb_reducer_param_layout: null argument");
  if (n != r->params.size()) throw std::invalid_argument("gb_reducer_param_layout: wrong parameter count");
  std::fill(bucket_of, bucket_of + n, -1);
  for (const auto& b : r->reducer->get_grad_buckets(/*return_zero_tensors=*/true)) {
    for (const auto& p : b.getParameters()) {
      for (size_t i = 0; i < n; ++i) {
        if (r->params[i].is_same(p)) bucket_of[i] = static_cast<int64_t>(b.getIndex());
      }
    }
  }
  std::vector<int64_t> stats = r->reducer->get_backward_stats();
  for (size_t i = 0; i < n; ++i) ready_ns[i] = i < stats.size() ? stats[i] : -1;
  GB_CATCH_C10
}

}  // extern "C"
