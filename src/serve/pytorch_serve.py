#!/usr/bin/env python3
"""gpubench's camera-frame inference server in PyTorch (`gpubench infer --impl pytorch`).

The Rust side writes a job JSON (and, for scenario "arrivals", a schedule of
`id offset_s worker` lines), runs `python pytorch_serve.py --job JOB.json`
next to pytorch_common.py, and computes every statistic from the per-request
records CSV written here: this script only serves and timestamps. It follows
gpubench's Rust server exactly:

- one worker per job device, each with its own model (seed, build_model, eval,
  inference mode, autocast for fp16/bf16), warmed up before the common t0;
- "threads": worker threads in one process share one queue; "processes": one
  spawned process per device, each with its own queue fed with its share of the
  schedule, all started at a common wall-clock time;
- a worker blocks for a request, then batches until max_batch or max_wait_s
  after its first kept request; a request older than drop_older_than_s when
  taken is dropped; after duration_s, what is queued is served until grace_s
  more has passed, and the rest is dropped;
- a batch: frame by frame into buffers made once per worker (no allocation per
  batch, so a frame costs the same in any batch): on the CPU each uint8 frame
  is resized in uint8, on a GPU it is copied over, converted to float at full
  size in one reused frame buffer and resized there (CUDA's bilinear takes no
  uint8); then ImageNet normalization in place; clock reads closed / copied /
  computed / done, each after a device synchronize;
- "overlap" (--overlap on, the default; CUDA only): two sets of buffers, the
  next batch staged in one on a stream of its own while the model reads the
  other, a completer thread per worker timing and recording each batch;
- "cuda_graphs" (--cuda-graphs on): after warm-up, the forward is captured
  once per batch-size bucket (torch.cuda.CUDAGraph) and replayed, a batch in
  the smallest bucket that holds it, as gpubench's server does;
- "offline": an endless backlog (sched 0) taken max_batch at a time;
  "single-stream": one request at a time on the first device.

stdout gets exactly one line, a JSON summary (status ok/failed/oom); all else
goes to stderr. Test hook: the job's "test_crash_worker" K (gpubench sets it
from GPUBENCH_SERVE_CRASH=K, see gpubench's src/internal.rs) makes worker K die
just after t0 (os._exit(3) under "processes", an exception under "threads"),
to check that a dead worker fails the run instead of hanging it.
"""

import argparse
import contextlib
import json
import multiprocessing as mp
import multiprocessing.connection  # noqa: F401  (mp.connection.wait)
import os
import queue
import sys
import threading
import time
import traceback
import types
import warnings

warnings.filterwarnings("ignore", message=".*NumPy.*")
# gpubench writes this file beside pytorch_common.py, the models and helpers
# it shares with pytorch_bench.py.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from pytorch_common import (  # noqa: E402
    AMP_DTYPES,
    MODELS,
    apply_globals,
    build_model,
    device_name,
    is_oom,
    make_sync,
    one_line,
)

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
POLL_S = 0.01  # how long an idle worker blocks before looking at the clock again
START_DELAY_S = 0.2  # "processes": the common start is this far after the last worker is ready
STOP_WAIT_S = 5.0  # "processes": after a failure, how long the others get to stop before they are killed
HEADER = "id,worker,status,sched,taken,closed,copied,computed,done,batch\n"
# torch.manual_seed is process-wide: threads building models at once would share it.
BUILD_LOCK = threading.Lock()


class Aborted(Exception):
    """The run was called off elsewhere (another worker failed, or the parent went away)."""


class Flag:
    """The abort flag: one shared byte, shared by the worker threads and (under
    "processes") by all processes. No lock on purpose: a multiprocessing.Event
    is wedged for good when a process dies while waiting on it (every later
    set() waits for the dead waiter to wake), which would hang the run."""

    def __init__(self, ctx):
        self.v = ctx.RawValue("b", 0)

    def set(self):
        self.v.value = 1

    def is_set(self):
        return self.v.value != 0

    def wait(self, timeout):
        """Sleeps up to timeout seconds; True as soon as the flag is set."""
        end = time.perf_counter() + timeout
        while not self.is_set():
            left = end - time.perf_counter()
            if left <= 0:
                return False
            time.sleep(min(left, 0.05))
        return True


