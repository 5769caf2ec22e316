//! Run as an unprivileged user by the privilege tests: tries every way such a user has
//! to read, change or disturb a root daemon's segment and the daemon itself.
//!
//! `unprivileged-probe SEGMENT LOCK_FILE DAEMON_PID` prints one `NAME=RESULT` line per
//! attempt, RESULT being `ok` or `denied:ERRNO`, and exits 0.

use std::os::fd::AsFd;

use gpupeek_shm::mapping::{self, Mapping};
use gpupeek_shm::{Error, Segment};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::{kill, Signal};
use nix::sys::stat::Mode;
use nix::unistd::Pid;

fn report(name: &str, result: Result<(), Errno>) {
    match result {
        Ok(()) => println!("{name}=ok"),
        Err(errno) => println!("{name}=denied:{errno:?}"),
    }
}

fn errno(e: Error) -> Errno {
    match e {
        Error::Os { errno, .. } => errno,
        other => panic!("unexpected error {other}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, name, lock_file, pid] = &args[..] else {
        eprintln!("usage: unprivileged-probe SEGMENT LOCK_FILE DAEMON_PID");
        std::process::exit(2);
    };
    let pid = Pid::from_raw(pid.parse().expect("pid"));

    report(
        "read",
        Segment::open(name)
            .and_then(|s| s.snapshot())
            .map(drop)
            .map_err(|e| panic!("an unprivileged reader must read: {e}")),
    );
    report(
        "open_rdwr",
        mapping::open(name, OFlag::O_RDWR, Mode::empty())
            .map(drop)
            .map_err(errno),
    );
    let fd = mapping::open(name, OFlag::O_RDONLY, Mode::empty()).expect("read-only open");
    report("ftruncate", nix::unistd::ftruncate(fd.as_fd(), 0));
    let len = mapping::fstat(name, &fd).expect("fstat").st_size as usize;
    report(
        "mmap_writable",
        Mapping::new(name, &fd, len, true).map(drop).map_err(errno),
    );
    report(
        "unlink",
        nix::sys::mman::shm_unlink(format!("/{name}").as_str()),
    );
    report(
        "create_over",
        mapping::open(
            name,
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_TRUNC,
            Mode::from_bits_truncate(0o644),
        )
        .map(drop)
        .map_err(errno),
    );
    report(
        "lock_file",
        std::fs::OpenOptions::new()
            .write(true)
            .open(lock_file)
            .map(drop)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(0))),
    );
    report("signal_daemon", kill(pid, Signal::SIGTERM));
    report("signal_daemon_stop", kill(pid, Signal::SIGSTOP));
}
