//! The NVML side of the daemon as the publishing thread sees it: every NVML call runs
//! on a [`Worker`] thread (see [`crate::worker`]), under the `--nvml-timeout` deadline.
//!
//! - [`Control`], one worker for the daemon's life, runs the driver-wide calls:
//!   `nvmlInit` (with the versions and the device count) and the per-tick device count.
//! - [`Session`] holds one NVML session and a worker per GPU, each owning that GPU's
//!   [`GpuSampler`]. Each tick [`Session::post`] hands every awake GPU a job (unless it
//!   is still busy with an earlier one), [`Session::wait`] waits for them until the
//!   tick's deadline, and [`Session::record`] says what to publish for each GPU: its
//!   newest record; or, for a GPU whose job has run past the timeout, its kept identity
//!   in state "not responding" (logged once, and once more when it answers again).
//!   A late job's result is published whenever it comes.
//!
//! The process lists of a GPU are those of its newest slow job, so a slow tick always
//! has a list for every GPU that answered (the newest one it gave). Its MIG devices are
//! those of its newest job.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gpupeek_shm::layout::{gpu_valid as v, GpuState};
use gpupeek_shm::{GpuRecord, MigRecord};

use crate::events::Events;
use crate::gpuprocs::GpuProcess;
use crate::reads::Failure;
use crate::sampler::{Closed, GpuSampler, Sampler, SystemInfo};
use crate::worker::{Done, Task, Worker};
use crate::xid::Xids;

/// The identity fields a "not responding" GPU keeps from its last record.
const IDENTITY: u64 =
    v::NAME | v::UUID | v::PCI_BUS_ID | v::CLOCK_GRAPHICS_MAX | v::CLOCK_SM_MAX | v::CLOCK_MEM_MAX;

/// A job of the control worker.
pub enum ControlJob {
    /// Load and initialise NVML from this library (the system's when `None`).
    Init(Option<String>),
    /// Count the GPUs of this session.
    Count(Sampler),
    /// Drop this session's share here: when it is the last, `nvmlShutdown` runs on
    /// this worker, not on the publishing thread.
    Close(Box<Session>),
}

/// What the control worker answered.
#[derive(Default)]
pub enum ControlOut {
    /// Nothing yet.
    #[default]
    None,
    /// A session with its driver facts and GPU count, or why there is none.
    Init(Result<(Sampler, SystemInfo, u32), Failure>),
    /// The GPU count, or why NVML could not count.
    Count(Result<u32, Failure>),
}

/// The control worker's task; it keeps no session of its own.
pub struct Control;

impl Task for Control {
    type Job = ControlJob;
    type Out = ControlOut;

    fn run(&mut self, job: ControlJob, out: &mut ControlOut) {
        *out = match job {
            // A library that initialises but cannot count the GPUs (a driver in a bad
            // state) has not come up.
            ControlJob::Init(lib) => {
                ControlOut::Init(Sampler::init(lib.as_deref()).and_then(|s| {
                    let count = s.device_count()?;
                    let info = s.system_info();
                    Ok((s, info, count))
                }))
            }
            ControlJob::Count(sampler) => ControlOut::Count(sampler.device_count()),
            ControlJob::Close(session) => {
                drop(session);
                ControlOut::None
            }
        };
    }
}

/// One GPU's job: sample it, and its slow tier when `slow`.
pub struct GpuJob {
    slow: bool,
    forget_slow: bool,
}

/// One GPU's result.
#[derive(Default)]
pub struct GpuOut {
    rec: GpuRecord,
    procs: Vec<GpuProcess>,
    /// Its MIG devices (see [`crate::mig`]).
    mig: Vec<MigRecord>,
    slow: bool,
}

impl Task for GpuSampler {
    type Job = GpuJob;
    type Out = GpuOut;

    fn run(&mut self, job: GpuJob, out: &mut GpuOut) {
        if job.forget_slow {
            self.forget_slow();
        }
        out.procs.clear();
        out.slow = job.slow;
        self.sample(
            &mut out.rec,
            job.slow.then_some(&mut out.procs),
            &mut out.mig,
        );
    }
}

