//! The slow tier: which ticks sample each GPU's processes, the process list kept in
//! between, and turning that list into the published process table.
//!
//! Process lists, per-process utilisation and the `/proc` reads that resolve each process
//! cost far more than the cheap per-GPU fields, so each GPU's are read only every
//! `--process-interval` (never more often than every tick). The GPUs' turns are spread
//! evenly over that interval: at 2 s and a 1 s tick, half the GPUs list their processes
//! on one tick and half on the next, so no tick pays for all of them (see
//! docs/PERFORMANCE.md). On the ticks in between a GPU's part of the table keeps its last
//! contents, and its processes are not read from `/proc` again. Each GPU is sampled on its
//! own worker, so a GPU late to answer keeps its older part of the list until its answer
//! comes (which replaces that part at once); the head's `sample_mono_ns` is when the
//! oldest part was sampled, so it never claims to be fresher than the processes it lists.
//!
//! The kept list never outlives what it describes: a GPU that sleeps, is lost, fails or is
//! no longer counted by the driver is dropped from it (and the table rewritten) in the
//! tick that finds it so, and the next tick samples every GPU's processes again; so does
//! the tick after the table was emptied because NVML went down or was released, and the
//! tick after a GPU came back.
//!
//! NVML reports host pids. When the `/proc` the daemon reads is not the host's pid
//! namespace (the daemon runs in a container with its own), a pid there names another
//! process or none: processes are then published with what NVML says only, never
//! resolved through that `/proc` ([`host_pids`], logged once at start).

use std::path::Path;
use std::time::{Duration, Instant};

use gpupeek_shm::layout::{proc_kind, proc_valid};
use gpupeek_shm::pool::TextPool;
use gpupeek_shm::{text, ProcContext, ProcPolicy, ProcRecord, Publisher};

use crate::gpuprocs::GpuProcess;
use crate::history::Clock;
use crate::procfs::{ProcInfo, Procfs};

/// The process tier's state.
pub struct ProcTier {
    period: Duration,
    tick: Duration,
    /// Per GPU index: when its processes are due next.
    clocks: Vec<Clock>,
    /// The next tick samples every GPU's processes whatever the clocks say.
    force: bool,
    /// Per GPU index: this tick samples its processes (set by [`Self::begin`]).
    due: Vec<bool>,
    /// Per GPU index: its turn could not be taken (its worker was still busy), so the
    /// next tick samples its processes whatever its clock says.
    owed: Vec<bool>,
    /// Per GPU index: its part of the list was replaced this tick, so its processes are
    /// read from `/proc` again.
    fresh: Vec<bool>,
    /// The table must be written at the end of this tick.
    dirty: bool,
    /// Every process must be resolved again (the publishing policy changed).
    resolve_all: bool,
    /// Per GPU index: dropped from the list as asleep, lost or failing.
    absent: Vec<bool>,
    /// What NVML listed for each GPU on its last slow tick, in GPU order.
    listed: Vec<GpuProcess>,
    /// Per GPU index: when its part of `listed` was sampled (0: it has none). A GPU
    /// late to answer keeps an older part.
    listed_ns: Vec<u64>,
    /// The table as last written, in the order of `listed`.
    records: Vec<ProcRecord>,
    /// The table before, whose unchanged GPU parts are copied (kept to reuse its memory).
    before: Vec<ProcRecord>,
    /// When a GPU's processes were last due (the head's time while no GPU has a part).
    sample_mono_ns: u64,
    procfs: Procfs,
    /// The text pool of the table being written: whole command names and lines.
    pool: TextPool,
    /// The pids under the `/proc` root are host pids, which NVML reports.
    host_pids: bool,
    /// The head of the table as last written, and how many times it was written.
    written: (ProcContext, u64),
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
    /// Samples each GPU's processes every `period` (at least every tick of `tick`),
    /// resolving them under `proc_root`.
    pub fn new(period: Duration, tick: Duration, proc_root: &Path) -> Self {
        let period = period.max(tick);
        let mut procfs = Procfs::new(proc_root);
        // A process is looked up once per period; its CPU time is kept for the next.
        procfs.keep_for((period + tick).as_nanos() as u64);
        ProcTier {
            period,
            tick,
            clocks: Vec::new(),
            force: true,
            due: Vec::new(),
            owed: Vec::new(),
            fresh: Vec::new(),
            dirty: false,
            resolve_all: false,
            absent: Vec::new(),
            listed: Vec::new(),
            listed_ns: Vec::new(),
            records: Vec::new(),
            before: Vec::new(),
            sample_mono_ns: 0,
            procfs,
            pool: TextPool::default(),
            host_pids: host_pids(proc_root),
            written: (ProcContext::new(ProcPolicy::None), 0),
        }
    }

