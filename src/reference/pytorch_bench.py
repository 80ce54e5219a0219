#!/usr/bin/env python3
"""gpubench's PyTorch reference: the same training loop, written in PyTorch Python.

`gpubench run --impl pytorch ...` runs this file (embedded in the binary) with
the torch venv that scripts/setup made, and turns the JSON it writes into a
row of gpubench's CSV schema with impl=pytorch. It can also be run by hand:

    python pytorch_bench.py --model resnet18 --image-size 64 --batch-size 8 --steps 5
    python -m torch.distributed.run --standalone --nproc-per-node 2 pytorch_bench.py --strategy ddp ...

Everything here mirrors gpubench (src/bench/measure.rs, src/strategy, src/data):

- models: torchvision's ResNet-18/34/50/101/152 layout (v1.5: the stride of a
  bottleneck sits on its 3x3 convolution) and gpubench's BatchNorm-free
  `tinycnn`; parameter names equal gpubench's (and torchvision's);
- data: torch.manual_seed(data_seed), then 4 batches, each randn(b,3,s,s) then
  randint(num_classes,(b,)), made on the input device and rotated; ddp rank r
  uses data_seed + 7919*r (mod 2**64);
- optimizer: SGD(momentum, dampening 0, weight decay, no Nesterov), or
  AdamW(betas 0.9/0.999, eps 1e-8, decoupled weight decay); grads set
  to None by zero_grad (libtorch's C++ default, which gpubench uses);
- step: forward and cross-entropy (mean) under autocast for fp16/bf16,
  zero_grad, backward (scaled by torch.amp.GradScaler for fp16), step;
- precision knobs as gpubench sets them: fp32 turns TF32 off for matmuls and
  cuDNN (PyTorch's own default leaves it on for convolutions), tf32 turns it
  on; --channels-last, --cudnn-benchmark, --deterministic;
- timing: warm-up (steps or seconds) untimed; each timed step is clocked from
  taking the batch to a device synchronize after the optimizer step; the loss
  is read (and, under ddp, averaged over ranks with rank 0's stop decision)
  outside the timed region; a ddp step lasts as long as its slowest rank;
- strategies: single, torch.nn.DataParallel (CUDA only: on the CPU PyTorch's
  DataParallel just calls the module, so it is refused), and
  DistributedDataParallel under torch.distributed.run (gloo on the CPU, NCCL
  on CUDA).

With --init FILE (a safetensors file written by `gpubench run --save-init`)
the model starts from gpubench's weights and the file's data seed, so both
implementations start identical.
"""

import argparse
import contextlib
import inspect
import json
import math
import os
import struct
import sys
import time
import warnings

# torch warns at import when numpy is absent; nothing here needs numpy.
warnings.filterwarnings("ignore", message=".*NumPy.*")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# Written beside this file by gpubench; run by hand, it is beside it too.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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

# The oldest torch this runs on is 1.12 (Python 3.8): the legacy route for
# GPUs that torch 2.11 has no kernels for (K80). Newer APIs are guarded.
TORCH = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])

DISTINCT_BATCHES = 4
RANK_SEED_STRIDE = 7919
U64 = 1 << 64
# ------------------------------------------------------- gpubench's init file

SAFETENSORS_DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}


