//! The write side: create (or take over) a segment, hold it exclusively, publish into it.
//!
//! Exactly one daemon owns a segment name: it holds an exclusive `flock` on a private
//! lock file (mode 0600, in a directory only its user can write) for its whole life; a
//! second daemon finds the lock taken and refuses to start. The lock is deliberately not
//! on the segment itself: every reader can open the segment, and `flock` needs no write
//! access, so any user could otherwise stop the daemon from (re)starting.
//!
//! A segment left by a dead daemon is taken over in place when it is ours and has the
//! same geometry (long-lived readers keep their mapping and see the new epoch); anything
//! else standing at the name (another user's object, a symlink, another geometry) is
//! unlinked and the segment is created anew with mode 0644. The object is never shrunk
//! while mapped, so readers cannot be hit by `SIGBUS`.
//!
//! Every page of the segment is allocated up front (`posix_fallocate`), not left sparse:
//! a page of a shared-memory object is otherwise allocated on first touch, and when the
//! filesystem is full (any user can fill `/dev/shm`) that touch is a `SIGBUS` for the
//! daemon and for every reader. A daemon that cannot allocate the whole segment fails at
//! start, with the new object removed.

use std::fs::File;
use std::mem::{offset_of, size_of};
use std::ops::Range;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use nix::errno::Errno;
use nix::fcntl::{posix_fallocate, Flock, FlockArg, OFlag};
use nix::sys::stat::{fchmod, Mode};
use zerocopy::IntoBytes;

use crate::error::{Error, Untrusted};
use crate::geometry::Geometry;
use crate::layout::{
    GpuRecord, HistoryHead, HistorySample, MigRecord, MigTableHead, ProcPolicy, ProcRecord,
    ProcTableHead, StaticHeader, StatusRecord, TierBucket, TierTableHead, TrackHead,
    DEFAULT_GPU_CAPACITY, DEFAULT_PROC_CAPACITY, DEFAULT_RAW_SLOTS, DEFAULT_TIER1_SLOTS,
    DEFAULT_TIER2_SLOTS, DEFAULT_TIER_TRACKS, MAGIC,
};
use crate::mapping::{self, Mapping};
use crate::seqlock;

/// The segment's permission bits: readable by all, writable by the daemon alone.
pub const SEGMENT_MODE: u32 = 0o644;

/// Environment variable overriding the directory of the daemon's lock file.
pub const LOCK_DIR_ENV: &str = "GPUPEEK_LOCK_DIR";

/// How to create a segment.
#[derive(Debug, Clone)]
pub struct Options {
    /// GPU slots.
    pub gpu_capacity: u32,
    /// Process slots.
    pub proc_capacity: u32,
    /// Random per-start value written to the header.
    pub epoch: u64,
    /// The daemon's pid.
    pub writer_pid: u32,
    /// Where the lock file `gpupeekd-NAME.lock` lives.
    pub lock_dir: PathBuf,
    /// Tracks of tiered history (ABI 1.7); 0 for none.
    pub tier_tracks: u32,
    /// Buckets in each tier's ring of a track: raw, tier 1, tier 2.
    pub tier_slots: [u32; 3],
}

impl Options {
    /// Default capacities and lock directory ([`default_lock_dir`]).
    pub fn new(epoch: u64, writer_pid: u32) -> Self {
        Options {
            gpu_capacity: DEFAULT_GPU_CAPACITY,
            proc_capacity: DEFAULT_PROC_CAPACITY,
            epoch,
            writer_pid,
            lock_dir: default_lock_dir(),
            tier_tracks: DEFAULT_TIER_TRACKS,
            tier_slots: [DEFAULT_RAW_SLOTS, DEFAULT_TIER1_SLOTS, DEFAULT_TIER2_SLOTS],
        }
    }

    /// The layout these options give a segment.
    fn geometry(&self) -> Geometry {
        Geometry::with_tiers(
            self.gpu_capacity,
            self.proc_capacity,
            self.tier_tracks,
            self.tier_slots,
        )
    }
}

/// `$GPUPEEK_LOCK_DIR` if set; else `/run` for root; else `$XDG_RUNTIME_DIR`; else `/tmp`.
pub fn default_lock_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(LOCK_DIR_ENV).filter(|d| !d.is_empty()) {
        return dir.into();
    }
    if nix::unistd::geteuid().is_root() {
        return "/run".into();
    }
    std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| "/tmp".into(), PathBuf::from)
}

