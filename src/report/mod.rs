//! Turning results into files and words: the CSV results file, summaries,
//! tables and charts.
pub mod charts;
pub mod check;
pub mod commands;
pub mod compare;
pub mod devices;
pub mod export;
pub mod long_csv;
pub mod results_csv;
pub mod significance;
pub mod summary;