/// A GPU's worker and what the publisher keeps of it.
struct Gpu {
    worker: Worker<GpuSampler>,
    /// The newest result taken (its record is valid once `sampled`).
    newest: GpuOut,
    sampled: bool,
    /// The processes of the newest slow result.
    procs: Vec<GpuProcess>,
    /// Its slow-tier values must be forgotten (it slept) before its next sample.
    forget_slow: bool,
    /// Published as not responding (and logged so).
    hung: bool,
    /// Given a job this tick: the tick waits for it.
    posted: bool,
    /// Asleep this tick: not sampled, and not waited for.
    asleep: bool,
    /// `procs` came from a result taken since the last tick published.
    new_procs: bool,
    /// When the result `procs` came from was sampled (`CLOCK_MONOTONIC` ns).
    procs_ns: u64,
    /// `newest` was taken since the last tick published.
    fresh: bool,
}

impl Gpu {
    /// Takes the worker's newest result, if one came since the last take.
    fn collect(&mut self) {
        if self.worker.take(&mut self.newest) {
            self.sampled = true;
            self.fresh = true;
            if self.newest.slow {
                std::mem::swap(&mut self.procs, &mut self.newest.procs);
                self.new_procs = true;
                self.procs_ns = self.newest.rec.sample_mono_ns;
            }
        }
    }
}

/// An NVML session, its GPU workers and its Xid events thread.
pub struct Session {
    sampler: Sampler,
    /// Counts the session's Xids; dropped with it, which ends that thread.
    events: Option<Events>,
    gpus: Vec<Gpu>,
    done: Arc<Done>,
    timeout: Duration,
    /// GPUs NVML counts, from the newest count.
    pub count: u32,
}

impl Session {
    /// A session of `count` GPUs whose workers signal `done`; late jobs are "not
    /// responding" after `timeout`. Its Xids are counted into `xids`.
    pub fn new(
        sampler: Sampler,
        count: u32,
        timeout: Duration,
        done: Arc<Done>,
        xids: &Xids,
    ) -> Self {
        Session {
            events: Events::spawn(sampler.clone(), xids.clone(), Arc::clone(&done)),
            sampler,
            gpus: Vec::new(),
            done,
            timeout,
            count,
        }
    }

    /// The session's sampler (for the control worker's count).
    pub fn sampler(&self) -> &Sampler {
        &self.sampler
    }

    /// Tells when the session is closed (see [`Sampler::closed`]).
    pub fn closed(&self) -> Closed {
        self.sampler.closed()
    }

    /// Starts the workers of GPUs `0..count` that are not running yet.
    fn grow(&mut self, count: usize) {
        while self.gpus.len() < count {
            let index = self.gpus.len() as u32;
            let task = self.sampler.gpu(index);
            let worker = match Worker::spawn(format!("gpu{index}"), task, Arc::clone(&self.done)) {
                Ok(worker) => worker,
                Err(e) => {
                    log::error!("cannot start a thread to sample GPU {index}: {e}");
                    return;
                }
            };
            self.gpus.push(Gpu {
                worker,
                newest: GpuOut::default(),
                sampled: false,
                procs: Vec::new(),
                forget_slow: false,
                hung: false,
                posted: false,
                asleep: false,
                new_procs: false,
                procs_ns: 0,
                fresh: false,
            });
        }
    }

    /// Starts the tick's round of GPU jobs: [`Self::wait`] is woken once, when the last
    /// of them finishes, rather than by each.
    pub fn begin(&self) {
        self.done.begin();
    }

    /// Posts this tick's job to GPU `slot` (the slow tier too when `slow`), unless it is
    /// still busy with an earlier one; returns whether it was posted.
    pub fn post(&mut self, slot: usize, slow: bool, now: Instant) -> bool {
        self.grow(slot + 1);
        let Some(gpu) = self.gpus.get_mut(slot) else {
            return false;
        };
        // A result that came after the last tick published is taken now, so that
        // waiting for this tick's job is not fooled by it.
        gpu.collect();
        let job = GpuJob {
            slow,
            forget_slow: gpu.forget_slow,
        };
        gpu.asleep = false;
        if let Some(events) = &self.events {
            events.awake(slot);
        }
        gpu.posted = gpu.worker.post_in_round(job, now).is_ok();
        if gpu.posted {
            gpu.forget_slow = false;
        }
        gpu.posted
    }

