// CUDA graphs (at::cuda::CUDAGraph) and side streams with events, which tch
// does not wrap: `--cuda-graphs` captures a training step or a serving
// forward once and replays it, and the server stages the next batch on a
// stream of its own while the current one computes.
//
// Capture runs on a stream from libtorch's pool, made current on the calling
// thread between capture_begin and capture_end (a graph cannot be captured
// on the legacy default stream), in cudaStreamCaptureModeThreadLocal: the
// process has other threads (the sampler, the data pipeline, other serving
// workers) whose CUDA calls must neither be captured nor break the capture.
// The autocast cast cache is off while capturing, as torch.cuda.graph's
// documentation asks: a cached cast made inside the capture would outlive it.
// Replay is launched on the thread's current stream, so copies into the
// static inputs queued there before it are ordered before it.
//
// Built without CUDA (GPUBENCH_CUDA unset), every function reports that.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/Event.h>

#include <memory>
#include <optional>
#include <stdexcept>

#ifdef GPUBENCH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "shim.h"

namespace {
[[noreturn]] void no_cuda() { throw std::runtime_error("gpubench was built without CUDA: no CUDA graphs or streams"); }
}  // namespace

struct gb_graph {
#ifdef GPUBENCH_CUDA
  at::cuda::CUDAGraph graph;
  int device = -1;
  // The thread's current stream before capture_begin, restored at capture_end.
  std::optional<c10::cuda::CUDAStream> before;
  bool cache_was = true;
  bool captured = false;
#endif
};

struct gb_stream {
#ifdef GPUBENCH_CUDA
  explicit gb_stream(c10::cuda::CUDAStream s) : stream(s) {}
  c10::cuda::CUDAStream stream;
#endif
};

// A device-generic event (c10::Event, through libc10_cuda's guard): the
// CUDA-specific event class inlines CUDA runtime calls, and the shim links
// no CUDA runtime of its own.
struct gb_event {
#ifdef GPUBENCH_CUDA
  c10::Event event{c10::DeviceType::CUDA};
#endif
};

#ifdef GPUBENCH_CUDA
namespace {
// What capture_begin changed on this thread, put back: the autocast cache
// and the current stream.
void restore(gb_graph* g) {
  at::autocast::set_autocast_cache_enabled(g->cache_was);
  c10::cuda::setCurrentCUDAStream(*g->before);
  g->before.reset();
}
}  // namespace
#endif

extern "C" {

char* gb_graph_new(int device, gb_graph** out) {
  GB_TRY
#ifdef GPUBENCH_CUDA
  if (device < 0 || device >= static_cast<int>(c10::cuda::device_count()))
    throw std::invalid_argument("CUDA graph: no CUDA device " + std::to_string(device));
  auto g = std::make_unique<gb_graph>();
  g->device = device;
  *out = g.release();
#else
  (void)device;
  (void)out;
  no_cuda();
#endif
  GB_CATCH
}

void gb_graph_free(gb_graph* g) { delete g; }

// Starts capturing this thread's work on `device` into `g`. With `share` (a
// graph already captured), `g` takes its memory from share's private pool:
// graphs replayed one at a time, whose outputs are read before the next
// replay, can share one pool (serving's batch-size buckets do).
char* gb_graph_capture_begin(gb_graph* g, const gb_graph* share) {
  GB_TRY
#ifdef GPUBENCH_CUDA
  if (g == nullptr) throw std::invalid_argument("gb_graph_capture_begin: null graph");
  if (g->captured || g->before) throw std::logic_error("CUDA graph: already captured");
  const auto dev = static_cast<c10::DeviceIndex>(g->device);
  c10::cuda::set_device(dev);
  // Everything queued so far is finished work before the capture starts
  // (torch.cuda.graph synchronizes too).
  c10::cuda::device_synchronize();
  auto side = c10::cuda::getStreamFromPool(false, dev);
  g->before = c10::cuda::getCurrentCUDAStream(dev);
  c10::cuda::setCurrentCUDAStream(side);
  g->cache_was = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(false);
  try {
    c10::MempoolId_t pool = {0, 0};
    if (share != nullptr) pool = const_cast<gb_graph*>(share)->graph.pool();
    g->graph.capture_begin(pool, cudaStreamCaptureModeThreadLocal);
  } catch (...) {
    restore(g);
    throw;
  }
#else
  (void)g;
  (void)share;
  no_cuda();
#endif
  GB_CATCH
}

// Ends the capture (and instantiates the graph); the thread's stream is
// restored whether or not the capture succeeded.
char* gb_graph_capture_end(gb_graph* g) {
  GB_TRY
#ifdef GPUBENCH_CUDA
  if (g == nullptr || !g->before) throw std::logic_error("CUDA graph: capture_end without capture_begin");
  struct Restore {
    gb_graph* g;
    ~Restore() { restore(g); }
  } restoring{g};
  g->graph.capture_end();
  g->captured = true;
#else
  (void)g;
  no_cuda();
#endif
  GB_CATCH
}

// Launches the captured work on this thread's current stream.
char* gb_graph_replay(gb_graph* g) {
  GB_TRY
#ifdef GPUBENCH_CUDA
  if (g == nullptr || !g->captured) throw std::logic_error("CUDA graph: replay before a capture");
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(g->device));
  g->graph.replay();
#else
  (void)g;
  no_cuda();
#endif
  GB_CATCH
}

