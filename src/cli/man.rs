//! `gpubench man DIR`: a man page per subcommand, made by clap_mangen from
//! the very definition the parser uses.
use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};

use super::{Cli, Configure, Job};
use crate::error::usage;

/// Write gpubench's man pages into DIR: gpubench.1 and one per subcommand
/// (gpubench-run.1, …); read one with `man DIR/gpubench-run.1`.
#[derive(Args, Debug, Clone)]
pub(crate) struct ManArgs {
    /// The directory the pages go in (created if missing).
    pub dir: PathBuf,
}

impl Configure for ManArgs {
    fn configure(self) -> Result<Job> {
        if self.dir.exists() && !self.dir.is_dir() {
            return Err(usage(format!("man {}: a file is there; give a directory for the pages", self.dir.display())));
        }
        Ok(Box::new(move || {
            let n = write_pages(&self.dir)?;
            println!("wrote {n} man pages into {}", self.dir.display());
            Ok(0)
        }))
    }
}

/// The pages: gpubench.1, then gpubench-SUB.1 for each public subcommand.
fn write_pages(dir: &Path) -> Result<usize> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let cli = Cli::public();
    let mut n = 0;
    let mut page = |cmd: clap::Command, name: &str| -> Result<()> {
        let mut bytes = vec![];
        clap_mangen::Man::new(cmd).render(&mut bytes).with_context(|| format!("rendering {name}"))?;
        crate::results::write_whole(&dir.join(format!("{name}.1")), &bytes)?;
        n += 1;
        Ok(())
    };
    for sub in cli.get_subcommands() {
        let name = format!("gpubench-{}", sub.get_name());
        page(sub.clone().display_name(name.clone()).bin_name(name.replacen('-', " ", 1)), &name)?;
    }
    page(cli.clone(), "gpubench")?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_page_per_public_subcommand_naming_its_options() {
        let dir = tempfile::tempdir().unwrap();
        let n = super::write_pages(dir.path()).unwrap();
        let public = super::Cli::definition().get_subcommands().filter(|s| !s.is_hide_set()).count();
        assert_eq!(n, public + 1);
        let check = std::fs::read_to_string(dir.path().join("gpubench-check.1")).unwrap();
        assert!(check.contains("max\\-drop") && check.contains(".TH"), "{}", &check[..check.len().min(400)]);
        assert!(!dir.path().join("gpubench-rank.1").exists(), "hidden roles get no page");
    }
}
