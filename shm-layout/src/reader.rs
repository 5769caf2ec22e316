//! The read side: open a segment read-only, check that it can be trusted, and take
//! consistent snapshots of it.
//!
//! A reader opens the object `O_RDONLY`, checks owner, mode and type on the descriptor,
//! checks the size before mapping (so a truncated object cannot `SIGBUS` it), maps it
//! `PROT_READ`, and validates every header number. A [`Snapshot`] is a private copy taken
//! under the seqlocks; it is consistent across records when the generation word did not
//! move while it was taken.

use std::mem::size_of;
use std::sync::atomic::{fence, AtomicU64, Ordering};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use crate::error::Error;
use crate::geometry::Geometry;
use crate::layout::{
    DaemonState, GpuRecord, HistoryHead, HistorySample, MigRecord, MigTableHead, ProcPolicy,
    ProcRecord, ProcTableHead, StaticHeader, StatusRecord,
};
use crate::mapping::{self, Mapping};
use crate::seqlock::{self, Stale};

/// Largest object a reader maps: far above any real capacity, so a hostile size cannot
/// make a reader map gigabytes.
pub const MAX_SEGMENT_BYTES: usize = 256 << 20;

/// How many times a snapshot is retaken when a publish happened while it was taken.
const SNAPSHOT_ATTEMPTS: u32 = 8;

/// An open, trusted, validated segment.
#[derive(Debug)]
pub struct Segment {
    name: String,
    /// Device and inode of the object mapped, to tell when the name is re-created.
    identity: (u64, u64),
    map: Mapping,
    geometry: Geometry,
    header: StaticHeader,
}

impl Segment {
    /// Opens segment `name` for reading, as the calling user.
    pub fn open(name: &str) -> Result<Self, Error> {
        Self::open_as(name, nix::unistd::geteuid().as_raw())
    }

    /// Opens segment `name` for reading, trusting objects owned by root or `euid`.
    pub fn open_as(name: &str, euid: u32) -> Result<Self, Error> {
        let fd = mapping::open(name, OFlag::O_RDONLY, Mode::empty())?;
        let st = mapping::fstat(name, &fd)?;
        mapping::check_trusted(name, &st, euid)?;
        let len = usize::try_from(st.st_size).unwrap_or(usize::MAX);
        if len < size_of::<StaticHeader>() {
            return Err(Error::NotReady {
                name: name.to_owned(),
            });
        }
        if len > MAX_SEGMENT_BYTES || len % 8 != 0 {
            return Err(Error::corrupt(name, format!("implausible size {len}")));
        }
        let map = Mapping::new(name, &fd, len, false)?;
        let identity = (st.st_dev, st.st_ino);
        let header = read_static_header(map.words());
        let geometry =
            Geometry::validate(name, &header, map.len())?.load_tiers(name, &header, map.words())?;
        Ok(Segment {
            name: name.to_owned(),
            identity,
            map,
            geometry,
            header,
        })
    }

    /// The segment's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The static header as validated at open time.
    pub fn header(&self) -> &StaticHeader {
        &self.header
    }

    /// The validated geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// The generation word: bumped after each complete publish.
    pub fn generation(&self) -> u64 {
        let g = self
            .geometry
            .generation(self.map.words())
            .load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        g
    }

    /// Sleeps until the generation moves past `seen` (the daemon wakes every waiter
    /// after each publish, see [`crate::futex`]) or `timeout` passes; returns the
    /// generation then. No polling: the process uses no CPU while it sleeps.
    pub fn wait_generation(&self, seen: u64, timeout: std::time::Duration) -> u64 {
        let word = self.geometry.generation(self.map.words());
        if word.load(Ordering::Relaxed) == seen {
            crate::futex::wait(word, seen, timeout);
        }
        self.generation()
    }

    /// The epoch in the mapping now: a daemon that takes the segment over in place
    /// writes a new one (the [`Segment::header`] keeps the one seen at open).
    pub fn current_epoch(&self) -> u64 {
        let index = std::mem::offset_of!(StaticHeader, epoch) / 8;
        self.map.words()[index].load(Ordering::Relaxed)
    }

