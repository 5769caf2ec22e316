//! The one error type of the segment layer. Each variant names the segment and the cause,
//! so binaries can print it as one actionable line and map it to an exit code.

use std::fmt;

use nix::errno::Errno;

/// Why a segment was not trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Untrusted {
    /// Owned by a user other than root and the reader itself.
    Owner {
        /// The owner's uid.
        uid: u32,
    },
    /// Owned, as this reader's user namespace sees it, by the overflow uid: by a user the
    /// namespace does not map (root outside a pod with `hostUsers: false`, whose volume
    /// is not mounted idmapped), which cannot be told from any other.
    Unmapped {
        /// The overflow uid (`/proc/sys/kernel/overflowuid`).
        uid: u32,
    },
    /// Writable by group or others (`mode` is the permission bits).
    Writable {
        /// The permission bits.
        mode: u32,
    },
    /// A symbolic link stands where the segment should be.
    Symlink,
    /// Not a regular shared-memory object.
    NotRegular,
}

/// Everything that can go wrong opening, validating, creating or reading a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The name is empty, too long, or contains `/`.
    InvalidName {
        /// The offending name.
        name: String,
    },
    /// No segment of that name exists: no daemon has run.
    NotFound {
        /// Segment name.
        name: String,
    },
    /// The segment exists but its header is not written yet (the daemon is starting).
    NotReady {
        /// Segment name.
        name: String,
    },
    /// Ownership or permissions make the segment untrustworthy.
    Untrusted {
        /// Segment name.
        name: String,
        /// What is wrong.
        why: Untrusted,
    },
    /// Written by an incompatible ABI major version.
    AbiMismatch {
        /// Segment name.
        name: String,
        /// The segment's major.minor.
        found: (u32, u32),
        /// This reader's major.minor.
        ours: (u32, u32),
    },
    /// The header's numbers do not describe a valid segment.
    Corrupt {
        /// Segment name.
        name: String,
        /// Which check failed.
        what: String,
    },
    /// A record stayed mid-write for every retry: its writer died or hangs while
    /// publishing it.
    Stale {
        /// Segment name.
        name: String,
        /// Which record.
        what: &'static str,
    },
    /// A live daemon already owns the segment.
    AlreadyRunning {
        /// Segment name.
        name: String,
        /// The owner's pid, if its header says.
        pid: Option<u32>,
    },
    /// The daemon's lock file cannot be used.
    Lock {
        /// Its path.
        path: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A system call failed.
    Os {
        /// Segment name.
        name: String,
        /// The call, e.g. "shm_open".
        op: &'static str,
        /// The errno.
        errno: Errno,
    },
}

impl Error {
    pub(crate) fn os(name: &str, op: &'static str, errno: Errno) -> Self {
        Error::Os {
            name: name.to_owned(),
            op,
            errno,
        }
    }

    pub(crate) fn corrupt(name: &str, what: impl Into<String>) -> Self {
        Error::Corrupt {
            name: name.to_owned(),
            what: what.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidName { name } => write!(
                f,
                "invalid segment name {name:?}: use 1-200 characters without '/', not . or .."
            ),
            Error::NotFound { name } if crate::mapping::is_path(name) => write!(
                f,
                "no gpupeek segment at {name}: is gpupeekd running with --pod-views, and \
                 this pod's view mounted there?"
            ),
            Error::NotFound { name } => write!(
                f,
                "no gpupeek segment '{name}' (/dev/shm/{name}): is gpupeekd running?"
            ),
            Error::NotReady { name } => {
                write!(
                    f,
                    "segment '{name}' is not initialised yet: gpupeekd is starting"
                )
            }
            Error::Untrusted { name, why } => {
                write!(f, "refusing untrusted segment '{name}': ")?;
                match why {
                    Untrusted::Owner { uid } => {
                        write!(f, "owned by uid {uid}, not by root or you")
                    }
                    Untrusted::Unmapped { uid } => write!(
                        f,
                        "owned by uid {uid}, a user outside this user namespace (in a pod \
                         with hostUsers: false, mount its volume idmapped, as container \
                         runtimes do on Linux 6.3 and later)"
                    ),
                    Untrusted::Writable { mode } => {
                        write!(f, "writable by group or others (mode {mode:04o})")
                    }
                    Untrusted::Symlink => write!(f, "it is a symbolic link"),
                    Untrusted::NotRegular => write!(f, "not a regular shared-memory object"),
                }
            }
            Error::AbiMismatch { name, found, ours } => write!(
                f,
                "segment '{name}' has layout version {}.{}, this program reads {}.{}: \
                 upgrade the older of gpupeekd and this client",
                found.0, found.1, ours.0, ours.1
            ),
            Error::Corrupt { name, what } => write!(f, "corrupt segment '{name}': {what}"),
            Error::Stale { name, what } => write!(
                f,
                "segment '{name}': the {what} stayed mid-write; gpupeekd died or hangs while publishing"
            ),
            Error::AlreadyRunning {
                name,
                pid: Some(pid),
            } => {
                write!(
                    f,
                    "segment '{name}' is owned by a running gpupeekd (pid {pid})"
                )
            }
            Error::AlreadyRunning { name, pid: None } => {
                write!(f, "segment '{name}' is owned by a running gpupeekd")
            }
            Error::Lock { path, problem } => write!(f, "lock file {path}: {problem}"),
            Error::Os { name, op, errno } => {
                write!(f, "segment '{name}': {op} failed: {}", errno.desc())
            }
        }
    }
}

impl std::error::Error for Error {}
