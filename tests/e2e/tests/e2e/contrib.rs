//! Third-party readers from contrib/: the C header and its example reader, built with the
//! system C compiler, and the Python module with its own tests, each against a live
//! daemon on the fake NVML, and each checked against the Rust definition of the layout.
//! The Python module is also installed with pip into a fresh virtual environment, and its
//! gpustat API compared with `gpupeek --json` (and, in its tests, with gpustat itself).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use gpupeek_e2e::{
    bins, compile_c, compile_c_reader, repo, run_with_limit, run_with_watchdog, stderr, stdout,
    tool, Daemon, Sandbox,
};
use serde_json::json;

const GIB: u64 = 1 << 30;

fn live(tag: &str) -> (Sandbox, Daemon) {
    let sandbox = Sandbox::new(tag);
    sandbox.write_scenario(&json!({
        "gpus": [
            {
                "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
                "memory_total_bytes": 85520809984u64, "memory_used_bytes": 10 * GIB + 12345,
                "utilization_gpu_pct": 45, "utilization_memory_pct": 12, "temperature_c": 41,
                "power_usage_mw": 123456, "power_limit_mw": 700000, "fan_speed_pct": 30,
                "processes": [{"pid": std::process::id(), "used_gpu_memory_bytes": 3 * GIB}]
            },
            {
                "name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000000",
                "memory_total_bytes": 42949672960u64
            }
        ]
    }));
    let daemon = sandbox.start_daemon("50ms");
    sandbox.wait_live(&daemon);
    (sandbox, daemon)
}

/// Runs `cmd`, a Python unittest run, for at most `limit_s` seconds; it must exit 0 and
/// say OK (`what` names it in the failure). Its output.
fn unittest_passes(cmd: Command, limit_s: u64, what: &str) -> std::process::Output {
    let out = run_with_limit(cmd, Duration::from_secs(limit_s));
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stderr(&out).contains("OK"), "{}", stderr(&out));
    out
}

/// `KEY=VALUE` pairs of one output line (values may be quoted).
fn pairs(line: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut rest = line;
    while let Some(eq) = rest.find('=') {
        let key = rest[..eq].rsplit(' ').next().unwrap().to_owned();
        let after = &rest[eq + 1..];
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"').unwrap();
            (&quoted[..end], &quoted[end + 1..])
        } else {
            let end = after.find(' ').unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        out.insert(key, value.to_owned());
        rest = next;
    }
    out
}

/// A JSON value as the C reader prints it: N/A for null.
fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "N/A".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn scaled(value: &str, divisor: u64) -> String {
    value
        .parse::<u64>()
        .map_or_else(|_| value.to_owned(), |v| (v / divisor).to_string())
}

