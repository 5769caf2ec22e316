//! Process lists on every driver generation from R450 on, each a fake NVML library whose
//! symbol table is that driver's (`gpupeek_e2e::driver_library`): v1 only, `_v2`, `_v3`
//! writing 32-byte entries (535.43–535.86), `_v3` withdrawn (535.98), and
//! `nvmlDeviceGetRunningProcessDetailList`. The fake reports any array write that overruns
//! the daemon's buffer in its calls file. Also: junk per-process utilisation samples, a
//! daemon whose `/proc` is not the host's pid namespace, and a memory checker.

use std::collections::BTreeMap;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use fake_nvml::calls::OVERFLOWS;
use fake_nvml::procs::{JUNK_NO_PROCESS, JUNK_OLD, JUNK_OVER_100, NOT_A_PID};
use gpupeek_e2e::profiles::{self, Profile, PROFILES};
use gpupeek_e2e::{root_or_skip, tool, wait_for, Daemon, Sandbox};
use gpupeek_shm::layout::{gpu_valid, gpu_valid2, gpu_valid3, proc_kind, proc_valid, ProcRecord};
use serde_json::{json, Value};

const MIB: u64 = 1 << 20;

/// The process-list entry point a daemon on `profile` must use: the newest it has.
fn expected_entry_point(profile: Profile) -> &'static str {
    match profile.name {
        "r450" => "nvmlDeviceGetComputeRunningProcesses",
        "r470" | "r535_98" => "nvmlDeviceGetComputeRunningProcesses_v2",
        "r535_54" => "nvmlDeviceGetComputeRunningProcesses_v3",
        "current" | "r590" | "r610" => "nvmlDeviceGetRunningProcessDetailList",
        other => panic!("no expectation for profile {other}"),
    }
}

/// (pid, MiB, type) of `n` processes that do not exist, mixing the kinds.
fn fake_processes(first_pid: u32, n: u32) -> Vec<(u32, u64, &'static str)> {
    (0..n)
        .map(|i| {
            let kind = ["compute", "graphics", "both"][(i % 3) as usize];
            (first_pid + i, 100 + u64::from(i), kind)
        })
        .collect()
}

fn gpu(procs: &[(u32, u64, &str)]) -> Value {
    let processes: Vec<Value> = procs
        .iter()
        .map(|&(pid, mib, kind)| json!({"pid": pid, "used_gpu_memory_bytes": mib * MIB, "type": kind}))
        .collect();
    json!({"name": "NVIDIA A100-SXM4-80GB", "memory_total_bytes": 80u64 << 30,
           "utilization_gpu_pct": 50, "processes": processes})
}

/// A scenario on `profile`'s driver with these GPUs.
fn scenario(profile: Profile, gpus: Vec<Value>) -> Value {
    json!({"driver_version": profile.driver_version, "gpus": gpus})
}

fn kind_bits(kind: &str) -> u32 {
    match kind {
        "compute" => proc_kind::COMPUTE,
        "graphics" => proc_kind::GRAPHICS,
        _ => proc_kind::COMPUTE | proc_kind::GRAPHICS,
    }
}

/// Fails the test if the fake saw a write past one of the daemon's arrays, or the
/// daemon is gone.
fn assert_no_overflow_and_alive(sb: &Sandbox, daemon: &Daemon, what: &str) {
    let calls = sb.nvml_call_file(daemon.pid()).unwrap_or_default();
    assert_eq!(
        calls.get(OVERFLOWS),
        None,
        "{what}: the driver wrote past the daemon's buffer; log:\n{}",
        daemon.log()
    );
    assert!(
        !matches!(daemon.state(), 'Z' | 'X'),
        "{what}: the daemon died; log:\n{}",
        daemon.log()
    );
}

