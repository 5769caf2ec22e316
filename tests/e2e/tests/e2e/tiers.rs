//! The daemon's two tiers: cheap GPU fields every tick, process lists (and ECC) only
//! every `--process-interval`, counted through the fake NVML's calls file; the process
//! table head saying when its processes were sampled; and a GPU that sleeps, is lost,
//! comes back or is no longer counted changing the table at once rather than a process
//! interval later.

use std::collections::BTreeMap;

use gpupeek_e2e::{wait_for, Daemon, Sandbox};
use gpupeek_shm::{GpuState, Snapshot};
use serde_json::{json, Value};

const LIST: &str = "nvmlDeviceGetRunningProcessDetailList";
const PER_TICK: &str = "nvmlDeviceGetUtilizationRates";
/// Read once per slow tick and on no other tier (the ECC totals, which the slow tick
/// also reads, are read by the 30 s near-static tier too, for their aggregate counts).
const SLOW: &str = "nvmlDeviceGetPerformanceState";
const MS: u64 = 1_000_000;

/// One GPU per entry of `procs`, each running those pids (real or not: `/proc` details
/// are not what these tests look at).
fn scenario(procs: &[&[u32]]) -> Value {
    let gpus: Vec<Value> = procs
        .iter()
        .enumerate()
        .map(|(i, pids)| {
            let list: Vec<Value> = pids
                .iter()
                .map(|pid| json!({"pid": pid, "used_gpu_memory_bytes": 1u64 << 30}))
                .collect();
            json!({
                "name": "NVIDIA H100 80GB HBM3", "uuid": format!("GPU-{i:08}"),
                "pci_bus_id": format!("00000000:{:02x}:00.0", 0x18 + i),
                "memory_total_bytes": 80u64 << 30, "memory_used_bytes": 2u64 << 30,
                "utilization_gpu_pct": 50, "ecc_corrected_volatile": 3,
                "processes": list
            })
        })
        .collect();
    json!({ "gpus": gpus })
}

fn calls(sb: &Sandbox, daemon: &Daemon) -> BTreeMap<String, u64> {
    sb.nvml_call_file(daemon.pid()).unwrap_or_default()
}

/// The first consistent snapshot satisfying `done`.
fn pids_on(snap: &Snapshot, gpu: u32) -> Vec<u32> {
    let mut pids: Vec<u32> = snap
        .processes
        .iter()
        .filter(|p| p.gpu_index == gpu)
        .map(|p| p.pid)
        .collect();
    pids.sort_unstable();
    pids
}

/// `(ticks, slow ticks, process-list calls)` once `ticks` more GPU samples have been
/// taken: every tick reads the utilisation, every slow tick the P-state.
fn counts_after(sb: &Sandbox, daemon: &Daemon, ticks: u64) -> [u64; 3] {
    let start = calls(sb, daemon).get(PER_TICK).copied().unwrap_or(0);
    let mut got = [0; 3];
    wait_for("ticks", daemon, || {
        let c = calls(sb, daemon);
        let count = |f| c.get(f).copied().unwrap_or(0);
        got = [count(PER_TICK), count(SLOW), count(LIST)];
        got[0] >= start + ticks
    });
    got
}

#[test]
fn at_10ms_ticks_processes_and_ecc_are_read_about_every_2_s_not_every_tick() {
    let sb = Sandbox::new("tier-rate");
    sb.write_scenario(&scenario(&[&[4242]]));
    let started = std::time::Instant::now();
    let daemon = sb.start_daemon("10ms");
    sb.wait_live(&daemon);
    let [ticks, slow, lists] = counts_after(&sb, &daemon, 100);
    let elapsed_s = started.elapsed().as_secs();
    // However slow the machine, no more than one slow tick every 2 s (and the first).
    assert!(
        (1..=elapsed_s / 2 + 1).contains(&slow),
        "{slow} slow ticks of {ticks} in {elapsed_s} s"
    );
    assert!(lists >= slow, "the process lists are read on slow ticks");
    assert!(
        ticks >= 100 && slow < ticks / 2,
        "{slow} slow ticks of {ticks}"
    );
    // And the table and the record kept their contents on every tick in between.
    let snap = sb.segment().snapshot().unwrap();
    assert_eq!(pids_on(&snap, 0), [4242]);
    assert_eq!(snap.gpus[0].process_count, 1);
    assert_eq!(snap.gpus[0].ecc_corrected_volatile_count, 3);
    assert_eq!(snap.proc_head.period_ns, 2000 * MS);
}

