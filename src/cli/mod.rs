//! The command line: clap's types, the options every subcommand shares
//! (`opts`, each defined once), and each subcommand's arguments with their
//! one conversion into the configuration its command takes. Nothing below
//! this layer names clap.
//!
//! The subcommands come from one registry, `crate::subcommands!` (in
//! `commands`): each line there names a module that exists here (its
//! arguments, `Configure`) and, unless it is marked `[cli]`, in `commands`
//! (what it does). From it, `define!` below declares the modules and makes
//! the `Command` enum and its dispatch; gpubench's own child processes
//! (`internal`) are its hidden variants.
pub(crate) mod opts;
pub mod parse;
#[cfg(feature = "torch")]
pub mod run_line;

use anyhow::Result;
use clap::builder::PossibleValue;
use clap::{Parser, Subcommand};
use std::ffi::OsString;

use crate::config::{
    Backend, CommDtype, CommHook, Impl, ModelKind, OptimizerImpl, OptimizerKind, Precision, Preprocess, ServeStrategy,
    StrategyKind,
};
use crate::error::usage;
use crate::report::check::Metric;
use crate::report::export::Format;

/// A subcommand ready to run: its configuration built and checked, what it
/// does not yet begun. Returns the exit code.
pub(crate) type Job = Box<dyn FnOnce() -> Result<i32>>;

/// A subcommand's arguments turned into its job: every check that needs no
/// work, once per process, before anything starts.
pub(crate) trait Configure {
    fn configure(self) -> Result<Job>;
}

impl<T: Configure> Configure for Box<T> {
    fn configure(self) -> Result<Job> {
        (*self).configure()
    }
}

