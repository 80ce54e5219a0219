//! The column reference of gpubench's CSV files, printed by `gpubench
//! schema`. The writers serialize `csv::Row`, `metrics::devices::DeviceMetrics`
//! and `metrics::sampler::DeviceSample`; the tests below keep these tables
//! equal to the headers they produce, column for column, so that the
//! reference cannot drift from the files.

/// One column of a gpubench CSV file.
pub(crate) struct ColumnDoc {
    pub name: &'static str,
    pub unit: &'static str,
    pub meaning: &'static str,
}

/// The results file (`--out`, CSV schema v5): one row per run, columns in the
/// order of `Row`'s fields, which is the header order.
pub(crate) const RESULTS: &[ColumnDoc] = &[
    // run identity
    ColumnDoc {
        name: "schema_version",
        unit: "",
        meaning: "Version of the CSV schema; 2. Files of schema 1 are read by column name; `gpubench upgrade FILE` \
                  rewrites one to schema 2 so that rows can be appended to it.",
    },
    ColumnDoc {
        name: "run_id",
        unit: "",
        meaning: "Unique id of the run (start time and process id, in hex); a ddp job's ranks share rank 0's.",
    },
    ColumnDoc {
        name: "timestamp",
        unit: "",
        meaning: "When the run started, RFC 3339 UTC to the second (a row the sweep writes for a cell that died: \
                  when the sweep wrote it).",
    },
    ColumnDoc { name: "gpubench_version", unit: "", meaning: "Version of the gpubench binary that wrote the row." },
    ColumnDoc { name: "host", unit: "", meaning: "Host name of the machine (of global rank 0 for ddp)." },
    ColumnDoc { name: "label", unit: "", meaning: "The --label text, e.g. \"V100 box\"; empty without one." },
    // set-up
    ColumnDoc {
        name: "impl",
        unit: "",
        meaning: "Who produced the figures: gpubench, pytorch (--impl pytorch, PyTorch's own implementation) or \
                  published (reference figures from results/reference/).",
    },
    ColumnDoc {
        name: "mode",
        unit: "",
        meaning: "What was measured: train (gpubench run), infer (gpubench infer), allreduce (gpubench \
                  allreduce) or peak (gpubench peak --out: a device's matmul peak at one precision, in \
                  achieved_tflops); empty in files written before the column existed (training rows).",
    },
    ColumnDoc {
        name: "strategy",
        unit: "",
        meaning: "Parallel strategy: single, dp or ddp for training; replicas, processes or dp for serving.",
    },
    ColumnDoc { name: "backend", unit: "", meaning: "Process-group backend, gloo or nccl, for ddp; empty otherwise." },
    ColumnDoc { name: "device_kind", unit: "", meaning: "cuda or cpu." },
    ColumnDoc {
        name: "devices",
        unit: "",
        meaning: "The devices, e.g. cuda:0,1,2,3 or cpu×2; multi-node ddp appends the node count (×N nodes).",
    },
    ColumnDoc { name: "n_devices", unit: "", meaning: "Number of devices: dp's replicas or ddp's ranks (world size)." },
    ColumnDoc { name: "device_name", unit: "", meaning: "GPU name of the first device, or the CPU model on CPU runs." },
    ColumnDoc {
        name: "driver_version",
        unit: "",
        meaning: "NVIDIA driver version (from /proc/driver/nvidia/version); empty without a driver.",
    },
    ColumnDoc { name: "cuda_version", unit: "", meaning: "CUDA runtime version libtorch uses; empty on CPU runs." },
    ColumnDoc {
        name: "libtorch_version",
        unit: "",
        meaning: "libtorch version, e.g. 2.11.0 (for --impl pytorch rows, the torch version that ran).",
    },
    ColumnDoc {
        name: "scheduler",
        unit: "",
        meaning: "Where the run ran: slurm, kubernetes or none (read from the scheduler's environment).",
    },
    ColumnDoc {
        name: "job_id",
        unit: "",
        meaning: "Slurm: the array's job id (SLURM_ARRAY_JOB_ID), else the job's; Kubernetes: the Job's name.",
    },
    ColumnDoc {
        name: "array_task",
        unit: "",
        meaning: "Slurm: the array task (SLURM_ARRAY_TASK_ID); Kubernetes: the Indexed Job's completion index.",
    },
    ColumnDoc { name: "node_list", unit: "", meaning: "Slurm: the job's nodes (SLURM_JOB_NODELIST); Kubernetes: the node." },
    // workload
    ColumnDoc { name: "model", unit: "", meaning: "Model trained: resnet18/34/50/101/152 or tinycnn." },
    ColumnDoc { name: "image_size", unit: "px", meaning: "Input height = width, in pixels." },
    ColumnDoc { name: "precision", unit: "", meaning: "Numeric precision: fp32, tf32, fp16 or bf16." },
    ColumnDoc {
        name: "channels_last",
        unit: "",
        meaning: "Whether --channels-last (NHWC weights and inputs) was on: true or false.",
    },
    ColumnDoc { name: "cudnn_benchmark", unit: "", meaning: "Whether cuDNN autotuning was on: true or false." },
    ColumnDoc {
        name: "deterministic",
        unit: "",
        meaning: "Whether --deterministic (deterministic algorithms, autotuning off) was on: true or false.",
    },
    ColumnDoc { name: "batch_per_device", unit: "", meaning: "Images per device per step (--batch-size)." },
    ColumnDoc {
        name: "global_batch",
        unit: "",
        meaning: "Images per optimizer step over all devices: batch_per_device × n_devices × grad_accum.",
    },
    ColumnDoc {
        name: "grad_accum",
        unit: "",
        meaning: "Micro-batches per optimizer step (--grad-accum; 1 without). Throughput counts every image of \
                  every micro-batch; ddp all-reduces once per step. Empty in rows before schema v3.",
    },
    ColumnDoc {
        name: "steps",
        unit: "",
        meaning: "Timed steps that ran: --steps, or as many as fitted in --duration.",
    },
    ColumnDoc { name: "warmup", unit: "", meaning: "Warm-up steps that ran before timing started (never timed)." },
    ColumnDoc {
        name: "warmup_end",
        unit: "",
        meaning:
            "How warm-up ended: steps, time, or with --warmup auto \"steady after N steps\" or \"not steady after N \
                  steps (the cap)\" (a run whose step times never settled).",
    },
    ColumnDoc {
        name: "timed_end",
        unit: "",
        meaning: "How the timed steps ended: steps, duration, or with --duration auto \"target met: ±x%\" or \"max \
                  duration reached: ±x%\" (the throughput interval achieved).",
    },
    ColumnDoc { name: "data", unit: "", meaning: "Input source: synthetic, or imagefolder:PATH for --data PATH." },
    ColumnDoc {
        name: "data_skipped",
        unit: "",
        meaning: "--data PATH: distinct unreadable files skipped (a file several ddp ranks met counts once); empty \
                  for synthetic data.",
    },
    ColumnDoc {
        name: "workers",
        unit: "",
        meaning: "--data PATH: decode threads per device; empty for synthetic data.",
    },
    ColumnDoc { name: "seed", unit: "", meaning: "The --seed for model initialisation and synthetic data." },
    ColumnDoc {
        name: "threads",
        unit: "",
        meaning: "libtorch intra-op threads of the (master) process: dp's one process, ddp's rank 0, the PyTorch \
                  process of a pytorch row; for serving rows, each worker's share of the cores (gpubench's and \
                  PyTorch's servers alike).",
    },
    ColumnDoc {
        name: "variant",
        unit: "",
        meaning: "The run options that change what is measured and have no column of their own, where they differ \
                  from run's defaults, as option=value words: num-classes, lr, momentum, weight-decay, \
                  optimizer (the optimizer step's implementation, fused or foreach; rows without it ran \
                  libtorch's per-parameter loop, as every row before --optimizer-impl did), the bare word adamw \
                  (--optimizer adamw; weight-decay then against AdamW's default 0.05, momentum unused), checkpoint \
                  (--checkpoint), seed, threads and workers (as asked), ddp's bucket-cap-mb, gradient-as-bucket-view, find-unused-parameters and \
                  no-broadcast-buffers, breakdown, profile, nvtx, init-from (the file's name). Rows that differ in it \
                  are different configurations in report, compare, check and a sweep's --resume; empty for serving, \
                  all-reduce and published rows.",
    },
    // results
    ColumnDoc {
        name: "throughput_img_s",
        unit: "img/s",
        meaning: "Global images per second over the timed steps: global_batch × steps ÷ the sum of step times.",
    },
    ColumnDoc { name: "throughput_per_device_img_s", unit: "img/s", meaning: "throughput_img_s ÷ n_devices." },
    ColumnDoc {
        name: "step_ms_mean",
        unit: "ms",
        meaning: "Mean timed step time (ddp: each step as long as its slowest rank).",
    },
    ColumnDoc {
        name: "step_ms_p50",
        unit: "ms",
        meaning: "Median timed step time (percentiles interpolate linearly, as numpy's default).",
    },
    ColumnDoc { name: "step_ms_p90", unit: "ms", meaning: "90th percentile of the timed step times." },
    ColumnDoc { name: "step_ms_p99", unit: "ms", meaning: "99th percentile of the timed step times." },
    ColumnDoc {
        name: "step_ms_std",
        unit: "ms",
        meaning: "Sample standard deviation (n − 1) of the timed step times; 0 for a single step.",
    },
    ColumnDoc {
        name: "throughput_ci95_lo",
        unit: "img/s",
        meaning: "Lower end of throughput's 95 % interval within this run (batch means over contiguous steps); empty \
                  below 10 timed steps. It does not cover drift between runs: that needs repeats.",
    },
    ColumnDoc { name: "throughput_ci95_hi", unit: "img/s", meaning: "Upper end of that interval." },
    ColumnDoc {
        name: "step_ms_p50_ci95_lo",
        unit: "ms",
        meaning: "Lower end of the median step time's 95 % interval within this run (circular block bootstrap); \
                  empty below 10 timed steps.",
    },
    ColumnDoc { name: "step_ms_p50_ci95_hi", unit: "ms", meaning: "Upper end of that interval." },
    ColumnDoc {
        name: "loss_first",
        unit: "",
        meaning: "Loss of the first step, warm-up included (ddp: the mean over ranks).",
    },
    ColumnDoc { name: "loss_last", unit: "", meaning: "Loss of the last timed step (ddp: the mean over ranks)." },
    ColumnDoc {
        name: "skipped_steps",
        unit: "",
        meaning: "fp16: steps the dynamic loss scaler skipped for non-finite gradients; 0 at other precisions.",
    },
    // per-device summary over the timed window
    ColumnDoc {
        name: "peak_mem_alloc_mb",
        unit: "MiB",
        meaning: "Highest, over devices, CUDA caching-allocator peak allocated memory since the end of warm-up.",
    },
    ColumnDoc {
        name: "peak_mem_reserved_mb",
        unit: "MiB",
        meaning: "Highest, over devices, CUDA caching-allocator peak reserved memory since the end of warm-up.",
    },
    ColumnDoc {
        name: "nvml_mem_peak_mb",
        unit: "MiB",
        meaning: "Highest, over devices, NVML peak memory used on the device (all processes) in the timed window.",
    },
    ColumnDoc {
        name: "util_mean_pct",
        unit: "%",
        meaning: "Mean over devices of each device's mean NVML GPU utilization in the timed window.",
    },
    ColumnDoc {
        name: "util_p95_pct",
        unit: "%",
        meaning: "The highest of the devices' 95th percentiles of NVML GPU utilization in the timed window.",
    },
    ColumnDoc {
        name: "power_mean_w",
        unit: "W",
        meaning: "Mean over devices of each device's mean NVML power draw in the timed window.",
    },
    ColumnDoc {
        name: "mem_imbalance",
        unit: "",
        meaning: "Max ÷ min peak memory across devices (allocator peak, else NVML); 1.00 = even; needs 2+ devices.",
    },
    ColumnDoc {
        name: "mem_params_mb",
        unit: "MiB",
        meaning: "Trainable parameters on the first device (dp's master, ddp's rank 0): their exact bytes.",
    },
    ColumnDoc {
        name: "mem_grads_mb",
        unit: "MiB",
        meaning: "Their gradients after the last step: exact bytes (under --gradient-as-bucket-view they are views \
                  of ddp's buckets, so counted twice with mem_buckets_mb).",
    },
    ColumnDoc {
        name: "mem_optimizer_mb",
        unit: "MiB",
        meaning: "The optimizer's state: measured from its buffers for --optimizer-impl fused and foreach (SGD's \
                  momentum, AdamW's two moments and step counts); for libtorch's loop computed from its definition \
                  (momentum: 1x the parameters, AdamW: 2x), its buffers being out of reach.",
    },
    ColumnDoc {
        name: "mem_buckets_mb",
        unit: "MiB",
        meaning: "ddp: the Reducer's gradient buckets on rank 0 (the sum of their sizes); empty otherwise.",
    },
    ColumnDoc {
        name: "mem_activations_mb",
        unit: "MiB",
        meaning: "The largest timed step's peak above what was live when it began: activations and the step's \
                  temporaries. What was live includes the previous step's gradients, which the step drops at its \
                  start and backward makes again, so they are not in it. CUDA: the caching allocator's allocated bytes. CPU: what libtorch itself allocates, \
                  counted by a wrapper of its CPU allocator (not the resident set, which glibc distorts); dp's CPU \
                  replicas share one process, so it is all of theirs.",
    },
    ColumnDoc {
        name: "dp_master_input_mb",
        unit: "MiB",
        meaning: "dp on 2+ devices, the master's extra memory by cause, computed from the tensors' sizes: the global \
                  input batch beyond the master's own chunk (DataParallel's input lives on the master). The \
                  optimizer's state, on the master alone, is mem_optimizer_mb.",
    },
    ColumnDoc {
        name: "dp_master_outputs_mb",
        unit: "MiB",
        meaning: "dp on 2+ devices: the gathered outputs on the master, the loss's saved log-softmax and, in \
                  backward, their gradient (3x the global batch's logits; the loss itself is one number).",
    },
    ColumnDoc {
        name: "dp_master_reduce_mb",
        unit: "MiB",
        meaning: "dp on 2+ devices: the gradient sum's buffers on the master. Coalesced (CUDA, distinct devices): \
                  the flat accumulator and one replica's flat copy, 2x the gradients; else one gradient tensor \
                  at a time, the largest.",
    },
    ColumnDoc {
        name: "dp_replicate_ms",
        unit: "ms",
        meaning: "dp on 2+ devices: median per timed step of the master's parameters and buffers copied onto the \
                  other replicas, host-timed. Timed on the CPU, whose ops return when done, and on CUDA only with \
                  --breakdown (the devices synchronized at its bounds); empty otherwise, rather than CUDA's \
                  launch times.",
    },
    ColumnDoc {
        name: "dp_scatter_ms",
        unit: "ms",
        meaning: "dp on 2+ devices: median per timed step of the batch split and copied to the replicas (timed as \
                  dp_replicate_ms).",
    },
    ColumnDoc {
        name: "dp_gather_ms",
        unit: "ms",
        meaning: "dp on 2+ devices: median per timed step of the outputs copied to the master and concatenated, \
                  and the loss computed there (timed as dp_replicate_ms).",
    },
    ColumnDoc {
        name: "dp_reduce_ms",
        unit: "ms",
        meaning: "dp on 2+ devices: median per timed step of the replicas' gradients summed into the master's \
                  (timed as dp_replicate_ms).",
    },
    ColumnDoc {
        name: "dp_compute_ms",
        unit: "ms",
        meaning: "dp on 2+ devices: median per timed step of the replicas' forward passes (in parallel) and the \
                  backward pass (through the gather and the loss on the master too, one autograd pass): what the \
                  master waits for besides its own work (timed as dp_replicate_ms).",
    },
    ColumnDoc {
        name: "alloc_retries",
        unit: "",
        meaning: "CUDA: times the caching allocator's cudaMalloc failed and it freed its cache and tried again \
                  (each a device-wide sync; a sign the batch is at the edge), over the run, summed over the \
                  process's devices (ddp: rank 0's).",
    },
    ColumnDoc {
        name: "alloc_ooms",
        unit: "",
        meaning: "CUDA: out-of-memory errors the caching allocator raised over the run, as alloc_retries counts them.",
    },
    ColumnDoc {
        name: "other_procs_mb",
        unit: "MiB",
        meaning: "NVML: the most GPU memory that processes outside this run held on its devices during the timed \
                  window (stray contexts on GPU 0 are a common cause of 'GPU 0 uses more'); ddp: rank 0's device.",
    },
    ColumnDoc {
        name: "slowest_rank",
        unit: "",
        meaning: "ddp on 2+ ranks: the rank with the longest compute per step (the Reducer's forward plus backward \
                  compute, averaged over its sampled iterations); wall step times are equal across ranks.",
    },
    ColumnDoc {
        name: "rank_compute_excess_pct",
        unit: "%",
        meaning: "ddp on 2+ ranks: the slowest rank's compute over the median of the other ranks' (a straggler's \
                  margin).",
    },
    ColumnDoc {
        name: "rank_wait_ms",
        unit: "ms",
        meaning: "ddp on 2+ ranks: the slowest rank's compute minus the median of the others', per step: what the \
                  others wait for it at the all-reduce.",
    },
    ColumnDoc {
        name: "model_gflop_per_img",
        unit: "GFLOP",
        meaning: "The model's arithmetic per image, counted from gpubench's own architecture (arch.rs): 2 FLOPs \
                  per multiply-add of every convolution and the classifier; training rows 3x the forward pass \
                  (backward is twice it), serving rows the forward pass.",
    },
    ColumnDoc {
        name: "achieved_tflops",
        unit: "TFLOP/s",
        meaning: "throughput_img_s x model_gflop_per_img, all devices together. Peak rows: the median of the \
                  matmul rounds.",
    },
    ColumnDoc {
        name: "mfu_pct",
        unit: "%",
        meaning: "Per device: achieved TFLOP/s against the matmul peak `gpubench peak` measured on this device \
                  name and precision (kept in ~/.cache/gpubench/peaks.json); empty when none was measured.",
    },
    ColumnDoc {
        name: "mfu_datasheet_pct",
        unit: "%",
        meaning: "Per device: achieved TFLOP/s against NVIDIA's dense datasheet peak for this GPU and precision \
                  (H200, H100 SXM and PCIe, A100, V100, K80); empty for other devices.",
    },
    ColumnDoc {
        name: "img_per_joule",
        unit: "img/J",
        meaning: "Images per joule over the timed window, all devices together: from the devices' energy \
                  counters (NVML's total energy on Volta and newer; RAPL's packages on a CPU host that exposes \
                  them, which most VMs do not), else from NVML's mean power (a K80); empty on a CPU without \
                  RAPL. ddp: the power of every rank's device.",
    },
    ColumnDoc {
        name: "util_spread_pct",
        unit: "%",
        meaning: "Max − min mean GPU utilization across devices, in percentage points.",
    },
    ColumnDoc {
        name: "master_mem_excess_pct",
        unit: "%",
        meaning: "dp only: the master's peak memory over the mean of the other devices', in %.",
    },
    ColumnDoc {
        name: "master_util_excess_pct",
        unit: "%",
        meaning: "dp only: the master's mean GPU utilization minus the other devices' mean, in percentage points.",
    },
    ColumnDoc {
        name: "cpu_util_pct",
        unit: "%",
        meaning: "CPU time ÷ wall time of the driving process over the timed window, in % of one core (200 = two \
                  cores busy); the highest over processes.",
    },
    ColumnDoc {
        name: "peak_rss_mb",
        unit: "MiB",
        meaning: "Peak resident memory of the driving process over its whole lifetime, the highest over processes \
                  (sweep-written rows: the peak the sweep sampled).",
    },
    // time breakdown per step
    ColumnDoc {
        name: "data_wait_ms",
        unit: "ms",
        meaning: "Mean time a timed step waited for its input batch (ddp: rank 0's).",
    },
    ColumnDoc {
        name: "data_wait_share",
        unit: "",
        meaning: "data_wait_ms ÷ the mean step time, a fraction from 0 to 1; over 0.10 the run is input-bound.",
    },
    ColumnDoc {
        name: "forward_ms",
        unit: "ms",
        meaning: "--breakdown only: mean forward phase per step, up to the loss (dp: with replicate, scatter and \
                  gather; ddp: with the Reducer's preparation and buffer broadcast).",
    },
    ColumnDoc {
        name: "backward_ms",
        unit: "ms",
        meaning: "--breakdown only: mean zero-grad and backward phase per step (dp: with the gradient sum on the \
                  master; ddp: with the overlapped all-reduce).",
    },
    ColumnDoc { name: "optimizer_ms", unit: "ms", meaning: "--breakdown only: mean optimizer step per step." },
    // ddp: the Reducer's own averaged runtime statistics (rank 0's)
    ColumnDoc {
        name: "ddp_forward_compute_ms",
        unit: "ms",
        meaning: "ddp: the c10d Reducer's average forward compute time per iteration (rank 0's).",
    },
    ColumnDoc {
        name: "ddp_backward_compute_ms",
        unit: "ms",
        meaning: "ddp: the Reducer's average backward compute time per iteration (rank 0's).",
    },
    ColumnDoc {
        name: "ddp_backward_comm_ms",
        unit: "ms",
        meaning: "ddp: the Reducer's average gradient all-reduce (communication) time per iteration (rank 0's).",
    },
    ColumnDoc {
        name: "ddp_overlap_ms",
        unit: "ms",
        meaning: "ddp: the Reducer's average time communication ran while backward was still computing (rank 0's).",
    },
    ColumnDoc { name: "ddp_buckets", unit: "", meaning: "ddp: number of gradient buckets the Reducer all-reduces." },
    ColumnDoc {
        name: "comm_hook",
        unit: "",
        meaning: "ddp: --comm-hook, the gradient compression before the all-reduce: none, fp16 (libtorch's builtin \
                  FP16 hook) or bf16; empty for other strategies.",
    },
    // serving
    ColumnDoc {
        name: "scenario",
        unit: "",
        meaning: "infer: how requests arrived: offline, server (Poisson), streams (cameras) or single-stream.",
    },
    ColumnDoc { name: "streams", unit: "", meaning: "infer, streams: number of cameras." },
    ColumnDoc { name: "fps", unit: "1/s", meaning: "infer, streams: frames per second per camera." },
    ColumnDoc {
        name: "offered_rate",
        unit: "req/s",
        meaning: "infer: requests per second the load offered (server: --rate; streams: streams × fps); empty for \
                  offline and single-stream, which go as fast as they are served.",
    },
    ColumnDoc {
        name: "achieved_rate",
        unit: "req/s",
        meaning: "infer: requests answered inside the load's window, per second (also in throughput_img_s, with \
                  its interval).",
    },
    ColumnDoc { name: "latency_bound_ms", unit: "ms", meaning: "infer: the --latency-bound for p99, if given." },
    ColumnDoc {
        name: "requests",
        unit: "",
        meaning: "infer: requests issued (offline: taken from the backlog); requests = completed + dropped.",
    },
    ColumnDoc { name: "completed", unit: "", meaning: "infer: requests answered." },
    ColumnDoc {
        name: "dropped",
        unit: "",
        meaning: "infer: requests dropped: older than --drop-older-than when taken, or still queued when the run \
                  ended (served for as long again as the window, at least 1 s, then dropped).",
    },
    ColumnDoc { name: "batches", unit: "", meaning: "infer: batches served (dynamic batching)." },
    ColumnDoc { name: "batch_mean", unit: "", meaning: "infer: mean requests per batch: completed ÷ batches." },
    ColumnDoc {
        name: "latency_ms_p50",
        unit: "ms",
        meaning: "infer: median latency from a request's scheduled arrival to its result on the host (queueing \
                  included, no coordinated omission); empty for offline.",
    },
    ColumnDoc { name: "latency_ms_p90", unit: "ms", meaning: "infer: 90th percentile latency." },
    ColumnDoc { name: "latency_ms_p99", unit: "ms", meaning: "infer: 99th percentile latency." },
    ColumnDoc { name: "latency_ms_max", unit: "ms", meaning: "infer: largest latency." },
    ColumnDoc {
        name: "queue_ms_mean",
        unit: "ms",
        meaning: "infer: mean time from scheduled arrival until a worker took the request.",
    },
    ColumnDoc {
        name: "batch_ms_mean",
        unit: "ms",
        meaning: "infer: mean time from being taken until its batch closed (waiting for more requests).",
    },
    ColumnDoc {
        name: "input_ms_mean",
        unit: "ms",
        meaning: "infer: the time a request's batch took to be preprocessed and copied to the device, averaged over \
                  requests: a batch's time, not a per-frame cost (a note gives that when input dwarfs compute).",
    },
    ColumnDoc {
        name: "compute_ms_mean",
        unit: "ms",
        meaning: "infer: the forward time of a request's batch, averaged over requests (a batch's time).",
    },
    ColumnDoc {
        name: "output_ms_mean",
        unit: "ms",
        meaning: "infer: the time a request's batch took to copy its predictions back to the host, averaged over \
                  requests.",
    },
    ColumnDoc {
        name: "generator_late_pct",
        unit: "%",
        meaning: "infer: share of requests the load generator issued over 1 ms late (their latency still counts \
                  from the schedule); above 1 % the generator, not the server, limited the load.",
    },
    // communication
    ColumnDoc {
        name: "bytes",
        unit: "B",
        meaning: "allreduce: message size; its time per operation is in step_ms_mean (mean over back-to-back \
                  operations), step_ms_p50 and step_ms_p99 (each timed alone), averaged over ranks.",
    },
    ColumnDoc {
        name: "in_place",
        unit: "",
        meaning: "allreduce: true for in-place; false for out-of-place (a copy into the output buffer, then c10d's \
                  in-place all-reduce).",
    },
    ColumnDoc { name: "algbw_gbs", unit: "GB/s", meaning: "allreduce: bytes ÷ mean time, decimal GB/s (nccl-tests)." },
    ColumnDoc {
        name: "busbw_gbs",
        unit: "GB/s",
        meaning:
            "allreduce: algbw × 2(n−1)/n for n ranks, the bandwidth a ring needs from the slowest link (nccl-tests).",
    },
    ColumnDoc {
        name: "nwrong",
        unit: "",
        meaning: "allreduce: elements that differed from the expected sum in the check, over all ranks (0 is right).",
    },
    // outcome
    ColumnDoc {
        name: "interference",
        unit: "",
        meaning:
            "What disturbed the timed window, \"; \"-separated: other processes' CPU use and load, CPU steal, GPU \
                  throttling, other processes' GPU memory; empty when clean.",
    },
    ColumnDoc { name: "status", unit: "", meaning: "How the run ended: ok, diverged, failed or oom." },
    ColumnDoc {
        name: "error",
        unit: "",
        meaning: "The error on one line, for any status but ok (ddp: prefixed with the failing rank).",
    },
    ColumnDoc {
        name: "note",
        unit: "",
        meaning: "Remarks about how the row was measured (dp's master and thread split, the torch that ran a \
                  pytorch row, a row the sweep wrote for a dead cell).",
    },
    ColumnDoc { name: "source", unit: "", meaning: "Citation for published reference rows; empty for measured rows." },
];

