//! The results file's columns, each declared once: its field and type in
//! `Row`, its name in the header, its unit, its meaning and the schema
//! version that added it. `Row` (what the writers serialize and the readers
//! parse, so the header check too), `schema::RESULTS` (`gpubench schema`)
//! and the versions `upgrade` recognises are all made from this one list.
use serde::{Deserialize, Serialize};

use super::packed::{Columns, Packed, Packer, Value};
use super::schema::ColumnDoc;

/// A column's header name: the field's own, unless the line names another.
macro_rules! column_name {
    ($field:ident) => {
        stringify!($field)
    };
    ($field:ident, $name:literal) => {
        $name
    };
}

/// Declares the columns: `field [as "name"]: Type, unit "…", since V, "meaning";`.
macro_rules! columns {
    ($( $(#[$attr:meta])* $field:ident $(as $name:literal)? : $ty:ty, unit $unit:literal, since $since:literal, $meaning:literal; )*) => {
        /// One benchmark result: a row of the results file (schema
        /// `csv::SCHEMA_VERSION`). Field order is column order.
        // A row read from JSON (an emitted sweep's manifest) may come from an
        // earlier schema: the columns added since take their empty value.
        #[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
        #[serde(default)]
        pub struct Row {
            $(
                #[doc = $meaning]
                $(#[$attr])*
                $(#[serde(rename = $name)])?
                pub $field: $ty,
            )*
        }

        /// Each column's place in `Row`, for `Packed`'s bitmap.
        #[allow(non_camel_case_types, clippy::enum_variant_names)]
        enum Place {
            $($field,)*
        }

        /// How many columns a row has.
        pub(crate) const COLUMNS: usize = [$(Place::$field,)*].len();

        /// Every column of a row, read the same way from a `Row` and from a
        /// `Packed` one: text as `&str`, the rest as its value. Code that
        /// takes `&impl Fields` serves both. Every column has its reader,
        /// whether a command reads it yet or not.
        #[allow(dead_code)]
        pub(crate) trait Fields {
            $(
                #[doc = $meaning]
                fn $field(&self) -> <$ty as Value>::View<'_>;
            )*

            /// A serving row (`gpubench infer`), not a training one.
            fn is_infer(&self) -> bool {
                self.mode() == super::Mode::Infer
            }

            /// A point of an all-reduce curve (`gpubench allreduce`): a
            /// message size, not a training configuration.
            fn is_allreduce(&self) -> bool {
                self.mode() == super::Mode::Allreduce
            }

            /// A device's measured matmul peak (`gpubench peak --out`), not a run.
            fn is_peak(&self) -> bool {
                self.mode() == super::Mode::Peak
            }
        }

        impl Fields for Row {
            $(
                fn $field(&self) -> <$ty as Value>::View<'_> {
                    self.$field.view()
                }
            )*
        }

        impl Fields for Packed {
            $(
                fn $field(&self) -> <$ty as Value>::View<'_> {
                    <$ty as Value>::unpack(self.word(Place::$field as usize), self.text())
                }
            )*
        }

        impl Row {
            /// The row with only its filled columns.
            #[cfg(test)]
            pub(crate) fn pack(&self) -> Packed {
                self.pack_only(Columns::ALL)
            }

            /// The row with only its filled columns among `keep`.
            pub(crate) fn pack_only(&self, keep: Columns) -> Packed {
                let mut p = Packer::new(keep);
                $(p.put(Place::$field as usize, &self.$field);)*
                p.finish()
            }
        }

        impl Packed {
            /// The row packed.
            pub(crate) fn unpack(&self) -> Row {
                Row { $($field: <$ty as Value>::own(<$ty as Value>::unpack(self.raw(Place::$field as usize), self.text())),)* }
            }
        }

        /// The results file's columns, in header order.
        pub(crate) const RESULTS: &[ColumnDoc] =
            &[$(ColumnDoc { name: column_name!($field $(, $name)?), unit: $unit, meaning: $meaning },)*];

        /// The schema version each of `RESULTS` first appeared in (2: in v2 or before).
        pub(crate) const SINCE: &[u32] = &[$($since,)*];
    };
}

/// The columns that schemas after `version` added, in header order.
pub(crate) fn added_after(version: u32) -> Vec<&'static str> {
    RESULTS.iter().zip(SINCE).filter(|(_, &at)| at > version).map(|(c, _)| c.name).collect()
}

columns! {
    // run identity
    schema_version: u32, unit "", since 2,
        "Version of the CSV schema; 6. Files of older schemas are read by column name; `gpubench upgrade \
          FILE` rewrites one to schema 6 so that rows can be appended to it.";
    run_id: String, unit "", since 2,
        "Unique id of the run (start time and process id, in hex); a ddp job's ranks share rank 0's.";
    timestamp: String, unit "", since 2,
        "When the run started, RFC 3339 UTC to the second (a row the sweep writes for a cell that died: \
          when the sweep wrote it).";
    gpubench_version: String, unit "", since 2,
        "Version of the gpubench binary that wrote the row.";
    gpubench_commit: String, unit "", since 6,
        "The git commit gpubench itself was built from (12 hex digits, `-dirty` when the tree had changes); \
          empty for a build outside a git checkout. Two nightly builds of one version differ here.";
    host: String, unit "", since 2,
        "Host name of the machine (of global rank 0 for ddp).";
    label: String, unit "", since 2,
        "The --label text, e.g. \"V100 box\"; empty without one.";
    // set-up
    implementation as "impl": super::Implementation, unit "", since 2,
        "Who produced the figures: gpubench, pytorch (--impl pytorch, PyTorch's own implementation) or \
          published (reference figures from results/reference/).";
    mode: super::Mode, unit "", since 2,
        "What was measured: train (gpubench run), infer (gpubench infer), allreduce (gpubench \
          allreduce) or peak (gpubench peak --out: a device's matmul peak at one precision, in \
          achieved_tflops). Files written before the column existed read as train.";
    strategy: String, unit "", since 2,
        "Parallel strategy: single, dp or ddp for training; replicas, processes or dp for serving.";
    backend: String, unit "", since 2,
        "Process-group backend, gloo or nccl, for ddp; empty otherwise.";
    device_kind: String, unit "", since 2,
        "cuda or cpu.";
    devices: String, unit "", since 2,
        "The devices, e.g. cuda:0,1,2,3 or cpu×2; multi-node ddp appends the node count (×N nodes).";
    n_devices: u32, unit "", since 2,
        "Number of devices: dp's replicas or ddp's ranks (world size).";
    device_name: String, unit "", since 2,
        "GPU name of the first device, or the CPU model on CPU runs.";
    driver_version: String, unit "", since 2,
        "NVIDIA driver version (from /proc/driver/nvidia/version); empty without a driver.";
    cuda_version: String, unit "", since 2,
        "CUDA runtime version libtorch uses; empty on CPU runs.";
    libtorch_version: String, unit "", since 2,
        "libtorch version, e.g. 2.11.0 (for --impl pytorch rows, the torch version that ran).";
    scheduler: String, unit "", since 4,
        "Where the run ran: slurm, kubernetes or none (read from the scheduler's environment).";
    job_id: String, unit "", since 4,
        "Slurm: the array's job id (SLURM_ARRAY_JOB_ID), else the job's; Kubernetes: the Job's name.";
    array_task: Option<u32>, unit "", since 4,
        "Slurm: the array task (SLURM_ARRAY_TASK_ID); Kubernetes: the Indexed Job's completion index.";
    node_list: String, unit "", since 4,
        "Slurm: the job's nodes (SLURM_JOB_NODELIST); Kubernetes: the node.";
    // place in history (gpubench history)
    commit: String, unit "", since 6,
        "The commit of the code under test: --commit, else the CI's variable (GITHUB_SHA, CI_COMMIT_SHA, \
          BUILDKITE_COMMIT, GIT_COMMIT), else `git rev-parse HEAD` of the working directory when it is a \
          repository; empty otherwise. `gpubench history` orders points by it.";
    branch: String, unit "", since 6,
        "The branch of that commit: --branch, else the CI's variable, else the working directory's checked-out \
          branch; empty when unknown.";
    sweep_id: String, unit "", since 6,
        "One id shared by every cell and repeat of one sweep (emitted Slurm and Kubernetes sweeps too), so the \
          repeats of one night pool as one point; empty for a run outside a sweep.";
    ci_url: String, unit "", since 6,
        "A link to the CI run that produced the row, where the CI's variables give one (GitHub Actions, GitLab, \
          Buildkite); empty otherwise.";
    // workload
    model: String, unit "", since 2,
        "Model trained: resnet18/34/50/101/152 or tinycnn.";
    image_size: Option<u32>, unit "px", since 2,
        "Input height = width, in pixels.";
    precision: String, unit "", since 2,
        "Numeric precision: fp32, tf32, fp16 or bf16.";
    channels_last: Option<bool>, unit "", since 2,
        "Whether --channels-last (NHWC weights and inputs) was on: true or false.";
    cudnn_benchmark: Option<bool>, unit "", since 2,
        "Whether cuDNN autotuning was on: true or false.";
    deterministic: Option<bool>, unit "", since 2,
        "Whether --deterministic (deterministic algorithms, autotuning off) was on: true or false.";
    batch_per_device: Option<u32>, unit "", since 2,
        "Images per device per step (--batch-size).";
    global_batch: Option<u32>, unit "", since 2,
        "Images per optimizer step over all devices: batch_per_device × n_devices × grad_accum.";
    grad_accum: Option<u32>, unit "", since 3,
        "Micro-batches per optimizer step (--grad-accum; 1 without). Throughput counts every image of \
          every micro-batch; ddp all-reduces once per step. Empty in rows before schema v3.";
    steps: Option<u32>, unit "", since 2,
        "Timed steps that ran: --steps, or as many as fitted in --duration.";
    warmup: Option<u32>, unit "", since 2,
        "Warm-up steps that ran before timing started (never timed).";
    warmup_end: String, unit "", since 2,
        "How warm-up ended: steps, time, or with --warmup auto \"steady after N steps\" or \"not steady after N \
          steps (the cap)\" (a run whose step times never settled).";
    timed_end: String, unit "", since 2,
        "How the timed steps ended: steps, duration, or with --duration auto \"target met: ±x%\" or \"max \
          duration reached: ±x%\" (the throughput interval achieved).";
    data: String, unit "", since 2,
        "Input source: synthetic, or imagefolder:PATH for --data PATH.";
    data_skipped: Option<u64>, unit "", since 2,
        "--data PATH: distinct unreadable files skipped (a file several ddp ranks met counts once); empty \
          for synthetic data.";
    workers: Option<u32>, unit "", since 2,
        "--data PATH: decode threads per device; empty for synthetic data.";
    seed: Option<u64>, unit "", since 2,
        "The --seed for model initialisation and synthetic data.";
    threads: Option<u32>, unit "", since 2,
        "libtorch intra-op threads of the (master) process: dp's one process, ddp's rank 0, the PyTorch \
          process of a pytorch row; for serving rows, each worker's share of the cores (gpubench's and \
          PyTorch's servers alike).";
    variant: String, unit "", since 2,
        "The run options that change what is measured and have no column of their own, where they differ \
          from run's defaults, as option=value words: num-classes, lr, momentum, weight-decay, \
          optimizer (the optimizer step's implementation, fused or foreach; rows without it ran \
          libtorch's per-parameter loop, as every row before --optimizer-impl did), the bare word adamw \
          (--optimizer adamw; weight-decay then against AdamW's default 0.05, momentum unused), checkpoint \
          (--checkpoint), seed, threads and workers (as asked), ddp's bucket-cap-mb, gradient-as-bucket-view, find-unused-parameters and \
          no-broadcast-buffers, breakdown, profile, nvtx, cuda-graphs (--cuda-graphs on, for serving rows \
          too), init-from (the file's name). Rows that differ in it are different configurations in report, \
          compare, check and a sweep's --resume; otherwise empty for serving, all-reduce and published rows.";
    // results
    throughput_img_s: Option<f64>, unit "img/s", since 2,
        "Global images per second over the timed steps: global_batch × steps ÷ the sum of step times.";
    throughput_per_device_img_s: Option<f64>, unit "img/s", since 2,
        "throughput_img_s ÷ n_devices.";
    step_ms_mean: Option<f64>, unit "ms", since 2,
        "Mean timed step time (ddp: each step as long as its slowest rank).";
    step_ms_p50: Option<f64>, unit "ms", since 2,
        "Median timed step time (percentiles interpolate linearly, as numpy's default).";
    step_ms_p90: Option<f64>, unit "ms", since 2,
        "90th percentile of the timed step times.";
    step_ms_p99: Option<f64>, unit "ms", since 2,
        "99th percentile of the timed step times.";
    step_ms_std: Option<f64>, unit "ms", since 2,
        "Sample standard deviation (n − 1) of the timed step times; 0 for a single step.";
    throughput_ci95_lo: Option<f64>, unit "img/s", since 2,
        "Lower end of throughput's 95 % interval within this run (batch means over contiguous steps); empty \
          below 10 timed steps. It does not cover drift between runs: that needs repeats.";
    throughput_ci95_hi: Option<f64>, unit "img/s", since 2,
        "Upper end of that interval.";
    step_ms_p50_ci95_lo: Option<f64>, unit "ms", since 2,
        "Lower end of the median step time's 95 % interval within this run (circular block bootstrap); \
          empty below 10 timed steps.";
    step_ms_p50_ci95_hi: Option<f64>, unit "ms", since 2,
        "Upper end of that interval.";
    loss_first: Option<f64>, unit "", since 2,
        "Loss of the first step, warm-up included (ddp: the mean over ranks).";
    loss_last: Option<f64>, unit "", since 2,
        "Loss of the last timed step (ddp: the mean over ranks).";
    skipped_steps: Option<u64>, unit "", since 2,
        "fp16: steps the dynamic loss scaler skipped for non-finite gradients; 0 at other precisions.";
    // per-device summary over the timed window (see metrics::devices)
    peak_mem_alloc_mb: Option<f64>, unit "MiB", since 2,
        "Highest, over devices, CUDA caching-allocator peak allocated memory since the end of warm-up.";
    peak_mem_reserved_mb: Option<f64>, unit "MiB", since 2,
        "Highest, over devices, CUDA caching-allocator peak reserved memory since the end of warm-up.";
    nvml_mem_peak_mb: Option<f64>, unit "MiB", since 2,
        "Highest, over devices, NVML peak memory used on the device (all processes) in the timed window.";
    util_mean_pct: Option<f64>, unit "%", since 2,
        "Mean over devices of each device's mean NVML GPU utilization in the timed window.";
    util_p95_pct: Option<f64>, unit "%", since 2,
        "The highest of the devices' 95th percentiles of NVML GPU utilization in the timed window.";
    power_mean_w: Option<f64>, unit "W", since 2,
        "Mean over devices of each device's mean NVML power draw in the timed window.";
    mem_imbalance: Option<f64>, unit "", since 2,
        "Max ÷ min peak memory across devices (allocator peak, else NVML); 1.00 = even; needs 2+ devices.";
    mem_params_mb: Option<f64>, unit "MiB", since 3,
        "Trainable parameters on the first device (dp's master, ddp's rank 0): their exact bytes.";
    mem_grads_mb: Option<f64>, unit "MiB", since 3,
        "Their gradients after the last step: exact bytes (under --gradient-as-bucket-view they are views \
          of ddp's buckets, so counted twice with mem_buckets_mb).";
    mem_optimizer_mb: Option<f64>, unit "MiB", since 3,
        "The optimizer's state: measured from its buffers for --optimizer-impl fused and foreach (SGD's \
          momentum, AdamW's two moments and step counts); for libtorch's loop computed from its definition \
          (momentum: 1x the parameters, AdamW: 2x), its buffers being out of reach.";
    mem_buckets_mb: Option<f64>, unit "MiB", since 3,
        "ddp: the Reducer's gradient buckets on rank 0 (the sum of their sizes); empty otherwise.";
    mem_activations_mb: Option<f64>, unit "MiB", since 3,
        "The largest timed step's peak above what was live when it began: activations and the step's \
          temporaries. What was live includes the previous step's gradients, which the step drops at its \
          start and backward makes again, so they are not in it. CUDA: the caching allocator's allocated bytes. CPU: what libtorch itself allocates, \
          counted by a wrapper of its CPU allocator (not the resident set, which glibc distorts); dp's CPU \
          replicas share one process, so it is all of theirs. Empty under --cuda-graphs: a replayed step \
          allocates nothing, its activations living in the graph's pool (in peak_mem_alloc_mb).";
    dp_master_input_mb: Option<f64>, unit "MiB", since 4,
        "dp on 2+ devices, the master's extra memory by cause, computed from the tensors' sizes: the global \
          input batch beyond the master's own chunk (DataParallel's input lives on the master). The \
          optimizer's state, on the master alone, is mem_optimizer_mb.";
    dp_master_outputs_mb: Option<f64>, unit "MiB", since 4,
        "dp on 2+ devices: the gathered outputs on the master, the loss's saved log-softmax and, in \
          backward, their gradient (3x the global batch's logits; the loss itself is one number).";
    dp_master_reduce_mb: Option<f64>, unit "MiB", since 4,
        "dp on 2+ devices: the gradient sum's buffers on the master. Coalesced (CUDA, distinct devices): \
          the flat accumulator and one replica's flat copy, 2x the gradients; else one gradient tensor \
          at a time, the largest.";
    dp_replicate_ms: Option<f64>, unit "ms", since 5,
        "dp on 2+ devices: median per timed step of the master's parameters and buffers copied onto the \
          other replicas, host-timed. Timed on the CPU, whose ops return when done, and on CUDA only with \
          --breakdown (the devices synchronized at its bounds); empty otherwise, rather than CUDA's \
          launch times.";
    dp_scatter_ms: Option<f64>, unit "ms", since 5,
        "dp on 2+ devices: median per timed step of the batch split and copied to the replicas (timed as \
          dp_replicate_ms).";
    dp_gather_ms: Option<f64>, unit "ms", since 5,
        "dp on 2+ devices: median per timed step of the outputs copied to the master and concatenated, \
          and the loss computed there (timed as dp_replicate_ms).";
    dp_reduce_ms: Option<f64>, unit "ms", since 5,
        "dp on 2+ devices: median per timed step of the replicas' gradients summed into the master's \
          (timed as dp_replicate_ms).";
    dp_compute_ms: Option<f64>, unit "ms", since 5,
        "dp on 2+ devices: median per timed step of the replicas' forward passes (in parallel) and the \
          backward pass (through the gather and the loss on the master too, one autograd pass): what the \
          master waits for besides its own work (timed as dp_replicate_ms).";
    alloc_retries: Option<u64>, unit "", since 4,
        "CUDA: times the caching allocator's cudaMalloc failed and it freed its cache and tried again \
          (each a device-wide sync; a sign the batch is at the edge), in the timed window (a run that \
          failed in warm-up: up to its failure), summed over the process's devices (ddp: rank 0's).";
    alloc_ooms: Option<u64>, unit "", since 4,
        "CUDA: out-of-memory errors the caching allocator raised, as alloc_retries counts them. It counts \
          the ones cuDNN catches too (it tries smaller workspaces when a large one does not fit), so an ok \
          row near the memory limit may show some.";
    other_procs_mb: Option<f64>, unit "MiB", since 4,
        "NVML: the most GPU memory that processes outside this run held on its devices during the timed \
          window (stray contexts on GPU 0 are a common cause of 'GPU 0 uses more'); ddp: rank 0's device.";
    slowest_rank: Option<u32>, unit "", since 4,
        "ddp on 2+ ranks: the rank with the longest compute per step (the Reducer's forward plus backward \
          compute, averaged over its sampled iterations); wall step times are equal across ranks.";
    rank_compute_excess_pct: Option<f64>, unit "%", since 4,
        "ddp on 2+ ranks: the slowest rank's compute over the median of the other ranks' (a straggler's \
          margin).";
    rank_wait_ms: Option<f64>, unit "ms", since 4,
        "ddp on 2+ ranks: the slowest rank's compute minus the median of the others', per step: what the \
          others wait for it at the all-reduce.";
    model_gflop_per_img: Option<f64>, unit "GFLOP", since 4,
        "The model's arithmetic per image, counted from gpubench's own architecture (arch.rs): 2 FLOPs \
          per multiply-add of every convolution and the classifier; training rows 3x the forward pass \
          (backward is twice it), serving rows the forward pass.";
    achieved_tflops: Option<f64>, unit "TFLOP/s", since 4,
        "throughput_img_s x model_gflop_per_img, all devices together. Peak rows: the median of the \
          matmul rounds.";
    mfu_pct: Option<f64>, unit "%", since 4,
        "Per device: achieved TFLOP/s against the matmul peak `gpubench peak` measured on this device \
          name and precision (kept in ~/.cache/gpubench/peaks.json); empty when none was measured.";
    mfu_datasheet_pct: Option<f64>, unit "%", since 4,
        "Per device: achieved TFLOP/s against NVIDIA's dense datasheet peak for this GPU and precision \
          (H200, H100 SXM and PCIe, A100, V100, K80); empty for other devices.";
    img_per_joule: Option<f64>, unit "img/J", since 4,
        "Images per joule over the timed window, all devices together: from the devices' energy \
          counters (NVML's total energy on Volta and newer; RAPL's packages on a CPU host that exposes \
          them, which most VMs do not), else from NVML's mean power (a K80); empty on a CPU without \
          RAPL. ddp: the power of every rank's device.";
    util_spread_pct: Option<f64>, unit "%", since 2,
        "Max − min mean GPU utilization across devices, in percentage points.";
    master_mem_excess_pct: Option<f64>, unit "%", since 2,
        "dp only: the master's peak memory over the mean of the other devices', in %.";
    master_util_excess_pct: Option<f64>, unit "%", since 2,
        "dp only: the master's mean GPU utilization minus the other devices' mean, in percentage points.";
    cpu_util_pct: Option<f64>, unit "%", since 2,
        "CPU time ÷ wall time of the driving process over the timed window, in % of one core (200 = two \
          cores busy); the highest over processes.";
    peak_rss_mb: Option<f64>, unit "MiB", since 2,
        "Peak resident memory of the driving process over its whole lifetime, the highest over processes \
          (sweep-written rows: the peak the sweep sampled).";
    // time breakdown per step (forward/backward/optimizer only with --breakdown)
    data_wait_ms: Option<f64>, unit "ms", since 2,
        "Mean time a timed step waited for its input batch (ddp: rank 0's).";
    data_wait_share: Option<f64>, unit "", since 2,
        "data_wait_ms ÷ the mean step time, a fraction from 0 to 1; over 0.10 the run is input-bound.";
    forward_ms: Option<f64>, unit "ms", since 2,
        "--breakdown only: mean forward phase per step, up to the loss (dp: with replicate, scatter and \
          gather; ddp: with the Reducer's preparation and buffer broadcast).";
    backward_ms: Option<f64>, unit "ms", since 2,
        "--breakdown only: mean zero-grad and backward phase per step (dp: with the gradient sum on the \
          master; ddp: with the overlapped all-reduce).";
    optimizer_ms: Option<f64>, unit "ms", since 2,
        "--breakdown only: mean optimizer step per step.";
    // ddp: the Reducer's own averaged runtime statistics
    ddp_forward_compute_ms: Option<f64>, unit "ms", since 2,
        "ddp: the c10d Reducer's average forward compute time per timed iteration (rank 0's; warm-up left out).";
    ddp_backward_compute_ms: Option<f64>, unit "ms", since 2,
        "ddp: the Reducer's average backward compute time per timed iteration (rank 0's).";
    ddp_backward_comm_ms: Option<f64>, unit "ms", since 2,
        "ddp: the Reducer's average gradient all-reduce (communication) time per timed iteration (rank 0's).";
    ddp_overlap_ms: Option<f64>, unit "ms", since 2,
        "ddp: the Reducer's average time communication ran while backward was still computing (rank 0's).";
    ddp_buckets: Option<u32>, unit "", since 2,
        "ddp: number of gradient buckets the Reducer all-reduces.";
    comm_hook: String, unit "", since 2,
        "ddp: --comm-hook, the gradient compression before the all-reduce: none, fp16 (libtorch's builtin \
          FP16 hook) or bf16; empty for other strategies.";
    // serving (mode infer; empty for training rows): see serve::records
    scenario: String, unit "", since 2,
        "infer: how requests arrived: offline, server (Poisson), streams (cameras) or single-stream.";
    streams: Option<u32>, unit "", since 2,
        "infer, streams: number of cameras.";
    fps: Option<f64>, unit "1/s", since 2,
        "infer, streams: frames per second per camera.";
    offered_rate: Option<f64>, unit "req/s", since 2,
        "infer: requests per second the load offered (server: --rate; streams: streams × fps); empty for \
          offline and single-stream, which go as fast as they are served.";
    achieved_rate: Option<f64>, unit "req/s", since 2,
        "infer: requests answered inside the load's window, per second (also in throughput_img_s, with \
          its interval).";
    latency_bound_ms: Option<f64>, unit "ms", since 2,
        "infer: the --latency-bound for p99, if given.";
    requests: Option<u64>, unit "", since 2,
        "infer: requests issued (offline: taken from the backlog); requests = completed + dropped.";
    completed: Option<u64>, unit "", since 2,
        "infer: requests answered.";
    dropped: Option<u64>, unit "", since 2,
        "infer: requests dropped: older than --drop-older-than when taken, or still queued when the run \
          ended (served for as long again as the window, at least 1 s, then dropped).";
    batches: Option<u64>, unit "", since 2,
        "infer: batches served (dynamic batching).";
    batch_mean: Option<f64>, unit "", since 2,
        "infer: mean requests per batch: completed ÷ batches.";
    latency_ms_p50: Option<f64>, unit "ms", since 2,
        "infer: median latency from a request's scheduled arrival to its result on the host (queueing \
          included, no coordinated omission); empty for offline.";
    latency_ms_p90: Option<f64>, unit "ms", since 2,
        "infer: 90th percentile latency.";
    latency_ms_p99: Option<f64>, unit "ms", since 2,
        "infer: 99th percentile latency.";
    latency_ms_max: Option<f64>, unit "ms", since 2,
        "infer: largest latency.";
    queue_ms_mean: Option<f64>, unit "ms", since 2,
        "infer: mean time from scheduled arrival until a worker took the request.";
    batch_ms_mean: Option<f64>, unit "ms", since 2,
        "infer: mean time from being taken until its batch closed (waiting for more requests).";
    input_ms_mean: Option<f64>, unit "ms", since 2,
        "infer: the time a request's batch took to be preprocessed and copied to the device, averaged over \
          requests: a batch's time, not a per-frame cost (a note gives that when input dwarfs compute).";
    compute_ms_mean: Option<f64>, unit "ms", since 2,
        "infer: the forward time of a request's batch, averaged over requests (a batch's time).";
    output_ms_mean: Option<f64>, unit "ms", since 2,
        "infer: the time a request's batch took to copy its predictions back to the host, averaged over \
          requests.";
    generator_late_pct: Option<f64>, unit "%", since 2,
        "infer: share of requests the load generator issued over 1 ms late (their latency still counts \
          from the schedule); above 1 % the generator, not the server, limited the load.";
    // communication (mode allreduce): see comm::allreduce
    bytes: Option<u64>, unit "B", since 2,
        "allreduce: message size; its time per operation is in step_ms_mean (mean over back-to-back \
          operations), step_ms_p50 and step_ms_p99 (each timed alone), averaged over ranks.";
    in_place: Option<bool>, unit "", since 2,
        "allreduce: true for in-place; false for out-of-place (a copy into the output buffer, then c10d's \
          in-place all-reduce).";
    algbw_gbs: Option<f64>, unit "GB/s", since 2,
        "allreduce: bytes ÷ mean time, decimal GB/s (nccl-tests).";
    busbw_gbs: Option<f64>, unit "GB/s", since 2,
        "allreduce: algbw × 2(n−1)/n for n ranks, the bandwidth a ring needs from the slowest link (nccl-tests).";
    nwrong: Option<u64>, unit "", since 2,
        "allreduce: elements that differed from the expected sum in the check, over all ranks (0 is right).";
    interference: String, unit "", since 2,
        "What disturbed the timed window, \"; \"-separated: other processes' CPU use and load, CPU steal, GPU \
          throttling, other processes' GPU memory; empty when clean.";
    // outcome
    status: super::Status, unit "", since 2,
        "How the run ended: ok, diverged, failed or oom.";
    error: String, unit "", since 2,
        "The error on one line, for any status but ok (ddp: prefixed with the failing rank).";
    note: String, unit "", since 2,
        "Remarks about how the row was measured (dp's master and thread split, the torch that ran a \
          pytorch row, a row the sweep wrote for a dead cell).";
    source: String, unit "", since 2,
        "Citation for published reference rows; empty for measured rows.";
}