/// Applies the registry's gate to an item: `[torch]` items exist only in
/// the full build.
macro_rules! gated {
    ([torch] $($item:tt)*) => { #[cfg(feature = "torch")] $($item)* };
    ([$($any:tt)*] $($item:tt)*) => { $($item)* };
}

/// A registry line's arguments in the torch-free build: a subcommand of the
/// full build takes whatever follows it, and says that it needs libtorch.
#[cfg(not(feature = "torch"))]
macro_rules! args_of {
    ([torch] $t:ty) => { Box<NoTorch> };
    ([$($any:tt)*] $t:ty) => { Box<$t> };
}

/// A registry line's dispatch: its job, or (torch-free) the line that the
/// subcommand needs libtorch.
macro_rules! configure_arm {
    ([torch] $a:ident, $name:expr) => {{
        #[cfg(feature = "torch")]
        let job = $a.configure();
        #[cfg(not(feature = "torch"))]
        let job = {
            let _ = $a;
            Err(without_torch($name))
        };
        job
    }};
    ([$($any:tt)*] $a:ident, $name:expr) => {
        $a.configure()
    };
}

/// The modules, the `Command` enum and its dispatch, from the registry.
macro_rules! define {
    ($($m:ident $variant:ident $args:ident [$($gate:tt)*];)*) => {
        $( gated! { [$($gate)*] pub mod $m; } )*
        #[cfg(feature = "torch")]
        pub mod internal;

        #[cfg(feature = "torch")]
        #[derive(Subcommand, Debug)]
        pub(crate) enum Command {
            $( $variant(Box<$m::$args>), )*
            // gpubench's own child processes (`crate::internal`), hidden from --help.
            #[command(name = crate::internal::Child::Rank.subcommand(), hide = true)]
            Rank(internal::Wrapped),
            #[command(name = crate::internal::Child::InferWorker.subcommand(), hide = true)]
            InferWorker(internal::InferWorkerArgs),
            #[command(name = crate::internal::Child::WriteInit.subcommand(), hide = true)]
            WriteInit(internal::WriteInitArgs),
            #[command(name = crate::internal::Child::Cell.subcommand(), hide = true)]
            Cell(internal::CellArgs),
            /// Checks a command line without running it (scripts use it).
            #[command(hide = true)]
            Validate(internal::ValidateArgs),
        }

        #[cfg(not(feature = "torch"))]
        #[derive(Subcommand, Debug)]
        pub(crate) enum Command {
            $( $variant(args_of!([$($gate)*] $m::$args)), )*
        }

        impl Command {
            /// This subcommand's job.
            pub(crate) fn configure(self) -> Result<Job> {
                match self {
                    $( Command::$variant(a) => configure_arm!([$($gate)*] a, stringify!($m)), )*
                    #[cfg(feature = "torch")]
                    Command::Rank(a) => a.configure(),
                    #[cfg(feature = "torch")]
                    Command::InferWorker(a) => a.configure(),
                    #[cfg(feature = "torch")]
                    Command::WriteInit(a) => a.configure(),
                    #[cfg(feature = "torch")]
                    Command::Cell(a) => a.configure(),
                    #[cfg(feature = "torch")]
                    Command::Validate(a) => a.configure(),
                }
            }
        }
    };
}

crate::subcommands!(define);

#[derive(Parser, Debug)]
#[command(
    name = "gpubench",
    version,
    about = "Which parallel training strategy (single, DataParallel, DistributedDataParallel) is fastest on your GPUs, and why",
    propagate_version = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// gpubench's whole command line as clap describes it: what help,
    /// completions and man pages are made from.
    pub(crate) fn definition() -> clap::Command {
        use clap::CommandFactory;
        Cli::command().mut_subcommands(|s| s.allow_negative_numbers(true))
    }

    /// The command line as users see it, without the hidden roles: what
    /// completions and man pages describe (clap's bash generator would
    /// otherwise offer `rank` and `infer-worker`).
    pub(crate) fn public() -> clap::Command {
        let cli = Cli::definition();
        let subs: Vec<clap::Command> = cli.get_subcommands().filter(|s| !s.is_hide_set()).cloned().collect();
        clap::Command::new("gpubench")
            .version(env!("CARGO_PKG_VERSION"))
            .about(cli.get_about().cloned().unwrap_or_default())
            .propagate_version(true)
            .subcommand_required(true)
            .subcommands(subs)
    }

    /// Parses `argv` (the program name first). A negative number is taken as
    /// an option's value, so that `--batch-size -4` is refused by that
    /// option's own check, naming it, not as "unexpected argument '-4'".
    pub(crate) fn parse_args<I, S>(argv: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString> + Clone,
    {
        use clap::FromArgMatches;
        Cli::from_arg_matches(&Cli::definition().try_get_matches_from(argv)?)
    }
}

/// Parses `argv` (the program name first) into its job: clap's help and
/// version become a job that prints them (exit 0, or 2 when a subcommand was
/// missing); its errors become one usage line, naming the new spelling of a
/// retired one.
pub(crate) fn job_of<I, S>(argv: I) -> Result<Job>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString> + Clone,
{
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    match Cli::parse_args(&argv) {
        Ok(cli) => cli.command.configure(),
        Err(e) => {
            use clap::error::ErrorKind;
            match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => Ok(Box::new(move || {
                    let _ = e.print();
                    let missing = e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand;
                    Ok(if missing { 2 } else { 0 })
                })),
                _ => Err(retired(&argv, &e).unwrap_or_else(|| clap_usage(&e, "see gpubench --help"))),
            }
        }
    }
}

/// A wrapped command line (`rank run …`) parsed as gpubench's own.
#[cfg(feature = "torch")]
pub(crate) fn parse_wrapped(line: &[OsString]) -> Result<Command> {
    let argv: Vec<OsString> = std::iter::once(OsString::from("gpubench")).chain(line.iter().cloned()).collect();
    match Cli::parse_args(&argv) {
        Ok(cli) => Ok(cli.command),
        Err(e) if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) => {
            Err(usage("a hidden subcommand wraps a whole gpubench command line, not --help"))
        }
        Err(e) => Err(retired(&argv, &e).unwrap_or_else(|| clap_usage(&e, "see gpubench --help"))),
    }
}

/// The spellings this gpubench no longer takes, each with what replaced it:
/// (subcommand, or "" for every one; the old option; the new spelling).
const RETIRED: &[(&str, &str, &str)] = &[
    ("", "--json", "--format json"),
    ("infer", "--strategy", "--serving"),
    ("infer", "--warmup", "--warmup-batches"),
    ("predict", "--devices", "--device-counts"),
    ("predict", "--nodes", "--nnodes"),
    ("predict", "--target-batch", "--target-batch-size"),
    ("peak", "--precision", "--precisions"),
    ("sweep", "--impl", "--impls (or --vary impl=…)"),
    ("sweep", "--cell", "the hidden role `gpubench cell DIR INDEX` (emit the sweep again to get scripts that call it)"),
    ("max-batch", "--strategy", "--strategy among the run options after --, e.g. max-batch --cpu -- --strategy ddp"),
    ("max-batch", "--model", "--model among the run options after --, e.g. max-batch --cpu -- --model resnet18"),
    (
        "max-batch",
        "--target-batch",
        "--target-global-batch (a global batch; --target-batch-size elsewhere is per device)",
    ),
];

