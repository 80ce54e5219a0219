//! gpubench's file formats, read and written: the results CSV (one row per
//! run: `columns` defines them, `csv` reads and writes them, `packed` holds
//! many rows in little memory), its per-device companion and the telemetry
//! timeline (`long`), the kept matmul peaks (`peak`), the GPU names the
//! datasheets know (`gpu`), the run outcome (`Status`) and the column
//! reference (`schema`).
pub mod columns;
pub mod csv;
pub mod gpu;
pub mod long;
pub mod packed;
pub mod peak;
pub mod schema;

pub(crate) use columns::Fields;

use anyhow::Result;
use serde::Serialize;
use std::path::Path;

use crate::metrics::devices::DeviceMetrics;

/// The git commit this gpubench was built from (12 hex digits, `-dirty`
/// when the checkout had changes), as build.rs found it; empty for a build
/// outside a git checkout. Rows carry it as `gpubench_commit`, and `info`
/// shows it beside the version.
pub(crate) const GPUBENCH_COMMIT: &str = match option_env!("GPUBENCH_GIT_COMMIT") {
    Some(c) => c,
    None => "",
};

/// Checks, before any work, that a run's row can be appended to `out` and
/// its per-device rows to the companion file beside it.
pub(crate) fn check_out(out: &Path) -> Result<()> {
    csv::check_writable(out)?;
    long::check_writable(&long::devices_path(out), &long::devices_header(), "--out")
}

/// Appends a run's row to `out` and its per-device rows beside it.
pub(crate) fn append_run(out: &Path, row: &csv::Row, devs: &[DeviceMetrics]) -> Result<()> {
    csv::append_rows(out, std::slice::from_ref(row))?;
    let key = long::RunKey { run_id: row.run_id.clone(), strategy: row.strategy.clone(), n_devices: row.n_devices };
    long::append_devices(&long::devices_path(out), &key, devs)
}

/// A results file about to be replaced, and its per-device file, renamed
/// beside it (`STEM.replaced-SECONDS.csv`): whatever is written there next
/// never loses the rows before. None when there is no file.
pub(crate) fn keep_beside(path: &Path) -> Result<Option<std::path::PathBuf>> {
    use anyhow::Context;
    if !path.exists() {
        return Ok(None);
    }
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let kept = path.with_file_name(format!("{stem}.replaced-{stamp}.csv"));
    std::fs::rename(path, &kept).with_context(|| format!("keeping {}", path.display()))?;
    let devs = long::devices_path(path);
    if devs.exists() {
        std::fs::rename(&devs, long::devices_path(&kept)).with_context(|| format!("keeping {}", devs.display()))?;
    }
    Ok(Some(kept))
}

/// A file written through a file beside it and put in place by `finish`'s
/// rename, so a reader never sees half of it; dropped unfinished, the file
/// beside it is removed and `path` is untouched. For text too large to
/// hold whole (`collect` of a fleet's cells).
pub(crate) struct Whole {
    path: std::path::PathBuf,
    tmp: std::path::PathBuf,
    file: Option<std::io::BufWriter<std::fs::File>>,
}

impl Whole {
    pub(crate) fn create(path: &Path) -> Result<Whole> {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let file = std::fs::File::create(&tmp).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        Ok(Whole { path: path.to_path_buf(), tmp, file: Some(std::io::BufWriter::with_capacity(1 << 20, file)) })
    }

    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<()> {
        use std::io::Write;
        let f = self.file.as_mut().expect("open until finish");
        f.write_all(bytes).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", self.path.display()))
    }

    /// Flushes, syncs and renames it into place.
    pub(crate) fn finish(mut self) -> Result<()> {
        use std::io::Write;
        let mut f = self.file.take().expect("open until finish");
        let res = (|| -> std::io::Result<()> {
            f.flush()?;
            f.get_ref().sync_all()?;
            std::fs::rename(&self.tmp, &self.path)
        })();
        anyhow::Context::with_context(res, || format!("cannot write {}", self.path.display()))
    }
}

