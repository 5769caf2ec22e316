//! Reading a live daemon: the segment opened, a snapshot taken and judged (a daemon
//! that is starting, stopped, stale, released or without NVML is an [`Exit`]), and the
//! GPUs' history rings. Every command and output that reads the segment goes through
//! here.

use gpupeek_shm::{History, Segment, Snapshot};

use crate::Exit;

/// Opens segment `name` and takes a snapshot of a live daemon, or says why not.
pub fn live_snapshot(name: &str) -> Result<Snapshot, Exit> {
    live_segment(name).map(|(_, snapshot)| snapshot)
}

/// [`live_snapshot`], keeping the segment open for more reads (its history rings).
pub fn live_segment(name: &str) -> Result<(Segment, Snapshot), Exit> {
    let segment = Segment::open(name)?;
    let snapshot = segment.snapshot()?;
    crate::check_live(
        name,
        snapshot.liveness(gpupeek_shm::mono_now_ns()),
        snapshot.status.period_ns,
    )?;
    Ok((segment, snapshot))
}

/// The history rings of the GPUs in `snapshot`, by GPU index, with at most the `keep`
/// newest samples each: nothing when `keep` is 0 or the segment has no rings. A ring that
/// cannot be read (its writer died mid-append) is left out.
pub fn histories(segment: &Segment, snapshot: &Snapshot, keep: usize) -> Vec<(u32, History)> {
    if keep == 0 {
        return Vec::new();
    }
    let mut rings = Vec::new();
    for (slot, gpu) in snapshot.gpus.iter().enumerate() {
        if let Ok(Some(mut ring)) = segment.history(slot) {
            let old = ring.samples.len().saturating_sub(keep);
            ring.samples.drain(..old);
            rings.push((gpu.index, ring));
        }
    }
    rings
}
