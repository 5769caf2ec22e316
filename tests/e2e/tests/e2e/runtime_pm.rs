//! End to end: runtime power management on a fake sysfs tree. A suspended GPU gets no
//! NVML call, NVML is released while every GPU sleeps or idles, and values come back
//! within one tick of a wake, never stale.

use std::collections::BTreeMap;

use gpupeek_e2e::{stderr, stdout, wait_for, Daemon, Sandbox};
use gpupeek_shm::layout::gpu_valid;
use gpupeek_shm::{text, GpuState, Segment, Snapshot};
use serde_json::{json, Value};

/// The laptop's discrete GPU, as sysfs names it.
const DGPU: &str = "0000:01:00.0";
/// A second GPU, for the two-GPU cases.
const OTHER: &str = "0000:02:00.0";

/// What a record of a GPU that is not queried may hold: its identity.
const IDENTITY: u64 = gpu_valid::NAME
    | gpu_valid::UUID
    | gpu_valid::PCI_BUS_ID
    | gpu_valid::CLOCK_GRAPHICS_MAX
    | gpu_valid::CLOCK_SM_MAX
    | gpu_valid::CLOCK_MEM_MAX;

fn gpu(bus_id: &str, uuid: &str, temperature_c: u32, util_pct: u32) -> Value {
    json!({
        "name": "NVIDIA GeForce RTX 4060 Laptop GPU", "uuid": uuid,
        "pci_bus_id": bus_id, "memory_total_bytes": 8585740288u64,
        "memory_used_bytes": 0, "memory_free_bytes": 8585740288u64,
        "utilization_gpu_pct": util_pct, "utilization_memory_pct": 0,
        "temperature_c": temperature_c, "power_usage_mw": 4000,
        "max_clocks_mhz": {"graphics": 3105, "sm": 3105, "memory": 8001},
    })
}

/// One idle laptop GPU at [`DGPU`] reading `temperature_c`.
fn laptop(temperature_c: u32) -> Value {
    json!({"gpus": [gpu("00000000:01:00.0", "GPU-aaaaaaaa", temperature_c, 0)]})
}

/// The state of GPU `slot` in a snapshot.
fn state(snap: &Snapshot, slot: usize) -> Option<GpuState> {
    GpuState::from_raw(snap.gpus.get(slot)?.state)
}

/// Fails unless every GPU not sampled as ok carries nothing but its identity.
fn assert_no_stale_values(snap: &Snapshot) {
    for g in &snap.gpus {
        if g.state != GpuState::Ok as u32 {
            assert_eq!(
                g.valid & !IDENTITY,
                0,
                "GPU {} in state {} publishes values: {g:?}",
                g.index,
                g.state
            );
        }
    }
}

/// Waits for a consistent snapshot that satisfies `done`, checking every snapshot seen
/// on the way for stale values.
fn wait_snapshot(sb: &Sandbox, daemon: &Daemon, what: &str, done: impl Fn(&Snapshot) -> bool) {
    wait_for(what, daemon, || {
        let Ok(snap) = Segment::open(&sb.shm).and_then(|s| s.snapshot()) else {
            return false; // not created yet
        };
        assert_no_stale_values(&snap);
        snap.consistent && done(&snap)
    });
}

/// Writes `runtime_status` = `active` for `address`, then returns the first consistent
/// snapshot published by a tick that started after the write (generation `g0 + 2`,
/// where `g0` is the generation right after the write), checking all on the way.
fn wake_and_take_next_tick(sb: &Sandbox, daemon: &Daemon, address: &str) -> Snapshot {
    sb.set_runtime_pm(address, "active", "auto");
    let segment = sb.segment();
    let target = segment.generation() + 2;
    let mut found = None;
    wait_for("the tick after the wake", daemon, || {
        let snap = segment.snapshot().unwrap();
        assert_no_stale_values(&snap);
        if snap.consistent && snap.generation >= target {
            found = Some(snap);
        }
        found.is_some()
    });
    found.unwrap()
}