    /// True when the name no longer refers to the object this reader mapped: removed,
    /// or re-created by a restarted daemon (reopen to follow the new one).
    pub fn replaced(&self) -> bool {
        let Ok(fd) = mapping::open(&self.name, OFlag::O_RDONLY, Mode::empty()) else {
            return true;
        };
        mapping::fstat(&self.name, &fd).map_or(true, |st| (st.st_dev, st.st_ino) != self.identity)
    }

    /// The status record alone (cheap liveness check).
    pub fn status(&self) -> Result<StatusRecord, Error> {
        let mut status = StatusRecord::new_zeroed();
        seqlock::read(self.geometry.status(self.map.words()), &mut status)
            .map_err(|Stale| self.stale("status record"))?;
        Ok(status)
    }

    /// Takes a snapshot of everything published. Retried while a publish interleaves;
    /// `consistent` says whether all records came from one publish.
    pub fn snapshot(&self) -> Result<Snapshot, Error> {
        let mut snap = Snapshot {
            header: self.header,
            status: StatusRecord::new_zeroed(),
            gpus: Vec::new(),
            processes: Vec::new(),
            proc_overflow: 0,
            proc_head: ProcTableHead::new_zeroed(),
            text: Vec::new(),
            mig: Vec::new(),
            mig_overflow: 0,
            generation: 0,
            consistent: false,
        };
        self.snapshot_into(&mut snap)?;
        Ok(snap)
    }

    /// [`Segment::snapshot`] into an existing snapshot, reusing its vectors: a reader that
    /// keeps one snapshot and refreshes it allocates nothing once they have grown.
    pub fn snapshot_into(&self, snap: &mut Snapshot) -> Result<(), Error> {
        snap.header = self.header;
        snap.consistent = false;
        for _ in 0..SNAPSHOT_ATTEMPTS {
            let before = self.generation();
            self.fill(snap)?;
            fence(Ordering::Acquire);
            let after = self
                .geometry
                .generation(self.map.words())
                .load(Ordering::Relaxed);
            snap.generation = before;
            if before == after {
                snap.consistent = true;
                break;
            }
        }
        Ok(())
    }

    fn fill(&self, snap: &mut Snapshot) -> Result<(), Error> {
        let words = self.map.words();
        snap.status = self.status()?;
        let count = snap.status.gpu_count as usize;
        if count > self.geometry.gpu_capacity {
            return Err(Error::corrupt(&self.name, "GPU count exceeds capacity"));
        }
        // Records are read in place, no copy through the stack; a reused snapshot's
        // records are overwritten, not zeroed first (every byte is loaded or zeroed).
        snap.gpus.truncate(count);
        snap.gpus.resize(count, GpuRecord::new_zeroed());
        for (slot, rec) in snap.gpus.iter_mut().enumerate() {
            seqlock::read(self.geometry.gpu(words, slot), rec)
                .map_err(|Stale| self.stale("GPU record"))?;
        }
        let head_block = self.geometry.proc_head(words);
        let (_, result) = seqlock::read_with(&head_block[0], || {
            self.load_processes(words, head_block, &mut snap.processes, &mut snap.text)
        })
        .map_err(|Stale| self.stale("process table"))?;
        snap.proc_head = result?;
        snap.proc_overflow = snap.proc_head.overflow;
        if !self.geometry.has_mig() {
            snap.mig.clear();
            snap.mig_overflow = 0;
            return Ok(());
        }
        let head_block = self.geometry.mig_head(words);
        let (_, result) = seqlock::read_with(&head_block[0], || {
            self.load_mig(words, head_block, &mut snap.mig)
        })
        .map_err(|Stale| self.stale("MIG table"))?;
        snap.mig_overflow = result?.overflow;
        Ok(())
    }

    /// Loads the MIG table head and its used slots; returns the head. Runs inside a
    /// seqlock attempt, like [`Self::load_processes`].
    fn load_mig(
        &self,
        words: &[AtomicU64],
        head_block: &[AtomicU64],
        out: &mut Vec<MigRecord>,
    ) -> Result<MigTableHead, Error> {
        let mut head = MigTableHead::new_zeroed();
        seqlock::load_words(&head_block[1..], &mut head.as_mut_bytes()[8..]);
        if head.count as usize > self.geometry.mig_capacity {
            out.clear();
            return Err(Error::corrupt(&self.name, "MIG count exceeds capacity"));
        }
        out.truncate(head.count as usize);
        out.resize(head.count as usize, MigRecord::new_zeroed());
        for (slot, rec) in out.iter_mut().enumerate() {
            seqlock::load_words(self.geometry.mig_slot(words, slot), rec.as_mut_bytes());
        }
        Ok(head)
    }