#[test]
fn c_example_reader_prints_what_gpupeek_json_shows() {
    let (sandbox, _daemon) = live("c-reader");
    let Some(exe) = compile_c_reader(&sandbox) else {
        return;
    };
    let out = run_with_watchdog({
        let mut cmd = Command::new(&exe);
        cmd.arg(&sandbox.shm);
        cmd
    });
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&sandbox.client(&["--json"]))).unwrap();
    let lines: Vec<_> = stdout(&out).lines().map(pairs).collect();
    let gpus: Vec<_> = lines.iter().filter(|l| l.contains_key("index")).collect();
    let jgpus = json["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), jgpus.len(), "{}", stdout(&out));
    for (c, j) in gpus.iter().zip(jgpus) {
        assert_eq!(c["index"], text(&j["index"]));
        assert_eq!(c["name"], text(&j["name"]));
        assert_eq!(c["uuid"], text(&j["uuid"]));
        assert_eq!(
            scaled(&c["mem_used_bytes"], 1 << 20),
            text(&j["memory.used"])
        );
        assert_eq!(
            scaled(&c["mem_total_bytes"], 1 << 20),
            text(&j["memory.total"])
        );
        assert_eq!(c["util_gpu_pct"], text(&j["utilization.gpu"]));
        assert_eq!(c["temp_gpu_c"], text(&j["temperature.gpu"]));
        assert_eq!(c["fan_speed_pct"], text(&j["fan.speed"]));
        assert_eq!(scaled(&c["power_draw_mw"], 1000), text(&j["power.draw"]));
        assert_eq!(
            scaled(&c["power_limit_mw"], 1000),
            text(&j["enforced.power.limit"])
        );
    }
    assert_eq!(gpus[1]["temp_gpu_c"], "N/A", "missing is N/A, never 0");
    let procs: Vec<_> = lines.iter().filter(|l| l.contains_key("pid")).collect();
    let jprocs = json["gpus"][0]["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 1);
    assert_eq!(procs[0]["pid"], text(&jprocs[0]["pid"]));
    assert_eq!(
        scaled(&procs[0]["gpu_mem_bytes"], 1 << 20),
        text(&jprocs[0]["gpu_memory_usage"])
    );
    assert_eq!(procs[0]["user"], text(&jprocs[0]["username"]));
    assert_eq!(procs[0]["command"], text(&jprocs[0]["command"]));
    let argv: Vec<String> = jprocs[0]["full_command"]
        .as_array()
        .unwrap()
        .iter()
        .map(text)
        .collect();
    assert_eq!(procs[0]["cmdline"], argv.join(" "));
}

/// A world-writable, a foreign-ABI, a corrupt and a missing segment give gpupeek's
/// exit statuses and a one-line reason.
#[test]
fn c_example_reader_refuses_untrusted_corrupt_and_foreign_segments() {
    let sandbox = Sandbox::new("c-refuse");
    let Some(exe) = compile_c_reader(&sandbox) else {
        return;
    };
    let mut header = vec![0u8; 4096];
    header[..8].copy_from_slice(b"GPUPEEK\0");
    header[16..24].copy_from_slice(&4096u64.to_ne_bytes());
    let cases: [(&str, u32, u32, i32); 4] = [
        ("ww", 1, 0o666, 7),
        ("abi", 2, 0o644, 6),
        ("bad", 1, 0o644, 8),
        ("missing", 1, 0, 3),
    ];
    for (suffix, major, mode, expected) in cases {
        let name = format!("{}-{suffix}", sandbox.shm);
        let path = Path::new("/dev/shm").join(&name);
        if mode != 0 {
            header[8..12].copy_from_slice(&major.to_ne_bytes());
            std::fs::write(&path, &header).unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(mode))
                .unwrap();
        }
        let out = run_with_watchdog({
            let mut cmd = Command::new(&exe);
            cmd.arg(&name);
            cmd
        });
        let _ = std::fs::remove_file(&path);
        assert_eq!(
            out.status.code(),
            Some(expected),
            "{suffix}: {}",
            stderr(&out)
        );
        assert_eq!(
            stderr(&out).lines().count(),
            1,
            "{suffix}: {}",
            stderr(&out)
        );
        assert!(stdout(&out).is_empty());
    }
}

/// A daemon that stopped beating (here: SIGSTOP) is exit 4 with the reason the header
/// found, no heartbeat, not "stale record", which sends a reader looking for a torn write.
#[test]
fn c_example_reader_names_a_daemon_without_heartbeat() {
    let (sandbox, daemon) = live("c-stale");
    let Some(exe) = compile_c_reader(&sandbox) else {
        return;
    };
    daemon.signal(nix::sys::signal::Signal::SIGSTOP);
    gpupeek_e2e::wait_for("gpupeek to call the daemon stale", &daemon, || {
        sandbox.client(&[]).status.code() == Some(4)
    });
    let out = run_with_watchdog({
        let mut cmd = Command::new(&exe);
        cmd.arg(&sandbox.shm);
        cmd
    });
    daemon.signal(nix::sys::signal::Signal::SIGCONT);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "gpupeek-read: the daemon is stale (no heartbeat)\n"
    );
}

