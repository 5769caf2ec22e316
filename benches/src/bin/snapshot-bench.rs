//! In-process snapshot reads: time per `Segment::snapshot` (a fresh snapshot, as a
//! one-shot client takes it) and per `Segment::snapshot_into` (a reused one, as a
//! long-lived reader takes it), for several GPU and process counts.
//!
//! `snapshot-bench` prints a table of wall-clock times (fastest and median batch).
//! `snapshot-bench GPUS PROCS ITERS fresh|reuse` takes exactly ITERS snapshots and
//! nothing else, for `valgrind --tool=callgrind` (see `benches/run`): instructions per
//! read = (Ir at ITERS - Ir at 0) / ITERS, which does not depend on machine load.

use std::hint::black_box;
use std::time::Duration;

use gpupeek_benches::{time_per_call, Fixture};
use gpupeek_shm::Segment;

/// (GPUs, processes) cases of the table.
const CASES: &[(u32, u32)] = &[(1, 0), (1, 8), (8, 0), (8, 64), (64, 0), (64, 512)];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [gpus, procs, iters, mode] = args.as_slice() {
        let parse = |s: &str| s.parse::<u32>().expect("a number");
        counted(parse(gpus), parse(procs), parse(iters), mode);
        return;
    }
    println!(
        "{:>5} {:>6}  {:>12} {:>12}  {:>12} {:>12}",
        "GPUs", "procs", "fresh min", "fresh med", "reuse min", "reuse med"
    );
    for &(gpus, procs) in CASES {
        let fixture = Fixture::new(&format!("{gpus}-{procs}"), gpus, procs);
        let segment = Segment::open(&fixture.name).expect("open bench segment");
        let budget = Duration::from_millis(300);
        let (fresh_min, fresh_med) = time_per_call(budget, || {
            black_box(segment.snapshot().expect("snapshot"));
        });
        let mut snap = segment.snapshot().expect("snapshot");
        let (reuse_min, reuse_med) = time_per_call(budget, || {
            segment.snapshot_into(&mut snap).expect("snapshot");
            black_box(&snap);
        });
        println!(
            "{gpus:>5} {procs:>6}  {:>12?} {:>12?}  {:>12?} {:>12?}",
            fresh_min, fresh_med, reuse_min, reuse_med
        );
    }
}

/// Exactly `iters` snapshots of a `gpus`/`procs` segment, for callgrind.
fn counted(gpus: u32, procs: u32, iters: u32, mode: &str) {
    let fixture = Fixture::new("counted", gpus, procs);
    let segment = Segment::open(&fixture.name).expect("open bench segment");
    let mut snap = segment.snapshot().expect("snapshot");
    for _ in 0..iters {
        match mode {
            "fresh" => snap = black_box(segment.snapshot().expect("snapshot")),
            "reuse" => segment.snapshot_into(&mut snap).expect("snapshot"),
            _ => panic!("mode is fresh or reuse"),
        }
    }
    black_box(&snap);
}
