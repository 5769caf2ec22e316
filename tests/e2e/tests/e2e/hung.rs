//! A driver call that never returns (a GPU after an Xid, a driver stuck in D state), made
//! by the fake NVML's `hang` lists until the test rewrites the scenario: the GPU is
//! published as "not responding" while the other GPUs and the heartbeat go on, logged
//! once, and recovers when the call returns. Also `gpupeekd --release` / `--resume`,
//! an operator letting the daemon give NVML up for a GPU reset and take it back.

use std::process::Command;

use gpupeek_e2e::{bins, run_with_watchdog, stderr, stdout, wait_for, Sandbox};
use gpupeek_shm::{DaemonState, GpuState, Liveness, Snapshot};
use serde_json::{json, Value};

const GPUS: usize = 3;

fn scenario() -> Value {
    let gpus: Vec<Value> = (0..GPUS)
        .map(|i| {
            json!({
                "name": "NVIDIA H100 80GB HBM3", "uuid": format!("GPU-{i:08}"),
                "pci_bus_id": format!("00000000:{:02x}:00.0", 0x18 + i),
                "memory_total_bytes": 80u64 << 30, "memory_used_bytes": 2u64 << 30,
                "utilization_gpu_pct": 40 + i, "utilization_memory_pct": 5,
                "temperature_c": 50, "power_usage_mw": 200_000,
            })
        })
        .collect();
    json!({ "gpus": gpus })
}

/// The scenario with GPU `gpu` hanging in `function`.
fn hanging(gpu: usize, function: &str) -> Value {
    let mut s = scenario();
    s["gpus"][gpu]["hang"] = json!([function]);
    s
}

fn state(snap: &Snapshot, slot: usize) -> Option<GpuState> {
    snap.gpus
        .get(slot)
        .and_then(|g| GpuState::from_raw(g.state))
}

fn count(log: &str, needle: &str) -> usize {
    log.lines().filter(|l| l.contains(needle)).count()
}