#[test]
fn every_driver_lists_forty_processes_per_gpu_with_their_memory() {
    for &profile in PROFILES {
        let what = profile.name;
        let sb = Sandbox::new(&format!("drv-{what}"));
        sb.use_driver(profile);
        let busy = fake_processes(4_000_000, 45);
        let other = fake_processes(4_100_000, 41);
        sb.write_scenario(&scenario(profile, vec![gpu(&busy), gpu(&[]), gpu(&other)]));
        let daemon = sb.start_daemon("100ms");
        sb.wait_live(&daemon);
        wait_for(&format!("{what}: the process lists"), &daemon, || {
            let snap = sb.segment().snapshot().unwrap();
            snap.processes.len() == busy.len() + other.len()
        });
        sb.let_ticks_pass(&daemon, 3);
        let snap = sb.segment().snapshot().unwrap();
        for (index, want) in [(0, &busy), (1, &Vec::new()), (2, &other)] {
            let rec = &snap.gpus[index as usize];
            assert_ne!(rec.valid & gpu_valid::PROCESSES, 0, "{what}: GPU {index}");
            assert_eq!(
                rec.process_count as usize,
                want.len(),
                "{what}: GPU {index}"
            );
            let got: BTreeMap<u32, &ProcRecord> =
                snap.processes_on(index).map(|p| (p.pid, p)).collect();
            assert_eq!(got.len(), want.len(), "{what}: GPU {index}");
            for &(pid, mib, kind) in want.iter() {
                let p = got
                    .get(&pid)
                    .unwrap_or_else(|| panic!("{what}: pid {pid} missing on GPU {index}"));
                assert_ne!(p.valid & proc_valid::GPU_MEMORY, 0, "{what}: pid {pid}");
                assert_eq!(p.gpu_mem_bytes, mib * MIB, "{what}: pid {pid}");
                assert_eq!(p.kind, kind_bits(kind), "{what}: pid {pid}");
            }
        }
        assert_no_overflow_and_alive(&sb, &daemon, what);
        let calls = sb.nvml_call_file(daemon.pid()).unwrap_or_default();
        let used = expected_entry_point(profile);
        assert!(
            calls.get(used).is_some_and(|&n| n > 0),
            "{what}: {used} was not called: {calls:?}"
        );
    }
}

