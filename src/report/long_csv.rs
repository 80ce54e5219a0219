//! Long-form companions of the results file: one row per (run, device) in
//! `<out>.devices.csv`, and the sampled telemetry timeline (`--telemetry`).
//! Like the results file, they are appended under a lock, one write per call,
//! and a file with a different header is refused, never mixed.
use anyhow::Result;
use serde::Serialize;
use std::path::{Path, PathBuf};

use crate::error::usage;
use crate::metrics::devices::DeviceMetrics;
use crate::metrics::sampler::DeviceSample;

/// `results.csv` → `results.devices.csv`.
pub fn devices_path(out: &Path) -> PathBuf {
    let stem = out.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    out.with_file_name(format!("{stem}.devices.csv"))
}

/// Identity columns that prefix every long-form row.
#[derive(Debug, Clone, Serialize)]
pub struct RunKey {
    pub run_id: String,
    pub strategy: String,
    pub n_devices: u32,
}

fn header_of<T: Serialize + Default>() -> String {
    let mut w = csv::Writer::from_writer(vec![]);
    w.serialize(T::default()).expect("serializing a default record");
    let text = String::from_utf8(w.into_inner().expect("flush")).expect("utf8");
    text.lines().next().unwrap_or_default().to_string()
}

pub fn devices_header() -> String {
    format!("run_id,strategy,n_devices,{}", header_of::<DeviceMetrics>())
}

pub fn telemetry_header() -> String {
    format!("run_id,{}", header_of::<DeviceSample>())
}

fn append(path: &Path, header: &str, body: String) -> Result<()> {
    crate::report::results_csv::append_locked(path, header, &body, |p| {
        usage(format!(
            "{} has a different header than gpubench writes there; move it aside or choose another --out",
            p.display()
        ))
    })
}

/// Before a run: `path` can later take rows under `header` (its directory
/// exists; an existing file has that header).
pub fn check_writable(path: &Path, header: &str, flag: &str) -> Result<()> {
    if path.exists() {
        let first = crate::report::results_csv::first_line(path)?;
        if !first.is_empty() && first != header {
            return Err(usage(format!(
                "{flag} {}: the file has a different header than gpubench writes there; choose another file",
                path.display()
            )));
        }
        return Ok(());
    }
    crate::report::results_csv::existing_parent(path, flag).map(|_| ())
}

fn records<T: Serialize>(key: &impl Serialize, items: &[T]) -> String {
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(vec![]);
    for it in items {
        w.serialize((key, it)).expect("serializing a record");
    }
    String::from_utf8(w.into_inner().expect("flush")).expect("utf8")
}

pub fn append_devices(path: &Path, key: &RunKey, devs: &[DeviceMetrics]) -> Result<()> {
    append(path, &devices_header(), records(key, devs))
}

pub fn append_telemetry(path: &Path, run_id: &str, samples: &[DeviceSample]) -> Result<()> {
    append(path, &telemetry_header(), records(&(run_id,), samples))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn companion_path() {
        assert_eq!(devices_path(Path::new("results/a.csv")), PathBuf::from("results/a.devices.csv"));
        assert_eq!(devices_path(Path::new("r")), PathBuf::from("r.devices.csv"));
    }

    #[test]
    fn long_form_rows_one_per_device_under_one_header() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.csv");
        let key = RunKey { run_id: "r1".into(), strategy: "dp".into(), n_devices: 2 };
        let devs = vec![
            DeviceMetrics {
                device: "cuda:0".into(),
                role: "master".into(),
                peak_alloc_mb: Some(4000.0),
                ..Default::default()
            },
            DeviceMetrics {
                device: "cuda:1".into(),
                role: "replica".into(),
                peak_alloc_mb: Some(1000.0),
                ..Default::default()
            },
        ];
        append_devices(&p, &key, &devs).unwrap();
        append_devices(&p, &key, &devs[..1]).unwrap();
        let mut r = csv::Reader::from_path(&p).unwrap();
        assert_eq!(
            r.headers().unwrap().iter().take(5).collect::<Vec<_>>(),
            ["run_id", "strategy", "n_devices", "device", "role"]
        );
        let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(&rows[0][3], "cuda:0");
        assert_eq!(&rows[0][5], "4000.0");
        assert_eq!(&rows[1][4], "replica");
        std::fs::write(&p, "x,y\n").unwrap();
        assert!(append_devices(&p, &key, &devs).is_err());
    }

    #[test]
    fn telemetry_rows_carry_the_run_id() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.csv");
        let s = DeviceSample { t: 0.1, device: "cuda:0".into(), gpu_util_pct: Some(97.0), ..Default::default() };
        append_telemetry(&p, "run9", &[s.clone(), s]).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("run_id,t,timestamp,device,gpu_util_pct"));
        assert_eq!(text.lines().filter(|l| l.starts_with("run9,")).count(), 2);
    }
}