/// A daemon that stopped inside a GPU record's write (the test hook freezes it there,
/// as a SIGSTOP may land) is named by its heartbeat too once that is stale, not by the
/// record it left mid-write.
#[test]
fn c_example_reader_names_a_daemon_frozen_mid_write_by_its_heartbeat() {
    let sandbox = Sandbox::new("c-frozen");
    let Some(exe) = compile_c_reader(&sandbox) else {
        return;
    };
    sandbox.write_scenario(&json!({"gpus": [{"name": "NVIDIA H100 80GB HBM3",
                                            "uuid": "GPU-11111111-2222-3333-4444-555555555555",
                                            "temperature_c": 41}]}));
    let mut cmd = sandbox.daemon_command("50ms");
    // Inside the 21st GPU write: the 11th tick's first GPU, after the first publishes.
    cmd.env("GPUPEEKD_TEST_FREEZE_MID_WRITE", "20");
    let daemon = sandbox.spawn_daemon(cmd);
    gpupeek_e2e::wait_for("the daemon to stop itself mid-write", &daemon, || {
        daemon.state() == 'T'
    });
    let read = || {
        run_with_watchdog({
            let mut cmd = Command::new(&exe);
            cmd.arg(&sandbox.shm);
            cmd
        })
    };
    // Mid-write and stale both, until the heartbeat is 3 periods (at least 1 s) old.
    gpupeek_e2e::wait_for("the C reader to name the heartbeat", &daemon, || {
        let out = read();
        assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
        stderr(&out) == "gpupeek-read: the daemon is stale (no heartbeat)\n"
    });
    daemon.signal(nix::sys::signal::Signal::SIGKILL);
}

/// The C reader's seqlock rule (`gpupeek_give_up`, the Rust reader's): a write held
/// mid-way for 10 ms, as a loaded machine may hold the daemon, is waited for; a block
/// left odd is stale after `GPUPEEK_STALE_AFTER_NS`. 200 quick attempts, the rule
/// before, called the first one stale on an idle machine.
#[test]
fn c_reader_waits_for_a_preempted_writer_and_not_for_a_dead_one() {
    let sandbox = Sandbox::new("c-patience");
    let source = repo().join("tests/e2e/c/seqlock-patience.c");
    let Some(exe) = compile_c(&sandbox, &source, "seqlock-patience") else {
        return;
    };
    let out = run_with_watchdog(Command::new(&exe));
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
}

/// Compiles a program that prints every field's `offsetof` and `sizeof` from the C
/// structs in `pin::describe()`'s format, and compares it with the Rust layout.
#[test]
fn c_header_structs_have_the_rust_layout() {
    let sandbox = Sandbox::new("c-layout");
    let layout = gpupeek_shm::pin::describe();
    let mut body = String::new();
    let mut current = "";
    for line in layout.lines() {
        if !line.starts_with(' ') {
            let record = line.split(' ').next().unwrap();
            current = match record {
                "StaticHeader" => "gpupeek_static_header",
                "StatusRecord" => "gpupeek_status",
                "GpuRecord" => "gpupeek_gpu",
                "ProcTableHead" => "gpupeek_proc_head",
                "ProcRecord" => "gpupeek_proc",
                "HistoryHead" => "gpupeek_history_head",
                "HistorySample" => "gpupeek_history_sample",
                "MigTableHead" => "gpupeek_mig_head",
                "MigRecord" => "gpupeek_mig",
                "TierTableHead" => "gpupeek_tier_table",
                "TrackHead" => "gpupeek_track_head",
                "TierBucket" => "gpupeek_tier_bucket",
                other => panic!("no C struct for {other}"),
            };
            body.push_str(&format!(
                "printf(\"{record} size=%zu\\n\", sizeof(struct {current}));\n"
            ));
            continue;
        }
        let field = line.split_whitespace().last().unwrap();
        body.push_str(&format!(
            "printf(\"  %4zu %3zu {field}\\n\", offsetof(struct {current}, {field}), \
             sizeof(((struct {current} *)0)->{field}));\n"
        ));
    }
    let source = sandbox.dir.join("layout.c");
    std::fs::write(
        &source,
        format!("#include \"gpupeek.h\"\nint main(void) {{\n{body}return 0;\n}}\n"),
    )
    .unwrap();
    let Some(exe) = compile_c(&sandbox, &source, "layout") else {
        return;
    };
    let out = run_with_watchdog(Command::new(exe));
    assert_eq!(stdout(&out), layout);
}

