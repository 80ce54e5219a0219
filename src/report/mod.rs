//! Turning results into files and words: the CSV results file, summaries,
//! tables and charts.
pub mod results_csv;
