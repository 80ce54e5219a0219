//! One module per subcommand: what it does with its configuration (the
//! engines it drives, what it prints, its exit code). Commands take plain
//! configurations; parsing and validating the command line is `cli`'s, and
//! the measuring and the runtimes are the engines' (`bench`, `serve`,
//! `sweep`, …).
//!
//! `subcommands!` is the registry of the public subcommands, one line each:
//! `module Variant Arguments [gate]`. `cli` declares `cli::module` (the
//! `Arguments` and their conversion) and the clap enum from it; here it
//! declares `commands::module`. The gate is `[torch]` for a subcommand of
//! the full build only, `[cli]` for one made of the command line itself
//! (completions, man pages), which has no module here. Adding a subcommand
//! is its two modules and one line below (docs/development.md).

/// The registry; `$then!` is called with its lines.
#[doc(hidden)]
#[macro_export]
macro_rules! subcommands {
    ($then:ident) => {
        $then! {
            info Info InfoArgs [];
            run Run RunArgs [torch];
            infer Infer InferArgs [torch];
            allreduce Allreduce AllreduceArgs [torch];
            predict Predict PredictArgs [torch];
            report Report ReportArgs [];
            compare Compare CompareArgs [];
            check Check CheckArgs [];
            diagnose Diagnose DiagnoseArgs [];
            history History HistoryArgs [];
            sweep Sweep SweepArgs [torch];
            max_batch MaxBatch MaxBatchArgs [torch];
            data_bench DataBench DataBenchArgs [torch];
            collect Collect CollectArgs [];
            peak Peak PeakArgs [torch];
            schema Schema SchemaArgs [];
            upgrade Upgrade UpgradeArgs [];
            trace_summary TraceSummary TraceSummaryArgs [];
            completions Completions CompletionsArgs [cli];
            man Man ManArgs [cli];
        }
    };
}

/// Declares the registry's command modules.
macro_rules! declare {
    ($($m:ident $variant:ident $args:ident [$($gate:tt)*];)*) => {
        $( declare!(@one $m [$($gate)*]); )*
    };
    (@one $m:ident [torch]) => {
        #[cfg(feature = "torch")]
        pub mod $m;
    };
    (@one $m:ident [cli]) => {};
    (@one $m:ident []) => {
        pub mod $m;
    };
}

crate::subcommands!(declare);

/// The registry's subcommands that need no libtorch, in registry order,
/// as their modules are named (`trace_summary`).
#[cfg(any(test, not(feature = "torch")))]
macro_rules! torch_free {
    ($($m:ident $variant:ident $args:ident [$($gate:tt)*];)*) => {
        &[$( torch_free!(@one $m [$($gate)*]) ),*]
    };
    (@one $m:ident [torch]) => { None };
    (@one $m:ident [$($any:tt)*]) => { Some(stringify!($m)) };
}

#[cfg(any(test, not(feature = "torch")))]
const REGISTRY_TORCH_FREE: &[Option<&str>] = crate::subcommands!(torch_free);

/// The subcommands the torch-free build has, as a sentence ("report,
/// compare and man"): generated from the registry, so the line a torch-only
/// subcommand gives there and `info` cannot go stale.
#[cfg(any(test, not(feature = "torch")))]
pub(crate) fn torch_free_commands() -> String {
    let names: Vec<String> = REGISTRY_TORCH_FREE.iter().flatten().map(|m| m.replace('_', "-")).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_torch_free_list_is_the_registry_without_its_torch_lines() {
        let list = super::torch_free_commands();
        assert!(list.starts_with("info, report, compare, check"), "{list}");
        assert!(list.contains("trace-summary") && list.ends_with(" and man"), "{list}");
        for torch_only in ["run", "infer", "sweep", "max-batch", "peak", "data-bench"] {
            assert!(!list.split([',', ' ']).any(|w| w == torch_only), "{torch_only} in {list}");
        }
    }
}