#[test]
fn python_module_passes_its_tests_against_a_live_daemon() {
    let Some(python) = tool("python3", "python3") else {
        return;
    };
    let (sandbox, _daemon) = live("python");
    let layout = sandbox.dir.join("layout.txt");
    std::fs::write(&layout, gpupeek_shm::pin::describe()).unwrap();
    let mut cmd = Command::new(python);
    cmd.arg(repo().join("contrib/python/test_gpupeek.py"))
        .env("GPUPEEK_SHM", &sandbox.shm)
        .env("GPUPEEK_TEST_SCENARIO", sandbox.scenario_path())
        .env("GPUPEEK_TEST_CLIENT", &gpupeek_e2e::bins().client)
        .env("GPUPEEK_TEST_LAYOUT", &layout)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    // gpustat 1.1.1 (scripts/test installs it) on the same fake NVML, for the parity test
    // of `gpupeek.new_query()`; without it that test is skipped, except in CI.
    match std::env::var_os("GPUPEEK_GPUSTAT") {
        Some(gpustat) => {
            let lib_dir = sandbox.dir.join("nvml-lib");
            std::fs::create_dir_all(&lib_dir).unwrap();
            std::os::unix::fs::symlink(&bins().fake_nvml, lib_dir.join("libnvidia-ml.so.1"))
                .unwrap();
            cmd.env("GPUPEEK_TEST_GPUSTAT", gpustat)
                .env("GPUPEEK_TEST_NVML_DIR", &lib_dir);
        }
        None => assert!(
            std::env::var_os("CI").is_none(),
            "CI must set GPUPEEK_GPUSTAT to a gpustat 1.1.1 executable"
        ),
    }
    // Longer than the usual watchdog: each `vram()` block waits for process samples taken
    // after it starts and after it ends (every 2 s here), and the tests start Pythons.
    unittest_passes(cmd, 240, "python tests");
}

/// `gpupeek.ResourceMetricCollector` (contrib/python/test_collector.py) against a live
/// daemon: the same keys as nvitop 1.7.2's own collector on the same fake NVML over the
/// same window (but for the pid keys only ours has), GPU values within one history step,
/// the same nesting, pid keys for children and grandchildren, and a collector that runs
/// and says so once without a daemon; its TensorBoard, Lightning and Keras adapters.
#[test]
fn python_collector_matches_nvitops_against_a_live_daemon() {
    let Some(python) = tool("python3", "python3") else {
        return;
    };
    let (sandbox, _daemon) = live("python-collector");
    let mut cmd = Command::new(python);
    cmd.arg(repo().join("contrib/python/test_collector.py"))
        .env("GPUPEEK_SHM", &sandbox.shm)
        .env("GPUPEEK_TEST_SCENARIO", sandbox.scenario_path())
        .env("PYTHONDONTWRITEBYTECODE", "1");
    // nvitop 1.7.2 (scripts/test installs it) on the same fake NVML; without it the
    // side-by-side tests are skipped, except in CI.
    match std::env::var_os("GPUPEEK_NVITOP") {
        Some(nvitop) => {
            let lib_dir = sandbox.dir.join("nvml-lib");
            std::fs::create_dir_all(&lib_dir).unwrap();
            std::os::unix::fs::symlink(&bins().fake_nvml, lib_dir.join("libnvidia-ml.so.1"))
                .unwrap();
            cmd.env("GPUPEEK_TEST_NVITOP", nvitop)
                .env("GPUPEEK_TEST_NVML_DIR", &lib_dir);
        }
        None => assert!(
            std::env::var_os("CI").is_none(),
            "CI must set GPUPEEK_NVITOP to an nvitop 1.7.2 executable"
        ),
    }
    unittest_passes(cmd, 240, "python collector tests");
}