def load_schedule(path):
    """[(id, offset_s, worker)] from `id offset_s worker` lines."""
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            p = line.split()
            if not p:
                continue
            if len(p) != 3:
                raise ValueError(f"{path}:{n}: expected 'id offset_s worker', got {line.strip()!r}")
            out.append((int(p[0]), float(p[1]), int(p[2])))
    return out


def check_job(job):
    choices = {
        "strategy": ("threads", "processes"),
        "scenario": ("arrivals", "offline", "single-stream"),
        "preprocess": ("device", "cpu"),
        "precision": ("fp32", "tf32", "fp16", "bf16"),
        "model": MODELS,
    }
    for key, allowed in choices.items():
        if job[key] not in allowed:
            raise ValueError(f"job: {key} {job[key]!r} is not one of {', '.join(allowed)}")
    if not job["devices"]:
        raise ValueError("job: devices is empty")
    for key in ("max_batch", "frame_pool", "threads_per_worker"):
        if job[key] < 1:
            raise ValueError(f"job: {key} must be at least 1, not {job[key]}")
    if job["scenario"] == "arrivals" and not job["schedule"]:
        raise ValueError("job: scenario arrivals needs a schedule")


def make_frames(job, pin):
    """The frame pool: request i shows frame i % frame_pool (pinned for CUDA copies)."""
    gen = torch.Generator().manual_seed(job["seed"])
    shape = (job["frame_h"], job["frame_w"], 3)
    frames = [torch.randint(0, 256, shape, dtype=torch.uint8, generator=gen) for _ in range(job["frame_pool"])]
    return [f.pin_memory() for f in frames] if pin else frames


