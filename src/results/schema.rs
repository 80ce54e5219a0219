//! The column reference of gpubench's CSV files, printed by `gpubench
//! schema`. The results file's columns are declared once, with `Row` itself
//! (`columns`); the devices and telemetry files serialize
//! `metrics::devices::DeviceMetrics` and `metrics::sampler::DeviceSample`,
//! and the test below keeps their tables equal to the headers they produce,
//! column for column, so that the reference cannot drift from the files.

/// One column of a gpubench CSV file.
pub(crate) struct ColumnDoc {
    pub name: &'static str,
    pub unit: &'static str,
    pub meaning: &'static str,
}

/// The results file (`--out`): declared with `Row`'s fields, in `columns`.
pub(crate) use super::columns::RESULTS;

/// `<out>.devices.csv` (for `--out r.csv`, `r.devices.csv`): one row per
/// (run, device), the identity columns and then `DeviceMetrics`' fields.
pub(crate) const DEVICES: &[ColumnDoc] = &[
    ColumnDoc { name: "run_id", unit: "", meaning: "The run's id, as in the results file's run_id column." },
    ColumnDoc {
        name: "strategy",
        unit: "",
        meaning: "Parallel strategy: single, dp or ddp for training; replicas, processes or dp for serving.",
    },
    ColumnDoc { name: "n_devices", unit: "", meaning: "Number of devices of the run." },
    ColumnDoc {
        name: "device",
        unit: "",
        meaning: "The device, e.g. cuda:0, or cpu (single, dp) or cpu:rankN (ddp) on CPU runs.",
    },
    ColumnDoc {
        name: "role",
        unit: "",
        meaning: "master or replica (dp on CUDA), process (dp on the CPU, one process), rank N (ddp), single.",
    },
    ColumnDoc {
        name: "peak_alloc_mb",
        unit: "MiB",
        meaning: "CUDA caching allocator's peak allocated memory on this device since the end of warm-up.",
    },
    ColumnDoc {
        name: "peak_reserved_mb",
        unit: "MiB",
        meaning: "CUDA caching allocator's peak reserved memory on this device since the end of warm-up.",
    },
    ColumnDoc {
        name: "nvml_mem_peak_mb",
        unit: "MiB",
        meaning: "NVML: peak memory used on the device (all processes, CUDA context included) in the timed window.",
    },
    ColumnDoc { name: "mem_total_mb", unit: "MiB", meaning: "NVML: the device's total memory." },
    ColumnDoc {
        name: "util_mean_pct",
        unit: "%",
        meaning: "NVML: mean GPU utilization of the device over the timed window.",
    },
    ColumnDoc {
        name: "util_p95_pct",
        unit: "%",
        meaning: "NVML: 95th percentile of the device's GPU utilization over the timed window.",
    },
    ColumnDoc {
        name: "mem_util_mean_pct",
        unit: "%",
        meaning:
            "NVML: mean memory utilization (share of time device memory was read or written) over the timed window.",
    },
    ColumnDoc { name: "power_mean_w", unit: "W", meaning: "NVML: mean power draw over the timed window." },
    ColumnDoc { name: "sm_clock_mean_mhz", unit: "MHz", meaning: "NVML: mean SM clock over the timed window." },
    ColumnDoc {
        name: "temperature_max_c",
        unit: "°C",
        meaning: "NVML: highest GPU temperature over the timed window.",
    },
    ColumnDoc {
        name: "cpu_util_pct",
        unit: "%",
        meaning: "The process driving this device: CPU time ÷ wall time over the timed window, in % of one core \
                  (200 = two cores busy).",
    },
    ColumnDoc {
        name: "peak_rss_mb",
        unit: "MiB",
        meaning: "The process driving this device: peak resident memory over its whole lifetime.",
    },
];

/// The `--telemetry FILE.csv` timeline (ddp rank r > 0: `FILE.rank<r>.csv`):
/// one row per sample per device, `run_id` and then `DeviceSample`'s fields.
pub(crate) const TELEMETRY: &[ColumnDoc] = &[
    ColumnDoc { name: "run_id", unit: "", meaning: "The run's id, as in the results file's run_id column." },
    ColumnDoc { name: "t", unit: "s", meaning: "Seconds since the sampler started." },
    ColumnDoc { name: "timestamp", unit: "", meaning: "Wall-clock time of the reading, RFC 3339 with milliseconds." },
    ColumnDoc {
        name: "device",
        unit: "",
        meaning: "cuda:N (the CUDA ordinal, matched to NVML by PCI bus id), or cpu for the process on CPU runs.",
    },
    ColumnDoc { name: "gpu_util_pct", unit: "%", meaning: "NVML: GPU utilization at the reading." },
    ColumnDoc {
        name: "mem_util_pct",
        unit: "%",
        meaning: "NVML: memory utilization (share of time device memory was read or written) at the reading.",
    },
    ColumnDoc { name: "mem_used_mb", unit: "MiB", meaning: "NVML: memory used on the device (all processes)." },
    ColumnDoc { name: "mem_total_mb", unit: "MiB", meaning: "NVML: the device's total memory." },
    ColumnDoc { name: "power_w", unit: "W", meaning: "NVML: power draw at the reading." },
    ColumnDoc { name: "sm_clock_mhz", unit: "MHz", meaning: "NVML: SM clock at the reading." },
    ColumnDoc { name: "temperature_c", unit: "°C", meaning: "NVML: GPU temperature at the reading." },
    ColumnDoc {
        name: "throttle",
        unit: "",
        meaning: "NVML: why the clocks are held down (thermal, power, hw, app clocks, joined by +); empty when not.",
    },
    ColumnDoc {
        name: "other_procs_mb",
        unit: "MiB",
        meaning: "NVML: GPU memory held by compute processes outside this run's process group.",
    },
    ColumnDoc {
        name: "process_cpu_pct",
        unit: "%",
        meaning: "CPU runs: the process's CPU time ÷ wall time since the previous sample, in % of one core.",
    },
    ColumnDoc {
        name: "process_rss_mb",
        unit: "MiB",
        meaning: "CPU runs: the process's resident memory (VmRSS) at the reading.",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    fn names(cols: &[ColumnDoc]) -> String {
        cols.iter().map(|c| c.name).collect::<Vec<_>>().join(",")
    }

    #[test]
    fn the_reference_covers_every_column_in_order() {
        assert_eq!(names(RESULTS), super::super::csv::Row::header());
        assert_eq!(names(DEVICES), super::super::long::devices_header());
        assert_eq!(names(TELEMETRY), super::super::long::telemetry_header());
        for c in RESULTS.iter().chain(DEVICES).chain(TELEMETRY) {
            assert!(!c.meaning.is_empty(), "{} has no meaning", c.name);
        }
    }
}
