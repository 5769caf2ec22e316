//! Status-bar and prompt outputs end to end: `--format`, `--output`, `--follow`, on the
//! fake NVML through a real daemon and segment.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use gpupeek_e2e::{bins, stderr, stdout, wait_for, Background, Daemon, Sandbox, WATCHDOG};
use serde_json::json;

const GIB: u64 = 1 << 30;

fn scenario() -> serde_json::Value {
    json!({
        "driver_version": "550.54.15",
        "gpus": [
            {
                "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
                "pci_bus_id": "00000000:1B:00.0", "memory_total_bytes": 80 * GIB,
                "memory_used_bytes": 10 * GIB, "utilization_gpu_pct": 45, "utilization_memory_pct": 12, "temperature_c": 41,
                "power_usage_mw": 123456, "power_limit_mw": 700000
            },
            {
                "name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-77777777-2222-3333-4444-555555555555",
                "pci_bus_id": "00000000:1C:00.0", "memory_total_bytes": 40 * GIB,
                "memory_used_bytes": 30 * GIB, "utilization_gpu_pct": 95, "utilization_memory_pct": 50, "temperature_c": 85,
                "power_usage_mw": 300000, "power_limit_mw": 400000
            }
        ]
    })
}

fn live(tag: &str, interval: &str) -> (Sandbox, Daemon) {
    let sandbox = Sandbox::new(tag);
    sandbox.write_scenario(&scenario());
    let daemon = sandbox.start_daemon(interval);
    sandbox.wait_live(&daemon);
    (sandbox, daemon)
}