/// The collector's MIG devices (`gpu:(0, 1)`), side by side with nvitop's on a daemon
/// started with GPU 0 split in two (contrib/python/test_collector.py, class Mig): the
/// same keys and values, and the process on its MIG device.
#[test]
fn python_collector_matches_nvitops_on_mig_devices() {
    let Some(python) = tool("python3", "python3") else {
        return;
    };
    let Some(nvitop) = std::env::var_os("GPUPEEK_NVITOP") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must set GPUPEEK_NVITOP to an nvitop 1.7.2 executable"
        );
        return;
    };
    let sandbox = Sandbox::new("python-collector-mig");
    let instance = |gi: u32, profile: u32| {
        json!({"gpu_instance_id": gi, "compute_instance_id": 0, "profile_id": profile,
               "uuid": format!("MIG-{gi:08x}-7d1c-5b8e-9d2a-{profile:012x}")})
    };
    sandbox.write_scenario(&json!({"gpus": [
        {
            "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
            "memory_total_bytes": 85520809984u64, "memory_used_bytes": 10 * GIB,
            "temperature_c": 40, "power_usage_mw": 100000, "power_limit_mw": 700000,
            "mig": {"instances": [instance(1, 9), instance(5, 14)]}
        },
        {
            "name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000000",
            "memory_total_bytes": 42949672960u64
        }
    ]}));
    let daemon = sandbox.start_daemon("50ms");
    sandbox.wait_live(&daemon);
    let lib_dir = sandbox.dir.join("nvml-lib");
    std::fs::create_dir_all(&lib_dir).unwrap();
    std::os::unix::fs::symlink(&bins().fake_nvml, lib_dir.join("libnvidia-ml.so.1")).unwrap();
    let mut cmd = Command::new(python);
    cmd.arg(repo().join("contrib/python/test_collector.py"))
        .arg("Mig")
        .env("GPUPEEK_SHM", &sandbox.shm)
        .env("GPUPEEK_TEST_SCENARIO", sandbox.scenario_path())
        .env("GPUPEEK_TEST_NVITOP", nvitop)
        .env("GPUPEEK_TEST_NVML_DIR", &lib_dir)
        .env("GPUPEEK_TEST_MIG", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let out = unittest_passes(cmd, 120, "python collector MIG tests");
    assert!(!stderr(&out).contains("skipped"), "{}", stderr(&out));
}

/// The collector's GPU windows from the tiered history (contrib/python/test_collector.py,
/// class TieredHistory): a daemon whose history unit the test hook shortens to 50 ms (raw
/// samples for 30 s, then 0.5 s and 3 s buckets) and GPU 0 alternating between two
/// phases every second: a window longer than the raw samples has the mean the schedule
/// implies (from the integrals, and from the tiers when the integral start moved), and
/// GPU 1, beyond `--history-tracks 1`, and a segment without tracks use the raw ring.
#[test]
fn python_collector_windows_come_from_the_tiered_history() {
    let Some(python) = tool("python3", "python3") else {
        return;
    };
    let sandbox = Sandbox::new("python-collector-tiers");
    let phase = |util: u32, mib: u64, mw: u32, temp: u32| {
        json!({"gpus": [{"utilization_gpu_pct": util, "memory_used_bytes": mib << 20,
                         "power_usage_mw": mw, "temperature_c": temp}]})
    };
    sandbox.write_scenario(&json!({
        "gpus": [
            {
                "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
                "memory_total_bytes": 85520809984u64, "memory_used_bytes": 1000u64 << 20,
                "utilization_gpu_pct": 20, "utilization_memory_pct": 5, "temperature_c": 40,
                "power_usage_mw": 100000, "power_limit_mw": 700000
            },
            {
                "name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000000",
                "memory_total_bytes": 42949672960u64
            }
        ],
        "schedule": {"step_ms": 1000, "phases": [phase(20, 1000, 100_000, 40),
                                                 phase(80, 3000, 300_000, 70)]}
    }));
    let daemon = sandbox.start_daemon_env(
        "50ms",
        &["--history-tracks", "1"],
        &[("GPUPEEKD_TEST_HISTORY_UNIT_MS", "50".as_ref())],
    );
    sandbox.wait_live(&daemon);
    let mut cmd = Command::new(python);
    cmd.arg(repo().join("contrib/python/test_collector.py"))
        .arg("TieredHistory")
        .env("GPUPEEK_SHM", &sandbox.shm)
        .env("GPUPEEK_TEST_SCENARIO", sandbox.scenario_path())
        .env("GPUPEEK_TEST_TIERED", "1")
        .env("GPUPEEK_TEST_DAEMON_PID", daemon.pid().to_string())
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let out = unittest_passes(cmd, 180, "python collector tiered-history tests");
    assert!(!stderr(&out).contains("skipped"), "{}", stderr(&out));
}