def read_init(path):
    """Reads a safetensors file: ({name: tensor}, metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path} is not a safetensors file (too short)")
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    data = raw[8 + n :]
    tensors = {}
    for name, info in header.items():
        dtype = SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        lo, hi = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[lo:hi]), dtype=dtype) if hi > lo else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(info["shape"]).clone()
    return tensors, meta


def load_init(model, tensors, path):
    """Copies the file's weights into the model; every parameter and buffer
    (bar BatchNorm's num_batches_tracked, which gpubench does not keep) must be
    there with its shape."""
    state = model.state_dict()
    expected = {k for k in state if not k.endswith("num_batches_tracked")}
    missing = sorted(expected - set(tensors))
    extra = sorted(set(tensors) - expected)
    if missing or extra:
        raise ValueError(f"{path} does not fit this model: missing {missing[:3]}, unexpected {extra[:3]}")
    with torch.no_grad():
        for k in expected:
            if tuple(state[k].shape) != tuple(tensors[k].shape):
                raise ValueError(f"{path}: {k} has shape {list(tensors[k].shape)}, model wants {list(state[k].shape)}")
            state[k].copy_(tensors[k])


# ---------------------------------------------------------------- the loop


class Synthetic:
    def __init__(self, batch, image_size, num_classes, device, seed, channels_last=False):
        torch.manual_seed(seed % U64)
        self.batches = []
        for _ in range(DISTINCT_BATCHES):
            x = torch.randn(batch, 3, image_size, image_size, device=device)
            y = torch.randint(num_classes, (batch,), dtype=torch.int64, device=device)
            self.batches.append((x, y))
        if channels_last:
            self.batches = [(x.contiguous(memory_format=torch.channels_last), y) for x, y in self.batches]
        self.next = 0

    def next_batch(self):
        b = self.batches[self.next]
        self.next = (self.next + 1) % len(self.batches)
        return b

    def next_step(self):
        return [self.next_batch()]


class Accumulated:
    """--grad-accum K: micro-batch k of rank r is what rank r*K + k of a job
    K times as wide sees (its seed), as gpubench's data::make_source."""

    def __init__(self, batch, args, device, rank):
        k = args.grad_accum
        self.sources = [
            Synthetic(
                batch,
                args.image_size,
                args.num_classes,
                device,
                (args.data_seed + RANK_SEED_STRIDE * (rank * k + i)) % U64,
                args.channels_last,
            )
            for i in range(k)
        ]

    def next_step(self):
        return [s.next_batch() for s in self.sources]


def make_data(batch, args, device, rank):
    if args.grad_accum == 1:
        seed = (args.data_seed + RANK_SEED_STRIDE * rank) % U64
        return Synthetic(batch, args.image_size, args.num_classes, device, seed, args.channels_last)
    return Accumulated(batch, args, device, rank)


def rust_float(v):
    """A non-finite float as gpubench's messages write it (NaN, inf)."""
    return "NaN" if math.isnan(v) else str(v)


def measure(args, step, agree, data, sync):
    """Warm-up then timed steps, as gpubench's bench::measure."""
    m = {"step_secs": [], "losses": [], "warmup_steps": 0, "loss_first": None, "status": None, "error": ""}
    try:
        t_warm = time.perf_counter()
        skip = args.warmup_time is None and args.warmup == 0
        while not skip:
            loss_t = step(data.next_step())
            m["warmup_steps"] += 1
            if args.warmup_time is None:
                stop = m["warmup_steps"] >= args.warmup
            else:
                stop = time.perf_counter() - t_warm >= args.warmup_time
            loss, stop = agree(loss_t, stop)
            if m["loss_first"] is None:
                m["loss_first"] = loss
            if not math.isfinite(loss):
                m["status"] = "diverged"
                m["error"] = f"loss became {rust_float(loss)} during warm-up step {m['warmup_steps']}"
                return m
            if stop:
                break
        sync()
        t_run = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            loss_t = step(data.next_step())
            sync()
            dt = time.perf_counter() - t0
            m["step_secs"].append(dt)
            n = len(m["step_secs"])
            if args.duration is None:
                stop = n >= args.steps
            else:
                stop = time.perf_counter() - t_run >= args.duration
            loss, stop = agree(loss_t, stop)
            m["losses"].append(loss)
            if m["loss_first"] is None:
                m["loss_first"] = loss
            if not math.isfinite(loss):
                m["status"] = "diverged"
                m["error"] = f"loss became {rust_float(loss)} at timed step {n}"
                return m
            if stop:
                break
        m["status"] = "ok"
    except Exception as e:  # a failure after the run started is recorded, not lost
        msg = one_line(e)
        m["status"] = "oom" if is_oom(msg) else "failed"
        m["error"] = msg
    return m


def default_threads():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def build(args, device):
    """The model (on `device`, from --init when given) and its optimizer."""
    torch.manual_seed(args.seed % U64)
    model = build_model(args.model, args.num_classes, inplace=not args.out_of_place)
    if args.checkpoint:
        model.checkpoint_stages = True
    if args.init_tensors is not None:
        load_init(model, args.init_tensors, args.init)
    model = model.to(device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    adamw = args.optimizer == "adamw"
    lr = args.lr if args.lr is not None else (0.001 if adamw else 0.1) * args.global_batch / 256.0
    if adamw:
        opt = torch.optim.AdamW(
            model.parameters(),
            lr=lr,
            betas=(0.9, 0.999),
            eps=1e-8,
            weight_decay=args.weight_decay,
            **impl_keywords(torch.optim.AdamW, args.optimizer_impl),
        )
    else:
        opt = torch.optim.SGD(
            model.parameters(),
            lr=lr,
            momentum=args.momentum,
            dampening=0.0,
            weight_decay=args.weight_decay,
            nesterov=False,
            **impl_keywords(torch.optim.SGD, args.optimizer_impl),
        )
    return model, opt


def impl_keywords(cls, impl):
    """The optimizer's keywords for gpubench's --optimizer-impl; an older
    torch without them (the legacy route) is told which to pass instead."""
    params = inspect.signature(cls.__init__).parameters
    want = {"fused": {"fused": True}, "foreach": {"foreach": True}, "loop": {"foreach": False}}[impl]
    missing = [k for k in want if k not in params]
    if missing and impl != "loop":
        raise SystemExit(
            f"torch {torch.__version__}'s {cls.__name__} has no {missing[0]}= argument: "
            "run gpubench with --optimizer-impl loop for this torch"
        )
    return {k: v for k, v in want.items() if k in params}


INIT_SCALE = 2.0**16


def make_step(model, opt, args, device):
    amp = AMP_DTYPES.get(args.precision)
    # GradScaler's defaults, the initial scale named so that skips can be counted.
    scaler = None
    if args.precision == "fp16":
        if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):  # torch >= 2.3
            scaler = torch.amp.GradScaler(device.type, init_scale=INIT_SCALE)
        elif device.type == "cuda":
            scaler = torch.cuda.amp.GradScaler(init_scale=INIT_SCALE)
        else:
            raise SystemExit(f"error: fp16 on the CPU needs torch >= 2.3 (this is {torch.__version__}); use bf16")
    args.scaler = scaler

    # No autocast object at all without mixed precision: torch < 2 refuses
    # one with another dtype than bf16 on the CPU, even disabled. Under CUDA
    # graphs the cast cache is off, as torch.cuda.graph's notes ask.
    cache = not args.cuda_graphs
    region = (
        (lambda: torch.autocast(device.type, dtype=amp, cache_enabled=cache))
        if amp is not None
        else contextlib.nullcontext
    )

    def step(micro):
        """One optimizer step over its micro-batches (one without
        --grad-accum): each loss weighted 1/K; DDP's no_sync for all but the
        last, so the Reducer all-reduces once."""
        k = len(micro)
        opt.zero_grad()
        losses = []
        for i, (x, y) in enumerate(micro):
            quiet = k > 1 and i < k - 1 and hasattr(model, "no_sync")
            with model.no_sync() if quiet else contextlib.nullcontext():
                with region():
                    loss = F.cross_entropy(model(x), y)
                part = loss / k if k > 1 else loss
                if scaler is None:
                    part.backward()
                else:
                    scaler.scale(part).backward()
            losses.append(loss.detach())
        if scaler is None:
            opt.step()
        else:
            scaler.step(opt)
            scaler.update()
        return losses[0] if k == 1 else torch.stack(losses).mean()

    return graphed(step, opt, device) if args.cuda_graphs else step


EAGER_STEPS = 3


def graphed(step, opt, device):
    """--cuda-graphs, as gpubench's strategy::graphed: EAGER_STEPS eager steps
    on a side stream (cuDNN's tuning, the momentum buffers and GradScaler's
    state made outside the capture), gradients dropped, the whole step
    (forward, loss, backward, GradScaler's unscale, the fused optimizer and
    the scale update, none of which syncs with fused=True) captured once on a
    copy of the first batch, then each step's batch copied into the static
    tensors and the graph replayed. The loss returned is a copy."""
    state = {}

    def run(micro):
        if len(micro) != 1:
            raise SystemExit("error: --cuda-graphs captures one micro-batch per step")
        (x, y) = micro[0]
        if not state:
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                for _ in range(EAGER_STEPS):
                    step(micro)
            torch.cuda.current_stream(device).wait_stream(side)
            sx, sy = x.clone(), y.clone()
            opt.zero_grad(set_to_none=True)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, capture_error_mode="thread_local"):
                loss = step([(sx, sy)])
            state.update(g=g, x=sx, y=sy, loss=loss)
        if x.data_ptr() != state["x"].data_ptr():
            state["x"].copy_(x)
            state["y"].copy_(y)
        state["g"].replay()
        return state["loss"].clone()

    return run