#[test]
fn a_hung_call_on_one_gpu_leaves_the_others_and_the_heartbeat_going_then_recovers() {
    let sb = Sandbox::new("hung-gpu");
    sb.write_scenario(&scenario());
    // 1 s, not less: on a loaded 2-core CI machine running the e2e suite's daemons side by
    // side, a healthy GPU's job has been seen to take 0.3 s, which the log check below
    // would call a hang.
    let daemon = sb.start_daemon_with("50ms", &["--nvml-timeout", "1s"]);
    sb.wait_live(&daemon);
    // The identity it keeps is the one its first job read: let that job answer first.
    sb.wait_sampled(&daemon);

    sb.write_scenario(&hanging(1, "nvmlDeviceGetUtilizationRates"));
    let hung = sb.snapshot_when(&daemon, "GPU 1 not responding", |s| {
        state(s, 1) == Some(GpuState::NotResponding)
    });
    // The hung GPU keeps its identity and shows no value as current.
    let g1 = &hung.gpus[1];
    assert_eq!(gpupeek_shm::text::decode(&g1.uuid), "GPU-00000001");
    assert_eq!(g1.valid & gpupeek_shm::layout::gpu_valid::UTILIZATION, 0);
    // The other GPUs and the heartbeat keep moving while the call stays stuck.
    let later = sb.snapshot_when(&daemon, "newer samples of GPUs 0 and 2", |s| {
        [0, 2].iter().all(|&i| {
            state(s, i) == Some(GpuState::Ok)
                && s.gpus[i].sample_mono_ns > hung.gpus[i].sample_mono_ns + 200_000_000
        }) && s.status.heartbeat_mono_ns > hung.status.heartbeat_mono_ns + 200_000_000
    });
    assert_eq!(state(&later, 1), Some(GpuState::NotResponding));
    assert_eq!(later.liveness(gpupeek_shm::mono_now_ns()), Liveness::Live);
    assert_eq!(later.status.state, DaemonState::Live as u32);

    // Readers say so: the table names it, JSON gives its state, the exit status is 0
    // (the daemon is fine; one GPU is not).
    let out = sb.client(&["--no-header"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let table = stdout(&out);
    let line1 = table.lines().nth(1).unwrap_or_default();
    assert!(
        line1.starts_with("[1]") && line1.contains("not responding"),
        "{table}"
    );
    assert!(table.lines().next().unwrap().contains(" 40 %"), "{table}");

    // Released: the GPU answers again and is sampled as before.
    sb.write_scenario(&scenario());
    sb.snapshot_when(&daemon, "GPU 1 back", |s| {
        state(s, 1) == Some(GpuState::Ok) && s.gpus[1].util_gpu_pct == 41
    });
    let log = daemon.log();
    assert_eq!(
        count(&log, "GPU 1: an NVML call has not returned"),
        1,
        "{log}"
    );
    assert_eq!(count(&log, "GPU 1: the driver answers again"), 1, "{log}");
    assert_eq!(count(&log, "GPU 0:") + count(&log, "GPU 2:"), 0, "{log}");
}

/// A GPU whose identity never comes (here its minor number, read once with it) is not
/// responding from the start, the others sampled beside it; released, it is sampled
/// with its whole identity, the minor number included.
#[test]
fn a_gpu_hung_in_its_first_identity_read_is_not_responding_and_the_others_go_on() {
    use gpupeek_shm::layout::gpu_valid4;
    let sb = Sandbox::new("hung-identity");
    sb.write_scenario(&hanging(1, "nvmlDeviceGetMinorNumber"));
    let daemon = sb.start_daemon_with("50ms", &["--nvml-timeout", "1s"]);
    sb.wait_live(&daemon);
    sb.snapshot_when(&daemon, "GPU 1 not responding, 0 and 2 sampled", |s| {
        state(s, 1) == Some(GpuState::NotResponding)
            && [0, 2].iter().all(|&i| state(s, i) == Some(GpuState::Ok))
    });
    sb.write_scenario(&scenario());
    let back = sb.snapshot_when(&daemon, "GPU 1 back", |s| state(s, 1) == Some(GpuState::Ok));
    let g1 = &back.gpus[1];
    assert_eq!(gpupeek_shm::text::decode(&g1.uuid), "GPU-00000001");
    assert_ne!(g1.valid4 & gpu_valid4::MINOR_NUMBER, 0);
    assert_eq!(g1.minor_number, 1);
}

#[test]
fn a_gpu_hung_in_its_process_list_on_a_slow_tick_is_not_responding_too() {
    let sb = Sandbox::new("hung-procs");
    let mut s = scenario();
    s["gpus"][0]["processes"] =
        json!([{"pid": std::process::id(), "used_gpu_memory_bytes": 1u64 << 30}]);
    sb.write_scenario(&s);
    let daemon = sb.start_daemon_with("50ms", &["--nvml-timeout", "1s"]);
    sb.wait_live(&daemon);
    s["gpus"][0]["hang"] = json!(["nvmlDeviceGetRunningProcessDetailList"]);
    sb.write_scenario(&s);
    // GPU 1 goes on answering. (On a starved machine one of its own ticks can outlast
    // --nvml-timeout too, for a moment: it must be Ok again while GPU 0 stays stuck.)
    let snap = sb.snapshot_when(&daemon, "GPU 0 not responding and GPU 1 ok", |s| {
        state(s, 0) == Some(GpuState::NotResponding) && state(s, 1) == Some(GpuState::Ok)
    });
    assert_eq!(
        snap.processes_on(0).count(),
        0,
        "its processes left the table"
    );
    s["gpus"][0]["hang"] = json!([]);
    sb.write_scenario(&s);
    sb.snapshot_when(&daemon, "GPU 0 back with its process", |s| {
        state(s, 0) == Some(GpuState::Ok) && s.processes_on(0).count() == 1
    });
}

#[test]
fn a_hung_nvml_init_keeps_the_heartbeat_and_says_the_driver_does_not_respond() {
    let sb = Sandbox::new("hung-init");
    let mut s = scenario();
    s["hang"] = json!(["nvmlInit_v2", "nvmlInitWithFlags"]);
    sb.write_scenario(&s);
    // nvmlInit is given 15 timeouts (1.5 s here) before it is called hung.
    let daemon = sb.start_daemon_with("50ms", &["--nvml-timeout", "100ms"]);
    wait_for("the segment", &daemon, || {
        gpupeek_shm::Segment::open(&sb.shm).is_ok_and(|s| s.status().is_ok())
    });
    let segment = sb.segment();
    let first = segment.status().unwrap();
    let snap = sb.snapshot_when(&daemon, "NVML error: not responding", |s| {
        s.status.state == DaemonState::NvmlError as u32
    });
    assert_eq!(snap.status.nvml_error_code, 10, "NVML_ERROR_TIMEOUT");
    assert!(snap.status.heartbeat_mono_ns > first.heartbeat_mono_ns);
    let out = sb.client(&[]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("driver not responding: nvmlInit"),
        "{}",
        stderr(&out)
    );

    sb.write_scenario(&scenario());
    sb.snapshot_when(&daemon, "live after init returned", |s| {
        s.status.state == DaemonState::Live as u32 && s.gpus.len() == GPUS
    });
    let log = daemon.log();
    assert_eq!(count(&log, "nvmlInit has not returned"), 1, "{log}");
}

fn operator(sb: &Sandbox, flag: &str) -> std::process::Output {
    let mut cmd = Command::new(&bins().daemon);
    cmd.args(["--shm", &sb.shm, flag]);
    run_with_watchdog(cmd)
}

#[test]
fn an_operator_makes_the_daemon_let_go_of_nvml_and_take_it_back() {
    let sb = Sandbox::new("release");
    sb.write_scenario(&scenario());
    let daemon = sb.start_daemon("50ms");
    sb.wait_live(&daemon);
    let open = |sb: &Sandbox| sb.nvml_call_file(daemon.pid()).unwrap()["open_handles"];
    assert_eq!(open(&sb), 1);

    let out = operator(&sb, "--release");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Done means done: NVML is shut down when --release returns.
    assert_eq!(open(&sb), 0);
    let snap = sb.segment().snapshot().unwrap();
    assert_eq!(
        snap.liveness(gpupeek_shm::mono_now_ns()),
        Liveness::Released
    );
    let calls = sb.nvml_call_file(daemon.pid()).unwrap();
    sb.let_ticks_pass(&daemon, 4);
    assert_eq!(
        sb.nvml_call_file(daemon.pid()).unwrap(),
        calls,
        "no NVML call while released"
    );
    let out = sb.client(&[]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    assert!(stderr(&out).contains("--resume"), "{}", stderr(&out));

    let out = operator(&sb, "--resume");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(open(&sb), 1);
    sb.snapshot_when(&daemon, "GPUs published again", |s| s.gpus.len() == GPUS);
    let out = sb.client(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = daemon.log();
    assert_eq!(count(&log, "releasing NVML on request"), 1, "{log}");
    assert_eq!(count(&log, "taking NVML back on request"), 1, "{log}");
}

#[test]
fn release_and_resume_without_a_daemon_fail_in_one_line() {
    let sb = Sandbox::new("release-none");
    for flag in ["--release", "--resume"] {
        let out = operator(&sb, flag);
        gpupeek_e2e::assert_one_line_failure(&out, 3, "no daemon");
    }
    let mut cmd = Command::new(&bins().daemon);
    cmd.args(["--shm", &sb.shm, "--release", "--resume"]);
    gpupeek_e2e::assert_one_line_failure(&run_with_watchdog(cmd), 2, "both");
}

#[test]
fn a_hung_nvml_shutdown_stops_neither_the_heartbeat_nor_the_truth() {
    let sb = Sandbox::new("hung-shutdown");
    sb.write_scenario(&scenario());
    let daemon = sb.start_daemon_with("50ms", &["--nvml-timeout", "200ms"]);
    sb.wait_live(&daemon);
    let mut stuck = scenario();
    stuck["hang"] = json!(["nvmlShutdown"]);
    sb.write_scenario(&stuck);
    daemon.signal(nix::sys::signal::Signal::SIGUSR1);
    // NVML cannot be shut down: the daemon says it is waiting for that, not "released",
    // and keeps publishing.
    let waiting = sb.snapshot_when(&daemon, "waiting to let go", |s| {
        s.status.state == DaemonState::NvmlError as u32 && s.status.nvml_error_code == 10
    });
    let message = gpupeek_shm::text::decode(&waiting.status.error_message);
    assert!(message.contains("releasing NVML"), "{message}");
    sb.snapshot_when(&daemon, "the heartbeat going on", |s| {
        s.status.heartbeat_mono_ns > waiting.status.heartbeat_mono_ns + 300_000_000
            && s.status.state == DaemonState::NvmlError as u32
    });
    // nvmlShutdown returns: released, and no handle is left open.
    sb.write_scenario(&scenario());
    sb.snapshot_when(&daemon, "released", |s| {
        s.status.state == DaemonState::Released as u32
    });
    assert_eq!(sb.nvml_call_file(daemon.pid()).unwrap()["open_handles"], 0);
}