/// The Python reader's `print_json()` has the Rust client's own keys (`verdict`,
/// `clock_event_reasons`, `gpm`, `mig`) with the same values under several
/// `GPUPEEK_VERDICT_THRESHOLDS`, and rejects a bad one as gpupeek does
/// (contrib/python/test_gpupeek.py, class RustKeys): GPU 0 in MIG mode with its clocks
/// power-capped and a process in its first instance, GPU 1 idle holding 4 GiB, GPU 2
/// busy with little SM activity.
#[test]
fn python_json_has_the_rust_clients_verdicts_and_mig_devices() {
    let Some(python) = tool("python3", "python3") else {
        return;
    };
    let sandbox = Sandbox::new("python-verdicts");
    let instance = |gi: u32, profile: u32, gpm: serde_json::Value| {
        json!({"gpu_instance_id": gi, "compute_instance_id": 0, "profile_id": profile,
               "uuid": format!("MIG-{gi:08x}-7d1c-5b8e-9d2a-{profile:012x}"), "gpm": gpm})
    };
    sandbox.write_scenario(&json!({"gpus": [
        {
            "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
            "memory_total_bytes": 85520809984u64, "memory_used_bytes": 10 * GIB,
            "temperature_c": 40, "power_usage_mw": 100000, "power_limit_mw": 700000,
            "clock_event_reasons": 0x5,
            "gpm": {"sm_activity_pct": 12.34, "sm_occupancy_pct": 6.0},
            "mig": {"instances": [instance(1, 9, json!({"sm_activity_pct": 0.5})),
                                  instance(5, 14, json!(null))]},
            "processes": [{"pid": std::process::id(), "used_gpu_memory_bytes": 2 * GIB,
                           "gpu_instance_id": 1, "compute_instance_id": 0}]
        },
        {
            "name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000000",
            "memory_total_bytes": 42949672960u64, "memory_used_bytes": 4 * GIB,
            "utilization_gpu_pct": 0, "utilization_memory_pct": 0, "clock_event_reasons": 0x1,
            "processes": [{"pid": 1, "used_gpu_memory_bytes": GIB}]
        },
        {
            "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-cccccccc-0000-0000-0000-000000000000",
            "memory_total_bytes": 85520809984u64, "memory_used_bytes": GIB,
            "utilization_gpu_pct": 90, "utilization_memory_pct": 5, "clock_event_reasons": 0,
            "gpm": {"sm_activity_pct": 12.34}
        }
    ]}));
    let daemon = sandbox.start_daemon("50ms");
    sandbox.wait_live(&daemon);
    let mut cmd = Command::new(python);
    cmd.arg(repo().join("contrib/python/test_gpupeek.py"))
        .arg("RustKeys")
        .env("GPUPEEK_SHM", &sandbox.shm)
        .env("GPUPEEK_TEST_SCENARIO", sandbox.scenario_path())
        .env("GPUPEEK_TEST_CLIENT", &gpupeek_e2e::bins().client)
        .env("GPUPEEK_TEST_VERDICTS", "1")
        .env_remove("GPUPEEK_VERDICT_THRESHOLDS")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let out = unittest_passes(cmd, 120, "python verdict tests");
    assert!(!stderr(&out).contains("skipped"), "{}", stderr(&out));
}

