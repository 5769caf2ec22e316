//! Xid errors, as NVML's events deliver them: gpupeekd registers every GPU for Xid events
//! on a thread of its own and counts what comes per GPU and per Xid, published for
//! `gpupeek metrics` as `gpupeek_xid_errors_total` with NVIDIA's recommended action.
//!
//! The fake NVML delivers the Xids a test appends to a GPU's `xids` after the daemon
//! registered (what happened before is never delivered, as on a real driver). A GPU on
//! which events are not supported has no Xid series at all (not 0); an event wait that
//! never returns stops nothing else; a driver older than R450 (no `nvmlEventSetWait_v2`)
//! is waited on through `nvmlEventSetWait`; a release for a GPU reset frees the event set
//! and a resume creates a new one.

use std::collections::BTreeMap;

use gpupeek_e2e::{profiles, stdout, wait_for, Daemon, Sandbox};
use gpupeek_shm::layout::gpu_valid3 as v3;
use nix::sys::signal::Signal;
use serde_json::{json, Value};

/// `nvmlEventTypeSingleBitEccError | DoubleBitEccError | PState | XidCriticalError`.
const EVENTS: u64 = 0xF;

fn gpu(i: usize, events: bool) -> Value {
    let mut g = json!({
        "name": "NVIDIA H100 80GB HBM3", "uuid": format!("GPU-{i:08}"),
        "pci_bus_id": format!("00000000:{:02x}:00.0", 0x18 + i),
        "memory_total_bytes": 80u64 << 30, "memory_used_bytes": 2u64 << 30,
        "utilization_gpu_pct": 40, "utilization_memory_pct": 5,
        "temperature_c": 50, "power_usage_mw": 200_000,
    });
    if events {
        g["supported_event_types"] = json!(EVENTS);
    }
    g
}

/// GPUs 0 and 1 with events, GPU 2 (a vGPU guest, say) without.
fn scenario() -> Value {
    json!({"gpus": [gpu(0, true), gpu(1, true), gpu(2, false)]})
}

fn calls(sb: &Sandbox, daemon: &Daemon) -> BTreeMap<String, u64> {
    sb.nvml_call_file(daemon.pid()).unwrap_or_default()
}

fn count(calls: &BTreeMap<String, u64>, name: &str) -> u64 {
    calls.get(name).copied().unwrap_or(0)
}

/// Waits until the daemon has asked `asked` times in all which events a GPU supports
/// and made `registered` registrations in all (the fake counts a call once it has
/// returned): an Xid written to the scenario after this is one the registered GPUs
/// have not seen yet. Counting the asks alone raced the last GPU's registration, which
/// takes the Xids already in the scenario as its history.
fn wait_registered(sb: &Sandbox, daemon: &Daemon, asked: u64, registered: u64) {
    wait_for("the event registrations", daemon, || {
        let c = calls(sb, daemon);
        count(&c, "nvmlDeviceGetSupportedEventTypes") >= asked
            && count(&c, "nvmlDeviceRegisterEvents") >= registered
    });
}

fn metrics(sb: &Sandbox) -> String {
    let out = sb.client_env(&["metrics"], &[]);
    assert_eq!(out.status.code(), Some(0));
    stdout(&out)
}

/// The `gpupeek_xid_errors_total` samples: labels after the GPU's identity → value.
fn xid_series(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("gpupeek_xid_errors_total{"))
        .filter_map(|l| {
            let (labels, value) = l.rsplit_once("} ")?;
            let gpu = labels.split(',').next()?;
            let rest: Vec<&str> = labels
                .split(',')
                .filter(|kv| kv.starts_with("xid=") || kv.starts_with("action="))
                .collect();
            Some((format!("{gpu},{}", rest.join(",")), value.parse().ok()?))
        })
        .collect()
}

fn wait_metrics(sb: &Sandbox, daemon: &Daemon, what: &str, done: impl Fn(&str) -> bool) -> String {
    let mut text = String::new();
    wait_for(what, daemon, || {
        text = metrics(sb);
        done(&text)
    });
    text
}