/// `<out>.devices.csv` (for `--out r.csv`, `r.devices.csv`): one row per
/// (run, device), the identity columns and then `DeviceMetrics`' fields.
pub(crate) const DEVICES: &[ColumnDoc] = &[
    ColumnDoc { name: "run_id", unit: "", meaning: "The run's id, as in the results file's run_id column." },
    ColumnDoc {
        name: "strategy",
        unit: "",
        meaning: "Parallel strategy: single, dp or ddp for training; replicas, processes or dp for serving.",
    },
    ColumnDoc { name: "n_devices", unit: "", meaning: "Number of devices of the run." },
    ColumnDoc {
        name: "device",
        unit: "",
        meaning: "The device, e.g. cuda:0, or cpu (single, dp) or cpu:rankN (ddp) on CPU runs.",
    },
    ColumnDoc {
        name: "role",
        unit: "",
        meaning: "master or replica (dp on CUDA), process (dp on the CPU, one process), rank N (ddp), single.",
    },
    ColumnDoc {
        name: "peak_alloc_mb",
        unit: "MiB",
        meaning: "CUDA caching allocator's peak allocated memory on this device since the end of warm-up.",
    },
    ColumnDoc {
        name: "peak_reserved_mb",
        unit: "MiB",
        meaning: "CUDA caching allocator's peak reserved memory on this device since the end of warm-up.",
    },
    ColumnDoc {
        name: "nvml_mem_peak_mb",
        unit: "MiB",
        meaning: "NVML: peak memory used on the device (all processes, CUDA context included) in the timed window.",
    },
    ColumnDoc { name: "mem_total_mb", unit: "MiB", meaning: "NVML: the device's total memory." },
    ColumnDoc {
        name: "util_mean_pct",
        unit: "%",
        meaning: "NVML: mean GPU utilization of the device over the timed window.",
    },
    ColumnDoc {
        name: "util_p95_pct",
        unit: "%",
        meaning: "NVML: 95th percentile of the device's GPU utilization over the timed window.",
    },
    ColumnDoc {
        name: "mem_util_mean_pct",
        unit: "%",
        meaning:
            "NVML: mean memory utilization (share of time device memory was read or written) over the timed window.",
    },
    ColumnDoc { name: "power_mean_w", unit: "W", meaning: "NVML: mean power draw over the timed window." },
    ColumnDoc { name: "sm_clock_mean_mhz", unit: "MHz", meaning: "NVML: mean SM clock over the timed window." },
    ColumnDoc {
        name: "temperature_max_c",
        unit: "°C",
        meaning: "NVML: highest GPU temperature over the timed window.",
    },
    ColumnDoc {
        name: "cpu_util_pct",
        unit: "%",
        meaning: "The process driving this device: CPU time ÷ wall time over the timed window, in % of one core \
                  (200 = two cores busy).",
    },
    ColumnDoc {
        name: "peak_rss_mb",
        unit: "MiB",
        meaning: "The process driving this device: peak resident memory over its whole lifetime.",
    },
];

