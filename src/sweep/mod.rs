//! The sweep engine: many runs, each in its own child process (`gpubench run … --out FILE --quiet` of this
//! binary), so that an out-of-memory error, a crash or a leak in one cell cannot touch the next. `plan` makes the
//! matrix, `vary` reads `--vary OPTION=V1,V2`, `cells` runs a cell and finds (or writes) its row, `child` watches a
//! cell's process, `emit` writes the matrix as Slurm or Kubernetes jobs and `cell` runs one of their cells where it
//! lands, `search` is max-batch's search and `frontier` its memory levers side by side (arguments and preset:
//! `cli::sweep`; commands: `commands::sweep`, `commands::max_batch`).
//!
//! **The matrix**: `--strategies`, `--device-counts` (a cell with N devices uses the first N of `--gpus`; on the
//! CPU, `--cpu N` is the most replicas or ranks; default 1, 2, 4, … and all), `--batch-sizes` (per device),
//! `--models`, `--impls gpubench,pytorch` (each cell under both, one after the other; no PyTorch dp cells on the
//! CPU, with a note) and `--repeat` (repeats go round the whole matrix, so slow drift spreads over every cell).
//! `single` runs at one device only. `run`'s options that make sense for every cell are passed on, and every
//! cell is validated as `gpubench run` would before the first starts (bad input: one line, exit 2).
//! `--preset demo` fills what the command line left open: tinycnn at 64 px, batch 32 and 128, on 1 and 2 CPU
//! replicas, 3 s after `--warmup auto`, on a machine without a GPU (or with `--cpu`); else resnet50, batch 64,
//! on 1 and all GPUs, 5 s after 5 warm-up steps; rows to `results/demo.csv`, charts to `results/demo-charts/`.
//!
//! **Running**: a line per finished cell, then the report's table over the matrix's rows (and, with
//! `--charts DIR`, its charts). Exit 0 when every cell ended ok or oom, 1 when one failed or diverged (the others
//! still ran), 130 after Ctrl-C or SIGTERM, which stops the current cell's process group (SIGTERM, SIGKILL after
//! 2 s) and prints the command that resumes. `--cell-timeout` stops a hung cell (row: `failed`).
//!
//! **Rows**: children append their rows (one locked write and an fdatasync per row, `results::csv::append_rows`), so
//! after a `kill -9` the file still parses. When a child ends without writing its row (OOM killer, abort,
//! timeout), the sweep writes one: `oom` if the kernel's OOM killer fired or the process said it ran out of
//! memory, else `failed`, with how it ended, its last line, the peak resident memory the sweep sampled and a
//! `note` saying the sweep wrote it.
//!
//! **`--mem-limit SIZE`** (sweep and max-batch; refused with `--gpus`) caps each cell's data memory
//! (`RLIMIT_DATA`, inherited by ddp's workers; dp's replicas share one process and cap), so that a batch beyond
//! it fails as on a full device: a smaller device emulated on the CPU (libtorch itself takes part of the cap).
//!
//! **One sweep per file**: while a sweep runs it holds an exclusive lock on `.<out>.lock` (beside `out`), which
//! its children inherit, and cells die with it (`PR_SET_PDEATHSIG`; ddp's workers follow their launcher). A
//! second sweep on the same file waits, and `--resume` after a `kill -9` reads the results only once no process
//! of the killed sweep can still append, then skips every cell that already has a row with status ok (counting
//! repeats). Test hook: `crate::internal::Hook::SweepChild` runs another program instead of gpubench.
//!
//! **max-batch** probes one strategy's per-device batch: doubling from `--start` (16; halving if it does not
//! fit), then bisecting until the largest batch that fits and the smallest that does not are within
//! `--granularity` (8, or 1/8 of the batch if closer), up to `--max`. Each probe is a cell in its own process
//! (`--warmup 1 --steps 3 --lr 0.01` unless given, so a huge batch does not diverge before its memory peak),
//! since a failed allocation can leave an allocator or CUDA context no later probe should inherit. Exit 1 when
//! even batch 1 does not fit or a probe failed for another reason than memory.
//!
//! **max-batch --frontier** searches once per memory lever (`frontier`: none, `--checkpoint`, fp16, bf16, each
//! precision with `--checkpoint`; a lever the run refuses or the device lacks is skipped with why), each search
//! starting at the plain run's answer. With `--target-global-batch N` the searches stop at N's per-device share, and each
//! lever's way to N (its largest micro-batch that divides the share, times `--grad-accum K`) is run and measured;
//! the fastest is the answer. A table on stdout, `<out>.frontier.csv`, a chart (`--charts`) and a page (`--html`).
pub mod cell;
pub mod cells;
pub mod child;
pub mod emit;
pub mod frontier;
pub mod plan;
pub mod search;
pub mod vary;