    /// Loads the process table head, its used slots and the used part of its text pool;
    /// returns the head. Runs inside a seqlock attempt: it may see a torn image, which
    /// the caller rejects.
    fn load_processes(
        &self,
        words: &[AtomicU64],
        head_block: &[AtomicU64],
        out: &mut Vec<ProcRecord>,
        text: &mut Vec<u8>,
    ) -> Result<ProcTableHead, Error> {
        let mut head = ProcTableHead::new_zeroed();
        seqlock::load_words(&head_block[1..], &mut head.as_mut_bytes()[8..]);
        if head.count as usize > self.geometry.proc_capacity {
            out.clear();
            return Err(Error::corrupt(&self.name, "process count exceeds capacity"));
        }
        out.truncate(head.count as usize);
        out.resize(head.count as usize, ProcRecord::new_zeroed());
        for (slot, rec) in out.iter_mut().enumerate() {
            seqlock::load_words(self.geometry.proc_slot(words, slot), rec.as_mut_bytes());
        }
        text.clear();
        let used = crate::pool::used_range(&head, self.map.len())
            .map_err(|what| Error::corrupt(&self.name, what))?;
        if let Some(used) = used {
            // Whole words: the range starts 8-aligned and lies inside the mapping, whose
            // length is a multiple of 8.
            let pool_words = &words[used.start / 8..used.end.div_ceil(8)];
            text.resize(pool_words.len() * 8, 0);
            seqlock::load_words(pool_words, text);
            text.truncate(used.len());
        }
        Ok(head)
    }

    /// GPU slot `slot`'s history, oldest sample first; `None` when the segment has no
    /// history region (a 1.0 writer) or `slot` is beyond the GPU capacity.
    pub fn history(&self, slot: usize) -> Result<Option<History>, Error> {
        let g = &self.geometry;
        if !g.has_history() || slot >= g.gpu_capacity {
            return Ok(None);
        }
        let ring = g.history(self.map.words(), slot);
        let mut raw = vec![0u8; g.history_ring_size];
        let (_, head) = seqlock::read_with(&ring[0], || {
            seqlock::load_words(&ring[1..], &mut raw[8..]);
            let mut head = HistoryHead::new_zeroed();
            head.as_mut_bytes()[8..].copy_from_slice(&raw[8..size_of::<HistoryHead>()]);
            head
        })
        .map_err(|Stale| self.stale("history ring"))?;
        let slots = g.history_slots as u64;
        let kept = head.written.min(slots);
        let samples = (head.written - kept..head.written)
            .map(|n| {
                let at = size_of::<HistoryHead>() + (n % slots) as usize * g.history_sample_size;
                let bytes = &raw[at..at + size_of::<HistorySample>()];
                HistorySample::read_from_bytes(bytes).unwrap_or_default()
            })
            .collect();
        Ok(Some(History {
            step_ns: head.step_ns,
            written: head.written,
            samples,
        }))
    }

    /// The history rings of the GPUs in `snapshot`, by GPU index, with at most the
    /// `keep` newest samples each: nothing when `keep` is 0 or the segment has no rings.
    /// A ring that cannot be read (its writer died mid-append) is left out.
    pub fn histories(&self, snapshot: &Snapshot, keep: usize) -> Vec<(u32, History)> {
        if keep == 0 {
            return Vec::new();
        }
        let mut rings = Vec::new();
        for (slot, gpu) in snapshot.gpus.iter().enumerate() {
            if let Ok(Some(mut ring)) = self.history(slot) {
                let old = ring.samples.len().saturating_sub(keep);
                ring.samples.drain(..old);
                rings.push((gpu.index, ring));
            }
        }
        rings
    }

    /// Number of tracks of tiered history (ABI 1.7); 0 from an older writer.
    pub fn track_count(&self) -> usize {
        self.geometry.tiers.map_or(0, |t| t.track_count)
    }