/// The daemon's calls file; empty when it never called NVML.
fn calls(sb: &Sandbox, daemon: &Daemon) -> BTreeMap<String, u64> {
    sb.nvml_call_file(daemon.pid()).unwrap_or_default()
}

#[test]
fn a_gpu_asleep_at_start_is_never_touched_and_is_reported_within_a_tick_of_waking() {
    let sb = Sandbox::new("pm-start");
    sb.write_scenario(&laptop(41));
    sb.add_sysfs_gpu(DGPU, "suspended", "auto");
    let daemon = sb.start_daemon("250ms");
    sb.wait_live(&daemon);
    sb.let_ticks_pass(&daemon, 3);

    assert_eq!(
        sb.nvml_call_file(daemon.pid()),
        None,
        "not a single NVML call (not even nvmlInit) while the only GPU sleeps"
    );
    let snap = sb.segment().snapshot().unwrap();
    assert_eq!(snap.status.state, gpupeek_shm::DaemonState::Live as u32);
    assert_eq!(state(&snap, 0), Some(GpuState::Suspended));
    assert_eq!(
        snap.gpus[0].valid,
        gpu_valid::PCI_BUS_ID,
        "only what sysfs knows"
    );
    assert_eq!(text::decode(&snap.gpus[0].pci_bus_id), "00000000:01:00.0");
    let out = sb.client(&["--no-header"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "[0] 00000000:01:00.0 | suspended\n");

    let snap = wake_and_take_next_tick(&sb, &daemon, DGPU);
    assert_eq!(state(&snap, 0), Some(GpuState::Ok), "{snap:?}");
    assert_eq!(snap.gpus[0].temp_gpu_c, 41);
    assert_eq!(
        text::decode(&snap.gpus[0].name),
        "NVIDIA GeForce RTX 4060 Laptop GPU"
    );
    assert_eq!(calls(&sb, &daemon)["open_handles"], 1);
}

#[test]
fn an_idle_gpu_is_released_makes_no_nvml_call_while_suspended_and_comes_back_fresh() {
    let sb = Sandbox::new("pm-cycle");
    sb.write_scenario(&laptop(41));
    sb.add_sysfs_gpu(DGPU, "active", "auto");
    // A long kernel autosuspend delay: the GPU stays "idle" until the test suspends it.
    let delay = sb
        .sysfs_root()
        .join("bus/pci/devices")
        .join(DGPU)
        .join("power/autosuspend_delay_ms");
    std::fs::write(delay, "60000\n").unwrap();
    let daemon = sb.start_daemon_with("250ms", &["--release-after", "1s"]);
    wait_snapshot(&sb, &daemon, "the GPU sampled", |s| {
        state(s, 0) == Some(GpuState::Ok) && s.gpus[0].temp_gpu_c == 41
    });

    // Idle for 1 s: NVML is released, the GPU is "idle" until the kernel suspends it.
    wait_snapshot(&sb, &daemon, "NVML released", |s| {
        state(s, 0) == Some(GpuState::Idle)
    });
    let released = calls(&sb, &daemon);
    assert_eq!(released["open_handles"], 0, "{released:?}");
    assert_eq!(released["nvmlShutdown"], 1, "{released:?}");
    let out = sb.client(&["--no-header"]);
    assert_eq!(
        stdout(&out),
        "[0] NVIDIA GeForce RTX 4060 Laptop GPU | idle\n",
        "{}",
        stderr(&out)
    );

    sb.set_runtime_pm(DGPU, "suspended", "auto");
    wait_snapshot(&sb, &daemon, "the GPU suspended", |s| {
        state(s, 0) == Some(GpuState::Suspended)
    });
    let asleep = calls(&sb, &daemon);
    sb.let_ticks_pass(&daemon, 4);
    assert_eq!(
        calls(&sb, &daemon),
        asleep,
        "no NVML call while the GPU is suspended"
    );
    assert_eq!(asleep["open_handles"], 0, "no NVML handle held");
    let doc: Value = serde_json::from_slice(&sb.client(&["--json"]).stdout).unwrap();
    assert_eq!(
        doc["gpus"][0],
        json!({
            "index": 0, "uuid": "GPU-aaaaaaaa", "name": "NVIDIA GeForce RTX 4060 Laptop GPU",
            "state": "suspended", "temperature.gpu": null, "fan.speed": null,
            "utilization.gpu": null, "utilization.enc": null, "utilization.dec": null,
            "power.draw": null, "enforced.power.limit": null, "memory.used": null,
            "memory.total": null, "processes": null,
            "verdict": null, "clock_event_reasons": null, "gpm": null,
        })
    );

    // Something else wakes it (and it got hot meanwhile): fresh values in the next tick.
    sb.write_scenario(&laptop(77));
    let snap = wake_and_take_next_tick(&sb, &daemon, DGPU);
    assert_eq!(state(&snap, 0), Some(GpuState::Ok), "{snap:?}");
    assert_eq!(
        snap.gpus[0].temp_gpu_c, 77,
        "current values, not the old ones"
    );
    assert!(
        daemon.log().contains("GPU 00000000:01:00.0 woke up"),
        "{}",
        daemon.log()
    );
}

#[test]
fn a_gpu_that_does_not_suspend_after_the_release_is_monitored_again() {
    let sb = Sandbox::new("pm-awake");
    sb.write_scenario(&laptop(41));
    sb.add_sysfs_gpu(DGPU, "active", "auto");
    let daemon = sb.start_daemon_with("100ms", &["--release-after", "200ms"]);
    wait_snapshot(&sb, &daemon, "NVML released", |s| {
        state(s, 0) == Some(GpuState::Idle)
    });
    // The GPU stays "active": after 200 ms (no autosuspend delay) the daemon gives up
    // waiting and samples it again.
    sb.write_scenario(&laptop(55));
    wait_snapshot(&sb, &daemon, "monitoring again", |s| {
        state(s, 0) == Some(GpuState::Ok) && s.gpus[0].temp_gpu_c == 55
    });
    assert!(
        daemon.log().contains("did not runtime-suspend"),
        "{}",
        daemon.log()
    );
    assert!(
        daemon.log().contains("next release after 400ms idle"),
        "{}",
        daemon.log()
    );
}

#[test]
fn runtime_pm_off_in_sysfs_means_nvml_is_never_released() {
    let sb = Sandbox::new("pm-on");
    sb.write_scenario(&laptop(41));
    sb.add_sysfs_gpu(DGPU, "active", "on");
    let daemon = sb.start_daemon_with("50ms", &["--release-after", "0s"]);
    sb.wait_live(&daemon);
    sb.let_ticks_pass(&daemon, 10);
    let snap = sb.segment().snapshot().unwrap();
    assert_eq!(state(&snap, 0), Some(GpuState::Ok));
    let calls = calls(&sb, &daemon);
    assert_eq!(calls["open_handles"], 1);
    assert_eq!(calls.get("nvmlShutdown"), None, "{calls:?}");
}

#[test]
fn of_two_gpus_the_suspended_one_gets_no_call_while_the_busy_one_is_sampled() {
    let sb = Sandbox::new("pm-two");
    sb.write_scenario(&json!({"gpus": [
        gpu("00000000:01:00.0", "GPU-aaaaaaaa", 60, 80),
        gpu("00000000:02:00.0", "GPU-bbbbbbbb", 35, 0),
    ]}));
    sb.add_sysfs_gpu(DGPU, "active", "auto");
    sb.add_sysfs_gpu(OTHER, "suspended", "auto");
    let daemon = sb.start_daemon_with("50ms", &["--release-after", "0s"]);
    sb.wait_live(&daemon);
    sb.let_ticks_pass(&daemon, 6);
    let snap = sb.segment().snapshot().unwrap();
    assert_eq!(state(&snap, 0), Some(GpuState::Ok));
    assert_eq!(snap.gpus[0].util_gpu_pct, 80);
    assert_eq!(state(&snap, 1), Some(GpuState::Suspended));
    assert_no_stale_values(&snap);
    let calls = calls(&sb, &daemon);
    assert_eq!(calls["suspended_gpu_calls"], 0, "{calls:?}");
    assert_eq!(calls["open_handles"], 1, "the busy GPU keeps NVML held");
    let out = sb.client(&["--no-header"]);
    let lines: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    // The name column is as wide as the longest name, GPU 0's.
    let width = "NVIDIA GeForce RTX 4060 Laptop GPU".len();
    assert_eq!(
        lines[1],
        format!("[1] {:width$} | suspended", "00000000:02:00.0")
    );

    // Woken by something else: sampled in the next tick, with a name now.
    let snap = wake_and_take_next_tick(&sb, &daemon, OTHER);
    assert_eq!(state(&snap, 1), Some(GpuState::Ok), "{snap:?}");
    assert_eq!(snap.gpus[1].temp_gpu_c, 35);
}

#[test]
fn with_no_runtime_pm_a_suspended_gpu_is_queried_as_before() {
    let sb = Sandbox::new("pm-off");
    sb.write_scenario(&laptop(41));
    sb.add_sysfs_gpu(DGPU, "suspended", "auto");
    let daemon = sb.start_daemon_with("50ms", &["--no-runtime-pm"]);
    sb.wait_live(&daemon);
    let snap = sb.segment().snapshot().unwrap();
    assert_eq!(state(&snap, 0), Some(GpuState::Ok));
    assert_eq!(snap.gpus[0].temp_gpu_c, 41);
    // The control for the test above: the fake does see calls on a suspended GPU.
    assert!(calls(&sb, &daemon)["suspended_gpu_calls"] > 0);
}

#[test]
fn unreadable_or_gpu_less_sysfs_falls_back_to_holding_nvml_and_says_so_once() {
    for (tag, break_sysfs) in [("pm-empty", false), ("pm-unreadable", true)] {
        let sb = Sandbox::new(tag);
        sb.write_scenario(&laptop(41));
        if break_sysfs {
            std::fs::remove_dir_all(sb.sysfs_root()).unwrap();
        }
        let daemon = sb.start_daemon_with("50ms", &["--release-after", "0s"]);
        sb.wait_live(&daemon);
        sb.let_ticks_pass(&daemon, 6);
        let snap = sb.segment().snapshot().unwrap();
        assert_eq!(state(&snap, 0), Some(GpuState::Ok), "{tag}");
        assert_eq!(calls(&sb, &daemon)["open_handles"], 1, "{tag}");
        let log = daemon.log();
        let said = if break_sysfs {
            "runtime PM awareness off: cannot read"
        } else {
            "no NVIDIA GPU on the nvidia driver"
        };
        assert_eq!(log.matches(said).count(), 1, "{tag}: {log}");
    }
}

#[test]
fn the_daemon_help_documents_the_laptop_policy_and_its_flags() {
    let mut cmd = std::process::Command::new(&gpupeek_e2e::bins().daemon);
    cmd.arg("--help");
    let out = gpupeek_e2e::run_with_watchdog(cmd);
    let help = stdout(&out);
    for needle in [
        "--sysfs-root",
        "--release-after",
        "--no-runtime-pm",
        "Runtime power management",
    ] {
        assert!(help.contains(needle), "{needle} missing from:\n{help}");
    }
    // Bad durations are usage errors.
    let mut cmd = std::process::Command::new(&gpupeek_e2e::bins().daemon);
    cmd.args(["--release-after", "2h"]);
    assert_eq!(gpupeek_e2e::run_with_watchdog(cmd).status.code(), Some(2));
}