/// An exclusively held, writable segment.
#[derive(Debug)]
pub struct Publisher {
    name: String,
    map: Mapping,
    geometry: Geometry,
    header: StaticHeader,
    /// The daemon lock of a named segment; none for a file made by [`Publisher::create_file`].
    _lock: Option<Flock<File>>,
}

impl Publisher {
    /// Takes the daemon lock for `name`, creates or takes over the segment, writes its
    /// static header and leaves the daemon state at "starting".
    pub fn create(name: &str, options: &Options) -> Result<Self, Error> {
        mapping::shm_path(name)?;
        let lock = lock_daemon(name, &options.lock_dir)?;
        let geometry = options.geometry();
        let (fd, fresh) = match reusable(name, &geometry)? {
            Some(fd) => (fd, false),
            None => (create_new(name, &geometry)?, true),
        };
        Self::finish(name, Some(lock), &fd, geometry, options, fresh)
    }

    /// Creates a segment as the file `file` in the directory open at `dir` (a pod's view,
    /// see `gpupeekd --pod-views`), named `label` in errors. Whatever stands at `file` is
    /// unlinked first (never followed: the new file is made with `O_EXCL` and
    /// `O_NOFOLLOW`), so readers that mapped an older one see it replaced. No lock is
    /// taken: the daemon that makes it holds its main segment's. Unlink it with
    /// [`unlink_file`].
    pub fn create_file(
        dir: std::os::fd::BorrowedFd,
        file: &str,
        label: &str,
        options: &Options,
    ) -> Result<Self, Error> {
        if file.is_empty() || file.contains('/') || file == "." || file == ".." {
            return Err(Error::InvalidName {
                name: label.to_owned(),
            });
        }
        unlink_file(dir, file, label)?;
        let geometry = options.geometry();
        let flags = OFlag::O_RDWR
            | OFlag::O_CREAT
            | OFlag::O_EXCL
            | OFlag::O_NOFOLLOW
            | OFlag::O_CLOEXEC
            | OFlag::O_NONBLOCK;
        let mode = Mode::from_bits_truncate(SEGMENT_MODE);
        let fd = nix::fcntl::openat(dir, file, flags, mode)
            .map_err(|e| Error::os(label, "openat", e))?;
        let made = fchmod(fd.as_fd(), mode)
            .map_err(|e| Error::os(label, "fchmod", e))
            .and_then(|()| allocate(label, &fd, &geometry));
        if let Err(e) = made {
            let _ = unlink_file(dir, file, label);
            return Err(e);
        }
        Self::finish(label, None, &fd, geometry, options, true)
    }

    fn finish(
        name: &str,
        lock: Option<Flock<File>>,
        fd: &OwnedFd,
        geometry: Geometry,
        options: &Options,
        fresh: bool,
    ) -> Result<Self, Error> {
        let publisher = Publisher {
            name: name.to_owned(),
            map: Mapping::new(name, fd, geometry.segment_size, true)?,
            geometry,
            header: geometry.static_header(options.epoch, options.writer_pid),
            _lock: lock,
        };
        if fresh {
            // magic last: a reader that sees it sees the whole header (and tier table).
            publisher.store_header(8..size_of::<StaticHeader>());
            if let Some(t) = geometry.tiers {
                let words = publisher.map.words();
                let at = t.table_offset / 8;
                seqlock::store_words(
                    &words[at..at + size_of::<TierTableHead>() / 8],
                    t.table_head().as_bytes(),
                );
            }
            publisher.map.words()[0].store(MAGIC, Ordering::Release);
        } else {
            // Same geometry: only the epoch and pid change; magic stays valid throughout.
            let pid = offset_of!(StaticHeader, writer_pid);
            publisher.store_header(offset_of!(StaticHeader, epoch)..pid + size_of::<u32>());
        }
        publisher.set_status(&StatusRecord {
            heartbeat_mono_ns: crate::mono_now_ns(),
            ..Default::default()
        });
        Ok(publisher)
    }

    /// The segment's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The geometry written into the header.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Records the daemon's pid (after it detached into the background).
    pub fn set_writer_pid(&mut self, pid: u32) {
        self.header.writer_pid = pid;
        let start = offset_of!(StaticHeader, writer_pid);
        self.store_header(start..start + 4);
    }