    /// Track `index`'s head alone (cheap: its integrals and ring counters); `None`
    /// without tiered history or beyond the track count.
    pub fn track_head(&self, index: usize) -> Result<Option<crate::layout::TrackHead>, Error> {
        let Some(t) = self.geometry.tiers.filter(|t| index < t.track_count) else {
            return Ok(None);
        };
        crate::tracks::load_head(&t, self.map.words(), index)
            .map(Some)
            .map_err(|Stale| self.stale("history track"))
    }

    /// Track `index` with at most the `keep[t]` newest buckets of each tier `t` (raw,
    /// tier 1, tier 2), oldest first; `None` without tiered history or beyond the track
    /// count.
    pub fn track(&self, index: usize, keep: [usize; 3]) -> Result<Option<crate::Track>, Error> {
        let Some(t) = self.geometry.tiers.filter(|t| index < t.track_count) else {
            return Ok(None);
        };
        crate::tracks::load_track(&t, self.map.words(), index, keep)
            .map(Some)
            .map_err(|Stale| self.stale("history track"))
    }

    /// Sleeps until the daemon publishes past generation `seen`, or a fallback timeout
    /// (three periods of `period_ns`, at least a second) that catches a daemon which
    /// died without waking anyone. Returns the generation then, or `None` when nothing
    /// was published and this mapping is no longer the daemon's (the name was removed or
    /// re-created, or a daemon took the object over with an epoch other than `epoch`):
    /// reopen to follow the new one.
    pub fn wait_publish(&self, seen: u64, period_ns: u64, epoch: u64) -> Option<u64> {
        let timeout = std::time::Duration::from_nanos(period_ns.saturating_mul(STALE_PERIODS))
            .max(std::time::Duration::from_secs(1));
        let next = self.wait_generation(seen, timeout);
        if next == seen && (self.replaced() || self.current_epoch() != epoch) {
            return None;
        }
        Some(next)
    }

    /// GPU slot `slot` copied with no sequence check at all: the control reader of the
    /// seqlock stress test, which must see torn records. Never use it for real data.
    #[doc(hidden)]
    pub fn gpu_unchecked(&self, slot: usize) -> GpuRecord {
        let mut rec = GpuRecord::default();
        seqlock::read_unchecked(self.geometry.gpu(self.map.words(), slot), &mut rec);
        rec
    }

    fn stale(&self, what: &'static str) -> Error {
        Error::Stale {
            name: self.name.clone(),
            what,
        }
    }
}

fn read_static_header(words: &[AtomicU64]) -> StaticHeader {
    let mut header = StaticHeader::new_zeroed();
    let magic = words[0].load(Ordering::Relaxed);
    fence(Ordering::Acquire);
    let bytes = header.as_mut_bytes();
    bytes[..8].copy_from_slice(&magic.to_ne_bytes());
    seqlock::load_words(&words[1..size_of::<StaticHeader>() / 8], &mut bytes[8..]);
    header
}

/// A private copy of one GPU's history ring.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    /// Time between two samples, ns.
    pub step_ns: u64,
    /// Samples appended since the daemon started (more than `samples.len()` once the
    /// ring has wrapped).
    pub written: u64,
    /// The samples still in the ring, oldest first.
    pub samples: Vec<HistorySample>,
}

/// A private copy of everything a daemon published.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The static header.
    pub header: StaticHeader,
    /// Daemon state, heartbeat and versions.
    pub status: StatusRecord,
    /// GPU records `0..status.gpu_count`.
    pub gpus: Vec<GpuRecord>,
    /// Used process slots.
    pub processes: Vec<ProcRecord>,
    /// Processes left out of the table for lack of slots.
    pub proc_overflow: u32,
    /// The process table head: policy, flags and pid namespace of the table.
    pub proc_head: ProcTableHead,
    /// The used part of the process table's text pool (ABI 1.5; empty from older
    /// writers): see [`Snapshot::full_text`].
    pub text: Vec<u8>,
    /// The MIG devices of every MIG-enabled GPU (ABI 1.4; empty from older writers).
    pub mig: Vec<MigRecord>,
    /// MIG devices left out of the table for lack of slots.
    pub mig_overflow: u32,
    /// Generation the snapshot was taken at.
    pub generation: u64,
    /// All records come from the same publish.
    pub consistent: bool,
}