#[test]
fn every_driver_gives_the_core_values_through_the_entry_points_it_has() {
    for &profile in PROFILES {
        let what = profile.name;
        let sb = Sandbox::new(&format!("drv-core-{what}"));
        sb.use_driver(profile);
        sb.write_scenario(&scenario(
            profile,
            vec![json!({
                "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-core",
                "memory_total_bytes": 80u64 << 30, "memory_used_bytes": 5u64 << 30,
                "memory_reserved_bytes": 1u64 << 30,
                "utilization_gpu_pct": 50, "utilization_memory_pct": 20,
                "temperature_c": 61, "power_usage_mw": 250_000, "energy_mj": 123_456,
                "clock_event_reasons": 0x40,
                "gpm": {"sm_activity_pct": 40.0},
                "gpu_max_pcie_link_gen": 4, "jpeg_utilization_pct": 7,
                "ofa_utilization_pct": 3,
                "clocks_event_reasons_counters": {"sw_power_cap": 1234},
                "margin_temperature_c": 30, "pci_class": [3, 2], "addressing_mode": 0,
                "gsp_firmware_mode": [1, 1], "row_remapper_histogram": [640, 0, 0, 0, 0],
                "hostname": "node-gpu-0",
                "fabric": {"state": 3, "status": 0, "clique_id": 7}
            })],
        ));
        // Every tick a slow one, so the slow tier's values come too.
        let daemon = sb.start_daemon_with("50ms", &["--process-interval", "50ms"]);
        sb.wait_live(&daemon);
        sb.let_ticks_pass(&daemon, 4);
        let g = sb.segment().snapshot().unwrap().gpus[0];
        let core = gpu_valid::MEMORY
            | gpu_valid::UTILIZATION
            | gpu_valid::TEMPERATURE
            | gpu_valid::POWER_DRAW
            | gpu_valid::ENERGY
            | gpu_valid::CLOCK_EVENT_REASONS;
        assert_eq!(g.valid & core, core, "{what}: {:#x}", g.valid);
        assert_eq!(g.mem_used_bytes, 5u64 << 30, "{what}");
        assert_eq!(
            (g.temp_gpu_c, g.power_draw_mw, g.clock_event_reasons),
            (61, 250_000, 0x40),
            "{what}"
        );
        // Reserved memory and GPM only where the driver has the entry points.
        let newer = profile.exports().any(|f| f == "nvmlDeviceGetMemoryInfo_v2");
        assert_eq!(g.valid & gpu_valid::MEM_RESERVED != 0, newer, "{what}");
        let gpm = profile.exports().any(|f| f == "nvmlGpmSampleGet");
        assert_eq!(g.valid & gpu_valid::GPM != 0, gpm, "{what}");
        // ABI 1.5's valid3: the GPU's own PCIe maximum from R510, the JPEG and OFA
        // utilisations from R535, the counters (field values) wherever the GPU has them;
        // a missing entry point leaves its value unknown, and nothing else.
        let has = |f: &str| profile.exports().any(|e| e == f);
        let gpumax = has("nvmlDeviceGetGpuMaxPcieLinkGeneration");
        let engines = has("nvmlDeviceGetJpgUtilization");
        let v3 = g.valid3;
        assert_eq!(v3 & gpu_valid3::PCIE_LINK_GEN_GPUMAX != 0, gpumax, "{what}");
        assert_eq!(v3 & gpu_valid3::UTIL_JPEG != 0, engines, "{what}");
        assert_eq!(v3 & gpu_valid3::UTIL_OFA != 0, engines, "{what}");
        let counters = gpu_valid3::CLOCKS_EVENT_US_SW_POWER_CAP
            | gpu_valid3::CLOCKS_EVENT_US_SYNC_BOOST
            | gpu_valid3::CLOCKS_EVENT_US_SW_THERMAL_SLOWDOWN
            | gpu_valid3::CLOCKS_EVENT_US_HW_THERMAL_SLOWDOWN
            | gpu_valid3::CLOCKS_EVENT_US_HW_POWER_BRAKE_SLOWDOWN;
        let only_power_cap = gpu_valid3::CLOCKS_EVENT_US_SW_POWER_CAP;
        assert_eq!(
            v3 & counters,
            only_power_cap,
            "{what}: the counter the GPU has"
        );
        assert_eq!(g.clocks_event_us_sw_power_cap, 1234, "{what}");
        if gpumax {
            assert_eq!(g.pcie_link_gen_gpumax, 4, "{what}");
        }
        // ABI 1.6: each of nvidia-smi 590's values from its entry point, where it is.
        for (bit, entry) in [
            (gpu_valid3::TEMP_TLIMIT, "nvmlDeviceGetMarginTemperature"),
            (gpu_valid3::PCI_CLASS, "nvmlDeviceGetPciInfoExt"),
            (gpu_valid3::ADDRESSING_MODE, "nvmlDeviceGetAddressingMode"),
            (gpu_valid3::GSP_MODE, "nvmlDeviceGetGspFirmwareMode"),
            (
                gpu_valid3::REMAPPED_ROWS_HISTOGRAM,
                "nvmlDeviceGetRowRemapperHistogram",
            ),
            // ABI 1.8: the GPU's hostname, R580+.
            (gpu_valid3::GPU_HOSTNAME, "nvmlDeviceGetHostname_v1"),
        ] {
            assert_eq!(v3 & bit != 0, has(entry), "{what}: {entry}");
        }
        if has("nvmlDeviceGetMarginTemperature") {
            assert_eq!(g.temp_tlimit_c, 30, "{what}");
        }
        if has("nvmlDeviceGetHostname_v1") {
            assert_eq!(&g.gpu_hostname[..11], b"node-gpu-0\0", "{what}");
        }
        if engines {
            assert_eq!((g.util_jpeg_pct, g.util_ofa_pct), (7, 3), "{what}");
        }
        // The fabric state from R525 (the versioned call from R550, the first one
        // before it), the clique only from the versioned call.
        let fabric = has("nvmlDeviceGetGpuFabricInfo");
        assert_eq!(g.valid2 & gpu_valid2::FABRIC != 0, fabric, "{what}");
        if fabric {
            assert_eq!((g.fabric_state, g.fabric_status), (3, 0), "{what}");
        }
        let versioned = has("nvmlDeviceGetGpuFabricInfoV");
        assert_eq!(v3 & gpu_valid3::FABRIC_CLIQUE != 0, versioned, "{what}");
        if versioned {
            assert_eq!(g.fabric_clique_id, 7, "{what}");
        }
        assert_no_overflow_and_alive(&sb, &daemon, what);
        // One fabric call per read: the first entry point only where the versioned one
        // is missing.
        let calls = sb.nvml_call_file(daemon.pid()).unwrap_or_default();
        let legacy = calls
            .get("nvmlDeviceGetGpuFabricInfo")
            .copied()
            .unwrap_or(0);
        assert_eq!(legacy > 0, fabric && !versioned, "{what}: {calls:?}");
    }
}