#[test]
fn format_prints_one_line_from_the_template() {
    let (sandbox, _daemon) = live("format", "1s");
    let out = sandbox.client(&[
        "--format",
        "{each ' | '}{index}:{util}% {mem_used:GiB:.1}G{end} total {mem_used:GiB:.0}/{mem_total:GiB:.0}G max {max.temp}C {driver}",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "0:45% 10.0G | 1:95% 30.0G total 40/120G max 85C 550.54.15\n"
    );
    let out = sandbox.client(&["--format", "{0.power:W:.2} {1.power_pct:.0}", "--id", "1,0"]);
    assert_eq!(stdout(&out), "123.46 75\n");
}

#[test]
fn a_bad_template_is_a_usage_error_pointing_at_the_column() {
    let (sandbox, _daemon) = live("badformat", "1s");
    let out = sandbox.client(&["--format", "GPU {0.mem_usd}"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).is_empty());
    assert_eq!(
        stderr(&out).lines().next().unwrap(),
        "gpupeek: bad --format template at column 8: unknown field \"mem_usd\" (fields: index, \
name, uuid, pci_bus_id, state, util, util_mem, util_enc, util_dec, mem_used, mem_free, \
mem_total, mem_reserved, mem_pct, temp, fan, power, power_limit, power_pct, energy, clock_gr, \
clock_sm, clock_mem, clock_gr_max, clock_sm_max, clock_mem_max, pstate, pcie_tx, pcie_rx, \
pcie_gen, pcie_width, ecc_corrected, ecc_uncorrected, procs, xid_errors, xid_last, count, \
driver)"
    );
    assert!(
        stderr(&out).ends_with("  GPU {0.mem_usd}\n         ^\n"),
        "{}",
        stderr(&out)
    );
    let out = sandbox.client(&["--output", "dwm"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// waybar's documented keys for `return-type: json` (waybar-custom(5)).
const WAYBAR_KEYS: &[&str] = &["text", "alt", "tooltip", "class", "percentage"];

pub fn check_waybar(line: &str) -> serde_json::Value {
    let doc: serde_json::Value = serde_json::from_str(line).expect("waybar line is JSON");
    let object = doc.as_object().expect("a JSON object");
    for (key, value) in object {
        assert!(
            WAYBAR_KEYS.contains(&key.as_str()),
            "undocumented key {key}"
        );
        match key.as_str() {
            "percentage" => assert!(value.as_u64().is_some_and(|p| p <= 100), "{value}"),
            "class" => assert!(value.is_string() || value.is_array()),
            _ => assert!(value.is_string(), "{key} is a string"),
        }
    }
    assert!(object.contains_key("text"));
    doc
}

#[test]
fn waybar_output_validates_and_carries_the_threshold_class() {
    let (sandbox, _daemon) = live("waybar", "1s");
    let out = sandbox.client(&["-o", "waybar"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = check_waybar(&stdout(&out));
    assert_eq!(doc["text"], "GPU 70% 40.0/120G 85°C");
    assert_eq!(doc["class"], "warning");
    assert_eq!(doc["percentage"], 70);
    assert!(doc["tooltip"]
        .as_str()
        .unwrap()
        .contains("GPU 1 NVIDIA A100-SXM4-40GB: 95%"));
}

#[test]
fn a_bar_shows_a_stopped_line_when_there_is_no_daemon() {
    let sandbox = Sandbox::new("nodaemon");
    let out = sandbox.client(&["-o", "waybar"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the bar must show it, not hide the module"
    );
    let doc = check_waybar(&stdout(&out));
    assert_eq!(doc["class"], "stopped");
    assert_eq!(doc["text"], "GPU: no daemon");
    let out = sandbox.client(&["-o", "bash"]);
    assert_eq!((out.status.code(), stdout(&out).as_str()), (Some(0), "\n"));
    let out = sandbox.client(&["--format", "{util}"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "text output keeps the usual exit status"
    );
}

/// A `--follow` client whose lines arrive on a channel.
pub(crate) fn follower(sandbox: &Sandbox, args: &[&str]) -> (Background, mpsc::Receiver<String>) {
    let mut child = Command::new(&bins().client)
        .arg("--shm")
        .arg(&sandbox.shm)
        .arg("--follow")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("gpupeek --follow starts");
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    (Background { child }, rx)
}

fn next_line(rx: &mpsc::Receiver<String>) -> String {
    rx.recv_timeout(WATCHDOG)
        .expect("a line before the watchdog")
}

/// Reads lines until one satisfies `want`.
pub(crate) fn line_where(rx: &mpsc::Receiver<String>, want: impl Fn(&str) -> bool) -> String {
    loop {
        let line = next_line(rx);
        if want(&line) {
            return line;
        }
    }
}

#[test]
fn follow_prints_a_line_per_publish_and_sees_changes() {
    let (sandbox, daemon) = live("follow", "100ms");
    let (_follower, rx) = follower(&sandbox, &["--format", "{0.util} {1.util}"]);
    assert_eq!(next_line(&rx), "45 95");
    let mut scenario = scenario();
    scenario["gpus"][0]["utilization_gpu_pct"] = json!(7);
    sandbox.write_scenario(&scenario);
    line_where(&rx, |l| l == "7 95");
    // One line per generation: count lines against generations over a stretch.
    let start = sandbox.segment().generation();
    let mut lines = 0;
    while sandbox.segment().generation() < start + 5 {
        next_line(&rx);
        lines += 1;
    }
    assert!((3..=7).contains(&lines), "{lines} lines for 5 publishes");
    drop(daemon);
}

#[test]
fn follow_survives_a_daemon_restart_and_says_when_it_is_gone() {
    let (sandbox, mut daemon) = live("followrestart", "100ms");
    let (_follower, rx) = follower(&sandbox, &["-o", "waybar"]);
    let first = check_waybar(&next_line(&rx));
    assert_eq!(first["class"], "warning");
    // A clean stop says "stopped" at once (the daemon's last publish wakes us).
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(daemon.wait_exit(), Some(0));
    let stopped = line_where(&rx, |l| check_waybar(l)["class"] == "stopped");
    assert_eq!(check_waybar(&stopped)["text"], "GPU: no daemon");
    // A new daemon takes the segment over: the follower follows it.
    let mut daemon = sandbox.start_daemon("100ms");
    line_where(&rx, |l| check_waybar(l)["class"] == "warning");
    // Killed without a word: the timed fallback notices the missing heartbeat.
    daemon.signal(nix::sys::signal::Signal::SIGKILL);
    daemon.wait_exit();
    let gone = line_where(&rx, |l| check_waybar(l)["class"] == "stopped");
    assert_eq!(check_waybar(&gone)["text"], "GPU: daemon not responding");
    // The segment removed and re-created by the next daemon: the follower reopens it.
    std::fs::remove_file(sandbox.shm_path()).unwrap();
    let no_daemon = line_where(&rx, |l| check_waybar(l)["text"] == "GPU: no daemon");
    assert_eq!(check_waybar(&no_daemon)["class"], "stopped");
    let daemon = sandbox.start_daemon("100ms");
    line_where(&rx, |l| check_waybar(l)["class"] == "warning");
    wait_for("daemon still up", &daemon, || true);
}

#[test]
fn follow_sleeps_in_the_kernel_between_publishes() {
    // A daemon publishing every 2 s: between publishes the follower is asleep in
    // futex_wait, not polling (its wait channel says so).
    let (sandbox, _daemon) = live("followsleep", "2s");
    let (follower, rx) = follower(&sandbox, &["--format", "{util}"]);
    next_line(&rx);
    let wchan = format!("/proc/{}/wchan", follower.child.id());
    let deadline = std::time::Instant::now() + WATCHDOG;
    loop {
        let chan = std::fs::read_to_string(&wchan).unwrap_or_default();
        if chan.contains("futex") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "wchan is {chan:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
