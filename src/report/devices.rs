//! Per-device values (peak memory, mean utilization) for the memory chart and
//! the imbalance column, read from the long-form file `run --out` writes beside
//! the results (`results.devices.csv`, see `long_csv`), one row per
//! (run_id, device).
//!
//! Columns are found by name, so the file may carry more (or, from an earlier
//! gpubench, fewer) than these: `run_id`, `device`, peak memory in MiB
//! (`peak_alloc_mb`, the caching allocator's, else `nvml_mem_peak_mb`), and
//! `util_mean_pct`. The file is optional: without it those figures are left
//! out, with a note.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const DEVICE_COLS: &[&str] = &["device"];
/// Peak-memory columns in order of preference, with bytes per unit: the
/// allocator's peak is what the model holds; NVML's adds the CUDA context.
const MEM_COLS: &[(&str, f64)] = &[("peak_alloc_mb", 1048576.0), ("nvml_mem_peak_mb", 1048576.0)];
const UTIL_COLS: &[&str] = &["util_mean_pct"];

#[derive(Debug, Clone, PartialEq)]
pub struct DeviceValues {
    pub device: String,
    pub peak_mem_bytes: Option<f64>,
    pub util_mean_pct: Option<f64>,
}

/// Per-device values by run_id, in file order.
#[derive(Debug, Clone, Default)]
pub struct DeviceData {
    pub by_run: BTreeMap<String, Vec<DeviceValues>>,
}

impl DeviceData {
    pub fn get(&self, run_id: &str) -> &[DeviceValues] {
        self.by_run.get(run_id).map_or(&[], Vec::as_slice)
    }

    /// max/min peak memory across the run's devices; needs two devices.
    pub fn mem_imbalance(&self, run_id: &str) -> Option<f64> {
        let mem: Vec<f64> = self.get(run_id).iter().filter_map(|d| d.peak_mem_bytes).collect();
        if mem.len() < 2 {
            return None;
        }
        let max = mem.iter().cloned().fold(f64::MIN, f64::max);
        let min = mem.iter().cloned().fold(f64::MAX, f64::min);
        (min > 0.0).then(|| max / min)
    }

    pub fn is_empty(&self) -> bool {
        self.by_run.is_empty()
    }
}

/// Where the per-device file of `results` may be.
pub fn sidecar_candidates(results: &Path) -> Vec<PathBuf> {
    let mut v = vec![];
    if results.extension().is_some_and(|e| e == "csv") {
        v.push(results.with_extension("devices.csv"));
    }
    let mut s = results.as_os_str().to_owned();
    s.push(".devices.csv");
    v.push(PathBuf::from(s));
    v
}

/// Loads the per-device files next to `results_files` that exist. A file that
/// cannot be read costs only its figures: it becomes a note, not an error.
pub fn load_for(results_files: &[PathBuf]) -> (DeviceData, Vec<String>) {
    let mut data = DeviceData::default();
    let mut notes = vec![];
    for f in results_files {
        if let Some(p) = sidecar_candidates(f).into_iter().find(|p| p.is_file()) {
            if let Err(e) = read_into(&p, &mut data) {
                notes.push(format!("per-device values not used: {e}"));
            }
        }
    }
    (data, notes)
}

fn read_into(path: &Path, data: &mut DeviceData) -> Result<(), String> {
    let p = path.display();
    let mut rdr = csv::Reader::from_path(path).map_err(|e| format!("cannot read {p}: {e}"))?;
    let headers = rdr.headers().map_err(|e| format!("{p}: {e}"))?.clone();
    let find = |names: &[&str]| names.iter().find_map(|n| headers.iter().position(|h| h == *n));
    let run_col = find(&["run_id"]).ok_or_else(|| format!("{p}: no `run_id` column"))?;
    let dev_col = find(DEVICE_COLS).ok_or_else(|| format!("{p}: no `device` column"))?;
    let mem_cols: Vec<(usize, f64)> =
        MEM_COLS.iter().filter_map(|(n, scale)| headers.iter().position(|h| h == *n).map(|i| (i, *scale))).collect();
    let util_col = find(UTIL_COLS);
    if mem_cols.is_empty() && util_col.is_none() {
        return Err(format!("{p}: neither a peak memory nor a utilization column"));
    }
    for rec in rdr.records() {
        let rec = rec.map_err(|e| format!("{p}: {e}"))?;
        let line = rec.position().map_or(0, |x| x.line());
        let num = |i: usize| -> Result<Option<f64>, String> {
            let s = rec.get(i).unwrap_or("").trim();
            if s.is_empty() || s == "n/a" {
                return Ok(None);
            }
            s.parse::<f64>().map(Some).map_err(|_| format!("{p}:{line}: `{}` is not a number", s))
        };
        let mut peak_mem_bytes = None;
        for &(i, scale) in &mem_cols {
            if let Some(v) = num(i)? {
                peak_mem_bytes = Some(v * scale);
                break;
            }
        }
        let util_mean_pct = match util_col {
            Some(i) => num(i)?,
            None => None,
        };
        data.by_run.entry(rec.get(run_col).unwrap_or("").to_string()).or_default().push(DeviceValues {
            device: rec.get(dev_col).unwrap_or("").to_string(),
            peak_mem_bytes,
            util_mean_pct,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let (d, notes) = load_for(&[results]);
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
        let (d, notes) = load_for(&[results]);
        assert!(d.is_empty());
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("r.csv.devices.csv: neither"), "{}", notes[0]);
    }

    #[test]
    fn candidates_cover_both_spellings() {
        let c = sidecar_candidates(Path::new("x/res.csv"));
        assert_eq!(c, [PathBuf::from("x/res.devices.csv"), PathBuf::from("x/res.csv.devices.csv")]);
    }
}
