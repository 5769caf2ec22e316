//! `gpupeek -i/--watch` on a pseudo-terminal: redraws in place, quits on `q` or Ctrl-C,
//! and leaves the terminal as it found it.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use gpupeek_e2e::{bins, Background, Sandbox, WATCHDOG};
use nix::sys::termios::{tcgetattr, LocalFlags};
use serde_json::json;

fn watch_until(key: &[u8]) {
    let sandbox = Sandbox::new("watch");
    sandbox.write_scenario(&json!({"gpus": [
        {"name": "NVIDIA H100", "memory_total_bytes": 80u64 << 30, "memory_used_bytes": 40u64 << 30,
         "utilization_gpu_pct": 100, "utilization_memory_pct": 1, "temperature_c": 41}
    ]}));
    let daemon = sandbox.start_daemon("50ms");
    sandbox.wait_live(&daemon);
    let pty = nix::pty::openpty(None, None).unwrap();
    let slave: OwnedFd = pty.slave;
    let before = tcgetattr(slave.as_fd()).unwrap();
    assert!(before
        .local_flags
        .contains(LocalFlags::ICANON | LocalFlags::ECHO));
    let child = Command::new(&bins().client)
        .args(["--shm", &sandbox.shm, "--watch", "0.05"])
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave.try_clone().unwrap()))
        .spawn()
        .unwrap();
    let mut child = Background { child };
    let mut master = std::fs::File::from(pty.master);
    let mut reader = master.try_clone().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut screen = Vec::new();
    let read_until = |screen: &mut Vec<u8>, want: &dyn Fn(&str) -> bool| {
        let deadline = Instant::now() + WATCHDOG;
        while !want(&String::from_utf8_lossy(screen)) {
            let left = deadline.saturating_duration_since(Instant::now());
            screen.extend(
                rx.recv_timeout(left)
                    .expect("watch output before the watchdog"),
            );
        }
    };
    // Alternate screen, hidden cursor, and frames redrawn from the top-left corner,
    // with the sparkline growing as publishes arrive (from its first column: the daemon
    // starts no history ring with a gap).
    read_until(&mut screen, &|s| s.contains("[0] util ██"));
    let text = String::from_utf8_lossy(&screen).into_owned();
    assert!(text.starts_with("\x1b[?1049h\x1b[?25l"), "{text:?}");
    assert!(text.matches("\x1b[H").count() >= 2, "redrawn in place");
    assert!(text.contains("NVIDIA H100"));
    // While it runs, the terminal is in raw mode: no echo, no line buffering.
    let during = tcgetattr(slave.as_fd()).unwrap();
    assert!(!during.local_flags.contains(LocalFlags::ICANON));
    master.write_all(key).unwrap();
    let deadline = Instant::now() + WATCHDOG;
    let status = loop {
        if let Some(status) = child.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "watch did not quit");
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(0));
    read_until(&mut screen, &|s| s.ends_with("\x1b[?25h\x1b[?1049l"));
    let after = tcgetattr(slave.as_fd()).unwrap();
    assert_eq!(after.local_flags, before.local_flags, "terminal restored");
}

#[test]
fn watch_redraws_in_place_and_quits_on_q() {
    watch_until(b"q");
}

#[test]
fn watch_quits_cleanly_on_ctrl_c() {
    watch_until(b"\x03");
}