/// `pip install contrib/python` into a fresh virtual environment installs the module
/// `gpupeek` (gpupeek's version), which, imported from elsewhere, reads a live daemon:
/// its `new_query().print_json()` is `gpupeek --json` but for the keys it leaves to the
/// Rust client. Offline where the new environment can build a wheel by itself
/// (setuptools and wheel); otherwise pip fetches the build backend from PyPI.
#[test]
fn python_package_installs_with_pip_and_reads_a_live_daemon() {
    let Some(python) = tool("python3", "python3") else {
        return;
    };
    let (sandbox, _daemon) = live("python-pip");
    // A copy of the directory, so the build's files (build/, *.egg-info) land outside the
    // repository and concurrent runs do not share them.
    let src = sandbox.dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    for entry in std::fs::read_dir(repo().join("contrib/python")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, src.join(path.file_name().unwrap())).unwrap();
        }
    }
    let venv = sandbox.dir.join("venv");
    let limit = Duration::from_secs(300);
    let run = |cmd: &mut Command| {
        let out = run_with_limit(std::mem::replace(cmd, Command::new("true")), limit);
        assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
        out
    };
    run(Command::new(&python).arg("-m").arg("venv").arg(&venv));
    let can_build = Command::new(venv.join("bin/python"))
        .args(["-c", "import setuptools, wheel"])
        .output()
        .unwrap()
        .status
        .success();
    let mut pip = Command::new(venv.join("bin/pip"));
    pip.args(["install", "--quiet", "--disable-pip-version-check"]);
    if can_build {
        pip.args(["--no-index", "--no-build-isolation"]);
    }
    run(pip.arg(&src));
    let script = "import gpupeek, sys\n\
                  collector = sys.modules[gpupeek.ResourceMetricCollector.__module__]\n\
                  print(gpupeek.__file__, gpupeek.__version__, collector.__file__)\n\
                  gpupeek.new_query().print_json()\n";
    let out = run(Command::new(venv.join("bin/python"))
        .args(["-c", script])
        .current_dir(&sandbox.dir)
        .env("GPUPEEK_SHM", &sandbox.shm)
        .env("PYTHONDONTWRITEBYTECODE", "1"));
    let text = stdout(&out);
    let (first, doc) = text.split_once('\n').unwrap();
    let [file, version, collector] = first.split(' ').collect::<Vec<_>>()[..] else {
        panic!("{first}")
    };
    assert!(
        Path::new(file).starts_with(&venv) && file.ends_with("site-packages/gpupeek.py"),
        "imported {file}, not the installed module"
    );
    assert!(
        Path::new(collector).starts_with(&venv)
            && collector.ends_with("site-packages/gpupeek_collector.py"),
        "the collector came from {collector}, not the installed package"
    );
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    let ours: serde_json::Value = serde_json::from_str(doc).unwrap();
    let theirs: serde_json::Value =
        serde_json::from_str(&stdout(&sandbox.client(&["--json"]))).unwrap();
    assert_eq!(ours["hostname"], theirs["hostname"]);
    assert_eq!(ours["driver_version"], theirs["driver_version"]);
    let (og, tg) = (
        ours["gpus"].as_array().unwrap(),
        theirs["gpus"].as_array().unwrap(),
    );
    assert_eq!(og.len(), tg.len());
    for (o, t) in og.iter().zip(tg) {
        for key in [
            "index",
            "uuid",
            "name",
            "memory.used",
            "memory.total",
            "power.draw",
        ] {
            assert_eq!(o[key], t[key], "{key}");
        }
        let pids = |g: &serde_json::Value| -> Vec<serde_json::Value> {
            g["processes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["pid"].clone())
                .collect()
        };
        assert_eq!(pids(o), pids(t));
    }
}