#[test]
fn a_driver_without_v3_still_publishes_the_process_count() {
    let sb = Sandbox::new("drv-nov3");
    sb.use_driver(profiles::R535_98);
    let procs = fake_processes(4_000_000, 3);
    sb.write_scenario(&scenario(profiles::R535_98, vec![gpu(&procs)]));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    wait_for("a process count", &daemon, || {
        let snap = sb.segment().snapshot().unwrap();
        snap.gpus[0].valid & gpu_valid::PROCESSES != 0
    });
    let snap = sb.segment().snapshot().unwrap();
    assert_eq!(snap.gpus[0].process_count, 3);
    let out = sb.client(&["--json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["gpus"][0]["processes"].as_array().map(Vec::len),
        Some(3)
    );
}

/// A child process, killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sleeper() -> Proc {
    Proc(Command::new("sleep").arg("600").spawn().unwrap())
}

#[test]
fn junk_utilisation_samples_are_never_shown() {
    let sb = Sandbox::new("drv-junk");
    let (busy, idle) = (sleeper(), sleeper());
    sb.write_scenario(&json!({"gpus": [{
        "name": "NVIDIA A100-SXM4-80GB", "memory_total_bytes": 80u64 << 30,
        "junk_process_samples": true,
        "processes": [
            {"pid": busy.0.id(), "used_gpu_memory_bytes": MIB, "utilization_pct": [30, 20, 0, 0]},
            {"pid": idle.0.id(), "used_gpu_memory_bytes": MIB}
        ]
    }]}));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    let util = |p: &ProcRecord| {
        (p.valid & proc_valid::GPU_UTIL != 0).then_some([
            p.sm_util_pct,
            p.mem_util_pct,
            p.enc_util_pct,
            p.dec_util_pct,
        ])
    };
    let junk = [JUNK_OLD, JUNK_OVER_100, JUNK_NO_PROCESS];
    let check = |snap: &gpupeek_shm::Snapshot| {
        assert!(snap.processes.iter().all(|p| p.pid != NOT_A_PID));
        for p in &snap.processes {
            if let Some(u) = util(p) {
                assert!(
                    !junk.contains(&u) && u.iter().all(|&v| v <= 100),
                    "pid {} shows junk {u:?}",
                    p.pid
                );
            }
        }
    };
    wait_for("the busy process's 30 %", &daemon, || {
        let snap = sb.segment().snapshot().unwrap();
        check(&snap);
        snap.processes
            .iter()
            .any(|p| p.pid == busy.0.id() && util(p) == Some([30, 20, 0, 0]))
    });
    for _ in 0..10 {
        sb.let_ticks_pass(&daemon, 1);
        let snap = sb.segment().snapshot().unwrap();
        check(&snap);
        let idle_util = snap
            .processes
            .iter()
            .find(|p| p.pid == idle.0.id())
            .and_then(util);
        assert_eq!(idle_util, Some([0; 4]), "the idle process");
    }
}

