//! Long-form companions of the results file: one row per (run, device) in
//! `<out>.devices.csv`, and the sampled telemetry timeline (`--telemetry`).
//! Like the results file, they are appended under a lock, one write per call,
//! and a file with a different header is refused, never mixed.
//!
//! The devices file is read back (for the memory chart, the imbalance column
//! and max-batch's per-device peaks) by column name, so a file from an
//! earlier gpubench with fewer columns still reads; one that cannot be read
//! costs only its figures, with a note.
use anyhow::Result;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::usage;
use crate::metrics::devices::DeviceMetrics;
use crate::metrics::sampler::DeviceSample;

/// `results.csv` → `results.devices.csv`.
pub(crate) fn devices_path(out: &Path) -> PathBuf {
    beside(out, "devices")
}

/// `<out stem>.<what>.csv` beside a results file: its companions (the
/// per-device rows, max-batch's frontier table).
pub(crate) fn beside(out: &Path, what: &str) -> PathBuf {
    let stem = out.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    out.with_file_name(format!("{stem}.{what}.csv"))
}

/// Identity columns that prefix every long-form row.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunKey {
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

pub(crate) fn devices_header() -> String {
    format!("run_id,strategy,n_devices,{}", header_of::<DeviceMetrics>())
}

pub(crate) fn telemetry_header() -> String {
    format!("run_id,{}", header_of::<DeviceSample>())
}

fn append(path: &Path, header: &str, body: String) -> Result<()> {
    crate::results::csv::append_locked(path, header, &body, |p| {
        usage(format!(
            "{} has a different header than gpubench writes there; move it aside or choose another --out",
            p.display()
        ))
    })
}

/// Before a run: `path` can later take rows under `header` (its directory
/// exists; an existing file has that header).
pub(crate) fn check_writable(path: &Path, header: &str, flag: &str) -> Result<()> {
    if path.is_dir() {
        return Err(usage(format!("{flag} {}: is a directory; give a file name in it", path.display())));
    }
    if path.exists() {
        let first = crate::results::csv::first_line(path)?;
        if !first.is_empty() && first != header {
            return Err(usage(format!(
                "{flag} {}: the file has a different header than gpubench writes there; choose another file",
                path.display()
            )));
        }
        return Ok(());
    }
    let dir = crate::results::csv::existing_parent(path, flag)?;
    crate::results::csv::writable_dir(dir, flag, path)
}

fn records<T: Serialize>(key: &impl Serialize, items: &[T]) -> String {
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(vec![]);
    for it in items {
        w.serialize((key, it)).expect("serializing a record");
    }
    String::from_utf8(w.into_inner().expect("flush")).expect("utf8")
}

pub(crate) fn append_devices(path: &Path, key: &RunKey, devs: &[DeviceMetrics]) -> Result<()> {
    append(path, &devices_header(), records(key, devs))
}

pub(crate) fn append_telemetry(path: &Path, run_id: &str, samples: &[DeviceSample]) -> Result<()> {
    append(path, &telemetry_header(), records(&(run_id,), samples))
}

// ---- reading the devices file ------------------------------------------------

/// Peak-memory columns in order of preference, with what they are called in
/// one-line outputs: the allocator's peak is what the model holds; NVML's
/// adds the CUDA context.
const MEM_COLS: &[(&str, &str)] = &[("peak_alloc_mb", "alloc"), ("nvml_mem_peak_mb", "nvml")];

/// One device of one run, as read back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeviceValues {
    pub device: String,
    /// master, replica, rank N, …; empty in files that lack the column.
    pub role: String,
    /// The allocator's peak, else NVML's, in bytes; None on the CPU.
    pub peak_mem_bytes: Option<f64>,
    /// Which of the two `peak_mem_bytes` is: "alloc" or "nvml".
    pub peak_mem_kind: &'static str,
    /// The process's peak resident set, MiB (CPU runs).
    pub peak_rss_mb: Option<f64>,
    pub util_mean_pct: Option<f64>,
    /// The process's CPU use over the timed window, % of one core.
    pub cpu_util_pct: Option<f64>,
}

impl DeviceValues {
    /// Peak memory for one-line outputs, MiB, with whose figure it is:
    /// the device's, else the process's resident set ("rss").
    pub(crate) fn peak_mb(&self) -> Option<(f64, &'static str)> {
        self.peak_mem_bytes.map(|b| (b / 1048576.0, self.peak_mem_kind)).or(self.peak_rss_mb.map(|m| (m, "rss")))
    }
}

/// Per-device values by run_id, in file order.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeviceData {
    pub by_run: BTreeMap<String, Vec<DeviceValues>>,
}

impl DeviceData {
    pub(crate) fn get(&self, run_id: &str) -> &[DeviceValues] {
        self.by_run.get(run_id).map_or(&[], Vec::as_slice)
    }

    /// max/min peak memory across the run's devices; needs two devices.
    pub(crate) fn mem_imbalance(&self, run_id: &str) -> Option<f64> {
        let mem: Vec<f64> = self.get(run_id).iter().filter_map(|d| d.peak_mem_bytes).collect();
        if mem.len() < 2 {
            return None;
        }
        let max = mem.iter().cloned().fold(f64::MIN, f64::max);
        let min = mem.iter().cloned().fold(f64::MAX, f64::min);
        (min > 0.0).then(|| max / min)
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.by_run.is_empty()
    }
}