/// The usage line for a retired spelling that clap refused, if it is one.
fn retired(argv: &[OsString], e: &clap::Error) -> Option<anyhow::Error> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else { return None };
    let old = arg.split('=').next().unwrap_or(arg);
    // The subcommand is among the words (a hidden role's wrapped line names it after the role).
    let words: Vec<&str> = argv.iter().skip(1).filter_map(|a| a.to_str()).collect();
    let &(cmd, _, new) = RETIRED.iter().find(|(c, o, _)| *o == old && (c.is_empty() || words.contains(c)))?;
    let scope = if cmd.is_empty() { String::new() } else { format!("{cmd} ") };
    Some(usage(format!("{scope}{old} is no longer taken: use {new} (docs/command-line.md lists the renames)")))
}

/// The one line a torch-only subcommand gives in the torch-free build.
#[cfg(not(feature = "torch"))]
fn without_torch(module: &str) -> anyhow::Error {
    let name = module.replace('_', "-");
    usage(format!(
        "`gpubench {name}` needs libtorch, and this gpubench was built without it (--no-default-features: {} \
         only); for the full build run scripts/setup, then cargo build --release",
        crate::commands::torch_free_commands()
    ))
}

/// Needs the full build (libtorch); this gpubench was built without it.
#[cfg(not(feature = "torch"))]
#[derive(clap::Args, Debug)]
pub(crate) struct NoTorch {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub args: Vec<std::ffi::OsString>,
}

/// A clap error as one usage line: the problem, then the valid choices,
/// then `hint` in parentheses.
pub(crate) fn clap_usage(e: &clap::Error, hint: &str) -> anyhow::Error {
    let text = e.render().to_string();
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information") && !l.starts_with("Usage:"))
        .collect();
    let line = parts.join(" ");
    let line = line.strip_prefix("error: ").unwrap_or(&line);
    crate::error::usage(format!("{line} ({hint})"))
}

/// Implements clap's `ValueEnum` for a plain enum of the layers below from
/// its `ALL` and `name()`, with each value's help text here, where the
/// command line is described.
macro_rules! value_enum {
    ($t:ty { $($v:ident => $help:expr),+ $(,)? }) => {
        impl clap::ValueEnum for $t {
            fn value_variants<'a>() -> &'a [Self] {
                &<$t>::ALL
            }
            fn to_possible_value(&self) -> Option<PossibleValue> {
                let help: &str = match self { $(<$t>::$v => $help,)+ };
                let v = PossibleValue::new(self.name());
                Some(if help.is_empty() { v } else { v.help(help) })
            }
        }
    };
}