    /// Stores the words of the static header that cover `bytes` (whole words, so a field
    /// sharing a word with another is rewritten together with it).
    fn store_header(&self, bytes: Range<usize>) {
        let words = bytes.start / 8..bytes.end.div_ceil(8);
        seqlock::store_words(
            &self.map.words()[words.clone()],
            &self.header.as_bytes()[words.start * 8..words.end * 8],
        );
    }

    /// Publishes the status record.
    pub fn set_status(&self, status: &StatusRecord) {
        seqlock::write(self.geometry.status(self.map.words()), status);
    }

    /// Publishes GPU slot `slot` (must be below the GPU capacity).
    pub fn write_gpu(&self, slot: usize, record: &GpuRecord) {
        seqlock::write(self.geometry.gpu(self.map.words(), slot), record);
    }

    /// [`Self::write_gpu`], calling `mid` after the odd sequence is stored and before
    /// any payload word: the fault tests freeze the writer there.
    #[doc(hidden)]
    pub fn write_gpu_interrupted(&self, slot: usize, record: &GpuRecord, mid: impl FnOnce()) {
        let block = self.geometry.gpu(self.map.words(), slot);
        seqlock::write_with(&block[0], || {
            mid();
            seqlock::store_words(&block[1..], &record.as_bytes()[8..]);
        });
    }

    /// Publishes the process table under `context`, with `text` (a [`crate::pool::TextPool`]'s
    /// bytes, which the records point into) as its text pool. Processes beyond the
    /// capacity are left out and counted in the head's `overflow`; text beyond the
    /// pool's size is left out (a [`crate::pool::TextPool`] sized by
    /// [`Publisher::text_pool_size`] never has any).
    pub fn write_processes(&self, context: &ProcContext, processes: &[ProcRecord], text: &[u8]) {
        let words = self.map.words();
        let stored = processes.len().min(self.geometry.proc_capacity);
        let left_out = u32::try_from(processes.len() - stored).unwrap_or(u32::MAX);
        let pool = self.geometry.writer_text_pool();
        let text = &text[..text.len().min(pool.len())];
        let head = ProcTableHead {
            seq: 0,
            count: stored as u32,
            overflow: left_out,
            policy: context.policy as u32,
            flags: context.flags,
            pid_ns_inode: context.pid_ns_inode,
            sample_mono_ns: context.sample_mono_ns,
            period_ns: context.period_ns,
            text_pool_offset: pool.start as u64,
            text_pool_size_bytes: pool.len() as u32,
            text_pool_used_bytes: text.len() as u32,
            reserved: [0; 8],
        };
        let head_block = self.geometry.proc_head(words);
        let pool_words = &words[pool.start / 8..pool.end / 8];
        seqlock::write_with(&head_block[0], || {
            seqlock::store_words(&head_block[1..], &head.as_bytes()[8..]);
            for (slot, p) in processes[..stored].iter().enumerate() {
                seqlock::store_words(self.geometry.proc_slot(words, slot), p.as_bytes());
            }
            seqlock::store_bytes(pool_words, text);
        });
    }

    /// Size of the text pool, bytes: what a [`crate::pool::TextPool`] for this segment
    /// may hold.
    pub fn text_pool_size(&self) -> usize {
        self.geometry.writer_text_pool().len()
    }

    /// Publishes the MIG table: every MIG device of every GPU, in one seqlock write, so a
    /// reader never sees half of a reconfiguration. Instances beyond the capacity are
    /// left out and counted in the head's `overflow`.
    pub fn write_mig(&self, instances: &[MigRecord]) {
        let g = &self.geometry;
        let words = self.map.words();
        let stored = instances.len().min(g.mig_capacity);
        let head = MigTableHead {
            seq: 0,
            count: stored as u32,
            overflow: u32::try_from(instances.len() - stored).unwrap_or(u32::MAX),
            reserved: [0; 14],
        };
        let head_block = g.mig_head(words);
        seqlock::write_with(&head_block[0], || {
            seqlock::store_words(&head_block[1..], &head.as_bytes()[8..]);
            for (slot, m) in instances[..stored].iter().enumerate() {
                seqlock::store_words(g.mig_slot(words, slot), m.as_bytes());
            }
        });
    }