#[test]
fn xids_are_counted_per_gpu_and_code_with_nvidias_action_and_none_for_a_gpu_without_events() {
    let sb = Sandbox::new("xid-count");
    let mut s = scenario();
    // An Xid from before the daemon started is in the history: it is not delivered.
    s["gpus"][0]["xids"] = json!([{"code": 48}]);
    sb.write_scenario(&s);
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    wait_registered(&sb, &daemon, 3, 2);

    s["gpus"][0]["xids"] = json!([{"code": 48}, {"code": 79}]);
    s["gpus"][1]["xids"] = json!([{"code": 13}, {"code": 31}, {"code": 13}]);
    sb.write_scenario(&s);
    let text = wait_metrics(&sb, &daemon, "the Xids in the metrics", |t| {
        xid_series(t).values().sum::<u64>() == 4
    });
    let series = xid_series(&text);
    let want: BTreeMap<String, u64> = [
        ("gpu=\"0\",xid=\"79\",action=\"RESTART_BM\"", 1),
        ("gpu=\"1\",xid=\"13\",action=\"RESTART_APP\"", 2),
        ("gpu=\"1\",xid=\"31\",action=\"RESTART_APP\"", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(series, want, "{text}");
    assert!(
        text.contains("# TYPE gpupeek_xid_errors_total counter"),
        "{text}"
    );
    // GPU 2 cannot tell: no series, not a 0.
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("gpupeek_xid") && l.contains("gpu=\"2\"")),
        "{text}"
    );
    // The last Xid, as dcgm-exporter's DCGM_FI_DEV_XID_ERRORS gives it.
    let dcgm = stdout(&sb.client_env(&["metrics", "--names", "dcgm"], &[]));
    let last: Vec<&str> = dcgm
        .lines()
        .filter(|l| l.starts_with("DCGM_FI_DEV_XID_ERRORS{"))
        .collect();
    assert_eq!(last.len(), 2, "{dcgm}");
    assert!(
        last[0].contains("gpu=\"0\"") && last[0].ends_with(" 79"),
        "{dcgm}"
    );
    assert!(
        last[1].contains("gpu=\"1\"") && last[1].ends_with(" 13"),
        "{dcgm}"
    );
    // gpustat's JSON is gpustat's: no Xid key joins it.
    let json = stdout(&sb.client(&["--json"]));
    assert!(!json.to_lowercase().contains("xid"), "{json}");
    // The segment: counts by number, the last one, no bits for GPU 2.
    let snap = sb.segment().snapshot().unwrap();
    let g1 = &snap.gpus[1];
    assert_eq!(
        g1.valid3 & (v3::XID_ERRORS | v3::XID_LAST),
        v3::XID_ERRORS | v3::XID_LAST
    );
    assert_eq!((g1.xid_errors_total, g1.xid_last_code), (3, 13));
    assert_eq!(
        (&g1.xid_codes[..3], &g1.xid_counts[..2]),
        (&[13, 31, 0][..], &[2, 1][..])
    );
    assert_eq!(g1.valid3 & v3::XID_LAST_INSTANCE, 0);
    assert_eq!(snap.gpus[2].valid3 & (v3::XID_ERRORS | v3::XID_LAST), 0);
    // A GPU that falls off the bus keeps its Xid series: the Xid says why it is gone.
    s["gpus"][0]["errors"] = json!({"*": "GPU_IS_LOST"});
    sb.write_scenario(&s);
    let text = wait_metrics(&sb, &daemon, "GPU 0 lost", |t| {
        t.contains("gpupeek_gpu_state{gpu=\"0\"")
            && t.lines().any(|l| {
                l.starts_with("gpupeek_gpu_state{gpu=\"0\"") && l.contains("state=\"lost\"} 1")
            })
    });
    assert_eq!(
        xid_series(&text).get("gpu=\"0\",xid=\"79\",action=\"RESTART_BM\""),
        Some(&1),
        "{text}"
    );
}

#[test]
fn an_event_wait_that_never_returns_stops_no_publishing_and_no_stop() {
    let sb = Sandbox::new("xid-hang");
    let mut s = scenario();
    s["hang"] = json!(["nvmlEventSetWait_v2"]);
    sb.write_scenario(&s);
    let mut daemon = sb.start_daemon_with("50ms", &["--nvml-timeout", "1s"]);
    sb.wait_live(&daemon);
    let first = sb.wait_sampled(&daemon);
    // Values still change and the heartbeat goes on while the wait is stuck.
    s["gpus"][1]["utilization_gpu_pct"] = json!(77);
    sb.write_scenario(&s);
    let later = sb.snapshot_when(&daemon, "GPU 1's new utilisation", |snap| {
        snap.gpus[1].util_gpu_pct == 77
            && snap.status.heartbeat_mono_ns > first.status.heartbeat_mono_ns + 300_000_000
    });
    assert!(later
        .gpus
        .iter()
        .all(|g| g.state == gpupeek_shm::GpuState::Ok as u32));
    // A stop does not wait for the stuck call either.
    daemon.signal(Signal::SIGTERM);
    let code = daemon.wait_exit_within(std::time::Duration::from_secs(10));
    assert_eq!(code, Some(0), "{}", daemon.log());
}