    /// GPU `slot` sleeps: its slow-tier values are forgotten before its next sample.
    pub fn asleep(&mut self, slot: usize) {
        self.grow(slot + 1);
        if let Some(gpu) = self.gpus.get_mut(slot) {
            gpu.asleep = true;
            gpu.forget_slow = true;
            gpu.posted = false;
        }
    }

    /// Waits until every GPU of `0..count` given a job this tick has answered, or
    /// `deadline` passes.
    pub fn wait(&self, count: usize, deadline: Instant) {
        let gpus = &self.gpus[..count.min(self.gpus.len())];
        self.done.wait_until(deadline, || {
            gpus.iter()
                .all(|g| !g.posted || g.worker.busy_for(deadline).is_none())
        });
    }

    /// Whether every awake GPU of `0..count` has a record to publish, or has been
    /// given up on: until then the session is still starting.
    pub fn ready(&self, count: usize, now: Instant) -> bool {
        let timeout = self.timeout;
        self.gpus[..count.min(self.gpus.len())].iter().all(|g| {
            g.asleep || g.sampled || g.worker.has_fresh() || g.worker.busy_for(now) >= Some(timeout)
        })
    }

    /// Writes into `rec` what to publish for GPU `slot` at `now`, taking its newest
    /// result, and says what it is. A GPU whose job has run past the timeout is
    /// published from its kept identity as not responding.
    pub fn record(&mut self, slot: usize, rec: &mut GpuRecord, now: Instant) -> Answer<'_> {
        let timeout = self.timeout;
        let Some(gpu) = self.gpus.get_mut(slot) else {
            not_responding(rec, slot as u32, None);
            return Answer::NotYet;
        };
        gpu.collect();
        let late = gpu.worker.busy_for(now).filter(|&busy| busy >= timeout);
        if let Some(busy) = late {
            if !gpu.hung {
                log::warn!(
                    "GPU {slot}: an NVML call has not returned for {:.1}s: published as not \
                     responding until it does",
                    busy.as_secs_f64()
                );
                gpu.hung = true;
            }
            not_responding(rec, slot as u32, gpu.sampled.then_some(&gpu.newest.rec));
            return Answer::Hung;
        }
        if gpu.hung {
            log::info!("GPU {slot}: the driver answers again");
            gpu.hung = false;
        }
        if !gpu.sampled {
            not_responding(rec, slot as u32, None);
            return Answer::NotYet;
        }
        *rec = gpu.newest.rec;
        Answer::Sampled {
            mig: &gpu.newest.mig,
            procs: &gpu.procs,
            procs_ns: gpu.procs_ns,
            new_procs: std::mem::take(&mut gpu.new_procs),
            fresh: std::mem::take(&mut gpu.fresh),
        }
    }
}

/// What [`Session::record`] wrote for a GPU.
pub enum Answer<'a> {
    /// Its newest record, and its processes as of its newest slow result (`new_procs`:
    /// that result was taken since the last tick published).
    Sampled {
        /// Its MIG devices, as of its newest record.
        mig: &'a [MigRecord],
        /// The processes.
        procs: &'a [GpuProcess],
        /// When they were sampled (`CLOCK_MONOTONIC` ns).
        procs_ns: u64,
        /// The record is a new sample (not republished: the GPU was late).
        fresh: bool,
        /// They came since the last tick.
        new_procs: bool,
    },
    /// Not sampled yet in this session (the session is still starting).
    NotYet,
    /// Its job has run past the timeout: not responding.
    Hung,
}

/// A "not responding" record for GPU `index` into `rec`: the identity of its `last`
/// record, if any, and no current value.
fn not_responding(rec: &mut GpuRecord, index: u32, last: Option<&GpuRecord>) {
    *rec = GpuRecord {
        index,
        state: GpuState::NotResponding as u32,
        ..Default::default()
    };
    if let Some(last) = last {
        rec.name = last.name;
        rec.uuid = last.uuid;
        rec.pci_bus_id = last.pci_bus_id;
        rec.clock_graphics_max_mhz = last.clock_graphics_max_mhz;
        rec.clock_sm_max_mhz = last.clock_sm_max_mhz;
        rec.clock_mem_max_mhz = last.clock_mem_max_mhz;
        rec.valid = last.valid & IDENTITY;
    }
}
