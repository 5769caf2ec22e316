//! End to end: the real gpupeekd on the fake NVML, the real gpupeek, real segments.

use std::process::{Child, Command};
use std::time::Duration;

use gpupeek_e2e::{bins, run_with_watchdog, stderr, stdout, wait_for, Sandbox};
use nix::sys::signal::Signal;
use serde_json::{json, Value};

/// A real process to list as a GPU user, so user and command come from /proc.
struct Sleeper(Child);

impl Sleeper {
    fn new() -> Self {
        Sleeper(Command::new("sleep").arg("600").spawn().unwrap())
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn me() -> String {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .unwrap()
        .map_or_else(|| nix::unistd::geteuid().to_string(), |u| u.name)
}

const GIB: u64 = 1 << 30;

/// Two H100s, one busy with `pid`, one idle; and a GPU whose every call says it is lost.
fn scenario(pid: u32) -> Value {
    json!({
        "driver_version": "550.54.15",
        "gpus": [
            {
                "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
                "pci_bus_id": "00000000:18:00.0",
                "memory_total_bytes": 85520809984u64, "memory_used_bytes": 10 * GIB,
                "memory_free_bytes": 85520809984u64 - 10 * GIB, "memory_reserved_bytes": 0,
                "utilization_gpu_pct": 45, "utilization_memory_pct": 12, "temperature_c": 41,
                "power_usage_mw": 123456, "power_limit_mw": 700000, "energy_mj": 5000,
                "encoder_utilization_pct": 0, "decoder_utilization_pct": 7,
                "clocks_mhz": {"graphics": 1980, "sm": 1980, "memory": 2619},
                "max_clocks_mhz": {"graphics": 1980, "sm": 1980, "memory": 2619},
                "pstate": 0, "clock_event_reasons": 4, "pcie_tx_kbps": 100, "pcie_rx_kbps": 200,
                "processes": [{"pid": pid, "used_gpu_memory_bytes": 8 * GIB, "type": "compute"}]
            },
            {
                "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-66666666-2222-3333-4444-555555555555",
                "pci_bus_id": "00000000:19:00.0",
                "memory_total_bytes": 85520809984u64, "memory_used_bytes": 0,
                "memory_free_bytes": 85520809984u64, "memory_reserved_bytes": 0,
                "utilization_gpu_pct": 0, "utilization_memory_pct": 0, "temperature_c": 30,
                "power_usage_mw": 70000, "power_limit_mw": 700000, "fan_speed_pct": 20
            },
            {
                "name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-77777777-2222-3333-4444-555555555555",
                "pci_bus_id": "00000000:1a:00.0", "memory_total_bytes": 42949672960u64,
                "errors": {"*": "GPU_IS_LOST"}
            }
        ]
    })
}

/// A sandbox with the standard scenario and a live daemon.
fn live(tag: &str, interval: &str) -> (Sandbox, Sleeper, gpupeek_e2e::Daemon) {
    let sandbox = Sandbox::new(tag);
    let sleeper = Sleeper::new();
    sandbox.write_scenario(&scenario(sleeper.pid()));
    let daemon = sandbox.start_daemon(interval);
    sandbox.wait_live(&daemon);
    (sandbox, sleeper, daemon)
}

#[test]
fn default_output_matches_the_scenario_in_gpustats_layout() {
    let (sb, _sleeper, _daemon) = live("table", "100ms");
    let out = sb.client(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    assert!(
        lines[0].starts_with(&format!("{host:24}  ")),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with("  550.54.15"), "{}", lines[0]);
    assert_eq!(
        &lines[1..],
        [
            format!(
                "[0] NVIDIA H100 80GB HBM3 | 41°C,  45 % | 10240 / 81559 MB | {}(8192M)",
                me()
            ),
            "[1] NVIDIA H100 80GB HBM3 | 30°C,   0 % |     0 / 81559 MB |".to_owned(),
            "[2] ((GPU is lost))       |  ?°C,   ? % |     ? /     ? MB | (Not Supported)"
                .to_owned(),
        ]
    );
}

#[test]
fn by_user_has_the_tables_header_line() {
    // A 60 s period: both runs read the same publish, so the same time.
    let (sb, _sleeper, _daemon) = live("byuser-header", "60s");
    let first_line = |args: &[&str]| stdout(&sb.client(args)).lines().next().map(str::to_owned);
    assert_eq!(first_line(&["--by-user"]), first_line(&[]));
}

#[test]
fn show_all_adds_command_pid_codec_power_and_fan() {
    let (sb, sleeper, _daemon) = live("all", "100ms");
    let out = sb.client(&["-aF", "--no-header"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = stdout(&out).lines().next().unwrap().to_owned();
    assert_eq!(
        first,
        format!(
            "[0] NVIDIA H100 80GB HBM3 | 41°C,  ?? %,  45 % (E:   0 %  D:   7 %),  123 / 700 W \
             | 10240 / 81559 MB | {}:sleep/{}(8192M)",
            me(),
            sleeper.pid()
        )
    );
}

#[test]
fn json_matches_the_scenario_with_gpustats_keys_and_units() {
    let (sb, sleeper, _daemon) = live("json", "100ms");
    let out = sb.client(&["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["driver_version"], "550.54.15");
    let gpu0 = &doc["gpus"][0];
    let expected = json!({
        "index": 0, "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "name": "NVIDIA H100 80GB HBM3", "temperature.gpu": 41, "fan.speed": null,
        "utilization.gpu": 45, "utilization.enc": 0, "utilization.dec": 7,
        "power.draw": 123, "enforced.power.limit": 700,
        "memory.used": 10240, "memory.total": 81559,
    });
    let mut gpu0 = gpu0.clone();
    let processes = gpu0.as_object_mut().unwrap().remove("processes").unwrap();
    // gpupeek's own keys after gpustat's (more in verdicts.rs): reasons 0x4, no GPM.
    let own = [
        ("verdict", json!("power-capped")),
        ("clock_event_reasons", json!(["sw_power_cap"])),
        ("gpm", Value::Null),
    ];
    for (key, want) in own {
        assert_eq!(
            gpu0.as_object_mut().unwrap().remove(key),
            Some(want),
            "{key}"
        );
    }
    assert_eq!(gpu0, expected);
    let p = &processes[0];
    assert_eq!(p["username"], me());
    assert_eq!(p["command"], "sleep");
    assert_eq!(p["full_command"], json!(["sleep", "600"]));
    assert_eq!(p["gpu_memory_usage"], 8192);
    assert_eq!(p["pid"], sleeper.pid());
    assert!(p["cpu_memory_usage"].as_u64().unwrap() > 0);
    assert_eq!(doc["gpus"][1]["fan.speed"], 20);
    assert_eq!(doc["gpus"][1]["processes"], json!([]));
    assert_eq!(
        doc["gpus"][2],
        json!({"index": 2, "name": "((GPU is lost))", "processes": null, "state": "lost", "uuid": null})
    );
    // Key order is gpustat's, for tools that read it positionally.
    let raw = stdout(&out);
    let order = [
        "\"index\"",
        "\"uuid\"",
        "\"name\"",
        "\"temperature.gpu\"",
        "\"memory.total\"",
        "\"processes\"",
    ];
    let positions: Vec<usize> = order.iter().map(|k| raw.find(k).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{raw}");
}

#[test]
fn a_value_edited_in_the_scenario_shows_up_within_two_ticks() {
    let (sb, sleeper, daemon) = live("edit", "100ms");
    let mut edited = scenario(sleeper.pid());
    edited["gpus"][0]["utilization_gpu_pct"] = json!(99);
    edited["gpus"][1]["temperature_c"] = json!(77);
    let generation = sb.segment().generation();
    sb.write_scenario(&edited);
    sb.wait_generation(generation + 2, &daemon);
    let doc: Value = serde_json::from_slice(&sb.client(&["--json"]).stdout).unwrap();
    assert_eq!(doc["gpus"][0]["utilization.gpu"], 99);
    assert_eq!(doc["gpus"][1]["temperature.gpu"], 77);
}

/// The benchmarks' `FAKE_NVML_SCENARIO_READ_ONCE=1`: the fake reads its scenario once,
/// so the `stat()` it otherwise makes on every call (the fake's cost, not a driver's)
/// is not in the daemon's measured cost, and an edit is then not seen.
#[test]
fn with_the_fakes_read_once_switch_an_edited_scenario_is_not_seen() {
    let sleeper = Sleeper::new();
    let sb = Sandbox::new("read-once");
    sb.write_scenario(&scenario(sleeper.pid()));
    let once = std::ffi::OsStr::new("1");
    let daemon = sb.start_daemon_env("100ms", &[], &[("FAKE_NVML_SCENARIO_READ_ONCE", once)]);
    sb.wait_live(&daemon);
    let mut edited = scenario(sleeper.pid());
    edited["gpus"][0]["utilization_gpu_pct"] = json!(99);
    let generation = sb.segment().generation();
    sb.write_scenario(&edited);
    sb.wait_generation(generation + 3, &daemon);
    let doc: Value = serde_json::from_slice(&sb.client(&["--json"]).stdout).unwrap();
    assert_eq!(doc["gpus"][0]["utilization.gpu"], 45, "{doc}");
}

#[test]
fn running_the_client_many_times_adds_zero_nvml_calls() {
    let (sb, _sleeper, daemon) = live("calls", "1s");
    // Freeze the daemon so that only clients could possibly call NVML meanwhile.
    daemon.signal(Signal::SIGSTOP);
    let before = sb.nvml_calls();
    assert_eq!(before.keys().copied().collect::<Vec<_>>(), [daemon.pid()]);
    for _ in 0..25 {
        assert_eq!(sb.client(&["--json"]).status.code(), Some(0));
        assert_eq!(sb.client(&["-a"]).status.code(), Some(0));
    }
    let after = sb.nvml_calls();
    daemon.signal(Signal::SIGCONT);
    assert_eq!(before, after, "clients must not call NVML");
    assert!(
        after[&daemon.pid()].0 > 0,
        "the daemon itself did call NVML"
    );
}

#[test]
fn sigterm_stops_cleanly_with_state_stopped_and_nvml_released() {
    let (sb, _sleeper, mut daemon) = live("sigterm", "100ms");
    let pid = daemon.pid();
    daemon.signal(Signal::SIGTERM);
    assert_eq!(daemon.wait_exit(), Some(0));
    let status = sb.segment().status().unwrap();
    assert_eq!(status.state, gpupeek_shm::DaemonState::Stopped as u32);
    assert_eq!(sb.nvml_calls()[&pid].1, 0, "nvmlShutdown was called");
    let out = sb.client(&[]);
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out).contains("has stopped"), "{}", stderr(&out));
}

#[test]
fn a_killed_daemon_reads_as_stale_and_a_restarted_one_is_picked_up() {
    let (sb, _sleeper, mut daemon) = live("restart", "100ms");
    let old_epoch = sb.segment().header().epoch;
    daemon.signal(Signal::SIGKILL);
    daemon.wait_exit();
    let mut last = None;
    wait_for("the client to report a stale daemon", &daemon, || {
        let out = sb.client(&[]);
        last = Some(stderr(&out));
        out.status.code() == Some(4)
    });
    assert!(last.unwrap().contains("not responding"));

    let restarted = sb.start_daemon("100ms");
    wait_for("the restarted daemon to be read", &restarted, || {
        sb.client(&[]).status.code() == Some(0)
    });
    assert_ne!(sb.segment().header().epoch, old_epoch);
}

#[test]
fn a_second_daemon_on_a_live_segment_refuses_and_leaves_the_first_alone() {
    let (sb, _sleeper, first) = live("second", "100ms");
    let mut second = sb.start_daemon("100ms");
    assert_eq!(second.wait_exit(), Some(3));
    assert!(
        second.log().contains(&format!("pid {}", first.pid())),
        "{}",
        second.log()
    );
    let generation = sb.segment().generation();
    sb.wait_generation(generation + 2, &first);
    assert_eq!(sb.client(&[]).status.code(), Some(0));
}

#[test]
fn nvml_init_failure_is_reported_then_recovered() {
    let sb = Sandbox::new("initfail");
    let sleeper = Sleeper::new();
    let mut failing = scenario(sleeper.pid());
    failing["init_error"] = json!("DRIVER_NOT_LOADED");
    sb.write_scenario(&failing);
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    let out = sb.client(&[]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(stderr(&out).contains("NVML error 9"), "{}", stderr(&out));
    sb.write_scenario(&scenario(sleeper.pid()));
    wait_for("NVML to be re-initialised", &daemon, || {
        sb.client(&[]).status.code() == Some(0)
    });
}

#[test]
fn no_segment_means_no_daemon() {
    let sb = Sandbox::new("absent");
    let out = sb.client(&[]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("is gpupeekd running?"),
        "{}",
        stderr(&out)
    );
    assert_eq!(stderr(&out).lines().count(), 1);
}

#[test]
fn a_squatted_segment_is_refused_by_clients_and_replaced_by_the_daemon() {
    let sb = Sandbox::new("squat");
    std::fs::write(sb.shm_path(), vec![0u8; 4096]).unwrap();
    std::fs::set_permissions(
        sb.shm_path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .unwrap();
    let out = sb.client(&[]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert!(stderr(&out).contains("untrusted"), "{}", stderr(&out));
    // The daemon does not reuse an object it cannot trust: it replaces it.
    let sleeper = Sleeper::new();
    sb.write_scenario(&scenario(sleeper.pid()));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    assert_eq!(sb.client(&[]).status.code(), Some(0));
}

#[test]
fn a_corrupt_segment_is_refused_with_one_line() {
    let sb = Sandbox::new("corrupt");
    std::fs::write(sb.shm_path(), vec![0x5au8; 8192]).unwrap();
    std::fs::set_permissions(
        sb.shm_path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let out = sb.client(&[]);
    assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("gpupeek: corrupt segment"),
        "{}",
        stderr(&out)
    );
    assert_eq!(stderr(&out).lines().count(), 1);
}

#[test]
fn bad_flags_get_one_line_and_exit_2() {
    let sb = Sandbox::new("flags");
    for args in [
        &["--bogus"][..],
        &["--id", "x"],
        &["-e", "mp4"],
        &["--gpuname-width", "-1"],
    ] {
        let out = sb.client(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stdout(&out).is_empty());
    }
    let mut cmd = Command::new(&bins().daemon);
    cmd.args(["--interval", "1ms"]);
    let out = run_with_watchdog(cmd);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("10ms"), "{}", stderr(&out));
}

#[test]
fn a_closed_stdout_pipe_is_a_quiet_exit() {
    let (sb, _sleeper, _daemon) = live("pipe", "100ms");
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let out = Command::new(&bins().client)
        .args(["--shm", &sb.shm, "--json"])
        .stdout(std::process::Stdio::from(write))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
}

#[test]
fn seqlock_stress_checked_readers_see_no_torn_record_while_a_control_reader_does() {
    // Its writer must reach 10 kHz, and it keeps both cores of a small machine busy.
    let _turn = gpupeek_e2e::one_at_a_time();
    let sb = Sandbox::new("stress");
    let peer = env!("CARGO_BIN_EXE_seqlock-stress-peer");
    let writer = Command::new(peer)
        .args(["writer", &sb.shm, "4000"])
        .env("GPUPEEK_LOCK_DIR", &sb.dir)
        // History state stays in the sandbox (a root daemon's default is
        // /var/lib/gpupeek).
        .env("GPUPEEK_STATE_DIR", sb.dir.join("state"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while gpupeek_shm::Segment::open(&sb.shm).map_or(true, |s| s.generation() == 0) {
        assert!(std::time::Instant::now() < deadline, "writer did not start");
        std::thread::sleep(Duration::from_millis(5));
    }
    let readers: Vec<_> = ["checked", "checked", "control"]
        .iter()
        .map(|role| {
            Command::new(peer)
                .args([*role, sb.shm.as_str(), "2500"])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let field = |line: &str, key: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.parse().ok())
            .unwrap()
    };
    let mut reports = Vec::new();
    for child in readers.into_iter().chain([writer]) {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        reports.push(stdout(&out).trim().to_owned());
    }
    let writes = field(&reports[3], "ops=");
    assert!(
        writes > 40_000,
        "the writer must run at 10 kHz or more: {reports:?}"
    );
    for checked in &reports[..2] {
        assert_eq!(field(checked, "torn="), 0, "{reports:?}");
        // Accepted (checked) snapshots; on a loaded machine many attempts against a
        // writer that never pauses end stale, each after the reader's full retry bound.
        let accepted = field(checked, "ops=") - field(checked, "stale=");
        assert!(accepted > 100, "{reports:?}");
    }
    assert!(
        field(&reports[2], "torn=") > 0,
        "the control reader must see tearing: {reports:?}"
    );
}

#[test]
fn a_segment_from_another_abi_major_is_refused_naming_both_versions() {
    let sb = Sandbox::new("abi");
    let geometry = gpupeek_shm::Geometry::for_capacities(1, 1);
    let mut header = geometry.static_header(1, 1);
    header.abi_major = gpupeek_shm::ABI_MAJOR + 1;
    header.abi_minor = 3;
    let mut bytes = vec![0u8; geometry.segment_size];
    bytes[..128].copy_from_slice(zerocopy::IntoBytes::as_bytes(&header));
    std::fs::write(sb.shm_path(), bytes).unwrap();
    std::fs::set_permissions(
        sb.shm_path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let out = sb.client(&[]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let theirs = format!("{}.3", gpupeek_shm::ABI_MAJOR + 1);
    let ours = format!("{}.{}", gpupeek_shm::ABI_MAJOR, gpupeek_shm::ABI_MINOR);
    assert!(
        stderr(&out).contains(&theirs) && stderr(&out).contains(&ours),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_library_without_the_v2_functions_still_gives_memory_fan_and_clock_reasons() {
    let sb = Sandbox::new("v1");
    let sleeper = Sleeper::new();
    let mut old = scenario(sleeper.pid());
    old["gpus"][0]["fan_speed_pct"] = json!(55);
    old["gpus"][0]["errors"] = json!({
        "nvmlDeviceGetMemoryInfo_v2": "FUNCTION_NOT_FOUND",
        "nvmlDeviceGetFanSpeed_v2": "FUNCTION_NOT_FOUND",
        "nvmlDeviceGetCurrentClocksEventReasons": "FUNCTION_NOT_FOUND",
    });
    sb.write_scenario(&old);
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    let doc: Value = serde_json::from_slice(&sb.client(&["--json"]).stdout).unwrap();
    assert_eq!(doc["gpus"][0]["memory.used"], 10240);
    assert_eq!(doc["gpus"][0]["memory.total"], 81559);
    assert_eq!(doc["gpus"][0]["fan.speed"], 55);
    let gpu = &sb.segment().snapshot().unwrap().gpus[0];
    use gpupeek_shm::layout::gpu_valid;
    assert_ne!(gpu.valid & gpu_valid::CLOCK_EVENT_REASONS, 0);
    assert_eq!(gpu.clock_event_reasons, 4);
    assert_eq!(
        gpu.valid & gpu_valid::MEM_RESERVED,
        0,
        "v1 does not report reserved memory"
    );
    assert_eq!(gpu.nvml_error_code, 0, "a missing function is not an error");
}

#[test]
fn an_unprivileged_user_reads_a_root_daemons_segment_but_cannot_write_it() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to start the daemon as root and the reader as another user");
        return;
    }
    use std::os::unix::process::CommandExt;
    let (sb, _sleeper, _daemon) = live("nonroot", "100ms");
    let as_nobody = |program: &std::path::Path| {
        let mut cmd = Command::new(program);
        cmd.uid(65534).gid(65534);
        cmd
    };
    let mut client = as_nobody(&bins().client);
    client.args(["--shm", &sb.shm, "--no-header"]);
    let out = run_with_watchdog(client);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("[0] NVIDIA H100 80GB HBM3 | 41°C,  45 %"),
        "{}",
        stdout(&out)
    );

    let mut write = as_nobody(std::path::Path::new("/bin/sh"));
    write.arg("-c").arg(format!(
        "echo x >> {0} || truncate -s 0 {0} || exit 0; exit 1",
        sb.shm_path().display()
    ));
    let out = run_with_watchdog(write);
    assert_eq!(
        out.status.code(),
        Some(0),
        "an unprivileged user modified the segment"
    );
    assert_eq!(sb.client(&[]).status.code(), Some(0));
}

#[test]
fn a_second_sigterm_exits_at_once_even_inside_a_slow_nvml_call() {
    let sb = Sandbox::new("twice");
    let sleeper = Sleeper::new();
    let mut slow = scenario(sleeper.pid());
    slow["latency_us_by_function"] = json!({"nvmlDeviceGetRunningProcessDetailList": 2_000_000});
    sb.write_scenario(&slow);
    let mut daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    // Every slow tick spends 2 s in one NVML call (on a GPU's worker thread), so half a
    // second from now a worker is inside that call: the first signal's clean stop waits
    // for it (up to the NVML timeout) to shut NVML down, the second must not wait.
    std::thread::sleep(Duration::from_millis(500));
    daemon.signal(Signal::SIGTERM);
    std::thread::sleep(Duration::from_millis(100));
    daemon.signal(Signal::SIGTERM);
    assert_eq!(
        daemon.wait_exit(),
        Some(1),
        "the second signal exits immediately"
    );
}

#[test]
fn a_record_left_mid_write_by_a_frozen_daemon_reads_as_stale_not_corrupt() {
    use std::os::unix::fs::FileExt;
    let (sb, _sleeper, daemon) = live("midwrite", "100ms");
    daemon.signal(Signal::SIGSTOP);
    // Freeze GPU 0's record mid-write, as a daemon killed inside a publish leaves it.
    let geometry = *sb.segment().geometry();
    let seq = sb.segment().snapshot().unwrap().gpus[0].seq;
    let segment = std::fs::OpenOptions::new()
        .write(true)
        .open(sb.shm_path())
        .unwrap();
    segment
        .write_all_at(&(seq + 1).to_ne_bytes(), geometry.gpu_table_offset as u64)
        .unwrap();
    let out = sb.client(&[]);
    daemon.signal(Signal::SIGCONT);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("mid-write"), "{}", stderr(&out));
}