    /// Starts a tick with NVML up at `now`, watching GPUs `0..count`: decides which of
    /// them sample their processes ([`Self::due`]). Processes kept for GPUs beyond
    /// `count` (the driver lists fewer GPUs than it did) leave the table in this tick.
    pub fn begin(&mut self, now: Instant, count: u32) {
        let forced = std::mem::take(&mut self.force);
        let n = count as usize;
        self.absent.truncate(n);
        self.listed_ns.truncate(n);
        let before = self.listed.len();
        self.listed.retain(|p| p.gpu_index < count);
        if self.listed.len() != before {
            self.dirty = true;
        }
        self.clocks.truncate(n);
        while self.clocks.len() < n {
            // A GPU's first turn comes its share of the period after now, so that the
            // GPUs' turns are spread evenly over it.
            let share = self.period.mul_f64(self.clocks.len() as f64 / n as f64);
            self.clocks
                .push(Clock::every_from(self.period, self.tick, now + share));
        }
        self.due.clear();
        self.owed.resize(n, false);
        // Every clock is asked, forced or not, so that each keeps its own schedule.
        let turns = self.clocks.iter_mut().zip(&mut self.owed);
        self.due
            .extend(turns.map(|(clock, owed)| clock.due(now) | forced | std::mem::take(owed)));
        self.fresh.clear();
        self.fresh.resize(n, false);
        if self.due.contains(&true) {
            self.sample_mono_ns = gpupeek_shm::mono_now_ns();
        }
        // A forced tick writes the table even when no GPU lists anything.
        self.dirty |= forced;
    }

    /// Whether this tick samples GPU `index`'s processes.
    pub fn due(&self, index: u32) -> bool {
        self.due.get(index as usize).copied().unwrap_or(false)
    }

    /// GPU `index`'s turn this tick could not be taken (its worker was still busy with an
    /// earlier job): the next tick gives it one.
    pub fn defer(&mut self, index: u32) {
        if let Some(owed) = self.owed.get_mut(index as usize) {
            *owed = true;
        }
    }

    /// GPU `index`'s processes as its newest slow result listed them at `sampled_ns`
    /// (given once per result, on the tick it is taken). They replace its part of the
    /// list.
    pub fn set_gpu(&mut self, index: u32, procs: &[GpuProcess], sampled_ns: u64) {
        let start = self.listed.partition_point(|p| p.gpu_index < index);
        let end = self.listed.partition_point(|p| p.gpu_index <= index);
        self.listed.splice(start..end, procs.iter().cloned());
        let slot = index as usize;
        if self.listed_ns.len() <= slot {
            self.listed_ns.resize(slot + 1, 0);
        }
        self.listed_ns[slot] = sampled_ns;
        if let Some(fresh) = self.fresh.get_mut(slot) {
            *fresh = true;
        }
        self.dirty = true;
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
        self.resolve_all = true;
    }

    /// Ends a tick with NVML up: rewrites the table when its list changed, resolving
    /// the processes of the GPUs listed anew through `/proc` as `context` allows and
    /// keeping the other GPUs' records as they were.
    pub fn publish(&mut self, publisher: &Publisher, context: &ProcContext) {
        if !std::mem::take(&mut self.dirty) {
            return;
        }
        let resolve_all = std::mem::take(&mut self.resolve_all);
        if self.fresh.contains(&true) {
            self.procfs.new_tick(gpupeek_shm::mono_now_ns());
        }
        std::mem::swap(&mut self.records, &mut self.before);
        self.records.clear();
        if context.policy != ProcPolicy::None {
            let resolve = context.policy == ProcPolicy::Full && self.host_pids;
            let mut rest = &self.listed[..];
            while let Some(first) = rest.first() {
                let gpu = first.gpu_index;
                let (part, after) = rest.split_at(rest.partition_point(|p| p.gpu_index == gpu));
                rest = after;
                let fresh = self.fresh.get(gpu as usize).copied().unwrap_or(true);
                let start = self.before.partition_point(|r| r.gpu_index < gpu);
                let end = self.before.partition_point(|r| r.gpu_index <= gpu);
                let kept = &self.before[start..end];
                if !fresh && !resolve_all && kept.len() == part.len() {
                    self.records.extend_from_slice(kept);
                    continue;
                }
                for p in part {
                    let mut rec = nvml_part(p);
                    if resolve {
                        if let Some(info) = self.procfs.lookup(p.pid) {
                            put_proc_info(&mut rec, info);
                        }
                    }
                    self.records.push(rec);
                }
            }
        }
        self.pool.clear(publisher.text_pool_size());
        for rec in &mut self.records {
            if let Some(info) = self.procfs.cached(rec.pid) {
                put_text(&mut self.pool, rec, info);
            }
        }
        let context = self.stamped(context);
        publisher.write_processes(&context, &self.records, self.pool.bytes());
        self.written = (context, self.written.1 + 1);
    }

