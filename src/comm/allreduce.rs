//! `gpubench allreduce`: per message size, the time of c10d's all-reduce
//! (sum) and its bandwidths, out-of-place and in-place, as nccl-tests
//! defines them (`doc/PERFORMANCE.md`):
//!
//! - **time**: the mean over `-n` back-to-back operations after one barrier,
//!   the device synchronised before both clock reads, averaged over ranks
//!   (nccl-tests' `-a 1`); then `-n` more, each timed on its own, for the
//!   per-operation p50 and p99.
//! - **algbw** = bytes ÷ time, in decimal GB/s; **busbw** = algbw × 2(n−1)/n,
//!   the bandwidth a ring all-reduce needs from the slowest link, comparable
//!   across world sizes.
//! - **#wrong**: every rank's buffer holds rank + 1 (exact in every dtype for
//!   the world sizes used), one more all-reduce, and the elements that do not
//!   equal n(n+1)/2, over all ranks.
//!
//! `launch` starts this node's ranks, `run_rank` is one rank's measurement,
//! `rows` makes the results rows, and the table and JSON are nccl-tests'.
//!
//! c10d's all-reduce works in place; out-of-place is measured as a copy of
//! the input into the output buffer followed by the in-place all-reduce, so
//! it includes that copy (nccl-tests' out-of-place has none). `-w` warm-up
//! operations run at every size first, untimed.
use anyhow::{Context, Result};

pub(crate) use super::curve::bus_factor;
use serde::Serialize;
use std::time::Instant;
use tch::{Device, Kind, Tensor};

use crate::bench::ddp::env::DistEnv;
use crate::bench::ddp::launcher::{rank_failure, spawn_ranks, wait_all, GRACE};
use crate::bench::row::identity_row;
use crate::config::{AllreduceConfig, CommDtype};
use crate::dist::{ProcessGroup, Store};
use crate::metrics::stats::percentile;
use crate::report::export::Format;
use crate::results::csv::{self as results_csv, Row};
use crate::results::Status;

/// One placement's figures at one size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct Timing {
    /// Mean over back-to-back operations, µs (averaged over ranks).
    pub time: f64,
    /// Per-operation median and 99th percentile, µs (averaged over ranks).
    pub p50_us: f64,
    pub p99_us: f64,
    pub alg_bw: f64,
    pub bus_bw: f64,
    /// Wrong elements, summed over ranks.
    pub nwrong: u64,
}

/// One message size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct SizeResult {
    pub size: u64,
    pub count: u64,
    pub out_of_place: Timing,
    pub in_place: Timing,
}

/// algbw and busbw (decimal GB/s) of `bytes` moved in `us` microseconds.
pub(crate) fn bandwidths(bytes: u64, us: f64, world: usize) -> (f64, f64) {
    let alg = if us > 0.0 { bytes as f64 / 1e9 / (us / 1e6) } else { 0.0 };
    (alg, alg * bus_factor(world))
}

fn kind(d: CommDtype) -> Kind {
    match d {
        CommDtype::Fp32 => Kind::Float,
        CommDtype::Fp16 => Kind::Half,
        CommDtype::Bf16 => Kind::BFloat16,
    }
}

struct Rank<'a> {
    pg: ProcessGroup,
    device: Device,
    cfg: &'a AllreduceConfig,
}

