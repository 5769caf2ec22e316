//! `Segment::snapshot_into` refreshes a kept snapshot in place (no allocation once its
//! vectors have grown); whatever it held before, the result must equal a fresh snapshot.

use gpupeek_shm::layout::DaemonState;
use gpupeek_shm::{
    text, GpuRecord, Options, ProcContext, ProcPolicy, ProcRecord, Publisher, Segment, StatusRecord,
};
use zerocopy::{FromZeros, IntoBytes};

fn publish(p: &Publisher, gpus: u32, procs: u32, tag: u32) {
    for i in 0..gpus {
        let mut g = GpuRecord::new_zeroed();
        g.index = i;
        g.mem_used_bytes = u64::from(tag) << 20 | u64::from(i);
        text::encode(&mut g.name, &format!("GPU {tag}.{i}"));
        p.write_gpu(i as usize, &g);
    }
    let table: Vec<ProcRecord> = (0..procs)
        .map(|i| {
            let mut r = ProcRecord::new_zeroed();
            r.pid = tag * 1000 + i;
            r.gpu_index = i % gpus.max(1);
            text::encode(&mut r.command, &format!("cmd{tag}-{i}"));
            r
        })
        .collect();
    let context = ProcContext::new(ProcPolicy::Full);
    p.write_processes(&context, &table, &[]);
    let mut s = StatusRecord::new_zeroed();
    s.state = DaemonState::Live as u32;
    s.gpu_count = gpus;
    s.period_ns = 1_000_000_000;
    s.heartbeat_mono_ns = gpupeek_shm::mono_now_ns();
    p.set_status(&s);
    p.bump_generation();
}

#[test]
fn a_reused_snapshot_equals_a_fresh_one_after_tables_shrink_and_grow() {
    let name = format!("gpupeek-test-reuse-{}", std::process::id());
    let lock_dir = std::env::temp_dir().join(&name);
    std::fs::create_dir_all(&lock_dir).unwrap();
    let options = Options {
        gpu_capacity: 8,
        proc_capacity: 64,
        lock_dir: lock_dir.clone(),
        ..Options::new(1, std::process::id())
    };
    let publisher = Publisher::create(&name, &options).unwrap();
    let segment = Segment::open(&name).unwrap();
    publish(&publisher, 8, 64, 1);
    let mut kept = segment.snapshot().unwrap();
    for (gpus, procs, tag) in [(2, 3, 2), (8, 40, 3), (0, 0, 4), (5, 64, 5)] {
        publish(&publisher, gpus, procs, tag);
        segment.snapshot_into(&mut kept).unwrap();
        let fresh = segment.snapshot().unwrap();
        assert!(kept.consistent);
        assert_eq!(kept.generation, fresh.generation);
        assert_eq!(kept.gpus.len(), gpus as usize);
        assert_eq!(kept.processes.len(), procs as usize);
        assert_eq!(
            kept.gpus.as_bytes(),
            fresh.gpus.as_bytes(),
            "GPUs after tag {tag}"
        );
        assert_eq!(
            kept.processes.as_bytes(),
            fresh.processes.as_bytes(),
            "processes after tag {tag}"
        );
        assert_eq!(kept.status.as_bytes(), fresh.status.as_bytes());
    }
    drop(publisher);
    let _ = gpupeek_shm::writer::unlink(&name);
    let _ = std::fs::remove_dir_all(lock_dir);
}
