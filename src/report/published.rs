//! "Is my number good?": a measured configuration beside the published
//! figure for the same GPU, model, image size, precision and GPU count,
//! from the reference files under `results/reference/` (built into the
//! binary, so every report has them).
//!
//! GPU names differ between NVML and publications ("NVIDIA H100 80GB HBM3"
//! is Lambda's "H100 80GB SXM5"), so they are matched by `results::gpu`'s
//! rule: the same product, form factor and (where both give one) memory.
use std::path::Path;

use crate::report::format::fmt_rate;
use crate::report::summary::{column_median, Group, Run};
use crate::results::csv::{parse_rows, Row};
use crate::results::gpu::{gpu_key, same_gpu};
use crate::results::Fields;

/// Each reference file with the software stack its figures were measured
/// on: a figure from a tuned stack (DALI, CUDA graphs, LARS) is far above
/// what eager PyTorch or libtorch can reach on the same GPU, so a note that
/// gives a percentage must say what it is a percentage of.
const FILES: [(&str, &str, &str); 7] = [
    (
        "results/reference/lambda.csv",
        include_str!("../../results/reference/lambda.csv"),
        "PyTorch, NGC container, DLE ResNet-50 v1.5",
    ),
    (
        "results/reference/nvidia_dle_rn50.csv",
        include_str!("../../results/reference/nvidia_dle_rn50.csv"),
        "PyTorch 21.03 NGC container, DLE ResNet-50 v1.5",
    ),
    (
        "results/reference/tf_cnn_benchmarks_k80.csv",
        include_str!("../../results/reference/tf_cnn_benchmarks_k80.csv"),
        "TensorFlow tf_cnn_benchmarks",
    ),
    (
        "results/reference/tf_cnn_benchmarks_p100.csv",
        include_str!("../../results/reference/tf_cnn_benchmarks_p100.csv"),
        "TensorFlow tf_cnn_benchmarks",
    ),
    (
        "results/reference/seed_pytorch_distributed_v100.csv",
        include_str!("../../results/reference/seed_pytorch_distributed_v100.csv"),
        "PyTorch 1.3 (DataParallel, DDP, Horovod, apex as the row's strategy says)",
    ),
    (
        "results/reference/superbench.csv",
        include_str!("../../results/reference/superbench.csv"),
        "PyTorch DDP, torchvision ResNet-50",
    ),
    (
        "results/reference/mlperf_training_v4.csv",
        include_str!("../../results/reference/mlperf_training_v4.csv"),
        "MXNet, DALI, CUDA graphs, LARS (MLPerf closed division)",
    ),
];

/// Every published row built into the binary, each with its file's stack.
pub(crate) fn rows() -> Vec<(Row, &'static str)> {
    FILES
        .iter()
        .flat_map(|&(name, text, stack)| {
            let rows = parse_rows(Path::new(name), text.as_bytes()).unwrap_or_default();
            rows.into_iter().map(move |(_, r)| (r, stack))
        })
        .collect()
}

/// The published rows (with their stacks) for `row`'s GPU, model, image
/// size, precision and GPU count.
pub(crate) fn matching<'a>(row: &impl Fields, refs: &'a [(Row, &'static str)]) -> Vec<&'a (Row, &'static str)> {
    let Some(mine) = gpu_key(row.device_name()) else { return vec![] };
    refs.iter()
        .filter(|(r, _)| {
            r.model == row.model()
                && r.image_size == row.image_size()
                && r.precision == row.precision()
                && r.n_devices == row.n_devices()
                && r.throughput_img_s.is_some()
                && gpu_key(&r.device_name).is_some_and(|k| same_gpu(&mine, &k))
        })
        .collect()
}

/// One note per measured training configuration that a publication also
/// measured: its median as a percentage of each published figure, naming
/// the source, the GPU as published, the batch (or that none was given) and
/// the software stack the figure was measured on.
pub(crate) fn notes(runs: &[Run], groups: &[Group]) -> Vec<String> {
    let refs = rows();
    let mut v = vec![];
    for g in groups.iter().filter(|g| g.scope.implementation.is_measured() && !g.ok.is_empty()) {
        let Some(t) = column_median(runs, &g.ok, |r| r.throughput_img_s()) else { continue };
        let row = &runs[g.ok[0]].row;
        for (r, stack) in matching(row, &refs) {
            let p = r.throughput_img_s.unwrap_or_default();
            let batch = r.batch_per_device.map_or("batch not given".to_string(), |b| format!("batch {b} per GPU"));
            let source = r.source.split(',').next().unwrap_or(&r.source);
            v.push(format!(
                "{} {} {} {}×{}: {} img/s is {:.0}% of {source}'s figure for {} \
                 ({} img/s, {batch}; stack: {stack}; yours: batch {})",
                row.device_name(),
                row.model(),
                row.precision(),
                row.strategy(),
                row.n_devices(),
                fmt_rate(t),
                100.0 * t / p,
                r.device_name,
                fmt_rate(p),
                row.batch_per_device().map_or("?".into(), |b| b.to_string()),
            ));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_reference_file_parses() {
        assert!(rows().len() >= 40, "{}", rows().len());
    }

    fn measured(device_name: &str, precision: &str) -> Row {
        Row {
            model: "resnet50".into(),
            image_size: Some(224),
            precision: precision.into(),
            strategy: "ddp".into(),
            n_devices: 8,
            device_name: device_name.into(),
            throughput_img_s: Some(1000.0),
            ..Default::default()
        }
    }

    #[test]
    fn an_h200_node_meets_mlperf_and_an_a100_node_meets_superbench() {
        let refs = rows();
        let h200 = matching(&measured("NVIDIA H200", "fp16"), &refs);
        let mlperf = h200.iter().find(|(r, _)| r.source.contains("h200_ngc24.04_mxnet")).expect("the MLPerf H200 row");
        assert_eq!((mlperf.0.throughput_img_s, mlperf.1), (Some(63600.0), FILES[6].2));
        // The H100 figure is another GPU, so it stays out.
        assert!(h200.iter().all(|(r, _)| !r.device_name.contains("H100")), "{h200:?}");

        let a100 = matching(&measured("NVIDIA A100-SXM4-80GB", "tf32"), &refs);
        let sb = a100.iter().find(|(r, _)| r.source.contains("SuperBench")).expect("the SuperBench tf32 row");
        assert_eq!((sb.0.throughput_per_device_img_s, sb.1), (Some(856.9), FILES[5].2));
    }
}