impl Rank<'_> {
    fn sync(&self) {
        self.cfg.devices.synchronize();
    }

    /// One operation: out-of-place copies `input` into `buf` first.
    fn op(&self, input: Option<&Tensor>, buf: &mut Tensor) -> Result<()> {
        if let Some(i) = input {
            buf.f_copy_(i)?;
        }
        self.pg.allreduce_sum(buf)
    }

    /// Mean, p50 and p99 in µs of `-n` operations, and the wrong elements.
    fn time(&self, count: i64, out_of_place: bool) -> Result<[f64; 4]> {
        let opts = (kind(self.cfg.dtype), self.device);
        let rank_value = (self.pg.rank() + 1) as f64;
        let input = out_of_place.then(|| Tensor::full([count], rank_value, opts));
        // In place, the buffer is summed over and over: zeros stay finite.
        let mut buf = Tensor::f_zeros([count], opts)?;
        let n = self.cfg.iters.max(1);
        self.pg.barrier()?;
        self.sync();
        let t0 = Instant::now();
        for _ in 0..n {
            self.op(input.as_ref(), &mut buf)?;
        }
        self.sync();
        let mean = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
        let mut each = Vec::with_capacity(n as usize);
        for _ in 0..n {
            self.sync();
            let t = Instant::now();
            self.op(input.as_ref(), &mut buf)?;
            self.sync();
            each.push(t.elapsed().as_secs_f64() * 1e6);
        }
        // Correctness: every rank holds rank + 1; the sum is n(n+1)/2 everywhere.
        let w = self.pg.world() as f64;
        let _ = buf.f_fill_(rank_value)?;
        let src = input.as_ref().map(|_| Tensor::full([count], rank_value, opts));
        self.op(src.as_ref(), &mut buf)?;
        let wrong = buf.f_ne(w * (w + 1.0) / 2.0)?.f_sum(Kind::Int64)?.int64_value(&[]) as f64;
        Ok([mean, percentile(&each, 50.0), percentile(&each, 99.0), wrong])
    }

    /// Averages `v` over ranks (the last element, #wrong, is summed).
    fn across_ranks(&self, v: [f64; 4]) -> Result<[f64; 4]> {
        let mut t = Tensor::from_slice(&v).f_to_device(self.device)?;
        self.pg.allreduce_sum(&mut t)?;
        let s: Vec<f64> = Vec::<f64>::try_from(t.f_to_device(Device::Cpu)?)?;
        let w = self.pg.world() as f64;
        Ok([s[0] / w, s[1] / w, s[2] / w, s[3]])
    }

    fn timing(&self, bytes: u64, count: i64, out_of_place: bool) -> Result<Timing> {
        let [time, p50, p99, wrong] = self.across_ranks(self.time(count, out_of_place)?)?;
        let (alg_bw, bus_bw) = bandwidths(bytes, time, self.pg.world());
        Ok(Timing { time, p50_us: p50, p99_us: p99, alg_bw, bus_bw, nwrong: wrong as u64 })
    }
}

/// This rank's part of the benchmark; every rank returns the same figures.
pub(crate) fn run_rank(
    cfg: &AllreduceConfig,
    env: &DistEnv,
    each: &mut dyn FnMut(&SizeResult) -> Result<()>,
) -> Result<()> {
    let fault = crate::bench::ddp::worker::Fault::from_env(env.rank)?;
    let device = cfg.devices.device(0);
    let store = Store::new(&env.master_addr, env.master_port, env.rank, env.world_size, env.rank == 0, cfg.timeout)
        .context("rendezvous")?;
    let cuda = match device {
        Device::Cuda(o) => Some(o),
        _ => None,
    };
    let pg = ProcessGroup::new(&store, cfg.backend, env.rank, env.world_size, cuda, cfg.timeout)?;
    let r = Rank { pg, device, cfg };
    let e = cfg.dtype.bytes();
    let sizes = cfg.sizes();
    for &b in &sizes {
        let mut t = Tensor::f_zeros([(b / e) as i64], (kind(cfg.dtype), device))?;
        for _ in 0..cfg.warmup {
            r.op(None, &mut t)?;
        }
    }
    r.sync();
    // Each size is handed on as soon as it is measured, so that a rank
    // dying later loses none of the sizes before it.
    for (i, &b) in sizes.iter().enumerate() {
        if let Some(f) = &fault {
            f.strike(i as u64 + 1)?;
        }
        let count = (b / e) as i64;
        let oop = r.timing(b, count, true)?;
        let ip = r.timing(b, count, false)?;
        each(&SizeResult { size: b, count: count as u64, out_of_place: oop, in_place: ip })?;
    }
    Ok(())
}