#[test]
fn a_driver_before_r450_is_waited_on_without_the_v2_entry_point() {
    let sb = Sandbox::new("xid-r440");
    sb.use_driver(profiles::R440);
    let mut s = scenario();
    s["driver_version"] = json!(profiles::R440.driver_version);
    sb.write_scenario(&s);
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    wait_registered(&sb, &daemon, 3, 2);
    s["gpus"][1]["xids"] = json!([{"code": 94}]);
    sb.write_scenario(&s);
    let text = wait_metrics(&sb, &daemon, "the Xid", |t| !xid_series(t).is_empty());
    assert_eq!(
        xid_series(&text),
        [("gpu=\"1\",xid=\"94\",action=\"RESTART_APP\"".to_owned(), 1)].into(),
        "{text}"
    );
    assert!(count(&calls(&sb, &daemon), "nvmlEventSetWait") > 0);
}

#[test]
fn a_release_frees_the_event_set_and_a_resume_counts_on_in_a_new_one() {
    let sb = Sandbox::new("xid-release");
    let mut s = scenario();
    sb.write_scenario(&s);
    let mut daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    wait_registered(&sb, &daemon, 3, 2);
    s["gpus"][0]["xids"] = json!([{"code": 94, "gpu_instance_id": 1, "compute_instance_id": 0}]);
    sb.write_scenario(&s);
    wait_metrics(&sb, &daemon, "the first Xid", |t| xid_series(t).len() == 1);
    // An Xid of a MIG instance counts at its GPU, with the instance's ids.
    let g0 = sb.segment().snapshot().unwrap().gpus[0];
    assert_ne!(g0.valid3 & v3::XID_LAST_INSTANCE, 0);
    assert_eq!(
        (g0.xid_last_gpu_instance_id, g0.xid_last_compute_instance_id),
        (1, 0)
    );

    daemon.signal(Signal::SIGUSR1);
    wait_for("the set freed", &daemon, || {
        let c = calls(&sb, &daemon);
        count(&c, "nvmlEventSetFree") == 1 && c.get("open_handles") == Some(&0)
    });
    // What happens while the daemon holds no NVML is not delivered later.
    s["gpus"][0]["xids"] = json!([
        {"code": 94, "gpu_instance_id": 1, "compute_instance_id": 0}, {"code": 63}
    ]);
    sb.write_scenario(&s);
    daemon.signal(Signal::SIGUSR2);
    wait_for("a new set", &daemon, || {
        count(&calls(&sb, &daemon), "nvmlEventSetCreate") == 2
    });
    wait_registered(&sb, &daemon, 6, 4);
    s["gpus"][0]["xids"] = json!([
        {"code": 94, "gpu_instance_id": 1, "compute_instance_id": 0}, {"code": 63}, {"code": 94}
    ]);
    sb.write_scenario(&s);
    let text = wait_metrics(&sb, &daemon, "the count going on", |t| {
        xid_series(t).values().sum::<u64>() == 2
    });
    assert_eq!(
        xid_series(&text),
        [("gpu=\"0\",xid=\"94\",action=\"RESTART_APP\"".to_owned(), 2)].into(),
        "{text}"
    );
    // A clean stop frees the set it holds.
    let pid = daemon.pid();
    daemon.signal(Signal::SIGTERM);
    assert_eq!(daemon.wait_exit(), Some(0), "{}", daemon.log());
    let c = sb.nvml_call_file(pid).unwrap();
    assert_eq!(count(&c, "nvmlEventSetFree"), 2, "{c:?}");
}