/// Where the devices file of `results` may be: where gpubench writes it
/// (`devices_path`), or `<results>.devices.csv`.
pub(crate) fn devices_candidates(results: &Path) -> Vec<PathBuf> {
    let mut s = results.as_os_str().to_owned();
    s.push(".devices.csv");
    let mut v = vec![devices_path(results), PathBuf::from(s)];
    v.dedup();
    v
}

/// Loads the devices files next to `results_files` that exist. A file that
/// cannot be read costs only its figures: it becomes a note, not an error.
pub(crate) fn load_devices(results_files: &[PathBuf]) -> (DeviceData, Vec<String>) {
    let mut data = DeviceData::default();
    let mut notes = vec![];
    for f in results_files {
        if let Some(p) = devices_candidates(f).into_iter().find(|p| p.is_file()) {
            if let Err(e) = read_devices_into(&p, &mut data) {
                notes.push(format!("per-device values not used: {e}"));
            }
        }
    }
    (data, notes)
}

fn read_devices_into(path: &Path, data: &mut DeviceData) -> Result<(), String> {
    let p = path.display();
    let mut rdr = csv::Reader::from_path(path).map_err(|e| format!("cannot read {p}: {e}"))?;
    let headers = rdr.headers().map_err(|e| format!("{p}: {e}"))?.clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let run_col = col("run_id").ok_or_else(|| format!("{p}: no `run_id` column"))?;
    let dev_col = col("device").ok_or_else(|| format!("{p}: no `device` column"))?;
    let role_col = col("role");
    let mem_cols: Vec<(usize, &'static str)> =
        MEM_COLS.iter().filter_map(|(n, kind)| col(n).map(|i| (i, *kind))).collect();
    let rss_col = col("peak_rss_mb");
    let util_col = col("util_mean_pct");
    let cpu_col = col("cpu_util_pct");
    if mem_cols.is_empty() && util_col.is_none() && rss_col.is_none() && cpu_col.is_none() {
        return Err(format!("{p}: neither a peak memory nor a utilization column"));
    }
    for rec in rdr.records() {
        let rec = rec.map_err(|e| format!("{p}: {e}"))?;
        let line = rec.position().map_or(0, |x| x.line());
        let num = |i: Option<usize>| -> Result<Option<f64>, String> {
            let Some(i) = i else { return Ok(None) };
            let s = rec.get(i).unwrap_or("").trim();
            if s.is_empty() || s == "n/a" {
                return Ok(None);
            }
            s.parse::<f64>().map(Some).map_err(|_| format!("{p}:{line}: `{}` is not a number", s))
        };
        let (mut peak_mem_bytes, mut peak_mem_kind) = (None, "");
        for &(i, kind) in &mem_cols {
            if let Some(v) = num(Some(i))? {
                (peak_mem_bytes, peak_mem_kind) = (Some(v * 1048576.0), kind);
                break;
            }
        }
        let text = |i: Option<usize>| i.and_then(|i| rec.get(i)).unwrap_or("").to_string();
        data.by_run.entry(text(Some(run_col))).or_default().push(DeviceValues {
            device: text(Some(dev_col)),
            role: text(role_col),
            peak_mem_bytes,
            peak_mem_kind,
            peak_rss_mb: num(rss_col)?,
            util_mean_pct: num(util_col)?,
            cpu_util_pct: num(cpu_col)?,
        });
    }
    Ok(())
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

    #[test]
    fn reads_long_form_and_computes_imbalance() {
        let dir = tempfile::tempdir().unwrap();
        let results = dir.path().join("r.csv");
        std::fs::write(
            dir.path().join("r.devices.csv"),
            "run_id,strategy,n_devices,device,role,peak_alloc_mb,nvml_mem_peak_mb,util_mean_pct\n\
             a,dp,2,cuda:0,master,4000,4500,95\na,dp,2,cuda:1,replica,1000,1500,60\nb,single,1,cpu,single,,2000,\n",
        )
        .unwrap();
        let (d, notes) = load_devices(&[results]);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(d.get("a").len(), 2);
        assert_eq!(d.get("a")[0].peak_mem_bytes, Some(4000.0 * 1048576.0));
        assert_eq!(d.get("b")[0].util_mean_pct, None);
        // no allocator figure (CPU): NVML's, or whatever comes next, is used
        assert_eq!(d.get("b")[0].peak_mem_bytes, Some(2000.0 * 1048576.0));
        assert_eq!(d.get("a")[1].device, "cuda:1");
        assert_eq!(d.mem_imbalance("a"), Some(4.0));
        assert_eq!(d.mem_imbalance("b"), None);
        assert_eq!(d.mem_imbalance("zzz"), None);
    }

    #[test]
    fn an_unusable_file_is_a_note_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let results = dir.path().join("r.csv");
        std::fs::write(dir.path().join("r.csv.devices.csv"), "run_id,device\na,0\n").unwrap();
        let (d, notes) = load_devices(&[results]);
        assert!(d.is_empty());
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("r.csv.devices.csv: neither"), "{}", notes[0]);
    }

    #[test]
    fn candidates_cover_both_spellings() {
        let c = devices_candidates(Path::new("x/res.csv"));
        assert_eq!(c, [PathBuf::from("x/res.devices.csv"), PathBuf::from("x/res.csv.devices.csv")]);
    }
}