impl Drop for Whole {
    /// Unfinished (or a failed rename): the file beside it goes; after a
    /// rename there is nothing there to remove.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.tmp);
    }
}

/// Writes `text` to `path` through a file beside it and a rename, so a
/// reader never sees half of it; true when it replaced a file.
pub fn write_whole(path: &Path, text: &[u8]) -> Result<bool> {
    let existed = path.exists();
    let mut w = Whole::create(path)?;
    w.write(text)?;
    w.finish()?;
    Ok(existed)
}

/// How a run ended, as in the `status` column. Reading a row, any value
/// it does not know (a hand edit, a later gpubench's) is `Failed`: a row
/// that does not say it is ok is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Diverged,
    /// A serving run that dropped more than 1 % of its requests: measured,
    /// but not the load it was asked to carry.
    Overloaded,
    #[default]
    Failed,
    Oom,
    /// An emitted sweep's cell that left no results file (`collect`).
    Missing,
}

impl<'de> serde::Deserialize<'de> for Status {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Status, D::Error> {
        let s = std::borrow::Cow::<str>::deserialize(d)?;
        Ok(Status::of(&s))
    }
}

impl Status {
    pub(crate) const ALL: [Status; 6] =
        [Status::Ok, Status::Diverged, Status::Overloaded, Status::Failed, Status::Oom, Status::Missing];

    pub fn name(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Diverged => "diverged",
            Self::Overloaded => "overloaded",
            Self::Failed => "failed",
            Self::Oom => "oom",
            Self::Missing => "missing",
        }
    }

    /// The status a column value names; anything unknown reads as failed
    /// (a row that does not say it is ok is not).
    pub(crate) fn of(s: &str) -> Status {
        Status::ALL.into_iter().find(|x| x.name() == s).unwrap_or(Status::Failed)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Status {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Status::ALL.into_iter().find(|x| x.name() == s).ok_or_else(|| format!("unknown status {s:?}"))
    }
}

/// What a row measured, as in the `mode` column: a training run, a serving
/// load, a point of an all-reduce curve, or a device's matmul peak. Every
/// analysis that takes one kind of row asks this, not a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Also what a file from before the column existed holds.
    #[default]
    Train,
    Infer,
    Allreduce,
    Peak,
}

impl Mode {
    pub(crate) const ALL: [Mode; 4] = [Mode::Train, Mode::Infer, Mode::Allreduce, Mode::Peak];

    pub fn name(self) -> &'static str {
        match self {
            Self::Train => "train",
            Self::Infer => "infer",
            Self::Allreduce => "allreduce",
            Self::Peak => "peak",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Mode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Mode, D::Error> {
        let s = std::borrow::Cow::<str>::deserialize(d)?;
        if s.is_empty() {
            return Ok(Mode::Train);
        }
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| serde::de::Error::custom(format!("mode {s:?} is not one of train, infer, allreduce, peak")))
    }
}

/// Who produced a row, as in the `impl` column: gpubench itself, PyTorch's
/// own implementation of the same run, a published figure, or `predict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Implementation {
    /// Also what a file from before the column existed holds.
    #[default]
    Gpubench,
    Pytorch,
    Published,
    Predicted,
}

impl Implementation {
    pub(crate) const ALL: [Implementation; 4] =
        [Implementation::Gpubench, Implementation::Pytorch, Implementation::Published, Implementation::Predicted];

    pub fn name(self) -> &'static str {
        match self {
            Self::Gpubench => "gpubench",
            Self::Pytorch => "pytorch",
            Self::Published => "published",
            Self::Predicted => "predicted",
        }
    }

    /// Measured here (by gpubench or by PyTorch), not cited or predicted.
    pub(crate) fn is_measured(self) -> bool {
        matches!(self, Self::Gpubench | Self::Pytorch)
    }
}