// A stream of `device` from libtorch's pool, for work beside the default stream.
char* gb_stream_new(int device, gb_stream** out) {
  GB_TRY
#ifdef GPUBENCH_CUDA
  if (device < 0 || device >= static_cast<int>(c10::cuda::device_count()))
    throw std::invalid_argument("CUDA stream: no CUDA device " + std::to_string(device));
  *out = new gb_stream(c10::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(device)));
#else
  (void)device;
  (void)out;
  no_cuda();
#endif
  GB_CATCH
}

void gb_stream_free(gb_stream* s) { delete s; }

// Makes `s` this thread's current stream for its device; `*before` gets the
// stream it replaces (free it with gb_stream_free), to be made current again
// with this same function.
char* gb_stream_make_current(gb_stream* s, gb_stream** before) {
  GB_TRY
#ifdef GPUBENCH_CUDA
  if (s == nullptr) throw std::invalid_argument("gb_stream_make_current: null stream");
  if (before != nullptr) *before = new gb_stream(c10::cuda::getCurrentCUDAStream(s->stream.device_index()));
  c10::cuda::setCurrentCUDAStream(s->stream);
#else
  (void)s;
  (void)before;
  no_cuda();
#endif
  GB_CATCH
}

// An event recorded now on `s`, or on the current stream of `device` when `s` is null.
char* gb_event_record(gb_stream* s, int device, gb_event** out) {
  GB_TRY
#ifdef GPUBENCH_CUDA
  auto e = std::make_unique<gb_event>();
  if (s != nullptr)
    e->event.record(s->stream.unwrap());
  else
    e->event.record(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).unwrap());
  *out = e.release();
#else
  (void)s;
  (void)device;
  (void)out;
  no_cuda();
#endif
  GB_CATCH
}

// Work queued on `s` (or on `device`'s current stream when `s` is null)
// after this waits for `e`; the host does not wait.
char* gb_event_block(gb_event* e, gb_stream* s, int device) {
  GB_TRY
#ifdef GPUBENCH_CUDA
  if (e == nullptr) throw std::invalid_argument("gb_event_block: null event");
  const auto on = s != nullptr ? s->stream : c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device));
  e->event.block(on.unwrap());
#else
  (void)e;
  (void)s;
  (void)device;
  no_cuda();
#endif
  GB_CATCH
}

// The host waits until the work before `e` is done.
char* gb_event_synchronize(gb_event* e) {
  GB_TRY
#ifdef GPUBENCH_CUDA
  if (e == nullptr) throw std::invalid_argument("gb_event_synchronize: null event");
  e->event.synchronize();
#else
  (void)e;
  no_cuda();
#endif
  GB_CATCH
}

void gb_event_free(gb_event* e) { delete e; }

}  // extern "C"