/// nccl-tests' table head, printed before the first size is measured.
pub(crate) fn table_head() -> &'static str {
    "#                                        out-of-place                                   in-place\n\
     #       size      count      type redop      time    p50    p99   algbw   busbw #wrong      time    p50    p99   algbw   busbw #wrong\n\
     #        (B) (elements)                      (us)   (us)   (us)  (GB/s)  (GB/s)             (us)   (us)   (us)  (GB/s)  (GB/s)\n"
}

/// One size's line of the table, with the per-operation p50 and p99 added.
pub(crate) fn table_line(r: &SizeResult, dtype: CommDtype) -> String {
    let part = |x: &Timing| {
        format!(
            "{:>9.1} {:>6.0} {:>6.0} {:>7.3} {:>7.3} {:>6}",
            x.time, x.p50_us, x.p99_us, x.alg_bw, x.bus_bw, x.nwrong
        )
    };
    format!(
        "{:>12} {:>10} {:>9} {:>5}  {}  {}\n",
        r.size,
        r.count,
        dtype.nccl_name(),
        "sum",
        part(&r.out_of_place),
        part(&r.in_place)
    )
}

/// The table's closing lines, over every size measured.
pub(crate) fn table_foot(results: &[SizeResult]) -> String {
    format!(
        "# Out of bounds values : {} {}\n# Avg bus bandwidth    : {:.4} GB/s\n",
        wrong(results),
        if wrong(results) == 0 { "OK" } else { "FAILED" },
        avg_busbw(results)
    )
}

/// Wrong elements over every size and placement.
pub(crate) fn wrong(results: &[SizeResult]) -> u64 {
    results.iter().map(|r| r.out_of_place.nwrong + r.in_place.nwrong).sum()
}

/// nccl-tests' "Avg bus bandwidth": the mean in-place and out-of-place busbw over sizes.
pub(crate) fn avg_busbw(results: &[SizeResult]) -> f64 {
    if results.is_empty() {
        return 0.0;
    }
    results.iter().map(|r| r.out_of_place.bus_bw + r.in_place.bus_bw).sum::<f64>() / (2 * results.len()) as f64
}

/// The figures as nccl-tests' `-J` JSON names them (`results[]` with
/// size, count, type, redop, out_of_place{time, alg_bw, bus_bw, nwrong},
/// in_place{…}), plus gpubench's own fields.
pub(crate) fn to_json(cfg: &AllreduceConfig, world: usize, results: &[SizeResult]) -> serde_json::Value {
    let part = |x: &Timing| {
        serde_json::json!({"time": x.time, "alg_bw": x.alg_bw, "bus_bw": x.bus_bw, "nwrong": x.nwrong,
                           "p50_us": x.p50_us, "p99_us": x.p99_us})
    };
    serde_json::json!({
        "tool": format!("gpubench {}", env!("CARGO_PKG_VERSION")),
        "collective": "all_reduce",
        "backend": cfg.backend.name(),
        "world_size": world,
        "config": {"minimum_bytes": cfg.min_bytes, "maximum_bytes": cfg.max_bytes, "step_factor": cfg.factor,
                   "warmup_iters": cfg.warmup, "iterations": cfg.iters},
        "results": results.iter().map(|r| serde_json::json!({
            "size": r.size, "count": r.count, "type": cfg.dtype.nccl_name(), "redop": "sum", "root": -1,
            "out_of_place": part(&r.out_of_place), "in_place": part(&r.in_place),
            "actual_iterations": cfg.iters,
        })).collect::<Vec<_>>(),
        "out_of_bounds": {"count": wrong(results), "okay": wrong(results) == 0},
        "average_bus_bandwidth": {"bandwidth": avg_busbw(results)},
    })
}