/// What a snapshot says about its daemon, as a client should report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// Published within the last three periods.
    Live,
    /// Has not published yet.
    Starting,
    /// Shut down cleanly.
    Stopped,
    /// Alive, but NVML released on an operator's request (GPU reset, MIG change).
    Released,
    /// NVML failed; the daemon keeps retrying.
    NvmlError {
        /// NVML return code.
        code: i32,
        /// The daemon's message.
        message: String,
    },
    /// No heartbeat for more than three periods: the daemon died or hangs.
    Stale {
        /// Age of the last heartbeat, ns.
        age_ns: u64,
    },
}

/// Heartbeats older than this many periods mean the daemon is stale.
pub const STALE_PERIODS: u64 = 3;

impl Liveness {
    /// What a client says about a daemon in this state on segment `name` (its sampling
    /// period `period_ns`); `None` when it is live.
    pub fn describe(&self, name: &str, period_ns: u64) -> Option<String> {
        Some(match self {
            Liveness::Live => return None,
            Liveness::Starting => {
                format!("gpupeekd on segment '{name}' is starting and has not published yet")
            }
            Liveness::Stopped => format!(
                "gpupeekd on segment '{name}' has stopped: start it again (see gpupeekd(8))"
            ),
            Liveness::Released => format!(
                "gpupeekd on segment '{name}' has let go of the driver on request (GPU reset or \
                 MIG change): `gpupeekd --resume` takes it back"
            ),
            Liveness::Stale { age_ns } => format!(
                "gpupeekd on segment '{name}' is not responding: last update {:.1}s ago, period {:.3}s",
                *age_ns as f64 / 1e9,
                period_ns as f64 / 1e9
            ),
            Liveness::NvmlError { code, message } => {
                format!("gpupeekd cannot use NVML: {message} (NVML error {code})")
            }
        })
    }
}

impl Snapshot {
    /// Judges the daemon at monotonic time `now_mono_ns` (see [`crate::mono_now_ns`]).
    pub fn liveness(&self, now_mono_ns: u64) -> Liveness {
        let s = &self.status;
        let state = DaemonState::from_raw(s.state);
        if state == Some(DaemonState::Stopped) {
            return Liveness::Stopped;
        }
        let age_ns = now_mono_ns.saturating_sub(s.heartbeat_mono_ns);
        // At least 1 s of grace, so a daemon at 10 ms is not called stale by scheduling noise.
        let limit = s.period_ns.saturating_mul(STALE_PERIODS).max(1_000_000_000);
        if age_ns > limit {
            return Liveness::Stale { age_ns };
        }
        match state {
            Some(DaemonState::Live) => Liveness::Live,
            Some(DaemonState::Released) => Liveness::Released,
            Some(DaemonState::NvmlError) => Liveness::NvmlError {
                code: s.nvml_error_code,
                message: crate::text::decode(&s.error_message),
            },
            _ => Liveness::Starting,
        }
    }

    /// How much the daemon publishes about processes; `None` from a 1.0 daemon.
    pub fn proc_policy(&self) -> Option<ProcPolicy> {
        ProcPolicy::from_raw(self.proc_head.policy)
    }

    /// Process `p`'s whole command name and command line, where the text pool has them
    /// (ABI 1.5); otherwise only its fixed `command` and `cmdline` fields hold them.
    pub fn full_text<'a>(&'a self, p: &ProcRecord) -> crate::pool::FullText<'a> {
        crate::pool::full_text(&self.text, p)
    }

    /// The MIG devices of the GPU with NVML index `gpu_index`.
    pub fn mig_on(&self, gpu_index: u32) -> impl Iterator<Item = &MigRecord> {
        self.mig.iter().filter(move |m| m.gpu_index == gpu_index)
    }

    /// The processes running in MIG device `mig`.
    pub fn processes_in<'a>(&'a self, mig: &'a MigRecord) -> impl Iterator<Item = &'a ProcRecord> {
        self.processes_on(mig.gpu_index).filter(move |p| {
            p.gpu_instance_id == mig.gpu_instance_id
                && p.compute_instance_id == mig.compute_instance_id
        })
    }

    /// Processes on the GPU with NVML index `gpu_index`.
    pub fn processes_on(&self, gpu_index: u32) -> impl Iterator<Item = &ProcRecord> {
        self.processes
            .iter()
            .filter(move |p| p.gpu_index == gpu_index)
    }
}