class Worker:
    """One model on one device and the batch path; built in the thread that serves with it."""

    def __init__(self, job, k, device, frames):
        self.k = k
        self.dev = torch.device(device)
        self.cuda = self.dev.type == "cuda"
        if self.cuda:
            torch.cuda.set_device(self.dev)
        # Intra-op threads are per calling thread (OpenMP), so each worker sets its own.
        torch.set_num_threads(job["threads_per_worker"])
        with BUILD_LOCK:
            torch.manual_seed(job["seed"])
            model = build_model(job["model"], job["num_classes"])
        model = model.to(self.dev).eval()
        self.channels_last = job["channels_last"]
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.model = model
        self.sync = make_sync(self.dev)
        self.frames = frames
        self.size = job["image_size"]
        self.on_device = job["preprocess"] == "device"
        pre = self.dev if self.on_device else torch.device("cpu")
        # (x/255 - mean)/std as (x - 255 mean)/(255 std): one pass fewer.
        self.mean = torch.tensor(MEAN, device=pre).mul(255.0).view(1, 3, 1, 1)
        self.std = torch.tensor(STD, device=pre).mul(255.0).view(1, 3, 1, 1)
        b, h, w, size = job["max_batch"], job["frame_h"], job["frame_w"], self.size
        fmt = torch.channels_last if self.channels_last else torch.contiguous_format
        # As gpubench's server: on a GPU (--overlap on, the default) two sets of
        # buffers, the next batch staged in one on a stream of its own while
        # the model reads the other.
        self.overlap = self.cuda and job.get("overlap", False)
        self.slots = []
        for _ in range(2 if self.overlap else 1):
            slot = types.SimpleNamespace(to_device=None)
            slot.inputs = torch.empty((b, 3, size, size), device=pre).contiguous(memory_format=fmt)
            if self.cuda and not self.on_device:
                slot.inputs = slot.inputs.pin_memory()
                slot.to_device = torch.empty_like(slot.inputs, device=self.dev)
            if self.cuda and self.on_device:
                slot.pinned = torch.empty((b, h, w, 3), dtype=torch.uint8, pin_memory=True)
                slot.raw = torch.empty((b, h, w, 3), dtype=torch.uint8, device=self.dev)
                slot.full = torch.empty((1, 3, h, w), device=self.dev)
            self.slots.append(slot)
        self.copy_stream = torch.cuda.Stream(self.dev) if self.overlap else None
        self.pipe = None
        # Test hook (job "predictions_dir"): each served request's id and logits.
        self.predictions = [] if job.get("predictions_dir") else None
        self.small = torch.empty((1, 3, size, size), dtype=torch.uint8)
        self.resize = (h, w) != (size, size)
        amp = AMP_DTYPES.get(job["precision"])
        # Under CUDA graphs the cast cache is off, as torch.cuda.graph's notes ask.
        cache = not job.get("cuda_graphs", False)
        self.amp = (
            (lambda: torch.autocast(self.dev.type, dtype=amp, cache_enabled=cache))
            if amp is not None
            else contextlib.nullcontext
        )
        # --cuda-graphs: (bucket, graph, static output), smallest bucket first,
        # every bucket reading the buffer the model is fed from.
        self.graphs = []
        first = self.slots[0]
        self.static = first.to_device if first.to_device is not None else first.inputs
        if self.overlap:
            # The next batch is staged into a slot while the current one may
            # still be copying out of the other: the graphs read their own buffer.
            self.static = torch.empty_like(self.static)

    def capture(self, buckets):
        """As gpubench's server (serve::graphs): one graph per bucket (the job's
        graph_buckets, gpubench's), largest first, each after one eager
        forward at its shape, all in one memory pool."""
        made, pool = [], None
        for b in reversed(buckets):
            x = self.static[:b]
            with self.amp():
                self.model(x)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool, capture_error_mode="thread_local"):
                with self.amp():
                    out = self.model(x)
            pool = pool if pool is not None else g.pool()
            made.append((b, g, out))
        self.graphs = list(reversed(made))

    def forward(self, x):
        if not self.graphs:
            with self.amp():
                return self.model(x)
        n = x.shape[0]
        fits = [(g, out) for b, g, out in self.graphs if b >= n]
        if not fits:
            raise RuntimeError(f"a batch of {n} is larger than the largest graph")
        g, out = fits[0]
        if x.data_ptr() != self.static.data_ptr():
            self.static[:n].copy_(x)
        g.replay()
        return out[:n]

    def prepare(self, ids, k=0):
        """The batch of `ids`, resized and normalized frame by frame into slot k's buffers."""
        n, size, b = len(self.frames), (self.size, self.size), self.slots[k]
        if self.cuda and self.on_device:
            for i, r in enumerate(ids):
                b.pinned[i].copy_(self.frames[r % n])
            raw = b.raw[: len(ids)]
            raw.copy_(b.pinned[: len(ids)])
            for i in range(len(ids)):
                frame = raw[i : i + 1].permute(0, 3, 1, 2)
                if self.resize:
                    b.full.copy_(frame)
                    torch.ops.aten.upsample_bilinear2d.out(b.full, size, False, out=b.inputs[i : i + 1])
                else:
                    b.inputs[i : i + 1].copy_(frame)
        else:
            for i, r in enumerate(ids):
                frame = self.frames[r % n].permute(2, 0, 1).unsqueeze(0)
                if self.resize:
                    torch.ops.aten.upsample_bilinear2d.out(frame, size, False, out=self.small)
                    frame = self.small
                b.inputs[i : i + 1].copy_(frame)
        x = b.inputs[: len(ids)].sub_(self.mean).div_(self.std)
        if b.to_device is not None:
            d = b.to_device[: len(ids)]
            d.copy_(x, non_blocking=True)
            return d
        return x

    def launch(self, ids, k):
        """Under overlap: stages `ids` in slot k on the copy stream and queues
        the forward after it (an event orders them); returns the events
        (input ready, forward done) and the predictions, still on the GPU."""
        with torch.cuda.stream(self.copy_stream):
            x = self.prepare(ids, k)
            ready = torch.cuda.Event()
            ready.record(self.copy_stream)
        torch.cuda.current_stream(self.dev).wait_event(ready)
        logits = self.forward(x)
        classes = logits.argmax(1)
        # A graph's output is overwritten by the next replay: the hook keeps a copy.
        kept = logits.clone() if self.predictions is not None else None
        done = torch.cuda.Event()
        done.record()
        return ready, done, classes, kept

    def run(self, ids, clock):
        """Serves one batch; returns the clock at copied, computed, done."""
        x = self.prepare(ids)
        self.sync()
        copied = clock()
        logits = self.forward(x)
        self.sync()
        computed = clock()
        logits.argmax(1).cpu()
        self.sync()
        done = clock()
        self.keep(ids, logits)
        return copied, computed, done

    def keep(self, ids, logits):
        if self.predictions is not None:
            self.predictions.extend(zip(ids, logits.float().cpu().tolist()))

    def write_predictions(self, folder):
        with open(os.path.join(folder, f"worker-{self.k}.txt"), "w") as f:
            for i, row in self.predictions:
                f.write(" ".join([str(i)] + [repr(v) for v in row]) + "\n")


