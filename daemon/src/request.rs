//! `gpupeekd --release` and `gpupeekd --resume`: an operator's way to make the running
//! daemon let go of NVML (a GPU reset or a MIG mode change fails while any process
//! holds it) and take it back. They signal the daemon that writes the segment (SIGUSR1,
//! SIGUSR2; its pid is in the segment's header) and wait until the segment shows the
//! result: "released", with `nvmlShutdown` done, or live again.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use gpupeek_shm::{Liveness, Segment};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::waiter::Request;

/// Exit status when the daemon did not do it in time.
const EXIT_NOT_DONE: u8 = 1;
/// Exit status when there is no daemon to ask (or it cannot be signalled).
const EXIT_NO_DAEMON: u8 = 3;

/// Sends `request` to the daemon writing segment `name` and waits up to `wait` for it
/// to take effect; prints one line on failure.
pub fn send(name: &str, request: Request, wait: Duration) -> ExitCode {
    let fail = |code: u8, message: String| {
        crate::logging::say(format_args!("{message}"));
        ExitCode::from(code)
    };
    let segment = match Segment::open(name) {
        Ok(segment) => segment,
        Err(e) => return fail(EXIT_NO_DAEMON, format!("{e}")),
    };
    let pid = segment.header().writer_pid;
    let Ok(pid) = i32::try_from(pid).map(Pid::from_raw) else {
        return fail(
            EXIT_NO_DAEMON,
            format!("segment '{name}' names no daemon pid"),
        );
    };
    let (signal, want, what) = match request {
        Request::Release => (Signal::SIGUSR1, Liveness::Released, "release NVML"),
        Request::Resume => (Signal::SIGUSR2, Liveness::Live, "take NVML back"),
    };
    if let Err(e) = kill(pid, signal) {
        return fail(
            EXIT_NO_DAEMON,
            format!(
                "cannot signal gpupeekd (pid {pid}) on segment '{name}': {}",
                e.desc()
            ),
        );
    }
    let deadline = Instant::now() + wait;
    loop {
        let state = segment
            .snapshot()
            .map(|snap| snap.liveness(gpupeek_shm::mono_now_ns()));
        match state {
            Ok(state) if state == want => return ExitCode::SUCCESS,
            Ok(Liveness::Stopped | Liveness::Stale { .. }) => {
                return fail(
                    EXIT_NO_DAEMON,
                    format!("gpupeekd on segment '{name}' is not running"),
                )
            }
            _ => {}
        }
        if Instant::now() >= deadline {
            return fail(
                EXIT_NOT_DONE,
                format!(
                    "gpupeekd (pid {pid}) did not {what} within {wait:?}: an NVML call may \
                     not have returned (see its log)"
                ),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
