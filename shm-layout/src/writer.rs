//! The write side: create (or take over) a segment, hold it exclusively, publish into it.
//!
//! Exactly one daemon owns a segment: it holds an exclusive `flock` on the object for its
//! whole life. A second daemon finds the lock taken and refuses to start. A segment left
//! by a dead daemon is taken over in place when it is ours and has the same geometry (so
//! long-lived readers keep their mapping and see the new epoch); otherwise it is unlinked
//! and created anew with mode 0644. The object is never shrunk while mapped, so readers
//! cannot be hit by `SIGBUS`.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg, OFlag};
use nix::sys::stat::{fchmod, Mode};
use nix::unistd::ftruncate;
use zerocopy::IntoBytes;

use crate::error::Error;
use crate::geometry::Geometry;
use crate::layout::{GpuRecord, ProcRecord, ProcTableHead, StaticHeader, StatusRecord};
use crate::mapping::{self, Mapping};
use crate::seqlock;

/// The segment's permission bits: readable by all, writable by the daemon alone.
pub const SEGMENT_MODE: u32 = 0o644;

/// An exclusively held, writable segment.
#[derive(Debug)]
pub struct Publisher {
    name: String,
    map: Mapping,
    geometry: Geometry,
    _lock: Flock<OwnedFd>,
}

impl Publisher {
    /// Creates or takes over segment `name` with the given capacities, writes its static
    /// header (`epoch`, `writer_pid`) and leaves the daemon state at "starting".
    pub fn create(
        name: &str,
        gpu_capacity: u32,
        proc_capacity: u32,
        epoch: u64,
        writer_pid: u32,
    ) -> Result<Self, Error> {
        let geometry = Geometry::for_capacities(gpu_capacity, proc_capacity);
        // Three rounds cover a race with another starting daemon or a vanishing object.
        for _ in 0..3 {
            if let Some(lock) = take_existing(name, &geometry)? {
                return Self::finish(name, lock, geometry, epoch, writer_pid, false);
            }
            if let Some(lock) = create_new(name, &geometry)? {
                return Self::finish(name, lock, geometry, epoch, writer_pid, true);
            }
        }
        Err(Error::os(name, "create", Errno::EAGAIN))
    }

