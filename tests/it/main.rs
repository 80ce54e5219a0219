//! The integration tests, one crate (one link against libtorch): the real
//! binary and the library's public parts, by feature.
mod allreduce;
mod common;
mod data;
mod ddp;
mod docs;
mod fidelity;
mod gpu;
mod gpu_smoke;
mod history;
mod html;
mod infer;
mod interference;
mod json;
mod profile;
mod report;
mod run;
mod setup;
mod strategies;
mod sweep;