/// An Xid belongs to its GPU, not to an NVML index: when a GPU is gone after a reset
/// (the Xid 79 case: it fell off the bus) the GPUs after it move down an index, and
/// each keeps its own counts; the gone GPU's go with it, to no other GPU.
#[test]
fn counts_follow_the_gpus_uuid_when_a_gone_gpu_moves_the_others_down_an_index() {
    let sb = Sandbox::new("xid-uuid");
    let mut s = json!({"gpus": [gpu(0, true), gpu(1, true)]});
    sb.write_scenario(&s);
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    wait_registered(&sb, &daemon, 2, 2);
    s["gpus"][0]["xids"] = json!([{"code": 79}]);
    sb.write_scenario(&s);
    wait_metrics(&sb, &daemon, "GPU 0's Xid 79", |t| xid_series(t).len() == 1);

    // Released for a reset, GPU 0 does not come back: GPU-00000001 is NVML's index 0.
    daemon.signal(Signal::SIGUSR1);
    wait_for("the release", &daemon, || {
        calls(&sb, &daemon).get("open_handles") == Some(&0)
    });
    let s = json!({"gpus": [gpu(1, true)]});
    sb.write_scenario(&s);
    daemon.signal(Signal::SIGUSR2);
    wait_registered(&sb, &daemon, 3, 3);
    sb.let_ticks_pass(&daemon, 3);
    let snap = sb.segment().snapshot().unwrap();
    let moved = snap
        .gpus
        .iter()
        .find(|g| gpupeek_shm::text::decode(&g.uuid) == "GPU-00000001")
        .expect("GPU-00000001 is published");
    assert_ne!(moved.valid3 & v3::XID_ERRORS, 0, "registered, so counted");
    assert_eq!(
        (moved.xid_errors_total, moved.xid_last_code),
        (0, 0),
        "GPU-00000001 had no Xid: {:?}",
        snap.gpus
            .iter()
            .map(|g| (gpupeek_shm::text::decode(&g.uuid), g.xid_errors_total))
            .collect::<Vec<_>>()
    );
}

/// A GPU that NVML counts only after the session started (the count is read again each
/// tick) is registered for Xid events once it is sampled, as the first GPUs were.
#[test]
fn a_gpu_counted_after_the_session_started_has_its_xids_counted() {
    let sb = Sandbox::new("xid-later");
    let mut s = json!({"gpus": [gpu(0, true)]});
    sb.write_scenario(&s);
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    wait_registered(&sb, &daemon, 1, 1);
    s["gpus"] = json!([gpu(0, true), gpu(1, true)]);
    sb.write_scenario(&s);
    wait_for("GPU 1 published", &daemon, || {
        sb.segment()
            .snapshot()
            .is_ok_and(|snap| snap.gpus.len() == 2)
    });
    wait_registered(&sb, &daemon, 2, 2);
    s["gpus"][1]["xids"] = json!([{"code": 48}]);
    sb.write_scenario(&s);
    let text = wait_metrics(&sb, &daemon, "GPU 1's Xid 48", |t| {
        !xid_series(t).is_empty()
    });
    let series = xid_series(&text);
    assert_eq!(
        series.keys().collect::<Vec<_>>(),
        ["gpu=\"1\",xid=\"48\",action=\"WORKFLOW_XID_48\""],
        "{text}"
    );
}

/// The voluntary context switches of gpupeekd's `nvml-events` thread so far.
fn events_thread_switches(pid: u32) -> u64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    let thread = tasks
        .filter_map(Result::ok)
        .find(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "nvml-events")
        })
        .expect("an nvml-events thread");
    let status = std::fs::read_to_string(thread.path().join("status")).unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .expect("voluntary_ctxt_switches");
    line.trim().parse().unwrap()
}

/// With no GPU to wait on (none has Xid events: a vGPU guest, a container), the events
/// thread makes no call and does not wake up (it used to, twice a second); a GPU that
/// comes later with events wakes it, and its Xids are counted.
#[test]
fn with_no_gpu_to_wait_on_the_events_thread_sleeps_until_one_comes() {
    let sb = Sandbox::new("xid-none");
    let mut s = json!({"gpus": [gpu(0, false)]});
    sb.write_scenario(&s);
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    wait_registered(&sb, &daemon, 1, 0);
    let before = events_thread_switches(daemon.pid());
    std::thread::sleep(std::time::Duration::from_secs(2));
    let woken = events_thread_switches(daemon.pid()) - before;
    assert!(woken <= 1, "the events thread woke {woken} times in 2 s");

    s["gpus"] = json!([gpu(0, false), gpu(1, true)]);
    sb.write_scenario(&s);
    wait_registered(&sb, &daemon, 2, 1);
    s["gpus"][1]["xids"] = json!([{"code": 48}]);
    sb.write_scenario(&s);
    let text = wait_metrics(&sb, &daemon, "GPU 1's Xid 48", |t| {
        !xid_series(t).is_empty()
    });
    assert_eq!(
        xid_series(&text).keys().collect::<Vec<_>>(),
        ["gpu=\"1\",xid=\"48\",action=\"WORKFLOW_XID_48\""],
        "{text}"
    );
}
