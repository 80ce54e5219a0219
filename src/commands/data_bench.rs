//! `gpubench data-bench`: the input pipeline's rate, printed.
use anyhow::Result;

use crate::data::bench::{data_bench, DataBenchSpec};

pub(crate) fn run(spec: &DataBenchSpec, json: bool) -> Result<i32> {
    let r = data_bench(spec)?;
    if json {
        crate::report::envelope::Envelope::new().own("data_bench", &r)?.print()?;
    } else {
        println!(
            "data-bench {}: {} files in {} classes, {}×{} crops, batch {}",
            r.data, r.files, r.classes, r.image_size, r.image_size, r.batch_size
        );
        println!("decode only  {:>8.1} img/s on one thread ({} files in memory)", r.decode_img_s, r.decode_files);
        println!(
            "pipeline     {:>8.1} img/s with {} workers ({:.1} per worker, {:.0}% of decode only)",
            r.pipeline_img_s,
            r.workers,
            r.pipeline_img_s_per_worker,
            r.fraction_of_decode * 100.0
        );
        if r.skipped > 0 {
            println!("skipped      {} unreadable files", r.skipped);
        }
    }
    Ok(0)
}