class Pipe:
    """Under overlap, as gpubench's server: the worker stages and launches a
    batch in a free slot and hands it here; this thread waits for its input
    (copied) and its forward (computed), reads the predictions (done),
    records every request and frees the slot. At most two batches are in
    flight; after an error the rest are recorded as dropped."""

    def __init__(self, server, w):
        self.server, self.w = server, w
        self.free, self.pending = queue.Queue(), queue.Queue()
        for k in range(len(w.slots)):
            self.free.put(k)
        self.error = None
        self.thread = threading.Thread(target=self.complete, daemon=True)
        self.thread.start()

    def submit(self, batch, closed):
        k = self.free.get()
        if k is None:
            self.drop(batch)
            raise RuntimeError(f"the completer stopped: {self.error}")
        try:
            launched = self.w.launch([i for i, _, _ in batch], k)
        except BaseException:
            self.drop(batch)
            raise
        self.pending.put((batch, k, closed, launched))

    def drop(self, batch):
        for i, sched, taken in batch:
            self.server.records.append((i, self.w.k, sched, taken, None))

    def complete(self):
        torch.cuda.set_device(self.w.dev)
        now = self.server.now
        while True:
            item = self.pending.get()
            if item is None:
                return
            batch, k, closed, (ready, done, classes, kept) = item
            if self.error is not None:
                self.drop(batch)
                continue
            try:
                ready.synchronize()
                copied = now()
                done.synchronize()
                computed = now()
                classes.cpu()
                served = (closed, copied, computed, now(), len(batch))
                if kept is not None:
                    self.w.keep([i for i, _, _ in batch], kept)
            except BaseException as e:
                self.error = one_line(e)
                self.drop(batch)
                self.free.put(None)
                continue
            for i, sched, taken in batch:
                self.server.records.append((i, self.w.k, sched, taken, served))
            self.free.put(k)

    def close(self):
        self.pending.put(None)
        self.thread.join()
        if self.error is not None:
            raise RuntimeError(self.error)


