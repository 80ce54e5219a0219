//! ddp's processes: `env` says where a process sits in the job, `launcher` starts and watches this node's ranks,
//! `worker` is one rank, `liveness` watches the others through the store, whose keys `keys` names. The parallelism itself (the Reducer step) is `strategy::ddp`.
//!
//! **Our launcher.** `gpubench run --strategy ddp --gpus 0,1,2,3` with no rank in the environment is a launcher:
//! it starts one worker per listed device (this binary, same arguments) with `RANK`, `LOCAL_RANK`, `WORLD_SIZE`,
//! `LOCAL_WORLD_SIZE`, `MASTER_ADDR` and `MASTER_PORT` set (127.0.0.1 and a free port unless given), forwards
//! their stderr behind a `[rank N]` prefix, and waits. Once a worker fails, the others get a 10 s grace and are
//! then killed; if rank 0 wrote no row, node 0's launcher appends one to `--out` with status `failed` (or `oom`)
//! naming the first rank that failed, and exits non-zero. Workers exit when their launcher goes away
//! (`worker::watch_parent`), so none is left waiting in a collective.
//!
//! **External launchers.** torchrun's variables (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`,
//! `MASTER_ADDR`, `MASTER_PORT`) or Slurm's (`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`, with `MASTER_ADDR`
//! or `--master-addr`) make the process a worker itself; nothing is spawned. The port is `MASTER_PORT`, else
//! `--master-port`, else 29500. Rank 0 then checks the outputs and writes `--save-init`.
//!
//! **Multi-node**, either way:
//! ```text
//! # one launcher per node (--master-addr and --master-port are required, the same on every node):
//! gpubench run --strategy ddp --gpus 0,1,2,3 --nnodes 2 --node-rank 0 --master-addr node0 --master-port 29500
//! gpubench run --strategy ddp --gpus 0,1,2,3 --nnodes 2 --node-rank 1 --master-addr node0 --master-port 29500
//! # or Slurm starts the ranks:
//! srun --ntasks-per-node 4 gpubench run --strategy ddp --master-addr node0 --master-port 29500 --out r.csv
//! ```
//!
//! A rank's device is entry `LOCAL_RANK` of `--gpus` when given, the CPU with `--cpu`, else `cuda:LOCAL_RANK`
//! where that device exists, else the CPU (`cli::run`). On the CPU a node's ranks split the cores (`--threads` or
//! all cores, ÷ `LOCAL_WORLD_SIZE`, at least one each; without that variable a rank keeps them all).
//! `--dist-timeout` (default 300s) bounds the rendezvous and every collective: an unreachable master is a
//! one-line error after it. A rank, host or node lost mid-run is named within seconds, not after the timeout:
//! every rank beats through the store and a silent one is called lost after 10 s (`liveness`).
//!
//! **The row.** Each rank draws its own synthetic data (data seed + 7919 × rank) and shares one sampler seed
//! for `--data PATH`, so shards are disjoint. One run id, chosen by rank 0 and shared through the store, tags
//! every rank's telemetry; with `--telemetry FILE`, rank r > 0 writes `FILE.rank<r>.csv`. After the timed window
//! every rank sends its measurements to rank 0 through the store, and only global rank 0 writes the row: a step
//! takes as long as its slowest rank, throughput is all images ÷ the sum of those step times, the loss is the
//! agreed global mean, data wait and `--breakdown` are rank 0's, and the first rank (in rank order) whose status
//! is not ok sets the row's status, named in its error (`worker::combine`).
pub mod env;
pub(crate) mod keys;
pub mod launcher;
pub(crate) mod liveness;
pub mod worker;
