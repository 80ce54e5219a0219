//! The measured peaks (`gpubench peak`): a small JSON file under
//! `$GPUBENCH_HOME` (default `~/.cache/gpubench`), keyed by device name and
//! precision, that `run` reads to put its achieved TFLOP/s against (`mfu_pct`).
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One measured peak.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Peak {
    /// Median of the rounds, TFLOP/s.
    pub tflops: f64,
    /// The rounds' lowest and highest.
    pub lo: f64,
    pub hi: f64,
    /// The square matrices' side.
    pub size: i64,
    pub measured_at: String,
}

/// Where the peaks are kept: `$GPUBENCH_PEAKS`, else `$GPUBENCH_HOME/peaks.json`,
/// else `~/.cache/gpubench/peaks.json`.
pub fn path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("GPUBENCH_PEAKS")
        .or_else(|| var("GPUBENCH_HOME").map(|h| h.join("peaks.json")))
        .or_else(|| var("HOME").map(|h| h.join(".cache/gpubench/peaks.json")))
}

fn key(device: &str, precision: &str) -> String {
    format!("{device} | {precision}")
}

fn read_all(p: &std::path::Path) -> BTreeMap<String, Peak> {
    std::fs::read(p).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

/// The peak measured for this device and precision, if any.
pub fn lookup(device: &str, precision: &str) -> Option<Peak> {
    lookup_in(&path()?, device, precision)
}

pub fn lookup_in(p: &std::path::Path, device: &str, precision: &str) -> Option<Peak> {
    read_all(p).remove(&key(device, precision))
}

/// Keeps `peak` for the device and precision (replacing an older one), written whole.
/// Checks, before any work, that the peaks can be kept where `path` says.
pub(crate) fn check_store() -> Result<()> {
    let p = path().ok_or_else(|| crate::error::usage("no place for the peaks: set GPUBENCH_HOME or HOME"))?;
    if p.is_dir() {
        return Err(crate::error::usage(format!(
            "the peaks file {} is a directory; set GPUBENCH_PEAKS to a file",
            p.display()
        )));
    }
    match p.ancestors().skip(1).find(|a| a.exists()) {
        Some(a) if !a.is_dir() => Err(crate::error::usage(format!(
            "the peaks file {} cannot be made: {} is a file; set GPUBENCH_PEAKS elsewhere",
            p.display(),
            a.display()
        ))),
        _ => Ok(()),
    }
}

pub fn store(device: &str, precision: &str, peak: Peak) -> Result<PathBuf> {
    let p = path().context("no place for the peaks: set GPUBENCH_HOME or HOME")?;
    store_in(&p, device, precision, peak)?;
    Ok(p)
}

pub fn store_in(p: &std::path::Path, device: &str, precision: &str, peak: Peak) -> Result<()> {
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut all = read_all(p);
    all.insert(key(device, precision), peak);
    let text = serde_json::to_string_pretty(&all)? + "\n";
    super::write_whole(p, text.as_bytes())?;
    Ok(())
}

/// A part's form factor, as the datasheet tells them apart.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Pcie,
    /// H100 NVL, H200 NVL: PCIe cards with NVLink bridges, at lower clocks
    /// and power than the SXM parts (dense fp16 835 against 989 TFLOP/s).
    Nvl,
}

/// Datasheet dense peaks (TFLOP/s, no sparsity) of well-known GPUs, by
/// precision: NVIDIA's published figures. A device matches the first entry
/// of its product (`results::gpu`'s rule) whose form factor is its own or
/// any (None): NVL and PCIe parts are listed first, so an "H100 PCIe" or an
/// "H200 NVL" is not taken for an SXM part.
const DATASHEET: &[(&str, Option<Form>, [f64; 4])] = &[
    // [fp32, tf32, fp16, bf16]
    ("H200", Some(Form::Nvl), [60.0, 417.5, 835.0, 835.0]),
    ("H200", None, [67.0, 494.7, 989.4, 989.4]),
    ("H100", Some(Form::Nvl), [60.0, 417.5, 835.0, 835.0]),
    ("H100", Some(Form::Pcie), [51.2, 378.0, 756.0, 756.0]),
    ("H100", None, [67.0, 494.7, 989.4, 989.4]),
    ("A100", None, [19.5, 156.0, 312.0, 312.0]),
    ("V100", Some(Form::Pcie), [14.0, 14.0, 112.0, 0.0]),
    ("V100", None, [15.7, 15.7, 125.0, 0.0]),
    ("K80", None, [4.37, 4.37, 0.0, 0.0]),
];

/// The datasheet peak of `device` at `precision`, when the device is one of
/// `DATASHEET`'s and has that precision in hardware.
pub fn datasheet(device: &str, precision: &str) -> Option<f64> {
    let i = ["fp32", "tf32", "fp16", "bf16"].iter().position(|p| *p == precision)?;
    let k = super::gpu::gpu_key(device)?;
    // NVML names them "NVIDIA H100 NVL" and "NVIDIA H200 NVL".
    let nvl = device.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w.eq_ignore_ascii_case("nvl"));
    let form = if nvl {
        Some(Form::Nvl)
    } else if k.pcie {
        Some(Form::Pcie)
    } else {
        None
    };
    let (_, _, peaks) =
        DATASHEET.iter().find(|(product, f, _)| *product == k.product && f.is_none_or(|f| Some(f) == form))?;
    Some(peaks[i]).filter(|&v| v > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datasheet_names_match_by_words_pcie_first() {
        assert_eq!(datasheet("NVIDIA H100 80GB HBM3", "bf16"), Some(989.4));
        assert_eq!(datasheet("NVIDIA H100 PCIe", "bf16"), Some(756.0));
        assert_eq!(datasheet("NVIDIA H200", "tf32"), Some(494.7));
        assert_eq!(datasheet("Tesla V100-SXM2-16GB", "fp16"), Some(125.0));
        assert_eq!(datasheet("Tesla V100-PCIE-16GB", "fp16"), Some(112.0));
        assert_eq!(datasheet("Tesla V100-SXM2-16GB", "bf16"), None);
        assert_eq!(datasheet("AMD EPYC 7B13", "fp32"), None);
        // NVL parts have their own figures, not the SXM parts'.
        assert_eq!(datasheet("NVIDIA H100 NVL", "fp16"), Some(835.0));
        assert_eq!(datasheet("NVIDIA H200 NVL", "bf16"), Some(835.0));
        assert_eq!(datasheet("NVIDIA H200", "bf16"), Some(989.4));
    }

    #[test]
    fn a_peak_is_kept_and_read_back_by_device_and_precision() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/peaks.json");
        let peak = Peak { tflops: 1.5, lo: 1.4, hi: 1.6, size: 1024, measured_at: "t".into() };
        store_in(&p, "cpu X", "fp32", peak.clone()).unwrap();
        store_in(&p, "cpu X", "bf16", Peak { tflops: 3.0, ..peak.clone() }).unwrap();
        assert_eq!(lookup_in(&p, "cpu X", "fp32"), Some(peak));
        assert_eq!(lookup_in(&p, "cpu Y", "fp32"), None);
    }
}