    fn finish(
        name: &str,
        lock: Flock<OwnedFd>,
        geometry: Geometry,
        epoch: u64,
        writer_pid: u32,
        fresh: bool,
    ) -> Result<Self, Error> {
        let map = Mapping::new(name, &lock, geometry.segment_size, true)?;
        let publisher = Publisher {
            name: name.to_owned(),
            map,
            geometry,
            _lock: lock,
        };
        let header = geometry.static_header(epoch, writer_pid);
        let words = publisher.map.words();
        if fresh {
            // magic last: a reader that sees it sees the whole header.
            seqlock::store_words(&words[1..16], &header.as_bytes()[8..]);
            words[0].store(header.magic, Ordering::Release);
        } else {
            // Same geometry: only the epoch and pid change; magic stays valid throughout.
            let offset = std::mem::offset_of!(StaticHeader, epoch) / 8;
            seqlock::store_words(&words[offset..offset + 2], &header.as_bytes()[24..40]);
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
    pub fn set_writer_pid(&self, pid: u32) {
        // `writer_pid` shares its word with `status_size_bytes`; rebuild it in memory order.
        let word = &self.map.words()[std::mem::offset_of!(StaticHeader, writer_pid) / 8];
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&pid.to_ne_bytes());
        bytes[4..].copy_from_slice(&(self.geometry.status_size as u32).to_ne_bytes());
        word.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
    }

    /// Publishes the status record.
    pub fn set_status(&self, status: &StatusRecord) {
        seqlock::write(self.geometry.status(self.map.words()), status);
    }

    /// Publishes GPU slot `slot` (must be below the GPU capacity).
    pub fn write_gpu(&self, slot: usize, record: &GpuRecord) {
        seqlock::write(self.geometry.gpu(self.map.words(), slot), record);
    }

    /// Publishes the process table. Processes beyond the capacity are counted in the
    /// head's `overflow` together with `extra_overflow`; returns how many were stored.
    pub fn write_processes(&self, processes: &[ProcRecord], extra_overflow: u32) -> usize {
        let words = self.map.words();
        let stored = processes.len().min(self.geometry.proc_capacity);
        let left_out = (processes.len() - stored) as u32;
        let head = ProcTableHead {
            seq: 0,
            count: stored as u32,
            overflow: left_out.saturating_add(extra_overflow),
            reserved: [0; 14],
        };
        let head_block = self.geometry.proc_head(words);
        seqlock::write_with(&head_block[0], || {
            seqlock::store_words(&head_block[1..], &head.as_bytes()[8..]);
            for (slot, p) in processes[..stored].iter().enumerate() {
                seqlock::store_words(self.geometry.proc_slot(words, slot), p.as_bytes());
            }
        });
        stored
    }

    /// Marks the end of a complete publish; returns the new generation.
    pub fn bump_generation(&self) -> u64 {
        let word = self.geometry.generation(self.map.words());
        let next = word.load(Ordering::Relaxed) + 1;
        fence(Ordering::Release);
        word.store(next, Ordering::Release);
        next
    }
}

/// Opens an existing object and, if no live daemon holds it, locks it. Returns the lock
/// when the object can be reused; unlinks it and returns `None` when it cannot.
fn take_existing(name: &str, geometry: &Geometry) -> Result<Option<Flock<OwnedFd>>, Error> {
    let fd = match mapping::open(name, OFlag::O_RDWR, Mode::empty()) {
        Ok(fd) => fd,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let lock = match Flock::lock(fd, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => lock,
        Err((fd, Errno::EWOULDBLOCK)) => {
            return Err(Error::AlreadyRunning {
                name: name.to_owned(),
                pid: owner_pid(name, &fd),
            })
        }
        Err((_, errno)) => return Err(Error::os(name, "flock", errno)),
    };
    let st = mapping::fstat(name, &lock)?;
    let ours = st.st_uid == nix::unistd::geteuid().as_raw();
    let same_size = usize::try_from(st.st_size).ok() == Some(geometry.segment_size);
    if ours && same_size && same_geometry(name, &lock, geometry) && still_named(name, &lock)? {
        fchmod(lock.as_fd(), Mode::from_bits_truncate(SEGMENT_MODE))
            .map_err(|e| Error::os(name, "fchmod", e))?;
        return Ok(Some(lock));
    }
    unlink(name)?;
    Ok(None)
}

/// Creates a new object exclusively and locks it; `None` if another process won the race.
fn create_new(name: &str, geometry: &Geometry) -> Result<Option<Flock<OwnedFd>>, Error> {
    let flags = OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL;
    let fd = match mapping::open(name, flags, Mode::from_bits_truncate(SEGMENT_MODE)) {
        Ok(fd) => fd,
        Err(Error::Os {
            errno: Errno::EEXIST,
            ..
        }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let lock = match Flock::lock(fd, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => lock,
        Err((_, Errno::EWOULDBLOCK)) => return Ok(None),
        Err((_, errno)) => return Err(Error::os(name, "flock", errno)),
    };
    fchmod(lock.as_fd(), Mode::from_bits_truncate(SEGMENT_MODE))
        .map_err(|e| Error::os(name, "fchmod", e))?;
    ftruncate(lock.as_fd(), geometry.segment_size as i64)
        .map_err(|e| Error::os(name, "ftruncate", e))?;
    Ok(Some(lock))
}

/// True if the old header describes exactly `geometry` (so old readers stay valid).
fn same_geometry(name: &str, fd: &OwnedFd, geometry: &Geometry) -> bool {
    let Ok(map) = Mapping::new(name, fd, geometry.segment_size, false) else {
        return false;
    };
    let mut old = StaticHeader::default();
    seqlock::load_words(&map.words()[..16], old.as_mut_bytes());
    Geometry::validate(name, &old, map.len()).ok() == Some(*geometry)
}

/// True if `name` still refers to the object behind `fd` (not unlinked and replaced).
fn still_named(name: &str, fd: &OwnedFd) -> Result<bool, Error> {
    let ours = mapping::fstat(name, fd)?;
    match mapping::open(name, OFlag::O_RDONLY, Mode::empty()) {
        Ok(again) => {
            let now = mapping::fstat(name, &again)?;
            Ok(now.st_dev == ours.st_dev && now.st_ino == ours.st_ino)
        }
        Err(Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The pid recorded by the daemon holding `fd`'s object, if its header is readable.
fn owner_pid(name: &str, fd: &OwnedFd) -> Option<u32> {
    let st = mapping::fstat(name, fd).ok()?;
    if st.st_size < 128 {
        return None;
    }
    let map = Mapping::new(name, fd, 128, false).ok()?;
    let word =
        map.words()[std::mem::offset_of!(StaticHeader, writer_pid) / 8].load(Ordering::Relaxed);
    Some(word as u32).filter(|&pid| pid != 0)
}

/// Removes the name; other processes' mappings stay valid.
pub fn unlink(name: &str) -> Result<(), Error> {
    let path = mapping::shm_path(name)?;
    match nix::sys::mman::shm_unlink(path.as_str()) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(Error::os(name, "shm_unlink", e)),
    }
}
