//! Privilege: a root daemon's segment can be read by anyone and changed by no one else.
//! The unprivileged side runs as uid/gid 65534 (nobody), which needs root to arrange;
//! without root these tests skip, except in CI, where they must run.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::Command;

use gpupeek_e2e::{bins, root_or_skip, run_with_watchdog, stderr, stdout, Sandbox};
use nix::fcntl::{Flock, FlockArg};
use serde_json::json;

const NOBODY: u32 = 65534;

fn live(tag: &str) -> (Sandbox, gpupeek_e2e::Daemon) {
    let sb = Sandbox::new(tag);
    sb.write_scenario(&json!({"gpus": [{"name": "GPU", "memory_total_bytes": 1000}]}));
    let daemon = sb.start_daemon("50ms");
    sb.wait_live(&daemon);
    (sb, daemon)
}

#[test]
fn an_unprivileged_user_can_read_but_not_write_truncate_replace_unlink_or_signal() {
    if !root_or_skip("an_unprivileged_user_can_read_but_not_write") {
        return;
    }
    let (sb, daemon) = live("probe");
    let before = sb.segment();
    let lock = sb.dir.join(format!("gpupeekd-{}.lock", sb.shm));
    let mut probe = Command::new(env!("CARGO_BIN_EXE_unprivileged-probe"));
    probe
        .arg(&sb.shm)
        .arg(&lock)
        .arg(daemon.pid().to_string())
        .uid(NOBODY)
        .gid(NOBODY);
    let out = run_with_watchdog(probe);
    assert!(out.status.success(), "{}", stderr(&out));
    let results: BTreeMap<String, String> = stdout(&out)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    assert_eq!(results.get("read").map(String::as_str), Some("ok"));
    for attempt in [
        "open_rdwr",
        "ftruncate",
        "mmap_writable",
        "unlink",
        "create_over",
        "lock_file",
        "signal_daemon",
        "signal_daemon_stop",
    ] {
        let result = results
            .get(attempt)
            .map(String::as_str)
            .unwrap_or("missing");
        assert!(
            result.starts_with("denied:"),
            "nobody's {attempt}: {result}\n{}",
            stdout(&out)
        );
    }
    // The daemon is untouched and still publishing into the same object.
    assert!(
        matches!(daemon.state(), 'S' | 'R'),
        "neither stopped nor killed"
    );
    let generation = before.generation();
    sb.wait_generation(generation + 2, &daemon);
    assert_eq!(sb.segment().header().epoch, before.header().epoch);
    assert_eq!(sb.client(&[]).status.code(), Some(0));
}

#[test]
fn an_unprivileged_daemon_cannot_take_over_a_root_daemons_segment() {
    if !root_or_skip("an_unprivileged_daemon_cannot_take_over") {
        return;
    }
    let (sb, daemon) = live("usurper");
    let before = sb.segment();
    // Its own lock directory, so the lock file does not stop it: only the segment can.
    let lock_dir = sb.dir.join("nobody");
    std::fs::create_dir(&lock_dir).unwrap();
    std::os::unix::fs::chown(&lock_dir, Some(NOBODY), Some(NOBODY)).unwrap();
    let mut usurper = Command::new(&bins().daemon);
    usurper
        .args(["--foreground", "--shm", &sb.shm, "--interval", "10ms"])
        .env("GPUPEEK_LOCK_DIR", &lock_dir)
        // History state stays in the sandbox (a root daemon's default is
        // /var/lib/gpupeek).
        .env("GPUPEEK_STATE_DIR", lock_dir.join("state"))
        .uid(NOBODY)
        .gid(NOBODY);
    let out = run_with_watchdog(usurper);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
    let generation = before.generation();
    sb.wait_generation(generation + 2, &daemon);
    assert_eq!(sb.segment().header().epoch, before.header().epoch);
    assert_eq!(sb.segment().header().writer_pid, daemon.pid());
}

#[test]
fn a_reader_holding_a_lock_on_the_segment_cannot_stop_a_daemon_restart() {
    let (sb, mut daemon) = live("flocker");
    // flock needs only read access, so any reader could take it: the daemon's own lock
    // is elsewhere, and this must not matter.
    let file = std::fs::File::open(sb.shm_path()).unwrap();
    let _held = Flock::lock(file, FlockArg::LockExclusiveNonblock).expect("a reader can flock");
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(daemon.wait_exit(), Some(0));
    let restarted = sb.start_daemon("50ms");
    gpupeek_e2e::wait_for("the restarted daemon to publish", &restarted, || {
        sb.client(&[]).status.code() == Some(0)
    });
}