class Server:
    """The workers of one process (all of them under "threads", one under
    "processes"), their queue, and for "arrivals" the thread that fills it."""

    def __init__(self, job, workers, entries, id_base, id_stride, abort, in_child):
        self.job = job
        self.workers = workers  # [(worker index, device)]
        self.entries = entries  # [(id, offset_s)] for this process's queue
        self.id_base, self.id_stride = id_base, id_stride  # "offline" ids: base + stride*j
        self.abort = abort
        self.in_child = in_child
        self.frames = make_frames(job, any(torch.device(d).type == "cuda" for _, d in workers))
        self.q = queue.Queue()
        self.gen_done = threading.Event()
        self.ready = threading.Semaphore(0)
        self.go = threading.Event()
        self.lock = threading.Lock()
        self.next_j = 0
        self.t0 = None
        self.error = None
        # (id, worker, sched, taken, (closed, copied, computed, done, batch) or None when dropped);
        # list.append is atomic, so all workers share it.
        self.records = []

    def now(self):
        return time.perf_counter() - self.t0

    def run(self, wait_start):
        """Builds and warms the workers, gets t0 from wait_start() once all are
        ready, serves, and raises the first worker's error."""
        threads = [threading.Thread(target=self.work, args=wd, daemon=True) for wd in self.workers]
        if self.job["scenario"] == "arrivals":
            threads.append(threading.Thread(target=self.generate, daemon=True))
        for t in threads[: len(self.workers)]:
            t.start()
        try:
            for _ in self.workers:
                while not self.ready.acquire(timeout=0.1):
                    if self.abort.is_set():
                        raise Aborted()
            self.t0 = wait_start()
            self.go.set()
            for t in threads[len(self.workers) :]:
                t.start()
        except Aborted:
            pass
        except BaseException:
            self.abort.set()
            raise
        finally:
            self.go.set()
            for t in threads:
                if t.ident is not None:
                    t.join()
        if self.error is not None:
            raise RuntimeError(self.error)
        if self.abort.is_set():
            raise Aborted()

    def work(self, k, device):
        try:
            with torch.inference_mode():
                w = Worker(self.job, k, device, self.frames)
                # As gpubench's server: under cudnn.benchmark every batch size is
                # tuned once before the load, not inside its p99.
                cudnn = self.job["cudnn_benchmark"] and torch.device(device).type == "cuda"
                tuned = list(range(self.job["max_batch"], 0, -1)) if cudnn else []
                for b in tuned + [self.job["max_batch"], 1] * self.job["warmup_batches"]:
                    if self.abort.is_set():
                        return
                    w.run(range(b), time.perf_counter)
                if self.job.get("cuda_graphs"):
                    w.capture(self.job["graph_buckets"])
                    for b in (self.job["max_batch"], 1):
                        w.run(range(b), time.perf_counter)
                if w.predictions is not None:
                    w.predictions.clear()
                self.ready.release()
                self.go.wait()
                if self.abort.is_set():
                    return
                time.sleep(max(0.0, self.t0 - time.perf_counter()))
                if k == self.job.get("test_crash_worker"):
                    if self.in_child:
                        os._exit(3)
                    raise RuntimeError(f"test hook: worker {k} fails as asked")
                scenario = self.job["scenario"]
                w.pipe = Pipe(self, w) if w.overlap else None
                try:
                    if scenario == "arrivals":
                        self.serve_arrivals(w)
                    elif scenario == "offline":
                        self.serve_offline(w)
                    else:
                        self.serve_single(w)
                finally:
                    if w.pipe is not None:
                        w.pipe.close()
                    if w.predictions is not None:
                        w.write_predictions(self.job["predictions_dir"])
        except BaseException as e:
            traceback.print_exc()
            with self.lock:
                if self.error is None:
                    self.error = f"worker {k} ({device}): {one_line(e)}"
            self.abort.set()

    def generate(self):
        """Puts each request in the queue at t0 + offset; a late put keeps its scheduled time."""
        try:
            for i, off in self.entries:
                delay = self.t0 + off - time.perf_counter()
                if delay > 0 and self.abort.wait(delay):
                    return
                self.q.put((i, off))
        finally:
            self.gen_done.set()

    def serve(self, w, batch, closed=None):
        if w.pipe is not None:
            return w.pipe.submit(batch, self.now() if closed is None else closed)
        if closed is None:
            w.sync()
            closed = self.now()
        copied, computed, done = w.run([i for i, _, _ in batch], self.now)
        served = (closed, copied, computed, done, len(batch))
        for i, sched, taken in batch:
            self.records.append((i, w.k, sched, taken, served))

    def take(self, k, hard_end):
        """Forms one batch (dropping stale requests on the way); [] when the queue stayed empty."""
        job = self.job
        drop = job["drop_older_than_s"]
        batch, deadline = [], None
        while len(batch) < job["max_batch"]:
            if deadline is None:
                if self.abort.is_set():
                    return batch
                timeout = min(POLL_S, max(hard_end - self.now(), 0.001))
            else:
                timeout = deadline - self.now()
                if timeout <= 0:
                    break
            try:
                i, sched = self.q.get(timeout=timeout)
            except queue.Empty:
                if deadline is None:
                    return batch
                break
            taken = self.now()
            if drop is not None and taken - sched > drop:
                self.records.append((i, k, sched, taken, None))
                continue
            batch.append((i, sched, taken))
            if deadline is None:
                deadline = taken + job["max_wait_s"]
        return batch

    def serve_arrivals(self, w):
        end = self.job["duration_s"]
        hard_end = end + self.job["grace_s"]
        while not self.abort.is_set():
            if self.now() >= hard_end:
                return self.drop_rest(w.k)
            batch = self.take(w.k, hard_end)
            if batch:
                self.serve(w, batch)
            elif self.gen_done.is_set() and self.q.empty() and self.now() >= end:
                return

    def drop_rest(self, k):
        """Past the grace period: whatever is queued, or still to come from a late generator, is dropped."""
        while not self.abort.is_set():
            try:
                i, sched = self.q.get(timeout=POLL_S)
            except queue.Empty:
                if self.gen_done.is_set() and self.q.empty():
                    return
                continue
            self.records.append((i, k, sched, self.now(), None))

    def serve_offline(self, w):
        b = self.job["max_batch"]
        while not self.abort.is_set() and self.now() < self.job["duration_s"]:
            with self.lock:
                j = self.next_j
                self.next_j += b
            w.sync()
            t = self.now()
            self.serve(w, [(self.id_base + self.id_stride * (j + m), 0.0, t) for m in range(b)], closed=t)

    def serve_single(self, w):
        i = 0
        while not self.abort.is_set() and self.now() < self.job["duration_s"]:
            w.sync()
            t = self.now()
            self.serve(w, [(i, t, t)], closed=t)
            i += 1


