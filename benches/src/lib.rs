//! Fixtures shared by the benchmark programs: a private segment filled with realistic
//! records for a chosen number of GPUs and processes, and a small timing loop.
//!
//! Nothing here is part of gpupeek; the programs in `src/bin` are run by `benches/run`
//! (see `benches/README.md`), never by `cargo test`.

use std::time::{Duration, Instant};

use gpupeek_shm::layout::{
    gpu_valid, proc_kind, proc_valid, DaemonState, GpuRecord, ProcPolicy, ProcRecord, StatusRecord,
};
use gpupeek_shm::text::encode;
use gpupeek_shm::{Options, ProcContext, Publisher};
use zerocopy::FromZeros;

/// A private, published segment that is unlinked when dropped.
pub struct Fixture {
    /// The segment's name (pass to `Segment::open`).
    pub name: String,
    publisher: Publisher,
}

impl Fixture {
    /// Creates segment `gpupeek-bench-PID-TAG` with `gpus` GPUs and `procs` processes
    /// spread over them, live, with one complete publish.
    pub fn new(tag: &str, gpus: u32, procs: u32) -> Self {
        let pid = std::process::id();
        let name = format!("gpupeek-bench-{pid}-{tag}");
        let mut options = Options::new(0x5eed, pid);
        options.lock_dir = std::env::temp_dir();
        let publisher = Publisher::create(&name, &options).expect("create bench segment");
        let fixture = Fixture { name, publisher };
        fixture.publish(gpus, procs);
        fixture
    }

    /// Writes a status record, `gpus` GPU records and `procs` processes, then bumps the
    /// generation: one daemon tick's worth of publishing.
    pub fn publish(&self, gpus: u32, procs: u32) {
        let p = &self.publisher;
        let mut status = StatusRecord::new_zeroed();
        status.state = DaemonState::Live as u32;
        status.heartbeat_mono_ns = gpupeek_shm::mono_now_ns();
        status.period_ns = 1_000_000_000;
        status.gpu_count = gpus;
        encode(&mut status.driver_version, "550.54.15");
        p.set_status(&status);
        for i in 0..gpus {
            p.write_gpu(i as usize, &gpu(i));
        }
        let table: Vec<ProcRecord> = (0..procs).map(|i| process(i, gpus.max(1))).collect();
        let context = ProcContext::new(ProcPolicy::Full);
        p.write_processes(&context, &table, &[]);
        p.bump_generation();
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = gpupeek_shm::writer::unlink(&self.name);
        let lock = std::env::temp_dir().join(format!("gpupeekd-{}.lock", self.name));
        let _ = std::fs::remove_file(lock);
    }
}

fn gpu(i: u32) -> GpuRecord {
    let mut g = GpuRecord::new_zeroed();
    g.index = i;
    g.valid = gpu_valid::NAME
        | gpu_valid::UUID
        | gpu_valid::PCI_BUS_ID
        | gpu_valid::MEMORY
        | gpu_valid::UTILIZATION;
    encode(&mut g.name, "NVIDIA H100 80GB HBM3");
    encode(
        &mut g.uuid,
        &format!("GPU-{i:08x}-2222-3333-4444-555555555555"),
    );
    encode(
        &mut g.pci_bus_id,
        &format!("00000000:{:02x}:00.0", 0x18 + i),
    );
    g.mem_total_bytes = 85_520_809_984;
    g.mem_used_bytes = 10 << 30;
    g.mem_free_bytes = g.mem_total_bytes - g.mem_used_bytes;
    g.util_gpu_pct = 45;
    g
}

fn process(i: u32, gpus: u32) -> ProcRecord {
    let mut p = ProcRecord::new_zeroed();
    p.gpu_index = i % gpus;
    p.pid = 10_000 + i;
    p.uid = 1000;
    p.kind = proc_kind::COMPUTE;
    p.valid = proc_valid::GPU_MEMORY | proc_valid::USER | proc_valid::COMMAND;
    p.gpu_mem_bytes = 1 << 30;
    encode(&mut p.user, "alice");
    encode(&mut p.command, "python3");
    p
}

/// Runs `f` in batches for about `budget` and returns the fastest batch's time per call
/// (the minimum is the figure least disturbed by other load on the machine) and the median.
pub fn time_per_call(budget: Duration, mut f: impl FnMut()) -> (Duration, Duration) {
    // Calibrate a batch to roughly 1 ms.
    let mut batch = 1u32;
    loop {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        if t.elapsed() >= Duration::from_millis(1) || batch >= 1 << 24 {
            break;
        }
        batch *= 2;
    }
    let mut samples = Vec::new();
    let start = Instant::now();
    while start.elapsed() < budget || samples.len() < 10 {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        samples.push(t.elapsed() / batch);
    }
    samples.sort();
    (samples[0], samples[samples.len() / 2])
}
