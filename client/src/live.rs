//! Reading a live daemon: the segment opened, a snapshot taken and judged (a daemon
//! that is starting, stopped, stale, released or without NVML is an [`Exit`]). Every
//! command and output that reads the segment goes through here; the GPUs' history
//! rings are [`Segment::histories`], shared with gpupeek-top.

use gpupeek_shm::{Segment, Snapshot};

use crate::Exit;

/// Opens segment `name` and takes a snapshot of a live daemon, or says why not; the
/// segment stays open for more reads (its history rings).
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