/// The `--telemetry FILE.csv` timeline (ddp rank r > 0: `FILE.rank<r>.csv`):
/// one row per sample per device, `run_id` and then `DeviceSample`'s fields.
pub(crate) const TELEMETRY: &[ColumnDoc] = &[
    ColumnDoc { name: "run_id", unit: "", meaning: "The run's id, as in the results file's run_id column." },
    ColumnDoc { name: "t", unit: "s", meaning: "Seconds since the sampler started." },
    ColumnDoc { name: "timestamp", unit: "", meaning: "Wall-clock time of the reading, RFC 3339 with milliseconds." },
    ColumnDoc {
        name: "device",
        unit: "",
        meaning: "cuda:N (the CUDA ordinal, matched to NVML by PCI bus id), or cpu for the process on CPU runs.",
    },
    ColumnDoc { name: "gpu_util_pct", unit: "%", meaning: "NVML: GPU utilization at the reading." },
    ColumnDoc {
        name: "mem_util_pct",
        unit: "%",
        meaning: "NVML: memory utilization (share of time device memory was read or written) at the reading.",
    },
    ColumnDoc { name: "mem_used_mb", unit: "MiB", meaning: "NVML: memory used on the device (all processes)." },
    ColumnDoc { name: "mem_total_mb", unit: "MiB", meaning: "NVML: the device's total memory." },
    ColumnDoc { name: "power_w", unit: "W", meaning: "NVML: power draw at the reading." },
    ColumnDoc { name: "sm_clock_mhz", unit: "MHz", meaning: "NVML: SM clock at the reading." },
    ColumnDoc { name: "temperature_c", unit: "°C", meaning: "NVML: GPU temperature at the reading." },
    ColumnDoc {
        name: "throttle",
        unit: "",
        meaning: "NVML: why the clocks are held down (thermal, power, hw, app clocks, joined by +); empty when not.",
    },
    ColumnDoc {
        name: "other_procs_mb",
        unit: "MiB",
        meaning: "NVML: GPU memory held by compute processes outside this run's process group.",
    },
    ColumnDoc {
        name: "process_cpu_pct",
        unit: "%",
        meaning: "CPU runs: the process's CPU time ÷ wall time since the previous sample, in % of one core.",
    },
    ColumnDoc {
        name: "process_rss_mb",
        unit: "MiB",
        meaning: "CPU runs: the process's resident memory (VmRSS) at the reading.",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    fn names(cols: &[ColumnDoc]) -> String {
        cols.iter().map(|c| c.name).collect::<Vec<_>>().join(",")
    }

    #[test]
    fn the_reference_covers_every_column_in_order() {
        assert_eq!(names(RESULTS), super::super::csv::Row::header());
        assert_eq!(names(DEVICES), super::super::long::devices_header());
        assert_eq!(names(TELEMETRY), super::super::long::telemetry_header());
        for c in RESULTS.iter().chain(DEVICES).chain(TELEMETRY) {
            assert!(!c.meaning.is_empty(), "{} has no meaning", c.name);
        }
    }
}
