//! The gpupeek shared-memory ABI: what the daemon publishes and how anyone reads it.
//!
//! `gpupeekd` writes fixed-layout records ([`layout`]) into one POSIX shared-memory
//! object, each record under a seqlock ([`seqlock`]). Readers map the object read-only,
//! check that it can be trusted and that its header is sane ([`reader`]), and copy
//! consistent snapshots out of it without any system call per read. This crate knows
//! nothing of NVML or terminals; it is the only crate a third-party reader needs.
//!
//! ```no_run
//! let segment = gpupeek_shm::Segment::open(gpupeek_shm::DEFAULT_NAME)?;
//! let snapshot = segment.snapshot()?;
//! for gpu in &snapshot.gpus {
//!     println!("{} {} MiB used", gpupeek_shm::text::decode(&gpu.name), gpu.mem_used_bytes >> 20);
//! }
//! # Ok::<(), gpupeek_shm::Error>(())
//! ```

#![deny(missing_docs)]

pub mod seqlock;

// Under `--cfg loom` only the seqlock is built, on loom's atomics (see seqlock.rs), so
// everything that hands it real `std` atomics is left out.
#[cfg(not(loom))]
pub mod error;
#[cfg(not(loom))]
pub mod futex;
#[cfg(not(loom))]
pub mod geometry;
#[cfg(not(loom))]
pub mod layout;
#[cfg(not(loom))]
pub mod mapping;
#[cfg(not(loom))]
pub mod pin;
#[cfg(not(loom))]
/// The text pool: whole command names and command lines (ABI 1.5).
pub mod pool;

pub mod procfs;
#[cfg(not(loom))]
pub mod reader;
#[cfg(not(loom))]
#[doc(hidden)]
pub mod testing;
#[cfg(not(loom))]
pub mod text;
#[cfg(not(loom))]
pub mod tracks;
#[cfg(not(loom))]
pub mod writer;

#[cfg(not(loom))]
pub use error::{Error, Untrusted};
#[cfg(not(loom))]
pub use geometry::Geometry;
#[cfg(not(loom))]
pub use layout::{
    DaemonState, GpuRecord, GpuState, HistorySample, MigRecord, ProcPolicy, ProcRecord,
    StaticHeader, StatusRecord, TierBucket, TrackHead, TrackKind, ABI_MAJOR, ABI_MINOR,
};
#[cfg(not(loom))]
pub use reader::{History, Liveness, Segment, Snapshot};
#[cfg(not(loom))]
pub use tracks::Track;
#[cfg(not(loom))]
pub use writer::{Options, ProcContext, Publisher};

/// Segment name used when neither `--shm` nor `GPUPEEK_SHM` says otherwise.
pub const DEFAULT_NAME: &str = "gpupeek";

/// Environment variable naming the segment, for every binary.
pub const ENV_NAME: &str = "GPUPEEK_SHM";

/// The segment name to use: the flag if given, else `$GPUPEEK_SHM` if set and non-empty,
/// else [`DEFAULT_NAME`].
pub fn resolve_name(flag: Option<&str>) -> String {
    if let Some(name) = flag {
        return name.to_owned();
    }
    match std::env::var(ENV_NAME) {
        Ok(name) if !name.is_empty() => name,
        _ => DEFAULT_NAME.to_owned(),
    }
}

/// `CLOCK_MONOTONIC` now, in ns: the clock of every heartbeat in the segment.
pub fn mono_now_ns() -> u64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is always available on Linux");
    (ts.tv_sec() as u64) * 1_000_000_000 + ts.tv_nsec() as u64
}