/// A child process, killed when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A daemon that withholds process details (`--process-info basic`, its default under
/// hidepid): `gpupeek.new_query()` fills them in from the reader's own `/proc` exactly as
/// `gpupeek --json` does, so the two documents are the same.
#[test]
fn python_new_query_fills_in_withheld_details_as_gpupeek_json_does() {
    use std::os::unix::process::CommandExt;
    let Some(python) = tool("python3", "python3") else {
        return;
    };
    let sandbox = Sandbox::new("python-basic");
    let sleeper = Killed(
        Command::new("sleep")
            .arg0("/opt/conda/bin/python3")
            .arg("600")
            .spawn()
            .unwrap(),
    );
    sandbox.write_scenario(&json!({"gpus": [{
        "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "memory_total_bytes": 85520809984u64, "memory_used_bytes": 10 * GIB,
        "processes": [{"pid": sleeper.0.id(), "used_gpu_memory_bytes": 3 * GIB}]
    }]}));
    let daemon = sandbox.start_daemon_with("50ms", &["--process-info", "basic"]);
    sandbox.wait_live(&daemon);
    gpupeek_e2e::wait_for("the process to be listed", &daemon, || {
        stdout(&sandbox.client(&["--json"])).contains("gpu_memory_usage\": 3072")
    });
    let script = "import gpupeek, json, sys\n\
                  json.dump(gpupeek.new_query().jsonify(), sys.stdout, default=str)\n";
    let out = run_with_watchdog({
        let mut cmd = Command::new(&python);
        cmd.args(["-c", script])
            .env("PYTHONPATH", repo().join("contrib/python"))
            .env("GPUPEEK_SHM", &sandbox.shm)
            .env("PYTHONDONTWRITEBYTECODE", "1");
        cmd
    });
    let theirs: serde_json::Value =
        serde_json::from_str(&stdout(&sandbox.client(&["--json"]))).unwrap();
    drop(sleeper);
    assert!(out.status.success(), "{}", stderr(&out));
    let ours: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let (o, t) = (
        &ours["gpus"][0]["processes"][0],
        &theirs["gpus"][0]["processes"][0],
    );
    assert!(o["username"].is_string(), "filled in: {o}");
    assert_eq!(o["command"], "python3");
    assert_eq!(o["full_command"], json!(["/opt/conda/bin/python3", "600"]));
    for (key, value) in t.as_object().unwrap() {
        if key == "cpu_memory_usage" || key == "running_time" {
            // Read from /proc at two moments.
            assert_eq!(o[key].is_null(), value.is_null(), "{key}");
        } else {
            assert_eq!(&o[key], value, "process key {key}: {ours} {theirs}");
        }
    }
}

/// A process with a 59-character name and a command line of about 2 KB (more than the
/// fixed 31 and 327 bytes of its process record): the C reader and the Python package
/// read both whole from the text pool (ABI 1.5), as `gpupeek --json` shows them.
#[test]
fn c_and_python_readers_show_whole_long_names_and_command_lines() {
    let sandbox = Sandbox::new("readers-long");
    let program = sandbox
        .scenario_path()
        .with_file_name("a-training-program-whose-name-is-over-forty-characters-long");
    std::fs::copy("/bin/sleep", &program).unwrap();
    let operands: Vec<String> = (0..220).map(|i| format!("0.00{i:04}")).collect();
    let long = Killed(
        Command::new(&program)
            .arg("600")
            .args(&operands)
            .spawn()
            .unwrap(),
    );
    sandbox.write_scenario(&json!({"gpus": [{
        "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "memory_total_bytes": 85520809984u64, "memory_used_bytes": 10 * GIB,
        "processes": [{"pid": long.0.id(), "used_gpu_memory_bytes": 3 * GIB}]
    }]}));
    let daemon = sandbox.start_daemon("50ms");
    sandbox.wait_live(&daemon);
    let name = program.file_name().unwrap().to_str().unwrap();
    let whole: Vec<String> = [program.to_str().unwrap().to_owned(), "600".into()]
        .into_iter()
        .chain(operands)
        .collect();
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&sandbox.client(&["--json"]))).unwrap();
    let p = &json["gpus"][0]["processes"][0];
    assert_eq!(p["command"], name);
    assert_eq!(p["full_command"], json!(whole));

    if let Some(exe) = compile_c_reader(&sandbox) {
        let out = run_with_watchdog({
            let mut cmd = Command::new(&exe);
            cmd.arg(&sandbox.shm);
            cmd
        });
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        let line = text.lines().find(|l| l.starts_with("proc ")).unwrap();
        let pairs = pairs(line);
        assert_eq!(pairs["command"], name);
        assert_eq!(pairs["cmdline"], whole.join(" "));
    }
    if let Some(python) = tool("python3", "python3") {
        let script = "import gpupeek, json, sys\n\
                      json.dump(gpupeek.new_query().jsonify(), sys.stdout, default=str)\n";
        let out = run_with_watchdog({
            let mut cmd = Command::new(&python);
            cmd.args(["-c", script])
                .env("PYTHONPATH", repo().join("contrib/python"))
                .env("GPUPEEK_SHM", &sandbox.shm)
                .env("PYTHONDONTWRITEBYTECODE", "1");
            cmd
        });
        assert!(out.status.success(), "{}", stderr(&out));
        let ours: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        let o = &ours["gpus"][0]["processes"][0];
        assert_eq!(o["command"], name);
        assert_eq!(o["full_command"], json!(whole));
    }
}