#[test]
fn with_the_process_interval_at_the_tick_every_tick_lists_processes() {
    let sb = Sandbox::new("tier-every");
    sb.write_scenario(&scenario(&[&[4242]]));
    let daemon = sb.start_daemon_with("10ms", &["--process-interval", "10ms"]);
    sb.wait_live(&daemon);
    let [ticks, slow, _] = counts_after(&sb, &daemon, 50);
    // The calls file is read between two calls: the slow reads of the last tick may be
    // just behind the utilisation read that ends the count.
    assert!(ticks - slow <= 1, "{slow} slow ticks of {ticks}");
    let snap = sb.segment().snapshot().unwrap();
    assert_eq!(snap.proc_head.period_ns, 10 * MS);
}

#[test]
fn a_process_interval_shorter_than_the_tick_is_the_tick() {
    let sb = Sandbox::new("tier-short");
    sb.write_scenario(&scenario(&[&[4242]]));
    let daemon = sb.start_daemon_with("200ms", &["--process-interval", "10ms"]);
    sb.wait_live(&daemon);
    assert_eq!(
        sb.segment().snapshot().unwrap().proc_head.period_ns,
        200 * MS
    );
}

#[test]
fn a_new_process_is_in_the_first_table_sampled_after_it_started() {
    let sb = Sandbox::new("tier-new");
    sb.write_scenario(&scenario(&[&[]]));
    let daemon = sb.start_daemon_with("10ms", &["--process-interval", "300ms"]);
    sb.wait_live(&daemon);
    let first = sb.segment().snapshot().unwrap().proc_head;
    assert_eq!(first.period_ns, 300 * MS);
    assert_ne!(first.sample_mono_ns, 0);
    // Fast ticks keep the table and its sample time: wait for the next slow tick.
    let next = sb.snapshot_when(&daemon, "a slow tick", |s| {
        s.proc_head.sample_mono_ns != first.sample_mono_ns
    });
    let c = calls(&sb, &daemon);
    assert!(c[PER_TICK] > c[SLOW], "not every tick: {c:?}");
    assert!(
        next.proc_head.sample_mono_ns - first.sample_mono_ns >= 150 * MS,
        "slow ticks come a process interval apart (within half a tick's slack)"
    );

    let started = gpupeek_shm::mono_now_ns();
    sb.write_scenario(&scenario(&[&[777]]));
    let snap = sb.snapshot_when(&daemon, "a table sampled after the start", |s| {
        s.proc_head.sample_mono_ns > started
    });
    assert_eq!(pids_on(&snap, 0), [777], "{:?}", snap.proc_head);
    assert_eq!(snap.gpus[0].process_count, 1);
}

#[test]
fn a_gpu_that_sleeps_or_is_lost_leaves_the_table_at_once_and_comes_back_at_once() {
    let sb = Sandbox::new("tier-pm");
    const GPU1: &str = "0000:19:00.0";
    sb.add_sysfs_gpu("0000:18:00.0", "active", "on");
    sb.add_sysfs_gpu(GPU1, "active", "auto");
    let mut doc = scenario(&[&[100], &[200]]);
    sb.write_scenario(&doc);
    // A process interval of an hour: only the first tick, and the GPU changes below,
    // can rewrite the table.
    let daemon = sb.start_daemon_with(
        "20ms",
        &["--process-interval", "60m", "--release-after", "60m"],
    );
    sb.wait_live(&daemon);
    let snap = sb.snapshot_when(&daemon, "both GPUs' processes", |s| {
        pids_on(s, 0) == [100] && pids_on(s, 1) == [200]
    });
    assert_eq!(snap.proc_head.period_ns, 3_600_000 * MS);

    sb.set_runtime_pm(GPU1, "suspended", "auto");
    let snap = sb.snapshot_when(&daemon, "GPU 1 asleep", |s| {
        s.gpus[1].state == GpuState::Suspended as u32
    });
    assert_eq!(
        pids_on(&snap, 1),
        Vec::<u32>::new(),
        "gone in the same tick"
    );
    assert_eq!(pids_on(&snap, 0), [100], "GPU 0's stay");

    // GPU 1 wakes with a new process: listed in the tick after the one that found it up.
    doc["gpus"][1]["processes"] = json!([{"pid": 201, "used_gpu_memory_bytes": 1}]);
    sb.write_scenario(&doc);
    sb.set_runtime_pm(GPU1, "active", "auto");
    sb.snapshot_when(&daemon, "GPU 1's new process", |s| {
        pids_on(s, 1) == [201] && s.gpus[1].process_count == 1
    });

    doc["gpus"][1]["errors"] = json!({"*": "GPU_IS_LOST"});
    sb.write_scenario(&doc);
    let snap = sb.snapshot_when(&daemon, "GPU 1 lost", |s| {
        s.gpus[1].state == GpuState::Lost as u32
    });
    assert_eq!(
        pids_on(&snap, 1),
        Vec::<u32>::new(),
        "gone in the same tick"
    );
    assert_eq!(pids_on(&snap, 0), [100]);
}

