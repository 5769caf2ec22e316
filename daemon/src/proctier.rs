//! The slow tier: which ticks sample GPU processes, the process list kept in between, and
//! turning that list into the published process table.
//!
//! Process lists, per-process utilisation and the `/proc` reads that resolve each process
//! cost far more than the cheap per-GPU fields, so they are read only every
//! `--process-interval` (never more often than every tick). On the ticks in between the
//! table keeps its last contents. Each GPU is sampled on its own worker, so a GPU late to
//! answer a slow tick keeps its older part of the list until its answer comes (which
//! replaces that part at once); the head's `sample_mono_ns` is when the oldest part was
//! sampled, so it never claims to be fresher than the processes it lists.
//!
//! The kept list never outlives what it describes: a GPU that sleeps, is lost, fails or is
//! no longer counted by the driver is dropped from it (and the table rewritten) in the
//! tick that finds it so, and the next tick samples every process again; so does the tick after the table was emptied
//! because NVML went down or was released, and the tick after a GPU came back.
//!
//! NVML reports host pids. When the `/proc` the daemon reads is not the host's pid
//! namespace (the daemon runs in a container with its own), a pid there names another
//! process or none: processes are then published with what NVML says only, never
//! resolved through that `/proc` ([`host_pids`], logged once at start).

use std::path::Path;
use std::time::{Duration, Instant};

use gpupeek_shm::layout::{proc_kind, proc_valid};
use gpupeek_shm::{text, ProcContext, ProcPolicy, ProcRecord, Publisher};

use crate::gpuprocs::GpuProcess;
use crate::history::Clock;
use crate::procfs::{ProcInfo, Procfs};

/// The process tier's state.
pub struct ProcTier {
    clock: Clock,
    period: Duration,
    /// The next tick samples processes whatever the clock says.
    force: bool,
    /// This tick samples processes (set by [`Self::begin`]).
    slow: bool,
    /// The table must be written at the end of this tick.
    dirty: bool,
    /// Per GPU index: dropped from the list as asleep, lost or failing.
    absent: Vec<bool>,
    /// What NVML listed on the last slow tick, every GPU.
    listed: Vec<GpuProcess>,
    /// Per GPU index: when its part of `listed` was sampled (0: it has none). A GPU
    /// late to answer on a slow tick keeps an older part.
    listed_ns: Vec<u64>,
    records: Vec<ProcRecord>,
    sample_mono_ns: u64,
    procfs: Procfs,
    /// The pids under the `/proc` root are host pids, which NVML reports.
    host_pids: bool,
}

/// The inode of the initial pid namespace, fixed by the kernel (`PROC_PID_INIT_INO`).
const INIT_PID_NS_INODE: u64 = 0xEFFF_FFFC;

/// Whether the pids under `proc_root` are those NVML reports (the initial pid
/// namespace's); logs why not. Unknown (unreadable) counts as yes.
fn host_pids(proc_root: &Path) -> bool {
    let host = crate::hooks::get(crate::hooks::HOST_PID_NS).unwrap_or(INIT_PID_NS_INODE);
    let ours = crate::procfs::pid_namespace_of(proc_root);
    if ours == 0 || ours == host {
        return true;
    }
    log::warn!(
        "{} is not the host's pid namespace (pid namespace {ours}, the host's {host}): \
         NVML reports host pids, so GPU processes are published with pid and GPU memory \
         only, not resolved through it",
        proc_root.display()
    );
    false
}

impl ProcTier {
    /// Samples processes every `period` (at least every tick of `tick`), resolving them
    /// under `proc_root`.
    pub fn new(period: Duration, tick: Duration, proc_root: &Path) -> Self {
        let period = period.max(tick);
        ProcTier {
            clock: Clock::every(period, tick),
            period,
            force: true,
            slow: false,
            dirty: false,
            absent: Vec::new(),
            listed: Vec::new(),
            listed_ns: Vec::new(),
            records: Vec::new(),
            sample_mono_ns: 0,
            procfs: Procfs::new(proc_root),
            host_pids: host_pids(proc_root),
        }
    }

    /// Starts a tick with NVML up at `now`; returns whether it samples processes (and
    /// then empties the list for each GPU's processes, see [`Self::set_gpu`]).
    pub fn begin(&mut self, now: Instant) -> bool {
        let forced = std::mem::take(&mut self.force);
        self.slow = self.clock.due(now) || forced;
        if self.slow {
            self.listed.clear();
            self.listed_ns.fill(0);
            self.sample_mono_ns = gpupeek_shm::mono_now_ns();
            self.dirty = true;
        }
        self.slow
    }

    /// GPU `index`'s processes as its newest slow result listed them at `sampled_ns`:
    /// on a slow tick (once per GPU), or between slow ticks for a GPU whose result
    /// came after the slow tick that asked for it. They replace its part of the list.
    pub fn set_gpu(&mut self, index: u32, procs: &[GpuProcess], sampled_ns: u64) {
        if !self.slow {
            self.listed.retain(|p| p.gpu_index != index);
            self.dirty = true;
        }
        self.listed.extend_from_slice(procs);
        let slot = index as usize;
        if self.listed_ns.len() <= slot {
            self.listed_ns.resize(slot + 1, 0);
        }
        self.listed_ns[slot] = sampled_ns;
    }

    /// This tick watches GPUs `0..count`: processes kept for GPUs beyond it (the driver
    /// lists fewer GPUs than it did) leave the table in this tick.
    pub fn gpu_count(&mut self, count: u32) {
        self.absent.truncate(count as usize);
        self.listed_ns.truncate(count as usize);
        let before = self.listed.len();
        self.listed.retain(|p| p.gpu_index < count);
        if self.listed.len() != before {
            self.dirty = true;
        }
    }