    /// Publishes an empty table (NVML down or released); the next tick with NVML up
    /// samples processes.
    pub fn publish_empty(&mut self, publisher: &Publisher, context: &ProcContext) {
        self.listed.clear();
        self.listed_ns.fill(0);
        self.records.clear();
        self.force = true;
        self.sample_mono_ns = gpupeek_shm::mono_now_ns();
        self.pool.clear(0);
        let context = self.stamped(context);
        publisher.write_processes(&context, &[], &[]);
        self.written = (context, self.written.1 + 1);
    }

    /// The table as last written: its head, records and text pool, and a number that
    /// changes with each write (for the pod views, see [`crate::podviews`]).
    pub fn table(&self) -> (&ProcContext, &[ProcRecord], &[u8], u64) {
        (
            &self.written.0,
            &self.records,
            self.pool.bytes(),
            self.written.1,
        )
    }

    /// The table head: sampled when the oldest GPU's part of it was (the last due
    /// tick's start when no GPU has one).
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

/// Puts the whole command name and command line of `rec` in `pool`, when what `/proc`
/// last said about its pid is what `rec`'s fixed fields hold the start of (a slot kept
/// from an earlier tick may describe an older state of the process, or a process whose
/// pid was reused). Only what the fixed fields publish goes to the pool: a slot
/// without a command (the basic policy, an unresolved process) gets none.
fn put_text(pool: &mut TextPool, rec: &mut ProcRecord, info: &ProcInfo) {
    let Some(command) = info.command.as_deref() else {
        return;
    };
    if rec.valid & proc_valid::COMMAND == 0 {
        return;
    }
    let mut fixed = [0u8; 32];
    text::encode(&mut fixed, command);
    if fixed != rec.command {
        return;
    }
    let argv = (rec.valid & proc_valid::CMDLINE != 0).then_some(info.cmdline.as_slice());
    if let Some(raw) = argv {
        let mut fixed = [0u8; 328];
        if text::encode_argv(&mut fixed, raw) != rec.cmdline_len || fixed != rec.cmdline {
            return;
        }
    }
    pool.put(rec, command, argv);
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: Duration = Duration::from_secs(1);

    /// Which of `count` GPUs are due on the tick at `now`.
    fn due_at(tier: &mut ProcTier, now: Instant, count: u32) -> Vec<u32> {
        tier.begin(now, count);
        (0..count).filter(|&i| tier.due(i)).collect()
    }

    #[test]
    fn at_twice_the_tick_half_the_gpus_list_their_processes_on_each_tick() {
        let mut tier = ProcTier::new(2 * TICK, TICK, Path::new("/proc"));
        let t0 = Instant::now();
        assert_eq!(
            due_at(&mut tier, t0, 8),
            (0..8).collect::<Vec<_>>(),
            "the first tick: all"
        );
        let (mut odd, mut even) = (Vec::new(), Vec::new());
        for tick in 1..9u32 {
            let due = due_at(&mut tier, t0 + TICK * tick, 8);
            assert_eq!(due.len(), 4, "tick {tick}: {due:?}");
            if tick % 2 == 1 { &mut odd } else { &mut even }.push(due);
        }
        // Each GPU every other tick, always with the same others.
        assert!(odd.windows(2).all(|w| w[0] == w[1]) && even.windows(2).all(|w| w[0] == w[1]));
        let mut all = [odd[0].clone(), even[0].clone()].concat();
        all.sort_unstable();
        assert_eq!(all, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn at_100_ticks_a_period_each_gpu_lists_once_on_a_tick_of_its_own() {
        let tick = Duration::from_millis(10);
        let mut tier = ProcTier::new(Duration::from_secs(1), tick, Path::new("/proc"));
        let t0 = Instant::now();
        due_at(&mut tier, t0, 8);
        let mut times = vec![0; 8];
        for n in 1..=100u32 {
            let due = due_at(&mut tier, t0 + tick * n, 8);
            assert!(due.len() <= 1, "tick {n}: {due:?}");
            for i in due {
                times[i as usize] += 1;
            }
        }
        assert_eq!(times, [1; 8]);
    }

    #[test]
    fn a_forced_tick_lists_every_gpu_and_keeps_their_turns() {
        let mut tier = ProcTier::new(2 * TICK, TICK, Path::new("/proc"));
        let t0 = Instant::now();
        due_at(&mut tier, t0, 4);
        let turn = due_at(&mut tier, t0 + TICK, 4);
        // GPU 3 sleeps and comes back: the next tick lists every GPU's processes.
        tier.gpu_absent(3);
        tier.gpu_present(3);
        assert_eq!(due_at(&mut tier, t0 + 2 * TICK, 4), [0, 1, 2, 3]);
        assert_eq!(due_at(&mut tier, t0 + 3 * TICK, 4), turn);
    }

    #[test]
    fn a_turn_its_busy_worker_could_not_take_comes_on_the_next_tick() {
        let mut tier = ProcTier::new(Duration::from_secs(3600), TICK, Path::new("/proc"));
        let t0 = Instant::now();
        assert_eq!(due_at(&mut tier, t0, 2), [0, 1]);
        // GPU 1's worker was still busy: its turn is owed, not lost for an hour.
        tier.defer(1);
        assert_eq!(due_at(&mut tier, t0 + TICK, 2), [1]);
        assert_eq!(due_at(&mut tier, t0 + 2 * TICK, 2), Vec::<u32>::new());
    }

    #[test]
    fn the_pool_gets_the_whole_text_only_when_the_fixed_fields_hold_its_start() {
        let name = "a-command-name-of-more-than-forty-characters";
        let info = ProcInfo {
            command: Some(name.to_owned()),
            cmdline: format!("/bin/{name}\0{}\0", "x".repeat(2000)).into_bytes(),
            ..Default::default()
        };
        let mut rec = ProcRecord::default();
        put_proc_info(&mut rec, &info);
        let mut pool = TextPool::new(1 << 16);
        put_text(&mut pool, &mut rec, &info);
        let full = gpupeek_shm::pool::full_text(pool.bytes(), &rec);
        assert_eq!(full.command, Some(name.as_bytes()));
        assert_eq!(full.cmdline.map(<[u8]>::len), Some(info.cmdline.len() - 1));

        // A slot kept from before the process rewrote its command line: no text.
        let mut kept = ProcRecord {
            pid: 2,
            ..Default::default()
        };
        put_proc_info(&mut kept, &info);
        let renamed = ProcInfo {
            command: Some(name.to_owned()),
            cmdline: b"/bin/other\0".to_vec(),
            ..Default::default()
        };
        put_text(&mut pool, &mut kept, &renamed);
        assert_eq!(kept.valid & proc_valid::FULL_COMMAND, 0);

        // The basic policy publishes no command: nor does the pool.
        let mut basic = ProcRecord {
            pid: 3,
            ..Default::default()
        };
        put_text(&mut pool, &mut basic, &info);
        assert_eq!(basic.valid & proc_valid::FULL_COMMAND, 0);
    }

    #[test]
    fn a_gpu_part_is_replaced_in_gpu_order() {
        let mut tier = ProcTier::new(2 * TICK, TICK, Path::new("/proc"));
        tier.begin(Instant::now(), 3);
        let p = |gpu_index, pid| GpuProcess {
            gpu_index,
            pid,
            ..Default::default()
        };
        tier.set_gpu(2, &[p(2, 20)], 1);
        tier.set_gpu(0, &[p(0, 1), p(0, 2)], 1);
        tier.set_gpu(1, &[p(1, 10)], 1);
        tier.set_gpu(0, &[p(0, 3)], 2);
        let listed: Vec<_> = tier.listed.iter().map(|p| (p.gpu_index, p.pid)).collect();
        assert_eq!(listed, [(0, 3), (1, 10), (2, 20)]);
        assert_eq!(tier.listed_ns, [2, 1, 1]);
    }
}