def skipped_steps(scaler, m):
    """Steps GradScaler skipped (non-finite gradients), read after the run so
    that no sync enters the timed steps: each skip halves the scale, and below
    growth_interval steps it never grows. None when that cannot be told."""
    if scaler is None:
        return 0
    steps = m["warmup_steps"] + len(m["step_secs"])
    if steps >= scaler.get_growth_interval():
        return None
    return max(0, round(math.log2(INIT_SCALE / scaler.get_scale())))


def local_agree(loss_t, stop):
    return loss_t.item(), stop


def summary(args, device, m, **extra):
    out = {
        "impl": "pytorch",
        "torch_version": torch.__version__,
        "python_version": sys.version.split()[0],
        "strategy": args.strategy,
        "device_name": device_name(device),
        # The CUDA this torch was built for (None for a CPU build): on the
        # legacy route it is not gpubench's.
        "cuda_version": torch.version.cuda if device.type == "cuda" else None,
        "threads": torch.get_num_threads(),
        "global_batch": args.global_batch,
        "data_seed": args.data_seed,
        "skipped_steps": skipped_steps(getattr(args, "scaler", None), m),
    }
    out.update(m)
    out.update(extra)
    return out


def run_local(args):
    """single, or torch.nn.DataParallel over --gpus."""
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.device == "cuda":
        ids = args.gpu_ids or [0]
        device = torch.device("cuda", ids[0])
    else:
        ids = []
        device = torch.device("cpu")
    if args.strategy == "dp":
        if device.type != "cuda":
            raise SystemExit(
                "error: PyTorch's DataParallel has no CPU replicas (on the CPU it just calls the module); "
                "use --strategy single, or dp on CUDA devices"
            )
        args.global_batch = args.batch_size * len(ids) * args.grad_accum
    else:
        args.global_batch = args.batch_size * args.grad_accum
    try:
        apply_globals(args)
        model, opt = build(args, device)
        if args.strategy == "dp":
            model = nn.DataParallel(model, device_ids=ids, output_device=ids[0])
        model.train()
        data = make_data(args.global_batch // args.grad_accum, args, device, 0)
    except Exception as e:
        msg = one_line(e)
        m = {"step_secs": [], "losses": [], "warmup_steps": 0, "loss_first": None}
        m.update(status="oom" if is_oom(msg) else "failed", error=msg)
        return summary(args, device, m, world_size=1, backend="")
    m = measure(args, make_step(model, opt, args, device), local_agree, data, make_sync(device))
    return summary(args, device, m, world_size=1, backend="")


def run_ddp(args):
    """One DistributedDataParallel rank, started by torch.distributed.run."""
    import datetime

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if args.device == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        if args.threads is not None:
            torch.set_num_threads(args.threads)
    else:
        device = torch.device("cpu")
        # Split the cores among this node's ranks, as gpubench does.
        total = args.threads if args.threads is not None else default_threads()
        torch.set_num_threads(max(1, total // max(1, local_world)))
    backend = args.backend or ("nccl" if device.type == "cuda" else "gloo")
    timeout = datetime.timedelta(seconds=args.dist_timeout)
    # device_id (eager NCCL init) exists from torch 2.3.
    kw = {"device_id": device} if device.type == "cuda" and TORCH >= (2, 3) else {}
    dist.init_process_group(backend=backend, timeout=timeout, **kw)
    args.global_batch = args.batch_size * world * args.grad_accum
    apply_globals(args)
    model, opt = build(args, device)
    model.train()
    ddp = DDP(
        model,
        device_ids=[local_rank] if device.type == "cuda" else None,
        bucket_cap_mb=args.bucket_cap_mb,
        find_unused_parameters=args.find_unused_parameters,
        gradient_as_bucket_view=args.gradient_as_bucket_view,
        broadcast_buffers=not args.no_broadcast_buffers,
    )
    if args.comm_hook != "none":
        # PyTorch's own compression hooks, as gpubench's --comm-hook mirrors them.
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        hook = {"fp16": default_hooks.fp16_compress_hook, "bf16": default_hooks.bf16_compress_hook}[args.comm_hook]
        ddp.register_comm_hook(state=None, hook=hook)
    data = make_data(args.batch_size, args, device, rank)

    def agree(loss_t, stop):
        flag = 1.0 if (rank == 0 and stop) else 0.0
        t = torch.tensor([loss_t.item() / world, flag], dtype=torch.float64, device=device)
        dist.all_reduce(t)
        v = t.tolist()
        return v[0], v[1] > 0.5

    m = measure(args, make_step(ddp, opt, args, device), agree, data, make_sync(device))
    combined = combine_ranks(m, rank, world, device)
    dist.destroy_process_group()
    if rank != 0:
        return None
    return summary(args, device, combined, world_size=world, backend=backend)


STATUS_CODES = ["ok", "diverged", "oom", "failed"]
MESSAGE_BYTES = 1024


def combine_ranks(m, rank, world, device):
    """Rank 0's measurement with every rank's outcome folded in, as gpubench
    combines ranks: a step lasts as long as its slowest rank; the loss is the
    agreed mean; the first rank that did not finish names the outcome. Plain
    tensor collectives (all_gather_object needs numpy, which torch lacks here)."""
    import torch.distributed as dist

    n = torch.tensor([len(m["step_secs"])], dtype=torch.int64, device=device)
    dist.all_reduce(n, op=dist.ReduceOp.MIN)
    k = int(n.item())
    steps = torch.tensor(m["step_secs"][:k] or [0.0], dtype=torch.float64, device=device)
    dist.all_reduce(steps, op=dist.ReduceOp.MAX)
    code = STATUS_CODES.index(m["status"]) if m["status"] in STATUS_CODES else len(STATUS_CODES) - 1
    msg = (bytes([code]) + m["error"].encode("utf-8"))[:MESSAGE_BYTES]
    mine = torch.zeros(MESSAGE_BYTES + 2, dtype=torch.uint8)
    mine[0] = len(msg) // 256
    mine[1] = len(msg) % 256
    mine[2 : 2 + len(msg)] = torch.tensor(list(msg), dtype=torch.uint8)
    mine = mine.to(device)
    outcomes = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(outcomes, mine)
    out = dict(m, step_secs=steps.tolist()[:k])
    for r, t in enumerate(outcomes):
        b = bytes(t.cpu().tolist())
        length = b[0] * 256 + b[1]
        body = b[2 : 2 + length]
        status = STATUS_CODES[body[0]]
        if status != "ok":
            out["status"] = status
            out["error"] = f"rank {r}: " + body[1:].decode("utf-8", "replace")
            break
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="gpubench's training loop in PyTorch (the reference implementation)")
    p.add_argument("--strategy", choices=["single", "dp", "ddp"], default="single")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda if available")
    p.add_argument("--gpus", default=None, help="CUDA ordinals for dp, comma-separated")
    p.add_argument("--model", choices=MODELS, default="resnet50")
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch-size", type=int, default=64, help="per device")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--duration", type=float, default=None, help="seconds (instead of --steps)")
    p.add_argument("--warmup-time", type=float, default=None, help="seconds (instead of --warmup)")
    p.add_argument("--lr", type=float, default=None, help="default 0.1 * global batch / 256")
    p.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    p.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step")
    p.add_argument(
        "--checkpoint", action="store_true", help="torch.utils.checkpoint around the stem and each ResNet stage"
    )
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument(
        "--optimizer-impl",
        choices=["fused", "foreach", "loop"],
        default="loop",
        help="SGD(fused=True), SGD(foreach=True) or SGD(foreach=False)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-seed", type=int, default=None, help="default seed ^ 0x5eed (or the --init file's)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--precision", choices=["fp32", "tf32", "fp16", "bf16"], default="fp32")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--cudnn-benchmark", action="store_true")
    p.add_argument("--cuda-graphs", action="store_true", help="capture the step once, replay it (CUDA, single/dp)")
    p.add_argument("--deterministic", action="store_true")
    p.add_argument("--init", default=None, help="safetensors file from gpubench run --save-init")
    p.add_argument("--backend", choices=["gloo", "nccl"], default=None)
    p.add_argument("--bucket-cap-mb", type=float, default=25.0)
    p.add_argument("--gradient-as-bucket-view", action="store_true")
    p.add_argument("--find-unused-parameters", action="store_true")
    p.add_argument("--no-broadcast-buffers", action="store_true")
    p.add_argument("--dist-timeout", type=float, default=300.0, help="seconds")
    p.add_argument("--comm-hook", choices=["none", "fp16", "bf16"], default="none")
    p.add_argument("--json-out", default=None, help="write the summary here (default: stdout)")
    p.add_argument("--out-of-place", action="store_true", help="out-of-place ReLU and residual add, as tch's ResNet")
    args = p.parse_args(argv)
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.gpu_ids = [int(g) for g in args.gpus.split(",")] if args.gpus else None
    args.init_tensors = None
    meta = {}
    if args.init is not None:
        args.init_tensors, meta = read_init(args.init)
        if meta.get("model") not in (None, args.model):
            p.error(f"--init {args.init} holds {meta['model']} weights, not {args.model}")
    if args.data_seed is None:
        args.data_seed = int(meta["data_seed"]) if "data_seed" in meta else (args.seed ^ 0x5EED)
    return args


def main(argv=None):
    args = parse_args(argv)
    out = run_ddp(args) if args.strategy == "ddp" else run_local(args)
    if out is None:
        return 0
    # JSON has no NaN or infinity: a diverged loss is written as null.
    out["losses"] = [x if math.isfinite(x) else None for x in out["losses"]]
    if out["loss_first"] is not None and not math.isfinite(out["loss_first"]):
        out["loss_first"] = None
    text = json.dumps(out, allow_nan=False)
    if args.json_out:
        tmp = args.json_out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.json_out)
    else:
        print(text)
    return 0 if out["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
