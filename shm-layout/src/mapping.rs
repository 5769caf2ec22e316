//! The platform layer: POSIX shared-memory objects and their mappings, through nix.
//!
//! This is the only module with `unsafe`: turning an `mmap` into a `&[AtomicU64]`, and
//! unmapping it. Everything above works on that slice. Trust checks (owner, mode,
//! file type) are done on the open descriptor with `fstat`, so a rename race cannot
//! swap the object between check and use; `shm_open` adds `O_NOFOLLOW` on Linux, so a
//! symbolic link fails with `ELOOP`.

use std::num::NonZeroUsize;
use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

use nix::fcntl::OFlag;
use nix::sys::mman::{self, MapFlags, ProtFlags};
use nix::sys::stat::{self, FileStat, Mode};

use crate::error::{Error, Untrusted};

/// Longest accepted segment name.
pub const MAX_NAME_LEN: usize = 200;

/// Longest accepted segment path ([`is_path`]).
pub const PATH_MAX_LEN: usize = 4095;

/// True when `name` is the absolute path of a segment file rather than a shared-memory
/// object's name: a pod's view, mounted into the pod read-only (see `gpupeekd
/// --pod-views`). Readers open it like an object, with the same trust checks.
pub fn is_path(name: &str) -> bool {
    name.starts_with('/')
}

/// Checks a segment name and returns the `shm_open` path (`/NAME`). `.` and `..` name
/// `/dev/shm` and its parent, not an object.
pub fn shm_path(name: &str) -> Result<String, Error> {
    if name.is_empty()
        || name.len() > MAX_NAME_LEN
        || name.contains('/')
        || name.contains('\0')
        || name == "."
        || name == ".."
    {
        return Err(Error::InvalidName {
            name: name.to_owned(),
        });
    }
    Ok(format!("/{name}"))
}

/// `shm_open` with errno mapped to the segment's error variants. `O_NONBLOCK` is always
/// added: it changes nothing for a shared-memory object, but a FIFO that another user
/// put at the name would otherwise block the open forever.
///
/// An absolute path ([`is_path`]) is opened as a file with `O_NOFOLLOW` (a symbolic link
/// fails with `ELOOP`, as `shm_open` makes it) and `O_CLOEXEC`.
pub fn open(name: &str, flags: OFlag, mode: Mode) -> Result<OwnedFd, Error> {
    let flags = flags | OFlag::O_NONBLOCK;
    let opened = if is_path(name) {
        if name.len() > PATH_MAX_LEN || name.contains('\0') {
            return Err(Error::InvalidName {
                name: name.to_owned(),
            });
        }
        let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        nix::fcntl::open(name, flags, mode)
    } else {
        let path = shm_path(name)?;
        mman::shm_open(path.as_str(), flags, mode)
    };
    opened.map_err(|errno| match errno {
        nix::errno::Errno::ENOENT => Error::NotFound {
            name: name.to_owned(),
        },
        nix::errno::Errno::ELOOP => Error::Untrusted {
            name: name.to_owned(),
            why: Untrusted::Symlink,
        },
        errno => Error::os(name, "shm_open", errno),
    })
}

/// `fstat` of an open segment.
pub fn fstat(name: &str, fd: &OwnedFd) -> Result<FileStat, Error> {
    stat::fstat(fd.as_fd()).map_err(|e| Error::os(name, "fstat", e))
}

/// The reader's trust rule: a regular object, owned by root or by `euid`, writable by
/// its owner alone.
pub fn check_trusted(name: &str, st: &FileStat, euid: u32) -> Result<(), Error> {
    let untrusted = |why| Error::Untrusted {
        name: name.to_owned(),
        why,
    };
    if !is_regular(st) {
        return Err(untrusted(Untrusted::NotRegular));
    }
    if st.st_uid != 0 && st.st_uid != euid {
        let uid = st.st_uid;
        let why = if uid == overflow_uid() && in_user_namespace() {
            Untrusted::Unmapped { uid }
        } else {
            Untrusted::Owner { uid }
        };
        return Err(untrusted(why));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(untrusted(Untrusted::Writable {
            mode: st.st_mode & 0o7777,
        }));
    }
    Ok(())
}

/// The uid a user namespace shows for an id it does not map.
fn overflow_uid() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/overflowuid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65534)
}

/// Whether this process runs in a user namespace other than the initial one, whose uid
/// map is the identity of every id.
fn in_user_namespace() -> bool {
    std::fs::read_to_string("/proc/self/uid_map").is_ok_and(|map| {
        let fields: Vec<&str> = map.split_whitespace().collect();
        fields != ["0", "0", "4294967295"]
    })
}

/// True for a regular file (what every shared-memory object is).
pub fn is_regular(st: &FileStat) -> bool {
    use nix::sys::stat::SFlag;
    st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFREG.bits()
}

/// A shared mapping of a whole segment, seen as 64-bit words. Unmapped on drop.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<AtomicU64>,
    words: usize,
}

// SAFETY: the mapping is only ever accessed through `&[AtomicU64]`, which is Sync; the
// pointer is owned by this value and unmapped exactly once, in Drop.
unsafe impl Send for Mapping {}
// SAFETY: as above: shared access goes through atomics only.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd`, read-only (`PROT_READ`) or read-write. `len` must be a
    /// non-zero multiple of 8 and no larger than the object (the caller checked `fstat`).
    pub fn new(name: &str, fd: &OwnedFd, len: usize, writable: bool) -> Result<Self, Error> {
        let size = NonZeroUsize::new(len)
            .filter(|_| len % 8 == 0)
            .ok_or_else(|| Error::corrupt(name, format!("segment size {len} is not usable")))?;
        let prot = if writable {
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE
        } else {
            ProtFlags::PROT_READ
        };
        // SAFETY: a fresh mapping chosen by the kernel (no address hint, no MAP_FIXED), so
        // no existing Rust object is aliased; the fd is a valid open descriptor.
        let ptr = unsafe { mman::mmap(None, size, prot, MapFlags::MAP_SHARED, fd.as_fd(), 0) }
            .map_err(|e| Error::os(name, "mmap", e))?;
        Ok(Mapping {
            ptr: ptr.cast(),
            words: len / 8,
        })
    }

    /// The whole segment as atomic words. On a read-only mapping only loads are allowed;
    /// this crate's readers never store.
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: `ptr` is page-aligned (so 8-aligned) and valid for `words * 8` bytes for
        // the life of `self`; AtomicU64 has the size and alignment of u64 and any bit
        // pattern is valid; all access goes through atomics, so other processes writing
        // the same memory is not a data race.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.words) }
    }

    /// Size of the mapping in bytes.
    pub fn len(&self) -> usize {
        self.words * 8
    }

    /// Always false: a mapping has at least one word.
    pub fn is_empty(&self) -> bool {
        self.words == 0
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, and no slice borrowed from
        // `words()` can outlive `self`.
        let _ = unsafe { mman::munmap(self.ptr.cast(), self.words * 8) };
    }
}
