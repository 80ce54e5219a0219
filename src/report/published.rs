//! "Is my number good?": a measured configuration beside the published
//! figure for the same GPU, model, image size, precision and GPU count,
//! from the reference files under `results/reference/` (built into the
//! binary, so every report has them).
//!
//! GPU names differ between NVML and publications ("NVIDIA H100 80GB HBM3"
//! is Lambda's "H100 80GB SXM5"), so they are matched by a rule: the same
//! product (H200, H100, A100, V100, P100, K80), the same form factor (a name
//! saying PCIe is a PCIe part; any other is SXM or a single-form product),
//! and the same memory size where both names give one.
use std::path::Path;

use crate::report::format::fmt_rate;
use crate::report::summary::{column_median, Group, Run};
use crate::results::csv::{parse_rows, Row};

const FILES: [(&str, &str); 5] = [
    ("results/reference/lambda.csv", include_str!("../../results/reference/lambda.csv")),
    ("results/reference/nvidia_dle_rn50.csv", include_str!("../../results/reference/nvidia_dle_rn50.csv")),
    ("results/reference/tf_cnn_benchmarks_k80.csv", include_str!("../../results/reference/tf_cnn_benchmarks_k80.csv")),
    (
        "results/reference/tf_cnn_benchmarks_p100.csv",
        include_str!("../../results/reference/tf_cnn_benchmarks_p100.csv"),
    ),
    (
        "results/reference/seed_pytorch_distributed_v100.csv",
        include_str!("../../results/reference/seed_pytorch_distributed_v100.csv"),
    ),
];

const PRODUCTS: [&str; 6] = ["H200", "H100", "A100", "V100", "P100", "K80"];

/// A GPU as the matching rule sees it: product, PCIe or not, memory in GB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GpuKey {
    pub product: &'static str,
    pub pcie: bool,
    pub mem_gb: Option<u32>,
}

pub(crate) fn gpu_key(name: &str) -> Option<GpuKey> {
    let upper = name.to_uppercase();
    let product = PRODUCTS.into_iter().find(|p| upper.contains(p))?;
    let mem_gb = upper
        .split(|c: char| !c.is_ascii_alphanumeric())
        .find_map(|w| w.strip_suffix("GB").and_then(|n| n.parse().ok()));
    Some(GpuKey { product, pcie: upper.contains("PCIE"), mem_gb })
}

fn same_gpu(a: &GpuKey, b: &GpuKey) -> bool {
    a.product == b.product
        && a.pcie == b.pcie
        && match (a.mem_gb, b.mem_gb) {
            (Some(x), Some(y)) => x == y,
            _ => true,
        }
}

/// Every published row built into the binary.
pub(crate) fn rows() -> Vec<Row> {
    FILES
        .iter()
        .flat_map(|(name, text)| parse_rows(Path::new(name), text.as_bytes()).unwrap_or_default())
        .map(|(_, r)| r)
        .collect()
}

/// The published rows for `row`'s GPU, model, image size, precision and GPU count.
pub(crate) fn matching<'a>(row: &Row, refs: &'a [Row]) -> Vec<&'a Row> {
    let Some(mine) = gpu_key(&row.device_name) else { return vec![] };
    refs.iter()
        .filter(|r| {
            r.model == row.model
                && r.image_size == row.image_size
                && r.precision == row.precision
                && r.n_devices == row.n_devices
                && r.throughput_img_s.is_some()
                && gpu_key(&r.device_name).is_some_and(|k| same_gpu(&mine, &k))
        })
        .collect()
}

/// One note per measured training configuration that a publication also
/// measured: its median as a percentage of each published figure, naming
/// the source, the GPU as published, and the batch (or that none was given).
pub(crate) fn notes(runs: &[Run], groups: &[Group]) -> Vec<String> {
    let refs = rows();
    let mut v = vec![];
    for g in groups.iter().filter(|g| g.scope.implementation.is_measured() && !g.ok.is_empty()) {
        let Some(t) = column_median(runs, &g.ok, |r| r.throughput_img_s) else { continue };
        let row = &runs[g.ok[0]].row;
        for r in matching(row, &refs) {
            let p = r.throughput_img_s.unwrap_or_default();
            let batch = r.batch_per_device.map_or("batch not given".to_string(), |b| format!("batch {b} per GPU"));
            let source = r.source.split(',').next().unwrap_or(&r.source);
            v.push(format!(
                "{} {} {} {}×{}: {} img/s is {:.0}% of {source}'s figure for {} ({} img/s, {batch}; yours: batch {})",
                row.device_name,
                row.model,
                row.precision,
                row.strategy,
                row.n_devices,
                fmt_rate(t),
                100.0 * t / p,
                r.device_name,
                fmt_rate(p),
                row.batch_per_device.map_or("?".into(), |b| b.to_string()),
            ));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_names_match_published_ones_by_the_rule() {
        let k = |n: &str| gpu_key(n).unwrap();
        assert!(same_gpu(&k("NVIDIA H100 80GB HBM3"), &k("H100 80GB SXM5")));
        assert!(!same_gpu(&k("NVIDIA H100 PCIe"), &k("H100 80GB SXM5")));
        assert!(same_gpu(&k("NVIDIA H200"), &k("H200 SXM")));
        assert!(same_gpu(&k("Tesla V100-SXM2-16GB"), &k("V100 16GB (DGX-1)")));
        assert!(!same_gpu(&k("Tesla V100-SXM2-32GB"), &k("V100 16GB")));
        assert!(same_gpu(&k("NVIDIA A100-SXM4-80GB"), &k("A100 80GB SXM4")));
        assert_eq!(gpu_key("AMD EPYC"), None);
        // Every built-in reference file parses.
        assert!(rows().len() >= 40, "{}", rows().len());
    }
}
