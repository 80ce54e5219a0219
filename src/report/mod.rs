//! Analysis and rendering of result rows: summaries (`summary`), machines side by side (`compare`), the CI gate
//! (`check`, with `significance`), tables in several formats (`export`, `format`; every `--format json` document is
//! `envelope`'s) and charts (`charts`). It only
//! reads rows (`results`); it never runs anything.
//!
//! `report`, `compare` and `check` read the results CSVs `run` writes, several at once. Rows are grouped by their
//! configuration key (`summary::ConfigKey`: model, image size, precision, strategy, number of devices, per-device
//! batch; precision is part of it because fp32 and fp16 are different workloads); rows with equal keys in one
//! scope are repeats, reduced to their median. Only rows with status `ok` contribute numbers; the others are
//! reported and left out, never counted as zero. Columns are matched by name, so files from older gpubench
//! versions with fewer columns still read (`results::csv`); a column this gpubench does not know is refused. A
//! file with a header but no rows is an error: a report over nothing is almost certainly the wrong file. Tables
//! go to stdout and notes to stderr, so `--format csv|json` stays machine-readable; a cell carries both its raw
//! value and its text (`export`), so scripts never parse "97.3%".
//!
//! - **report** groups by scope (device name, label, impl, so other machines or published figures never pool as
//!   repeats) and configuration, and shows throughput, per-device throughput, scaling efficiency, step time
//!   p50/p90 and imbalance. Scaling efficiency = throughput(N) ÷ (N × throughput(1)), against the 1-device group
//!   of the same scope and workload (`single` preferred), where one exists. `--charts DIR` writes SVG (and PNG
//!   with a font): throughput against device count with the ideal line, scaling efficiency, per-device peak
//!   memory and utilization (from `<out>.devices.csv`, so dp's master stands out; without it, skipped with a
//!   note), the step-time distribution per run (box p50–p90, whisker to p99, tick at the mean) and one bar per
//!   strategy at one device count; every scenario (including each implementation) gets its own files, and no
//!   chart overwrites another.
//! - **compare** puts result sets side by side (one box against another, today against last month, a machine
//!   against published figures), joined on the configuration key. Sets are named by `label`, else device name,
//!   else file name, PyTorch's own runs forming a set of their own (`[pytorch]`); a configuration missing from a
//!   set is shown as missing, not dropped.
//! - **check** is the CI gate (see `check`).
//! - `--html FILE` on all three (and `sweep`) writes one self-contained page (`html`) with the same tables and
//!   the same SVG charts, for colleagues who would rather open a file.
//!
//! Published references: `results/reference/` holds other people's figures on other hardware as rows of the
//! same schema with `impl=published` and a citation in `source`, for comparison only.
//!
//! Fonts (`charts`): PNG text needs a TrueType font loaded at run time (none is embedded): `$GPUBENCH_FONT`, then
//! the system's DejaVu Sans, then the copy `scripts/setup` unpacks from Debian's `fonts-dejavu-core`. Without one
//! charts are SVG only, with a note. SVG needs no font, so layout never asks the font for text sizes.
pub mod charts;
pub mod check;
pub mod comm;
pub mod compare;
pub mod diagnose;
pub mod envelope;
pub mod export;
pub mod format;
pub mod history;
pub mod html;
pub mod peaks;
pub mod pipeline;
pub mod published;
pub mod serving;
pub mod significance;
pub mod summary;
pub mod trace;
pub mod verdict;
