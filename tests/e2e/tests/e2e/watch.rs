//! `gpupeek -i/--watch` on a pseudo-terminal: redraws in place, quits on `q` or Ctrl-C,
//! and leaves the terminal as it found it.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use gpupeek_e2e::{bins, Background, Sandbox, Tmux, WATCHDOG};
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

const GIB: u64 = 1 << 30;

/// Eight H100s, each with three processes (so gpustat's line is wider than 80 columns),
/// utilisation 30 to 65 % and a quarter of the memory used: no sample is drawn full.
fn eight_gpus() -> serde_json::Value {
    let gpus: Vec<_> = (0..8u32)
        .map(|n| {
            json!({
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": format!("GPU-{n:08}-2222-3333-4444-555555555555"),
                "pci_bus_id": format!("00000000:{:02x}:00.0", 0x18 + n),
                "memory_total_bytes": 80 * GIB, "memory_used_bytes": 20 * GIB,
                "memory_free_bytes": 60 * GIB,
                "utilization_gpu_pct": 30 + 5 * n, "utilization_memory_pct": 30,
                "temperature_c": 41 + n, "power_usage_mw": 250_000, "power_limit_mw": 700_000,
                "fan_speed_pct": 35,
                "processes": [
                    {"pid": 1, "used_gpu_memory_bytes": 2 * GIB, "type": "compute"},
                    {"pid": 1, "used_gpu_memory_bytes": 3 * GIB, "type": "compute"},
                    {"pid": 1, "used_gpu_memory_bytes": 4 * GIB, "type": "graphics"},
                ],
            })
        })
        .collect();
    json!({ "gpus": gpus })
}

/// `gpupeek --shm SEGMENT ARGS` in a detached tmux session `w` of `x`×`y`; the pane
/// stays after it exits, to read how it ended.
fn watch_in_tmux(sb: &Sandbox, x: u16, y: u16, args: &str) -> Option<Tmux> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let command = format!("{} --shm {} {args}", bins().client.display(), sb.shm);
    Tmux::start(format!("{}-{n}", sb.shm), x, y, &command)
}

fn resize(t: &Tmux, x: u16, y: u16) {
    let (x, y) = (x.to_string(), y.to_string());
    t.run(&["resize-window", "-t", "w", "-x", &x, "-y", &y]);
}

fn widest(s: &str) -> usize {
    s.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

fn hostname() -> String {
    nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn watch_fits_the_terminal_and_redraws_at_once_when_it_is_resized() {
    let sb = Sandbox::new("watch-fit");
    sb.write_scenario(&eight_gpus());
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    // Two history samples (one a second), so the first frame has sparklines.
    std::thread::sleep(std::time::Duration::from_millis(2200));
    // A long interval: only the resize (SIGWINCH) can bring the new frames below.
    // -a (all fields) makes gpustat's GPU line wider than 80 columns.
    let Some(t) = watch_in_tmux(&sb, 80, 24, "-a -i 60") else {
        return;
    };
    let host = hostname();
    let header = |s: &str| s.lines().next().is_some_and(|l| l.starts_with(&host));
    let s = t.until("eight sparklines at 80x24", |s| {
        s.lines()
            .any(|l| l.starts_with("[7] util ") && l.chars().nth(9).is_some_and(|c| c != ' '))
    });
    assert!(header(&s), "header scrolled away:\n{s}");
    assert!(widest(&s) <= 80, "wider than 80:\n{s}");
    assert!(s.contains("[7] NVIDIA H100"), "{s}");
    assert!(s.lines().any(|l| l.ends_with('…')), "a cut line:\n{s}");
    // Wider: the sparklines take their 40 samples, the table line its full width.
    resize(&t, 120, 40);
    let s = t.until("a frame at 120x40", |s| widest(s) > 80);
    assert!(header(&s), "header scrolled away:\n{s}");
    assert!(widest(&s) <= 120, "wider than 120:\n{s}");
    // Back to 80x24, then fewer rows than lines: the top stays, the rest is counted.
    resize(&t, 80, 24);
    let s = t.until("a frame at 80x24 again", |s| widest(s) == 80);
    assert!(header(&s), "header scrolled away:\n{s}");
    resize(&t, 80, 10);
    let s = t.until("a frame at 80x10", |s| s.contains("more"));
    assert!(header(&s), "header scrolled away:\n{s}");
    assert_eq!(s.lines().count(), 10, "{s}");
    assert_eq!(s.lines().last(), Some("… 8 more"), "{s}");
    assert!(widest(&s) <= 80, "wider than 80:\n{s}");
}

#[test]
fn watch_draws_a_lost_gpu_as_a_gap_not_full() {
    let sb = Sandbox::new("watch-lost");
    let mut scenario = eight_gpus();
    sb.write_scenario(&scenario);
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    let Some(t) = watch_in_tmux(&sb, 80, 24, "-i 0.1") else {
        return;
    };
    t.until("GPU 1's sparklines", |s| s.contains("[1] util ▄▄"));
    scenario["gpus"][1]["errors"] = json!({"*": "GPU_IS_LOST"});
    sb.write_scenario(&scenario);
    let s = t.until("GPU 1 lost, with a gap in its sparkline", |s| {
        s.contains("GPU is lost")
            && s.lines()
                .any(|l| l.starts_with("[1] util ") && l.contains("▄ "))
    });
    let line = s.lines().find(|l| l.starts_with("[1] util ")).unwrap();
    assert!(
        !line.contains('█') && !line.contains('▇'),
        "lost GPU drawn full: {line}\n{s}"
    );
}

#[test]
fn watch_started_before_the_daemon_waits_for_it() {
    let sb = Sandbox::new("watch-wait");
    sb.write_scenario(&eight_gpus());
    let Some(t) = watch_in_tmux(&sb, 80, 24, "-i 0.1") else {
        return;
    };
    let s = t.until("a waiting line", |s| s.contains("waiting"));
    assert!(s.starts_with("gpupeek: waiting: "), "{s}");
    assert!(widest(&s) <= 80, "wider than 80:\n{s}");
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    t.until("the GPUs", |s| s.contains("[7] NVIDIA H100"));
    // A daemon that stops is waited for again, and its successor shown.
    let mut daemon = daemon;
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    daemon.wait_exit();
    t.until("a waiting line again", |s| s.contains("waiting"));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    t.until("the GPUs again", |s| s.contains("[7] NVIDIA H100"));
    let dead = t.run(&["list-panes", "-t", "w", "-F", "#{pane_dead}"]);
    assert_eq!(dead.trim(), "0", "gpupeek -i exited");
}