    /// Appends `sample` to GPU slot `slot`'s history ring (overwriting the oldest once
    /// the ring is full) and records `step_ns`. Does nothing on a segment without
    /// history or for a slot beyond the GPU capacity.
    pub fn append_history(&self, slot: usize, step_ns: u64, sample: &HistorySample) {
        let g = &self.geometry;
        if !g.has_history() || slot >= g.gpu_capacity {
            return;
        }
        let ring = g.history(self.map.words(), slot);
        let written_word = offset_of!(HistoryHead, written) / 8;
        let written = ring[written_word].load(Ordering::Relaxed);
        let index = (written % g.history_slots as u64) as usize;
        let start = (size_of::<HistoryHead>() + index * g.history_sample_size) / 8;
        let sample_words = &ring[start..start + size_of::<HistorySample>() / 8];
        let head = HistoryHead {
            seq: 0,
            written: written + 1,
            step_ns,
            reserved: 0,
        };
        seqlock::write_with(&ring[0], || {
            seqlock::store_words(sample_words, sample.as_bytes());
            seqlock::store_words(&ring[1..], &head.as_bytes()[8..]);
        });
    }

    /// Number of tracks of tiered history (0 without a tier region).
    pub fn track_count(&self) -> usize {
        self.geometry.tiers.map_or(0, |t| t.track_count)
    }

    /// Writes `head` and `buckets` (`(tier, slot, bucket)`) into track `index` under its
    /// seqlock. Does nothing without a tier region or for a track beyond the count.
    pub fn write_track(
        &self,
        index: usize,
        head: &TrackHead,
        buckets: impl IntoIterator<Item = (usize, usize, TierBucket)>,
    ) {
        if let Some(t) = &self.geometry.tiers {
            if index < t.track_count {
                crate::tracks::store_track(t, self.map.words(), index, head, buckets);
            }
        }
    }

    /// Reads track `index` back whole (what a previous daemon left in a segment taken
    /// over in place); `None` without a tier region, for a track beyond the count, or
    /// when its writer died mid-write.
    pub fn read_track(&self, index: usize) -> Option<crate::tracks::Track> {
        let t = self.geometry.tiers?;
        if index >= t.track_count {
            return None;
        }
        crate::tracks::load_track(&t, self.map.words(), index, [usize::MAX; 3]).ok()
    }

    /// Marks the end of a complete publish; returns the new generation.
    pub fn bump_generation(&self) -> u64 {
        let word = self.geometry.generation(self.map.words());
        let next = word.load(Ordering::Relaxed) + 1;
        // Release: every record store of this publish happens before the new generation.
        word.store(next, Ordering::Release);
        // Followers sleep on the word (`Segment::wait_generation`) instead of polling.
        crate::futex::wake_all(word);
        next
    }
}

/// Takes the exclusive daemon lock for `name`; a held lock means a live daemon.
fn lock_daemon(name: &str, dir: &Path) -> Result<Flock<File>, Error> {
    let path = dir.join(format!("gpupeekd-{name}.lock"));
    let lock_error = |problem: String| Error::Lock {
        path: path.display().to_string(),
        problem,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(&path)
        .map_err(|e| lock_error(e.to_string()))?;
    let meta = file.metadata().map_err(|e| lock_error(e.to_string()))?;
    if meta.uid() != nix::unistd::geteuid().as_raw() || !meta.file_type().is_file() {
        return Err(lock_error(format!(
            "owned by uid {}, not by this user",
            meta.uid()
        )));
    }
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(lock),
        Err((_, Errno::EWOULDBLOCK)) => Err(Error::AlreadyRunning {
            name: name.to_owned(),
            pid: owner_pid(name),
        }),
        Err((_, errno)) => Err(lock_error(errno.desc().to_owned())),
    }
}