/// This node's ranks, one per local device, started as ddp's workers are
/// (`bench::ddp::launcher`) and waited for; one rank's failure is the
/// run's, naming it.
pub(crate) fn launch(cfg: &AllreduceConfig) -> Result<i32> {
    if let (Some(out), 0) = (&cfg.output.out, cfg.node_rank) {
        results_csv::check_writable(out)?;
    }
    let local = cfg.node_devices.len();
    let world = local * cfg.nnodes;
    let addr = cfg.master_addr.clone().unwrap_or_else(|| "127.0.0.1".into());
    let port = match cfg.master_port {
        Some(p) => p,
        None => crate::dist::free_port()?,
    };
    if !cfg.output.quiet && cfg.output.format == Format::Table {
        eprintln!(
            "gpubench allreduce: {} on {}: {local} rank(s) on this node, world size {world}, {} to {} bytes ×{}",
            cfg.backend.name(),
            cfg.node_devices.describe(),
            cfg.min_bytes,
            cfg.max_bytes,
            cfg.factor
        );
    }
    let ranks = spawn_ranks(local, cfg.node_rank, world, (&addr, port), cfg.output.quiet)?;
    let ended = wait_all(ranks, GRACE);
    match ended.first().filter(|(_, e)| !e.exit.success()) {
        None => Ok(0),
        Some((r, e)) => Err(anyhow::anyhow!(rank_failure("allreduce", *r, e))),
    }
}

/// A row per size and placement, in the results file's schema.
pub(crate) fn rows(cfg: &AllreduceConfig, world: usize, results: &[SizeResult]) -> Vec<Row> {
    let base = Row {
        mode: crate::results::Mode::Allreduce,
        strategy: "allreduce".into(),
        backend: cfg.backend.name().into(),
        devices: if cfg.nnodes > 1 {
            format!("{} ×{} nodes", cfg.node_devices.describe(), cfg.nnodes)
        } else {
            cfg.node_devices.describe()
        },
        n_devices: world as u32,
        precision: cfg.dtype.name().into(),
        steps: Some(cfg.iters as u32),
        warmup: Some(cfg.warmup as u32),
        status: Status::Ok,
        note: "op sum; out-of-place = a copy into the output buffer + c10d's in-place all_reduce".into(),
        ..identity_row(&cfg.node_devices, &cfg.output.label, crate::results::Implementation::Gpubench)
    };
    let mut v = vec![];
    for r in results {
        for (in_place, t) in [(false, &r.out_of_place), (true, &r.in_place)] {
            v.push(fill(&base, r.size, in_place, t));
        }
    }
    v
}

fn fill(base: &Row, bytes: u64, in_place: bool, t: &Timing) -> Row {
    Row {
        bytes: Some(bytes),
        in_place: Some(in_place),
        step_ms_mean: Some(t.time / 1e3),
        step_ms_p50: Some(t.p50_us / 1e3),
        step_ms_p99: Some(t.p99_us / 1e3),
        algbw_gbs: Some(t.alg_bw),
        busbw_gbs: Some(t.bus_bw),
        nwrong: Some(t.nwrong),
        status: if t.nwrong == 0 { Status::Ok } else { Status::Failed },
        error: if t.nwrong == 0 { String::new() } else { format!("{} wrong elements", t.nwrong) },
        ..base.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidths_follow_nccl_tests_definitions() {
        // 1 GB in 0.5 s: algbw 2 GB/s; 8 ranks: busbw = 2 × 2·7/8 = 3.5.
        let (alg, bus) = bandwidths(1_000_000_000, 500_000.0, 8);
        assert!((alg - 2.0).abs() < 1e-12 && (bus - 3.5).abs() < 1e-12);
        assert_eq!(bus_factor(2), 1.0);
        assert_eq!(bus_factor(1), 1.0);
    }
}
