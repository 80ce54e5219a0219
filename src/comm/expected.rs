//! What a ddp row's all-reduce alone should cost, from an all-reduce curve
//! among the rows read: the figure a verdict holds the step's exposed
//! communication against (report, compare and sweep take it from here, so
//! that the report reads rows and never needs the curves' arithmetic).
use std::path::Path;

use super::curve::curve;
use crate::config::{Backend, CommHook, CurveSource, ModelKind};
use crate::report::summary::Run;
use crate::report::verdict::Expected;
use crate::results::csv::Row;
use crate::results::packed::Packed;
use crate::results::Fields;

/// What a ddp row's gradient all-reduce alone should cost, from an
/// all-reduce curve among the files read (rows of `gpubench allreduce --out
/// FILE`) of the same world size and backend, in the dtype the gradients
/// travel in: the row's gradient bytes (`mem_grads_mb`; for older rows the
/// model's parameters counted from its architecture, for ImageNet's 1000
/// classes, gpubench's default) in the row's number of buckets, taken as
/// equal, each all-reduced on its own.
pub(crate) fn expected_allreduce(runs: &[Run]) -> impl Fn(&Packed) -> Option<Expected> + '_ {
    // Each file's all-reduce rows, gathered once for every verdict.
    let mut files: Vec<(&Path, Vec<Row>)> = vec![];
    for r in runs.iter().filter(|r| r.row.is_allreduce()) {
        match files.iter_mut().find(|(f, _)| *f == &*r.file) {
            Some((_, rows)) => rows.push(r.row.unpack()),
            None => files.push((&r.file, vec![r.row.unpack()])),
        }
    }
    move |row| {
        if row.strategy() != "ddp" {
            return None;
        }
        let backend = Backend::ALL.into_iter().find(|b| b.name() == row.backend())?;
        // Rows from before the column have no hook: the Reducer's own fp32.
        let hook = match row.comm_hook() {
            "" => CommHook::None,
            h => CommHook::ALL.into_iter().find(|k| k.name() == h)?,
        };
        let buckets = row.ddp_buckets().filter(|&b| b > 0)?;
        files.iter().find_map(|(f, rows)| {
            let c = curve(&CurveSource::File(f.to_path_buf()), rows, row.n_devices() as usize, backend, hook)?;
            // The run's own gradient bytes (fp32) where its row has them.
            let fp32 = match row.mem_grads_mb() {
                Some(mb) => mb * 1048576.0,
                None => {
                    let model = ModelKind::ALL.into_iter().find(|m| m.name() == row.model())?;
                    crate::arch::param_count(model, 1000) as f64 * 4.0
                }
            };
            let wire = if hook == CommHook::None { 1.0 } else { 0.5 };
            let each = fp32 * wire / buckets as f64;
            Some(Expected {
                ms: buckets as f64 * c.time(each) * 1e3,
                from: format!(
                    "{}, the gradients in {buckets} equal bucket{} of {}",
                    c.describe(),
                    if buckets == 1 { "" } else { "s" },
                    binary_bytes(each)
                ),
            })
        })
    }
}

/// Bytes with a binary unit: "21.2 KiB", "22.3 MiB", "512 bytes".
fn binary_bytes(b: f64) -> String {
    let t = crate::report::format::fmt_bytes(b);
    match t.strip_suffix(['K', 'M', 'G']) {
        Some(n) => format!("{n} {}iB", &t[n.len()..]),
        None => format!("{t} bytes"),
    }
}