value_enum!(StrategyKind {
    Single => "One device",
    Dp => "DataParallel: one process, replicas refreshed from the master every step",
    Ddp => "DistributedDataParallel: one process per device, c10d Reducer all-reduce",
});
value_enum!(ServeStrategy {
    Replicas => "One process, a model replica per device, each fed by its own thread from one queue",
    Processes => "One process per device; each camera or request goes to one of them",
    Dp => "DataParallel forward: each batch split over the devices, outputs gathered",
});
value_enum!(CommDtype {
    Fp32 => "",
    Fp16 => "",
    Bf16 => "",
});
value_enum!(OptimizerImpl {
    Auto => "The fastest this device has (fused on CUDA and the CPU in libtorch 2.11)",
    Fused => "One fused kernel for all parameters, as SGD(fused=True)",
    Foreach => "Multi-tensor kernels, as SGD(foreach=True), PyTorch's default on CUDA",
    Loop => "libtorch's C++ SGD: a few kernels per parameter, as SGD(foreach=False)",
});
value_enum!(OptimizerKind {
    Sgd => "SGD with momentum (default lr 0.1 × global batch / 256, weight decay 1e-4)",
    Adamw => "AdamW (default lr 0.001 × global batch / 256, weight decay 0.05, betas 0.9/0.999)",
});
value_enum!(CommHook {
    None => "The Reducer's own fp32 all-reduce",
    Fp16 => "libtorch's builtin FP16 compression hook",
    Bf16 => "The same in bfloat16",
});
value_enum!(Preprocess {
    Device => "Copy uint8 frames to the device, resize and normalise there",
    Cpu => "Resize and normalise on the CPU, then copy",
});
value_enum!(ModelKind {
    Resnet18 => "",
    Resnet34 => "",
    Resnet50 => "",
    Resnet101 => "",
    Resnet152 => "",
    Tinycnn => "Small BatchNorm-free CNN for tests and smoke runs",
});
value_enum!(Backend {
    Gloo => "",
    Nccl => "",
});
value_enum!(Precision {
    Fp32 => "Full fp32: TF32 off for matmuls and convolutions",
    Tf32 => "fp32 storage, TF32 tensor-core math for cuBLAS and cuDNN (CUDA)",
    Fp16 => "Autocast to float16 with dynamic loss scaling",
    Bf16 => "Autocast to bfloat16 (no loss scaling needed)",
});
value_enum!(Impl {
    Gpubench => "gpubench itself (Rust over libtorch)",
    Pytorch => "PyTorch's own single / DataParallel / DistributedDataParallel, in Python",
});
value_enum!(Format {
    Table => "Aligned plain text for the terminal",
    Markdown => "GitHub-flavoured markdown, e.g. for a PR comment",
    Csv => "Raw values, one line per row; notes go to stderr",
    Json => "Raw values as objects keyed by column, with title and notes",
});
value_enum!(Metric {
    Throughput => "Images per second (higher is better)",
    Scaling => "Throughput over devices x the 1-device throughput (higher is better)",
    StepP50 => "Median step time in ms (lower is better)",
    StepP90 => "90th-percentile step time in ms (lower is better)",
    LatencyP99 => "Serving rows: p99 latency in ms (lower is better)",
});

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn every_value_parses_back_to_itself() {
        fn check<T: ValueEnum + PartialEq + std::fmt::Debug>() {
            for v in T::value_variants() {
                let name = v.to_possible_value().unwrap().get_name().to_string();
                assert_eq!(&T::from_str(&name, false).unwrap(), v);
            }
        }
        check::<StrategyKind>();
        check::<ModelKind>();
        check::<Backend>();
        check::<Precision>();
        check::<Impl>();
        check::<Format>();
        check::<Metric>();
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::definition().debug_assert();
    }

    /// What a long flag is, as clap knows it: its type, its grammar and its help.
    #[derive(Debug, PartialEq)]
    struct Shape {
        value_type: String,
        action: String,
        num_args: String,
        value_names: Vec<String>,
        values: Vec<String>,
        delimiter: Option<char>,
        hyphen_values: bool,
        help: String,
    }

    fn shape(a: &clap::Arg) -> Shape {
        Shape {
            value_type: format!("{:?}", a.get_value_parser().type_id()),
            action: format!("{:?}", a.get_action()),
            num_args: format!("{:?}", a.get_num_args()),
            value_names: a.get_value_names().unwrap_or_default().iter().map(|v| v.to_string()).collect(),
            values: a.get_possible_values().iter().map(|v| v.get_name().to_string()).collect(),
            delimiter: a.get_value_delimiter(),
            hyphen_values: a.is_allow_hyphen_values_set(),
            help: a.get_help().map(|h| h.to_string()).unwrap_or_default(),
        }
    }

    /// clap makes a flattened option group's doc comment the about of a
    /// command that has none: `sweep --help` once began "The code under
    /// test, for the rows' commit and branch columns".
    #[test]
    fn every_subcommand_has_an_about_of_its_own() {
        use clap::Args;
        let g = || clap::Command::new("group");
        let groups: Vec<String> = [
            opts::DeviceOpts::augment_args(g()),
            opts::ModelOpts::augment_args(g()),
            opts::HostOpts::augment_args(g()),
            opts::StepOpts::augment_args(g()),
            opts::OutputOpts::augment_args(g()),
            opts::RenderOpts::augment_args(g()),
            opts::DistOpts::augment_args(g()),
            opts::ReducerOpts::augment_args(g()),
            opts::CommitOpts::augment_args(g()),
        ]
        .iter()
        .filter_map(|c| c.get_about().map(|a| a.to_string()))
        .collect();
        assert!(groups.len() >= 5, "the groups' docs are abouts: {groups:?}");
        for sub in Cli::definition().get_subcommands().filter(|s| !s.is_hide_set()) {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            assert!(!about.is_empty(), "{} has no about", sub.get_name());
            assert!(!groups.contains(&about), "{}'s about is an option group's: {about}", sub.get_name());
        }
    }

    /// Every long flag of every subcommand, through clap's own description:
    /// one type, one grammar and one help text per name across the whole
    /// command line, and no flag without help.
    #[test]
    fn one_definition_per_long_flag() {
        let cli = Cli::definition();
        let mut seen: std::collections::BTreeMap<String, (String, Shape)> = Default::default();
        let mut problems = vec![];
        let mut flags = 0;
        for sub in cli.get_subcommands() {
            for a in sub.get_arguments() {
                let Some(long) = a.get_long() else { continue };
                if matches!(long, "help" | "version") {
                    continue;
                }
                flags += 1;
                let s = shape(a);
                if s.help.trim().is_empty() && !a.is_hide_set() {
                    problems.push(format!("{} --{long} has no help", sub.get_name()));
                }
                match seen.get(long) {
                    Some((first, s0)) if *s0 != s => {
                        problems.push(format!("--{long}: {first} has {s0:?}, {} has {s:?}", sub.get_name()))
                    }
                    Some(_) => {}
                    None => {
                        seen.insert(long.to_string(), (sub.get_name().to_string(), s));
                    }
                }
            }
        }
        // The torch-free build has the reporting commands' flags only.
        let (least_flags, least_names) = if cfg!(feature = "torch") { (150, 90) } else { (20, 10) };
        assert!(
            flags > least_flags && seen.len() > least_names,
            "{flags} flags, {} names: the walk found too few",
            seen.len()
        );
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn a_retired_spelling_names_its_successor() {
        let line = |s: &str| -> String {
            let argv: Vec<OsString> = s.split(' ').map(OsString::from).collect();
            match job_of(argv) {
                Err(e) => {
                    assert_eq!(crate::error::exit_code(&e), 2, "{s}");
                    e.to_string()
                }
                Ok(_) => panic!("{s}: accepted"),
            }
        };
        assert!(line("gpubench report x.csv --json").contains("use --format json"));
        assert!(line("gpubench schema --json").contains("use --format json"));
        let e = line("gpubench compare a.csv --frobnicate");
        assert!(e.contains("--frobnicate") && !e.contains("no longer"), "{e}");
    }

    /// `--cudnn-benchmark on`, `off` and the bare flag (on) mean the same in
    /// every command that takes it, run's options after `--` included.
    #[cfg(feature = "torch")]
    #[test]
    fn cudnn_benchmark_is_said_one_way_in_every_command() {
        let tiny = "--image-size 16 --num-classes 10";
        for (form, want) in
            [("--cudnn-benchmark", true), ("--cudnn-benchmark on", true), ("--cudnn-benchmark off", false), ("", false)]
        {
            let lines = [
                format!("run --cpu --model tinycnn {tiny} {form}"),
                format!("infer --cpu --model tinycnn {tiny} {form}"),
                format!("sweep --cpu 1 --strategies single --models tinycnn --out /tmp/x.csv -- {tiny} {form}"),
                format!("max-batch --cpu -- --model tinycnn {tiny} {form}"),
            ];
            for line in lines {
                let argv = std::iter::once("gpubench").chain(line.split_whitespace());
                let cmd = Cli::parse_args(argv).unwrap_or_else(|e| panic!("{line}: {e}")).command;
                let got = match cmd {
                    Command::Run(a) => run::job(*a, false).map(|(_, cfg)| cfg.workload.cudnn_benchmark),
                    Command::Infer(a) => a.into_config(false).map(|cfg| cfg.workload.cudnn_benchmark),
                    Command::Sweep(a) => sweep::plan(*a).map(|p| p.cells[0].cfg.workload.cudnn_benchmark),
                    Command::MaxBatch(a) => max_batch::max_batch_plan(*a).map(|p| p.first.cfg.workload.cudnn_benchmark),
                    _ => unreachable!("{line}"),
                };
                assert_eq!(got.unwrap_or_else(|e| panic!("{line}: {e}")), want, "{line}");
            }
        }
        let argv = ["gpubench", "run", "--cpu", "--cudnn-benchmark", "maybe"];
        let e = job_of(argv).err().expect("maybe was taken");
        assert!(e.to_string().contains("maybe"), "{e}");
    }
}