def write_rows(f, rows):
    for i, k, sched, taken, served in rows:
        if served is None:
            f.write(f"{i},{k},dropped,{sched:.9f},{taken:.9f},,,,,\n")
        else:
            c, cp, cm, d, b = served
            f.write(f"{i},{k},done,{sched:.9f},{taken:.9f},{c:.9f},{cp:.9f},{cm:.9f},{d:.9f},{b}\n")


def set_globals(job):
    apply_globals(
        types.SimpleNamespace(precision=job["precision"], cudnn_benchmark=job["cudnn_benchmark"], deterministic=False)
    )


def worker_devices(job):
    return job["devices"][:1] if job["scenario"] == "single-stream" else job["devices"]


def run_threads(job):
    entries = [(i, off) for i, off, _ in load_schedule(job["schedule"])] if job["scenario"] == "arrivals" else []
    set_globals(job)
    srv = Server(job, list(enumerate(worker_devices(job))), entries, 0, 1, Flag(mp), False)
    try:
        srv.run(lambda: time.perf_counter() + 0.05)
    finally:
        with open(job["records"], "w") as f:
            f.write(HEADER)
            write_rows(f, srv.records)


def child_main(job, k, nproc, part, abort, conn):
    """One "processes" worker: build, warm up, report ready, start at the parent's wall time."""
    srv = None
    code = 0
    try:
        set_globals(job)
        entries = []
        if job["scenario"] == "arrivals":
            entries = [(i, off) for i, off, w in load_schedule(job["schedule"]) if w == k]
        srv = Server(job, [(k, job["devices"][k])], entries, k, nproc, abort, True)

        def wait_start():
            conn.send(("ready", k))
            while not conn.poll(0.2):
                if abort.is_set():
                    raise Aborted()
            try:
                start = conn.recv()
            except EOFError:  # the parent is gone
                raise Aborted() from None
            # Both clocks read back to back: the wall-clock start on this process's perf_counter.
            return time.perf_counter() + (start - time.time())

        srv.run(wait_start)
    except Aborted:
        pass
    except BaseException as e:
        traceback.print_exc()
        msg = one_line(e) if srv is not None and srv.error is not None else f"worker {k}: {one_line(e)}"
        abort.set()
        code = 1
        with contextlib.suppress(OSError):
            conn.send(("error", k, msg))
    finally:
        with open(part, "w") as f:
            write_rows(f, srv.records if srv is not None else [])
    sys.exit(code)


