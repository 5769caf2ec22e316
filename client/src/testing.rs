//! What the client's unit tests share: a snapshot of a live daemon made of given GPU
//! records, as a reader would have copied it out of a segment.

use gpupeek_shm::layout::DaemonState;
use gpupeek_shm::{GpuRecord, Snapshot, StatusRecord};

/// A consistent snapshot of a live daemon with a 1 s period publishing `gpus` and no
/// process.
pub fn live_snapshot(gpus: Vec<GpuRecord>) -> Snapshot {
    Snapshot {
        header: Default::default(),
        status: StatusRecord {
            state: DaemonState::Live as u32,
            gpu_count: gpus.len() as u32,
            period_ns: 1_000_000_000,
            ..StatusRecord::default()
        },
        gpus,
        processes: Vec::new(),
        proc_overflow: 0,
        proc_head: Default::default(),
        text: Vec::new(),
        mig: Vec::new(),
        mig_overflow: 0,
        generation: 1,
        consistent: true,
    }
}
