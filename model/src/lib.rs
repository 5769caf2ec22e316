//! gpupeek's model: a snapshot of the segment decoded once into typed values, and the
//! only thing any output reads.
//!
//! Past this crate nobody tests a validity bit or casts a state number: a value the
//! daemon did not publish is `None`, a state is an enum ([`GpuState`], [`DaemonState`],
//! [`ProcKind`], [`ClockEventReasons`]), a quantity carries its unit ([`Bytes`],
//! [`MilliWatts`], ...) and converts itself (MiB, watts, hertz) in one place. Which values
//! a GPU shows in which state is decided once, in [`Gpu::new`].
//!
//! It is its own crate, between `gpupeek-shm` (the segment) and its readers, so that
//! both `gpupeek-render` (which the daemon uses for its prompt file) and the client read
//! it, and the layout crate stays about bytes. Decoding numbers allocates nothing and
//! text is borrowed from the records ([`Text`]), so the daemon can decode every tick.
//! The shape follows facebookincubator/below's `model` crate: plain structs of
//! `Option`s built from raw samples.

#![deny(missing_docs)]

pub mod details;
pub mod fields;
mod gpu;
pub mod history;
mod mig;
mod process;
mod status;
mod text;
mod units;
pub mod verdict;
pub mod xid;

pub use fields::{Field, FIELDS};
pub use gpu::{ClockEventReasons, Clocks, Gpm, Gpu, Memory};
pub use gpupeek_shm::layout::{DaemonState, GpuState};
pub use gpupeek_shm::ProcPolicy;
pub use history::{Integral, Metric, Point, Sample, Series, Stat};
pub use mig::{Mig, MigGpm, Placement};
pub use process::{ProcKind, Process};
pub use status::Status;
pub use text::Text;
pub use units::*;
pub use xid::{LastXid, Xids};

use gpupeek_shm::Snapshot;

/// A whole snapshot, decoded.
#[derive(Debug, Clone)]
pub struct Model<'a> {
    /// The daemon and the driver.
    pub status: Status<'a>,
    /// Every published GPU, in slot order.
    pub gpus: Vec<Gpu<'a>>,
    /// Every process slot in use.
    pub processes: Vec<Process<'a>>,
    /// Every MIG device of every MIG-enabled GPU (ABI 1.4; none before).
    pub mig: Vec<Mig<'a>>,
    /// How much the daemon publishes about processes (`None` from a 1.0 daemon).
    pub proc_policy: Option<ProcPolicy>,
    /// When the daemon sampled the process lists, `CLOCK_MONOTONIC` ns (`None` before
    /// ABI 1.2).
    pub processes_sampled_mono_ns: Option<u64>,
    /// How often the daemon samples the process lists, ns (`None` before ABI 1.2).
    pub processes_period_ns: Option<u64>,
    /// Inode of the pid namespace the process table's pids are in (`None`: unknown).
    pub pid_ns_inode: Option<u64>,
}

impl<'a> Model<'a> {
    /// Decodes `snap`.
    pub fn new(snap: &'a Snapshot) -> Model<'a> {
        let head = &snap.proc_head;
        let nonzero = |x: u64| (x != 0).then_some(x);
        // Each GPU is decoded once; its MIG devices take its state from the decoded one.
        let gpus: Vec<Gpu> = snap.gpus.iter().map(Gpu::new).collect();
        Model {
            status: Status::new(&snap.status),
            mig: snap
                .mig
                .iter()
                .map(|m| {
                    let parent = gpus.iter().find(|g| g.index == m.gpu_index);
                    Mig::new(m, parent.map_or(GpuState::Error, |g| g.state))
                })
                .collect(),
            gpus,
            processes: snap
                .processes
                .iter()
                .map(|p| Process::new(p, &snap.text))
                .collect(),
            proc_policy: snap.proc_policy(),
            processes_sampled_mono_ns: nonzero(head.sample_mono_ns),
            processes_period_ns: nonzero(head.period_ns),
            pid_ns_inode: nonzero(head.pid_ns_inode),
        }
    }

    /// The GPU with NVML index `index`.
    pub fn gpu(&self, index: u32) -> Option<&Gpu<'a>> {
        self.gpus.iter().find(|g| g.index == index)
    }

    /// Processes on the GPU with NVML index `index`.
    pub fn processes_on(&self, index: u32) -> impl Iterator<Item = &Process<'a>> {
        self.processes.iter().filter(move |p| p.gpu_index == index)
    }

    /// MIG devices of the GPU with NVML index `index`.
    pub fn mig_on(&self, index: u32) -> impl Iterator<Item = &Mig<'a>> {
        self.mig.iter().filter(move |m| m.gpu_index == index)
    }

    /// Processes running in MIG device `mig`.
    pub fn processes_in<'m>(&'m self, mig: &'m Mig<'a>) -> impl Iterator<Item = &'m Process<'a>> {
        self.processes_on(mig.gpu_index)
            .filter(move |p| p.mig == Some((mig.gpu_instance_id, mig.compute_instance_id)))
    }

    /// The MIG device with UUID `uuid` (any case).
    pub fn mig_by_uuid(&self, uuid: &str) -> Option<&Mig<'a>> {
        self.mig.iter().find(|m| {
            m.uuid
                .is_some_and(|u| u.decode().eq_ignore_ascii_case(uuid))
        })
    }

    /// The GPU instances of the GPU with NVML index `index`, each once, in the order of
    /// their first MIG device (a GPU instance has one MIG device per compute instance).
    pub fn gpu_instance_ids(&self, index: u32) -> Vec<u32> {
        let mut ids: Vec<u32> = Vec::new();
        for m in self.mig_on(index) {
            if !ids.contains(&m.gpu_instance_id) {
                ids.push(m.gpu_instance_id);
            }
        }
        ids
    }

    /// The first MIG device of GPU instance `gi` of the GPU with NVML index `index`
    /// (its compute instances share the GPU instance's memory and GPM).
    pub fn mig_instance(&self, index: u32, gi: u32) -> Option<&Mig<'a>> {
        self.mig_on(index).find(|m| m.gpu_instance_id == gi)
    }

    /// MIG device `mig` seen as a GPU ([`Mig::as_gpu`]); `None` when its parent is
    /// not in the snapshot.
    pub fn mig_as_gpu(&self, mig: &Mig<'a>) -> Option<Gpu<'a>> {
        let parent = self.gpu(mig.gpu_index)?;
        Some(mig.as_gpu(parent, self.processes_in(mig).count() as u32))
    }

    /// GPU instance `gi` of the GPU with NVML index `index` seen as a GPU: its first MIG
    /// device ([`Mig::as_gpu`]; compute instances share the GPU instance's memory and
    /// GPM) with the processes of all its compute instances.
    pub fn gpu_instance_as_gpu(&self, index: u32, gi: u32) -> Option<Gpu<'a>> {
        let first = self.mig_instance(index, gi)?;
        let processes = self
            .mig_on(index)
            .filter(|m| m.gpu_instance_id == gi)
            .map(|m| self.processes_in(m).count() as u32)
            .sum();
        Some(first.as_gpu(self.gpu(index)?, processes))
    }

    /// How long before `now_mono_ns` the daemon sampled the process lists (`None`
    /// when it does not say).
    pub fn processes_age_ns(&self, now_mono_ns: u64) -> Option<u64> {
        self.processes_sampled_mono_ns
            .map(|at| now_mono_ns.saturating_sub(at))
    }
}