#[test]
fn a_gpu_the_driver_no_longer_counts_takes_its_processes_with_it_at_once() {
    let sb = Sandbox::new("tier-shrink");
    let mut doc = scenario(&[&[100], &[200]]);
    sb.write_scenario(&doc);
    // An hour between process samples: only the GPU count can clear GPU 1's row.
    let daemon = sb.start_daemon_with("20ms", &["--process-interval", "60m"]);
    sb.wait_live(&daemon);
    sb.snapshot_when(&daemon, "both GPUs' processes", |s| {
        pids_on(s, 0) == [100] && pids_on(s, 1) == [200]
    });

    doc["gpus"].as_array_mut().unwrap().truncate(1);
    sb.write_scenario(&doc);
    let snap = sb.snapshot_when(&daemon, "one GPU counted", |s| s.status.gpu_count == 1);
    assert_eq!(
        pids_on(&snap, 1),
        Vec::<u32>::new(),
        "gone in the tick that counted one GPU"
    );
    assert_eq!(pids_on(&snap, 0), [100], "GPU 0's stay");
}

#[test]
fn json_and_metrics_say_how_old_the_process_lists_are() {
    let sb = Sandbox::new("tier-age");
    sb.write_scenario(&scenario(&[&[4242]]));
    // Processes are sampled once, at the first tick; the GPU values keep coming.
    let daemon = sb.start_daemon_with("20ms", &["--process-interval", "60m"]);
    sb.wait_live(&daemon);
    let first = sb.snapshot_when(&daemon, "the process", |s| pids_on(s, 0) == [4242]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    sb.let_ticks_pass(&daemon, 2);
    let later = sb.segment().snapshot().unwrap();
    assert_eq!(
        later.proc_head.sample_mono_ns,
        first.proc_head.sample_mono_ns
    );

    let json: Value = serde_json::from_str(&gpupeek_e2e::stdout(&sb.client(&["--json"]))).unwrap();
    let age_ms = json["processes_age_ms"].as_u64().expect("processes_age_ms");
    assert!(
        age_ms >= 300,
        "{age_ms} ms, sampled before the 300 ms sleep"
    );
    assert_eq!(json["gpus"][0]["processes"][0]["pid"], 4242);

    let metrics = gpupeek_e2e::stdout(&sb.client_env(&["metrics"], &[]));
    let value = |name: &str| -> f64 {
        let line = metrics
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in:\n{metrics}"));
        line[name.len() + 1..].parse().unwrap()
    };
    assert!(value("gpupeek_process_sample_age_seconds") >= 0.3);
    assert_eq!(value("gpupeek_process_sampling_period_seconds"), 3600.0);
}

#[test]
fn the_table_is_as_old_as_its_oldest_gpus_processes() {
    let sb = Sandbox::new("tier-late");
    let mut doc = scenario(&[&[4242], &[4343]]);
    // Each GPU's slow job spends 2 × 300 ms in its process lists (compute and graphics),
    // so the processes it publishes were sampled at least 600 ms before.
    doc["latency_us_by_function"] = json!({ LIST: 300_000 });
    sb.write_scenario(&doc);
    let daemon = sb.start_daemon_with("50ms", &["--process-interval", "50ms"]);
    sb.wait_live(&daemon);
    sb.snapshot_when(&daemon, "both GPUs' processes", |s| {
        pids_on(s, 0) == [4242] && pids_on(s, 1) == [4343]
    });
    sb.let_ticks_pass(&daemon, 5);
    let snap = sb.segment().snapshot().unwrap();
    let head = snap.proc_head.sample_mono_ns;
    let age = snap.status.heartbeat_mono_ns - head;
    // The head says when the processes were sampled, not when the tick that published
    // them started (a 50 ms tick's start would be at most about a period old).
    assert!(age >= 500 * MS, "the table claims to be {age} ns old");
    for g in &snap.gpus {
        assert!(head <= g.sample_mono_ns, "{head} > {}", g.sample_mono_ns);
    }
}