impl std::fmt::Display for Implementation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl From<crate::config::Impl> for Implementation {
    fn from(i: crate::config::Impl) -> Self {
        match i {
            crate::config::Impl::Gpubench => Self::Gpubench,
            crate::config::Impl::Pytorch => Self::Pytorch,
        }
    }
}

impl<'de> serde::Deserialize<'de> for Implementation {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Implementation, D::Error> {
        let s = std::borrow::Cow::<str>::deserialize(d)?;
        if s.is_empty() {
            return Ok(Implementation::Gpubench);
        }
        Implementation::ALL.into_iter().find(|i| i.name() == s).ok_or_else(|| {
            serde::de::Error::custom(format!("impl {s:?} is not one of gpubench, pytorch, published, predicted"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file streamed through `Whole` appears whole at `finish` or not at
    /// all: an unfinished one leaves the old file as it was, and nothing beside it.
    #[test]
    fn a_whole_file_appears_at_finish_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.csv");
        std::fs::write(&path, "old\n").unwrap();
        let mut w = Whole::create(&path).unwrap();
        w.write(b"new, half").unwrap();
        drop(w);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "a file left beside it");
        let mut w = Whole::create(&path).unwrap();
        w.write(b"new\n").unwrap();
        w.write(b"whole\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n", "in place before finish");
        w.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\nwhole\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn statuses_read_back_and_unknown_ones_are_failures() {
        for s in Status::ALL {
            assert_eq!(s.name().parse::<Status>(), Ok(s));
            assert_eq!(Status::of(&s.to_string()), s);
        }
        assert!("fine".parse::<Status>().is_err());
        assert_eq!(Status::of("fine"), Status::Failed);
        #[derive(serde::Deserialize)]
        struct R {
            status: Status,
        }
        let mut r = ::csv::Reader::from_reader("status\nok\noom\nfine\n\n".as_bytes());
        let got: Vec<Status> = r.deserialize::<R>().map(|x| x.unwrap().status).collect();
        assert_eq!(got, [Status::Ok, Status::Oom, Status::Failed]);
    }

    #[test]
    fn implementations_read_back_and_an_empty_one_is_gpubench() {
        #[derive(Debug, serde::Deserialize)]
        struct R {
            #[serde(rename = "impl")]
            i: Implementation,
        }
        let text = "impl\ngpubench\npytorch\npublished\npredicted\n\"\"\n";
        let mut r = ::csv::Reader::from_reader(text.as_bytes());
        let got: Vec<Implementation> = r.deserialize::<R>().map(|x| x.unwrap().i).collect();
        assert_eq!(got[..4], Implementation::ALL);
        assert_eq!(got[4], Implementation::Gpubench);
        let mut r = ::csv::Reader::from_reader("impl\ntensorflow\n".as_bytes());
        let e = r.deserialize::<R>().next().unwrap().unwrap_err().to_string();
        assert!(e.contains("\"tensorflow\" is not one of"), "{e}");
    }

    #[test]
    fn modes_read_back_an_empty_one_is_train_and_an_unknown_one_is_refused() {
        #[derive(Debug, serde::Deserialize)]
        struct R {
            mode: Mode,
        }
        let text = "mode\ntrain\ninfer\nallreduce\npeak\n\"\"\n";
        let mut r = ::csv::Reader::from_reader(text.as_bytes());
        let got: Vec<Mode> = r.deserialize::<R>().map(|x| x.unwrap().mode).collect();
        assert_eq!(got, [Mode::Train, Mode::Infer, Mode::Allreduce, Mode::Peak, Mode::Train]);
        // A later gpubench's mode is not taken for a training run.
        let mut r = ::csv::Reader::from_reader("mode\nfinetune\n".as_bytes());
        let e = r.deserialize::<R>().next().unwrap().unwrap_err().to_string();
        assert!(e.contains("mode \"finetune\" is not one of"), "{e}");
    }
}
