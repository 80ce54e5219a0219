//! `gpubench completions SHELL`: a completion script, made by clap_complete
//! from the very definition the parser uses, so it never drifts from it.
use anyhow::Result;
use clap::Args;

use super::{Cli, Configure, Job};

/// Print a shell completion script for gpubench, e.g. `gpubench completions
/// bash > ~/.local/share/bash-completion/completions/gpubench`.
#[derive(Args, Debug, Clone)]
pub(crate) struct CompletionsArgs {
    /// The shell the script is for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

impl Configure for CompletionsArgs {
    fn configure(self) -> Result<Job> {
        Ok(Box::new(move || {
            let mut script = vec![];
            clap_complete::generate(self.shell, &mut Cli::public(), "gpubench", &mut script);
            crate::report::pipeline::print(&script)?;
            Ok(0)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shell_gets_a_script_naming_the_subcommands_and_their_flags() {
        use clap::ValueEnum;
        for shell in clap_complete::Shell::value_variants() {
            let mut script = vec![];
            clap_complete::generate(*shell, &mut Cli::public(), "gpubench", &mut script);
            let text = String::from_utf8(script).unwrap();
            for word in ["max-batch", "max-drop", "baseline"] {
                assert!(text.contains(word), "{shell}: no {word}");
            }
            assert!(!text.contains("infer-worker"), "{shell}: a hidden role is offered");
        }
    }
}