    /// Compute processes of GPU `index` in the kept list.
    pub fn compute_on(&self, index: u32) -> usize {
        self.listed
            .iter()
            .filter(|p| p.gpu_index == index && p.kind & proc_kind::COMPUTE != 0)
            .count()
    }

    /// GPU `index` sleeps, is lost or fails this tick: it has no processes to show. The
    /// first time, its kept processes are dropped and the next tick samples them all.
    pub fn gpu_absent(&mut self, index: u32) {
        let slot = index as usize;
        if self.absent.len() <= slot {
            self.absent.resize(slot + 1, false);
        }
        if std::mem::replace(&mut self.absent[slot], true) {
            return;
        }
        self.listed.retain(|p| p.gpu_index != index);
        if let Some(ns) = self.listed_ns.get_mut(slot) {
            *ns = 0;
        }
        self.dirty = true;
        self.force = true;
    }

    /// GPU `index` was sampled and is fine: after an absence, the next tick samples
    /// processes again so that its own show without waiting a whole period.
    pub fn gpu_present(&mut self, index: u32) {
        if let Some(absent) = self.absent.get_mut(index as usize) {
            if std::mem::replace(absent, false) {
                self.force = true;
            }
        }
    }

    /// The publishing policy changed: this tick rewrites the table from the kept list.
    pub fn rewrite(&mut self) {
        self.dirty = true;
    }

    /// Ends a tick with NVML up: rewrites the table when this tick sampled processes or
    /// dropped some, resolving them through `/proc` as `context` allows.
    pub fn publish(&mut self, publisher: &Publisher, context: &ProcContext) {
        if !std::mem::take(&mut self.dirty) {
            return;
        }
        self.records.clear();
        if self.slow {
            self.procfs.new_tick(self.sample_mono_ns);
        }
        if context.policy != ProcPolicy::None {
            for p in &self.listed {
                let mut rec = nvml_part(p);
                if context.policy == ProcPolicy::Full && self.host_pids {
                    if let Some(info) = self.procfs.lookup(p.pid) {
                        put_proc_info(&mut rec, info);
                    }
                }
                self.records.push(rec);
            }
        }
        publisher.write_processes(&self.stamped(context), &self.records);
    }

    /// Publishes an empty table (NVML down or released); the next tick with NVML up
    /// samples processes.
    pub fn publish_empty(&mut self, publisher: &Publisher, context: &ProcContext) {
        self.listed.clear();
        self.listed_ns.fill(0);
        self.force = true;
        self.sample_mono_ns = gpupeek_shm::mono_now_ns();
        publisher.write_processes(&self.stamped(context), &[]);
    }

    /// The table head: sampled when the oldest GPU's part of it was (the slow tick's
    /// start when no GPU has one).
    fn stamped(&self, context: &ProcContext) -> ProcContext {
        let oldest = self.listed_ns.iter().copied().filter(|&ns| ns != 0).min();
        ProcContext {
            sample_mono_ns: oldest.unwrap_or(self.sample_mono_ns),
            period_ns: self.period.as_nanos() as u64,
            ..*context
        }
    }
}

/// What NVML says about a process: all that the basic policy publishes.
fn nvml_part(p: &GpuProcess) -> ProcRecord {
    let mut rec = ProcRecord {
        gpu_index: p.gpu_index,
        pid: p.pid,
        kind: p.kind,
        gpu_instance_id: p.gpu_instance_id.unwrap_or(u32::MAX),
        compute_instance_id: p.compute_instance_id.unwrap_or(u32::MAX),
        ..Default::default()
    };
    if let Some(bytes) = p.gpu_mem_bytes {
        rec.gpu_mem_bytes = bytes;
        rec.valid |= proc_valid::GPU_MEMORY;
    }
    if let Some([sm, mem, enc, dec]) = p.util_pct {
        (rec.sm_util_pct, rec.mem_util_pct) = (sm, mem);
        (rec.enc_util_pct, rec.dec_util_pct) = (enc, dec);
        rec.valid |= proc_valid::GPU_UTIL;
    }
    rec
}

/// Adds what `/proc` says about a process (the full policy).
fn put_proc_info(rec: &mut ProcRecord, info: &ProcInfo) {
    if let Some((uid, name)) = &info.user {
        rec.uid = *uid;
        text::encode(&mut rec.user, name);
        rec.valid |= proc_valid::USER;
    }
    if let Some(command) = &info.command {
        text::encode(&mut rec.command, command);
        rec.valid |= proc_valid::COMMAND;
    }
    rec.cmdline_len = text::encode_argv(&mut rec.cmdline, &info.cmdline);
    rec.valid |= proc_valid::CMDLINE;
    if let Some(centipct) = info.cpu_centipct {
        rec.cpu_centipct = centipct;
        rec.valid |= proc_valid::CPU;
    }
    if let Some(rss) = info.rss_bytes {
        rec.host_rss_bytes = rss;
        rec.valid |= proc_valid::HOST_MEMORY;
    }
    if let Some(start) = info.start_unix_ns {
        rec.start_unix_ns = start;
        rec.valid |= proc_valid::START_TIME;
    }
    if let Some((ns_pid, inode)) = info.namespace {
        (rec.ns_pid, rec.pid_ns_inode) = (ns_pid, inode);
        rec.valid |= proc_valid::NAMESPACE;
    }
    if let Some(c) = &info.container {
        text::encode(&mut rec.container_runtime, c.runtime);
        text::encode(&mut rec.container_id, &c.id);
        text::encode(&mut rec.pod_uid, c.pod_uid.as_deref().unwrap_or(""));
        rec.valid |= proc_valid::CONTAINER;
    }
}