#[test]
fn pids_from_another_pid_namespace_are_not_resolved_in_ours() {
    if !root_or_skip("pids_from_another_pid_namespace_are_not_resolved_in_ours") {
        return;
    }
    let sb = Sandbox::new("drv-pidns");
    let host = sleeper();
    // Host pid 1 is the init system; in the daemon's own pid namespace pid 1 is itself.
    let listed = [1, host.0.id()];
    let processes: Vec<Value> = listed
        .iter()
        .map(|&pid| json!({"pid": pid, "used_gpu_memory_bytes": MIB}))
        .collect();
    sb.write_scenario(&json!({"gpus": [{"name": "NVIDIA A100-SXM4-80GB",
        "memory_total_bytes": 80u64 << 30, "processes": processes}]}));
    let inner = sb.daemon_command("100ms");
    let mut cmd = Command::new("unshare");
    cmd.args(["--pid", "--fork", "--mount-proc", "--kill-child", "--"])
        .arg(inner.get_program())
        .args(inner.get_args());
    for (key, value) in inner.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    let daemon = sb.spawn_daemon(cmd);
    sb.wait_live(&daemon);
    wait_for("both processes", &daemon, || {
        sb.segment().snapshot().unwrap().processes.len() == 2
    });
    sb.let_ticks_pass(&daemon, 2);
    for p in &sb.segment().snapshot().unwrap().processes {
        assert_ne!(p.valid & proc_valid::GPU_MEMORY, 0, "pid {}", p.pid);
        let resolved = proc_valid::USER | proc_valid::COMMAND | proc_valid::START_TIME;
        assert_eq!(
            p.valid & resolved,
            0,
            "pid {} was resolved in the wrong pid namespace",
            p.pid
        );
    }
    assert!(
        daemon.log().contains("pid namespace"),
        "the daemon says why: {}",
        daemon.log()
    );
}

#[test]
fn memcheck_finds_no_invalid_write_on_the_535_54_driver() {
    let Some(valgrind) = tool("valgrind", "valgrind") else {
        return;
    };
    // A daemon under valgrind keeps a core busy for the whole test.
    let _turn = gpupeek_e2e::one_at_a_time();
    let sb = Sandbox::new("drv-memcheck");
    let profile = profiles::R535_54;
    sb.use_driver(profile);
    let procs = fake_processes(4_000_000, 40);
    sb.write_scenario(&scenario(profile, vec![gpu(&procs)]));
    let inner = sb.daemon_command("200ms");
    let log = sb.dir.join("memcheck.log");
    let mut cmd = Command::new(valgrind);
    cmd.arg("--tool=memcheck")
        .arg(format!("--log-file={}", log.display()))
        .arg(inner.get_program())
        .args(inner.get_args());
    for (key, value) in inner.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    let mut daemon = sb.spawn_daemon(cmd);
    // Under valgrind everything is many times slower than the other tests' watchdog.
    let deadline = Instant::now() + Duration::from_secs(180);
    let listed = || {
        gpupeek_shm::Segment::open(&sb.shm).is_ok_and(|s| {
            s.snapshot()
                .is_ok_and(|snap| snap.processes.len() == procs.len() && snap.generation >= 3)
        })
    };
    while !listed() {
        assert!(
            Instant::now() < deadline,
            "no process list under valgrind; daemon log:\n{}\nvalgrind:\n{}",
            daemon.log(),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    let _ = daemon.wait_exit_within(Duration::from_secs(120));
    let report = std::fs::read_to_string(&log).unwrap();
    assert!(report.contains("ERROR SUMMARY"), "{report}");
    assert!(
        !report.contains("Invalid write"),
        "memcheck saw invalid writes:\n{report}"
    );
}