def run_processes(job):
    nproc = len(job["devices"])
    if job["scenario"] == "arrivals":
        bad = sorted({w for _, _, w in load_schedule(job["schedule"]) if not 0 <= w < nproc})
        if bad:
            raise ValueError(f"schedule routes requests to workers {bad[:5]}, but there are {nproc} processes")
    n = len(worker_devices(job))
    ctx = mp.get_context("spawn")
    abort = Flag(ctx)
    # One pipe per child (no lock shared between children, which a dying one could hold).
    pipes = [ctx.Pipe() for _ in range(n)]
    parts = [f"{job['records']}.part{k}" for k in range(n)]
    for p in parts:
        if os.path.exists(p):
            os.remove(p)
    procs = [
        ctx.Process(target=child_main, args=(job, k, nproc, parts[k], abort, pipes[k][1]), daemon=True)
        for k in range(n)
    ]
    conns = [c for c, _ in pipes]
    live = list(conns)
    state = {"ready": set(), "error": None}

    def receive(conn):
        try:
            msg = conn.recv()
        except (EOFError, OSError):  # that child is gone; its exit code tells
            live.remove(conn)
            return
        if msg[0] == "ready":
            state["ready"].add(msg[1])
        elif msg[0] == "error" and state["error"] is None:
            state["error"] = msg[2]

    started = False
    try:
        for p in procs:
            p.start()
        for _, c in pipes:
            c.close()  # the parent keeps only its ends, so a dead child reads as EOF
        while state["error"] is None:
            for conn in mp.connection.wait(live, timeout=0.1):
                receive(conn)
            if not started and len(state["ready"]) == n:
                start = time.time() + START_DELAY_S
                for conn in conns:
                    with contextlib.suppress(OSError):
                        conn.send(start)
                started = True
            for k, p in enumerate(procs):
                if p.exitcode not in (None, 0) and state["error"] is None:
                    # Its own message, when it sent one, says more than its exit code.
                    while state["error"] is None and conns[k] in live and conns[k].poll(0.2):
                        receive(conns[k])
                    if state["error"] is None:
                        state["error"] = f"worker {k} ({job['devices'][k]}) exited with code {p.exitcode}"
            if all(p.exitcode == 0 for p in procs):
                break
    finally:
        if state["error"] is not None or any(p.exitcode is None for p in procs):
            abort.set()  # the others stop at their next check and write what they have
            deadline = time.time() + STOP_WAIT_S
            for p in procs:
                if p.pid is not None:
                    p.join(max(0.0, deadline - time.time()))
            for p in procs:
                if p.is_alive():
                    p.terminate()
                    p.join(1.0)
                if p.is_alive():
                    p.kill()
        for p in procs:
            if p.pid is not None:
                p.join()
        with open(job["records"], "w") as f:
            f.write(HEADER)
            for part in parts:
                if os.path.exists(part):
                    with open(part) as pf:
                        f.write(pf.read())
                    os.remove(part)
    if state["error"] is not None:
        raise RuntimeError(state["error"])


def main(argv=None):
    # Only the summary may reach stdout: keep the real one aside and send fd 1
    # (torch's, any library's, the spawned workers') to stderr.
    out_fd = os.dup(1)
    os.dup2(2, 1)
    p = argparse.ArgumentParser(description="gpubench's inference server in PyTorch")
    p.add_argument("--job", required=True, help="job JSON written by gpubench infer")
    args = p.parse_args(argv)
    status, error, first_device = "ok", "", "cpu"
    try:
        with open(args.job) as f:
            job = json.load(f)
        first_device = (job.get("devices") or ["cpu"])[0]
        # A run that fails before serving still leaves a (header-only) records file.
        with open(job["records"], "w") as f:
            f.write(HEADER)
        check_job(job)
        if job["strategy"] == "threads":
            run_threads(job)
        else:
            run_processes(job)
    except Exception as e:
        traceback.print_exc()
        error = one_line(e)
        status = "oom" if is_oom(error) else "failed"
    try:
        name = device_name(torch.device(first_device))
    except Exception:
        name = str(first_device)
    summary = {
        "torch_version": torch.__version__,
        "python_version": sys.version.split()[0],
        "device_name": name,
        "status": status,
        "error": error,
    }
    os.write(out_fd, (json.dumps(summary) + "\n").encode())
    return 0 if status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