/// The existing object at `name` if it can be taken over in place: ours, a regular
/// object, and written with exactly `geometry`. Anything else there is unlinked.
fn reusable(name: &str, geometry: &Geometry) -> Result<Option<OwnedFd>, Error> {
    let fd = match mapping::open(name, OFlag::O_RDWR, Mode::empty()) {
        Ok(fd) => fd,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(Error::Untrusted {
            why: Untrusted::Symlink,
            ..
        }) => {
            unlink(name)?;
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let st = mapping::fstat(name, &fd)?;
    let ours = st.st_uid == nix::unistd::geteuid().as_raw();
    let regular = mapping::is_regular(&st);
    let same_size = usize::try_from(st.st_size).ok() == Some(geometry.segment_size);
    if ours && regular && same_size && same_geometry(name, &fd, geometry) {
        fchmod(fd.as_fd(), Mode::from_bits_truncate(SEGMENT_MODE))
            .map_err(|e| Error::os(name, "fchmod", e))?;
        // Fills any page an older writer left sparse; a no-op otherwise.
        allocate(name, &fd, geometry)?;
        return Ok(Some(fd));
    }
    unlink(name)?;
    Ok(None)
}

/// Creates a new object; a squatter racing to recreate the name is unlinked again.
fn create_new(name: &str, geometry: &Geometry) -> Result<OwnedFd, Error> {
    let flags = OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL;
    for _ in 0..3 {
        match mapping::open(name, flags, Mode::from_bits_truncate(SEGMENT_MODE)) {
            Ok(fd) => {
                // Sized and allocated in one step, so no reader ever sees a sparse object;
                // a half-made object is removed so that no reader can accept it.
                let made = fchmod(fd.as_fd(), Mode::from_bits_truncate(SEGMENT_MODE))
                    .map_err(|e| Error::os(name, "fchmod", e))
                    .and_then(|()| allocate(name, &fd, geometry));
                if let Err(e) = made {
                    let _ = unlink(name);
                    return Err(e);
                }
                return Ok(fd);
            }
            Err(Error::Os {
                errno: Errno::EEXIST,
                ..
            }) => unlink(name)?,
            Err(e) => return Err(e),
        }
    }
    Err(Error::os(name, "shm_open", Errno::EEXIST))
}

/// Sizes the object to the segment and allocates every page of it.
fn allocate(name: &str, fd: &OwnedFd, geometry: &Geometry) -> Result<(), Error> {
    posix_fallocate(fd.as_fd(), 0, geometry.segment_size as i64)
        .map_err(|e| Error::os(name, "posix_fallocate", e))
}

/// True if the old header describes exactly `geometry` (so old readers stay valid).
fn same_geometry(name: &str, fd: &OwnedFd, geometry: &Geometry) -> bool {
    let Ok(map) = Mapping::new(name, fd, geometry.segment_size, false) else {
        return false;
    };
    let mut old = StaticHeader::default();
    seqlock::load_words(&map.words()[..16], old.as_mut_bytes());
    Geometry::validate(name, &old, map.len())
        .and_then(|g| g.load_tiers(name, &old, map.words()))
        .ok()
        == Some(*geometry)
}

/// The pid recorded in the header of the segment at `name`, if readable.
fn owner_pid(name: &str) -> Option<u32> {
    let fd = mapping::open(name, OFlag::O_RDONLY, Mode::empty()).ok()?;
    if mapping::fstat(name, &fd).ok()?.st_size < 128 {
        return None;
    }
    let map = Mapping::new(name, &fd, 128, false).ok()?;
    let word = map.words()[offset_of!(StaticHeader, writer_pid) / 8].load(Ordering::Relaxed);
    let mut pid = [0u8; 4];
    pid.copy_from_slice(&word.to_ne_bytes()[..4]);
    Some(u32::from_ne_bytes(pid)).filter(|&pid| pid != 0)
}

/// What the process table head says about every process in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcContext {
    /// How much is published about each process.
    pub policy: ProcPolicy,
    /// Bits from [`crate::layout::proc_flags`].
    pub flags: u32,
    /// Inode of the pid namespace the pids are in (0 when unknown).
    pub pid_ns_inode: u64,
    /// When the processes were sampled (`CLOCK_MONOTONIC` ns).
    pub sample_mono_ns: u64,
    /// How often processes are sampled, ns.
    pub period_ns: u64,
}

impl ProcContext {
    /// A table published under `policy`, with no flags, an unknown pid namespace and no
    /// sample time yet (the daemon fills those in).
    pub fn new(policy: ProcPolicy) -> Self {
        ProcContext {
            policy,
            flags: 0,
            pid_ns_inode: 0,
            sample_mono_ns: 0,
            period_ns: 0,
        }
    }
}

/// Removes the file `file` of the directory open at `dir` (a segment made by
/// [`Publisher::create_file`]), if there is one; other processes' mappings stay valid.
pub fn unlink_file(dir: std::os::fd::BorrowedFd, file: &str, label: &str) -> Result<(), Error> {
    match nix::unistd::unlinkat(dir, file, nix::unistd::UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(Error::os(label, "unlinkat", e)),
    }
}

/// Removes the name; other processes' mappings stay valid.
pub fn unlink(name: &str) -> Result<(), Error> {
    let path = mapping::shm_path(name)?;
    match nix::sys::mman::shm_unlink(path.as_str()) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(Error::os(name, "shm_unlink", e)),
    }
}
