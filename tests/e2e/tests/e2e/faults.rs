//! Faults: a daemon killed mid-write, GPUs and NVML failing under it, slow driver
//! calls, a shared-memory filesystem that is full or read-only, and the signals and
//! closed descriptors a daemon meets in practice. Each test states the outcome the
//! daemon and its readers must show; docs/RELIABILITY.md lists them with their figures.

use std::process::Command;
use std::time::{Duration, Instant};

use gpupeek_e2e::{bins, root_or_skip, run_with_watchdog, stderr, stdout, wait_for, Sandbox, Tmux};
use gpupeek_shm::layout::{DaemonState, GpuState};
use gpupeek_shm::{Error, Liveness, Segment};
use nix::sys::signal::Signal;
use serde_json::{json, Value};

const GIB: u64 = 1 << 30;

fn gpu(n: u32, temperature_c: u32) -> Value {
    json!({
        "name": format!("NVIDIA H100 80GB HBM3 #{n}"),
        "uuid": format!("GPU-{n:08}-2222-3333-4444-555555555555"),
        "pci_bus_id": format!("00000000:{:02x}:00.0", 0x18 + n),
        "memory_total_bytes": 80 * GIB, "memory_used_bytes": GIB,
        "utilization_gpu_pct": 10 * n, "temperature_c": temperature_c,
        "power_usage_mw": 100_000, "power_limit_mw": 700_000
    })
}

fn two_gpus() -> Value {
    json!({"gpus": [gpu(0, 40), gpu(1, 50)]})
}

fn live(tag: &str, scenario: &Value, interval: &str) -> (Sandbox, gpupeek_e2e::Daemon) {
    let sb = Sandbox::new(tag);
    sb.write_scenario(scenario);
    let daemon = sb.start_daemon(interval);
    sb.wait_live(&daemon);
    (sb, daemon)
}

/// Waits until a fresh snapshot satisfies `check`.
fn wait_snapshot(
    sb: &Sandbox,
    daemon: &gpupeek_e2e::Daemon,
    what: &str,
    check: impl Fn(&gpupeek_shm::Snapshot) -> bool,
) {
    wait_for(what, daemon, || {
        Segment::open(&sb.shm)
            .and_then(|s| s.snapshot())
            .is_ok_and(|snap| check(&snap))
    });
}

#[test]
fn a_daemon_frozen_mid_write_reads_stale_and_after_sigkill_a_restart_resumes_old_readers() {
    // A daemon starved by a test loading both cores publishes nothing in its first ticks.
    let _turn = gpupeek_e2e::one_at_a_time();
    let sb = Sandbox::new("frozen");
    sb.write_scenario(&two_gpus());
    let mut cmd = sb.daemon_command("50ms");
    // Freeze inside the 41st GPU write: GPU 0's record of the 21st tick, about a second
    // in. (The 3rd tick was too soon: on a loaded machine the first ticks publish
    // nothing, the daemon froze before its first publish and `wait_live` timed out.)
    cmd.env("GPUPEEKD_TEST_FREEZE_MID_WRITE", "40");
    let mut daemon = sb.spawn_daemon(cmd);
    sb.wait_live(&daemon);
    // A long-lived reader, mapped before the fault and kept across the restart.
    let reader = sb.segment();
    wait_for("the daemon to stop itself mid-write", &daemon, || {
        daemon.state() == 'T'
    });
    let geometry = *reader.geometry();
    let seq = reader.generation();
    let gpu0_seq = {
        let words = std::fs::read(sb.shm_path()).unwrap();
        let at = geometry.gpu_table_offset;
        u64::from_ne_bytes(words[at..at + 8].try_into().unwrap())
    };
    assert_eq!(gpu0_seq % 2, 1, "GPU 0's record is left mid-write");

    let stale_now = |what: &str| {
        let started = Instant::now();
        let result = reader.snapshot();
        let took = started.elapsed();
        assert!(
            matches!(result, Err(Error::Stale { .. })),
            "{what}: {result:?}"
        );
        eprintln!("{what}: snapshot gave up as stale after {took:?}");
        let out = sb.client(&[]);
        assert_eq!(out.status.code(), Some(4), "{what}: {}", stderr(&out));
        assert!(stderr(&out).contains("mid-write"), "{}", stderr(&out));
    };
    stale_now("frozen");
    daemon.signal(Signal::SIGKILL);
    assert_eq!(daemon.wait_exit(), None, "killed by a signal");
    stale_now("killed");
    assert_eq!(
        reader.generation(),
        seq,
        "nothing published after the freeze"
    );

    let restarted = sb.start_daemon("50ms");
    wait_for("the old reader to read the new daemon", &restarted, || {
        reader.snapshot().is_ok_and(|snap| {
            snap.generation > seq
                && snap.liveness(gpupeek_shm::mono_now_ns()) == Liveness::Live
                && snap.gpus.len() == 2
                && snap.gpus[0].temp_gpu_c == 40
        })
    });
    assert_ne!(sb.segment().header().epoch, reader.header().epoch);
    assert_eq!(
        sb.segment().geometry(),
        reader.geometry(),
        "taken over in place"
    );
    assert_eq!(sb.client(&[]).status.code(), Some(0));
}

#[test]
fn a_gpu_lost_mid_run_is_marked_lost_keeps_its_identity_and_the_others_keep_updating() {
    let (sb, daemon) = live("lost", &two_gpus(), "50ms");
    let mut scenario = two_gpus();
    scenario["gpus"][0]["errors"] = json!({"*": "GPU_IS_LOST"});
    sb.write_scenario(&scenario);
    wait_snapshot(&sb, &daemon, "GPU 0 to be lost", |s| {
        s.gpus[0].state == GpuState::Lost as u32
    });
    scenario["gpus"][1]["temperature_c"] = json!(77);
    sb.write_scenario(&scenario);
    wait_snapshot(&sb, &daemon, "GPU 1 to keep updating", |s| {
        s.gpus[1].temp_gpu_c == 77 && s.gpus[1].state == GpuState::Ok as u32
    });
    let snap = sb.segment().snapshot().unwrap();
    assert_eq!(
        gpupeek_shm::text::decode(&snap.gpus[0].uuid),
        "GPU-00000000-2222-3333-4444-555555555555",
        "a lost GPU keeps its identity so people can tell which one it is"
    );
    assert_eq!(snap.gpus[0].nvml_error_code, 15, "NVML_ERROR_GPU_IS_LOST");
    let out = sb.client(&["--no-header"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.lines().next().unwrap().contains("((GPU is lost))"),
        "{text}"
    );
    assert!(text.lines().nth(1).unwrap().contains("77°C"), "{text}");
}

#[test]
fn a_gpu_whose_calls_start_failing_reports_the_error_and_recovers_when_they_stop() {
    let (sb, daemon) = live("failing", &two_gpus(), "50ms");
    let mut scenario = two_gpus();
    scenario["gpus"][0]["errors"] = json!({
        "nvmlDeviceGetTemperatureV": "UNKNOWN",
        "nvmlDeviceGetUtilizationRates": "UNKNOWN",
    });
    sb.write_scenario(&scenario);
    use gpupeek_shm::layout::gpu_valid;
    wait_snapshot(&sb, &daemon, "GPU 0's errors to show", |s| {
        s.gpus[0].nvml_error_code == 999 && s.gpus[0].valid & gpu_valid::TEMPERATURE == 0
    });
    let snap = sb.segment().snapshot().unwrap();
    assert_ne!(
        snap.gpus[0].valid & gpu_valid::MEMORY,
        0,
        "other fields go on"
    );
    assert_eq!(
        snap.gpus[1].nvml_error_code, 0,
        "the other GPU is untouched"
    );
    let doc: Value = serde_json::from_slice(&sb.client(&["--json"]).stdout).unwrap();
    assert_eq!(
        doc["gpus"][0]["temperature.gpu"],
        Value::Null,
        "N/A, never 0"
    );
    assert_eq!(doc["gpus"][0]["memory.used"], 1024);
    assert_eq!(doc["gpus"][1]["temperature.gpu"], 50);

    // Said once for the whole episode, however many ticks it lasts.
    sb.let_ticks_pass(&daemon, 5);
    let failing = |log: &str| log.matches("GPU 0 (NVIDIA H100 80GB HBM3 #0, GPU-").count();
    let log = daemon.log();
    assert_eq!(failing(&log), 1, "{log}");
    assert!(
        log.contains("NVML queries fail: ") && log.contains("(code 999)"),
        "{log}"
    );

    sb.write_scenario(&two_gpus());
    wait_snapshot(&sb, &daemon, "GPU 0 to recover", |s| {
        s.gpus[0].nvml_error_code == 0 && s.gpus[0].temp_gpu_c == 40
    });
    wait_for("the recovery logged", &daemon, || {
        daemon.log().contains("NVML queries work again")
    });
    assert_eq!(failing(&daemon.log()), 2, "{}", daemon.log());
}

#[test]
fn a_gpu_whose_every_query_fails_is_in_error_not_ok_with_unknowns() {
    let (sb, daemon) = live("allfail", &two_gpus(), "50ms");
    let mut scenario = two_gpus();
    scenario["gpus"][1]["errors"] = json!({"*": "UNKNOWN"});
    sb.write_scenario(&scenario);
    wait_snapshot(&sb, &daemon, "GPU 1 in error", |s| {
        s.gpus[1].state == GpuState::Error as u32
    });
    let snap = sb.segment().snapshot().unwrap();
    assert_eq!(snap.gpus[1].nvml_error_code, 999);
    assert_eq!(snap.gpus[0].state, GpuState::Ok as u32, "GPU 0 goes on");
    let table = stdout(&sb.client(&[]));
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("[1] ((Unknown Error))")),
        "{table}"
    );
    wait_for("the failure logged", &daemon, || {
        daemon.log().contains("NVML queries fail")
    });

    sb.write_scenario(&two_gpus());
    wait_snapshot(&sb, &daemon, "GPU 1 back", |s| {
        s.gpus[1].state == GpuState::Ok as u32 && s.gpus[1].temp_gpu_c == 50
    });
}

#[test]
fn nvml_that_stops_working_mid_run_is_reported_then_reinitialised_without_leaking_handles() {
    let (sb, daemon) = live("nvmldown", &two_gpus(), "50ms");
    let mut scenario = two_gpus();
    scenario["errors"] = json!({"nvmlDeviceGetCount_v2": "UNKNOWN"});
    sb.write_scenario(&scenario);
    wait_for("the client to report the NVML error", &daemon, || {
        sb.client(&[]).status.code() == Some(5)
    });
    let status = sb.segment().status().unwrap();
    assert_eq!(status.state, DaemonState::NvmlError as u32);
    assert_eq!(status.nvml_error_code, 999);
    sb.write_scenario(&two_gpus());
    wait_for("NVML to be re-initialised", &daemon, || {
        sb.client(&[]).status.code() == Some(0)
    });
    assert!(
        daemon.log().contains("NVML stopped working"),
        "{}",
        daemon.log()
    );
    // The failed session was shut down before the new one opened.
    assert_eq!(
        sb.nvml_calls()[&daemon.pid()].1,
        1,
        "exactly one open handle"
    );
}

/// A driver whose library initialises but then cannot count the GPUs must not flap
/// between "initialised" and "stopped working" at every retry: that is two log lines
/// per two ticks forever, and no backoff at all.
#[test]
fn nvml_that_initialises_but_cannot_count_gpus_is_logged_once_and_backs_off() {
    let (sb, daemon) = live("nvmlflap", &two_gpus(), "50ms");
    let mut scenario = two_gpus();
    scenario["errors"] = json!({"nvmlDeviceGetCount_v2": "UNKNOWN"});
    sb.write_scenario(&scenario);
    wait_for("the client to report the NVML error", &daemon, || {
        sb.client(&[]).status.code() == Some(5)
    });
    sb.let_ticks_pass(&daemon, 40);
    let log = daemon.log();
    let count = |what: &str| log.lines().filter(|l| l.contains(what)).count();
    assert_eq!(count("NVML stopped working"), 1, "{log}");
    assert_eq!(count("NVML initialised"), 1, "only the first one:\n{log}");
    // At most one attempt a tick, with a doubling backoff: a handful in 40 ticks, where
    // a retry every other tick would make about 20.
    let calls = sb.nvml_call_file(daemon.pid()).unwrap_or_default();
    let inits = calls.get("nvmlInit_v2").copied().unwrap_or(0)
        + calls.get("nvmlInitWithFlags").copied().unwrap_or(0);
    assert!(
        inits <= 12,
        "{inits} initialisations in 40 ticks: {calls:?}"
    );
    sb.write_scenario(&two_gpus());
    wait_for("NVML to be re-initialised", &daemon, || {
        sb.client(&[]).status.code() == Some(0)
    });
}

/// NVML can take seconds to initialise (no persistence mode): until the first publish
/// readers must judge the segment against the daemon's period, so a daemon still in its
/// first tick reads as starting, not as "not responding ..., period 0.000s".
#[test]
fn a_daemon_slow_to_initialise_nvml_reads_as_starting_not_stale() {
    let sb = Sandbox::new("slowinit");
    let mut scenario = two_gpus();
    scenario["latency_us_by_function"] =
        json!({"nvmlInit_v2": 8_000_000, "nvmlInitWithFlags": 8_000_000});
    sb.write_scenario(&scenario);
    let daemon = sb.start_daemon("10s");
    // Past the 1 s floor of the staleness limit, still inside the first tick.
    wait_for("the segment to be 1.5 s old", &daemon, || {
        Segment::open(&sb.shm)
            .and_then(|s| s.status())
            .is_ok_and(|st| gpupeek_shm::mono_now_ns() > st.heartbeat_mono_ns + 1_500_000_000)
    });
    let out = sb.client(&[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("is starting"), "{}", stderr(&out));
    assert_eq!(
        sb.segment().generation(),
        0,
        "the first tick has not published yet"
    );
}

#[test]
fn a_stalled_tick_skips_missed_ticks_instead_of_queueing_them() {
    let period_ns = 50_000_000;
    let (sb, daemon) = live("slow", &two_gpus(), "50ms");
    let segment = sb.segment();
    // A daemon held up for 300 ms (stopped here; on a real machine, swapping or a
    // starved CPU) finds six ticks missed when it runs again.
    daemon.signal(Signal::SIGSTOP);
    std::thread::sleep(Duration::from_millis(300));
    daemon.signal(Signal::SIGCONT);
    // Heartbeats of the ticks right after: a daemon that queued the missed ticks would
    // now publish several of them back to back.
    let after = segment.generation() + 1;
    let mut beats = Vec::new();
    let mut last = 0;
    wait_for("ten normal ticks", &daemon, || {
        let status = segment.status().unwrap();
        let generation = segment.generation();
        if generation >= after && generation != last {
            last = generation;
            beats.push((generation, status.heartbeat_mono_ns));
        }
        std::thread::sleep(Duration::from_millis(1));
        generation >= after + 10
    });
    // One tick that ran late (the machine was busy) can come close to the next one; a
    // queue of missed ticks would come as a burst. So three ticks in a row must span at
    // least half a period.
    for run in beats.windows(3) {
        let ((g1, t1), (g3, t3)) = (run[0], run[2]);
        if g3 == g1 + 2 {
            assert!(
                t3 - t1 >= period_ns / 2,
                "ticks {g1} to {g3} came within {} ns: missed ticks were queued",
                t3 - t1
            );
        }
    }
    assert!(daemon.log().contains("overran"), "{}", daemon.log());
}

#[test]
fn a_slow_nvml_call_delays_its_gpu_not_the_heartbeat() {
    let (sb, daemon) = live("slowcall", &two_gpus(), "50ms");
    let mut slow = two_gpus();
    slow["latency_us_by_function"] = json!({"nvmlDeviceGetUtilizationRates": 300_000});
    sb.write_scenario(&slow);
    let segment = sb.segment();
    // Let the slow calls begin, then count twenty ticks.
    sb.let_ticks_pass(&daemon, 4);
    let start = segment.snapshot().unwrap();
    wait_for("twenty ticks", &daemon, || {
        segment.generation() >= start.generation + 20
    });
    let end = segment.snapshot().unwrap();
    // Ticks waited for no call: twenty of them took far less than twenty 300 ms calls
    // (each GPU is sampled on its own thread, and a tick publishes what has come).
    let span = end.status.heartbeat_mono_ns - start.status.heartbeat_mono_ns;
    assert!(span < 3_000_000_000, "twenty ticks took {span} ns");
    // The GPUs are late, not hung (300 ms is under the 2 s timeout): still ok, with
    // records older than the heartbeat.
    for g in &end.gpus {
        assert_eq!(GpuState::from_raw(g.state), Some(GpuState::Ok));
    }
    assert!(end
        .gpus
        .iter()
        .any(|g| g.sample_mono_ns + 50_000_000 < end.status.heartbeat_mono_ns));
    let log = daemon.log();
    assert!(
        !log.contains("overran") && !log.contains("not returned"),
        "{log}"
    );
}

#[test]
fn a_second_daemon_refuses_even_while_the_first_is_frozen() {
    let (sb, first) = live("frozenowner", &two_gpus(), "50ms");
    first.signal(Signal::SIGSTOP);
    let mut second = sb.start_daemon("50ms");
    let code = second.wait_exit();
    first.signal(Signal::SIGCONT);
    assert_eq!(code, Some(3), "{}", second.log());
    let generation = sb.segment().generation();
    sb.wait_generation(generation + 2, &first);
    assert_eq!(sb.client(&[]).status.code(), Some(0));
}

/// Runs `script` in a private mount namespace (as root) with these positional
/// parameters: $1 gpupeekd, $2 gpupeek, $3 the fake NVML, $4 the sandbox directory.
fn in_mount_namespace(sb: &Sandbox, script: &str) -> String {
    let mut cmd = gpupeek_e2e::sh_in_private_mounts(script);
    cmd.arg(&bins().daemon)
        .arg(&bins().client)
        .arg(&bins().fake_nvml)
        .arg(&sb.dir)
        .env("FAKE_NVML_SCENARIO", sb.scenario_path())
        .env("GPUPEEK_LOCK_DIR", &sb.dir)
        // History state stays in the sandbox (a root daemon's default is
        // /var/lib/gpupeek).
        .env("GPUPEEK_STATE_DIR", sb.dir.join("state"));
    let out = run_with_watchdog(cmd);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    stdout(&out) + &stderr(&out)
}

#[test]
fn a_full_shared_memory_filesystem_at_start_is_one_line_exit_4_and_leaves_nothing() {
    if !root_or_skip("a_full_shared_memory_filesystem_at_start") {
        return;
    }
    let sb = Sandbox::new("shmfull");
    sb.write_scenario(&two_gpus());
    // 8 KiB of tmpfs: the header fits, the segment does not.
    let out = in_mount_namespace(
        &sb,
        r#"mount -t tmpfs -o size=8k,mode=1777 tmpfs /dev/shm || exit 1
        "$1" --foreground --shm full --nvml-lib "$3" 2>"$4/err"; echo "daemon=$?"
        echo "lines=$(wc -l <"$4/err")"; cat "$4/err"
        echo "left=$(ls -A /dev/shm | wc -l)"
        "$2" --shm full; echo "client=$?""#,
    );
    assert!(out.contains("daemon=4"), "{out}");
    assert!(out.contains("lines=1"), "{out}");
    assert!(out.contains("No space left on device"), "{out}");
    assert!(
        out.contains("left=0"),
        "a half-made segment was left: {out}"
    );
    assert!(out.contains("client=3"), "{out}");
}

#[test]
fn a_read_only_shared_memory_filesystem_is_one_line_exit_4() {
    if !root_or_skip("a_read_only_shared_memory_filesystem") {
        return;
    }
    let sb = Sandbox::new("shmro");
    sb.write_scenario(&two_gpus());
    let out = in_mount_namespace(
        &sb,
        r#"mount -t tmpfs -o ro,mode=1777 tmpfs /dev/shm || exit 1
        "$1" --foreground --shm ro --nvml-lib "$3" 2>"$4/err"; echo "daemon=$?"
        echo "lines=$(wc -l <"$4/err")"; cat "$4/err"
        "$2" --shm ro; echo "client=$?""#,
    );
    assert!(out.contains("daemon=4"), "{out}");
    assert!(out.contains("lines=1"), "{out}");
    assert!(out.contains("Read-only file system"), "{out}");
    assert!(out.contains("client=3"), "{out}");
}

#[test]
fn a_shared_memory_filesystem_that_fills_up_after_start_hurts_neither_daemon_nor_readers() {
    if !root_or_skip("a_shared_memory_filesystem_that_fills_up_after_start") {
        return;
    }
    let sb = Sandbox::new("shmfills");
    sb.write_scenario(&two_gpus());
    // Room for the segment and 64 KiB more, which a filler then takes.
    let segment = gpupeek_shm::Geometry::for_capacities(
        gpupeek_shm::layout::DEFAULT_GPU_CAPACITY,
        gpupeek_shm::layout::DEFAULT_PROC_CAPACITY,
    )
    .segment_size;
    let tmpfs_kib = segment.div_ceil(4096) * 4 + 64;
    let script = r#"mount -t tmpfs -o size=TMPFSk,mode=1777 tmpfs /dev/shm || exit 1
        "$1" --foreground --shm fills --interval 20ms --nvml-lib "$3" 2>"$4/err" &
        daemon=$!
        for i in $(seq 100); do "$2" --shm fills >/dev/null 2>&1 && break; sleep 0.05; done
        dd if=/dev/zero of=/dev/shm/filler bs=4k 2>/dev/null; echo "avail=$(($(df --output=avail /dev/shm | tail -1)))"
        sleep 0.3
        "$2" --shm fills --no-header; echo "client=$?"
        kill $daemon; wait $daemon; echo "daemon=$?""#;
    let out = in_mount_namespace(&sb, &script.replace("TMPFS", &tmpfs_kib.to_string()));
    assert!(out.contains("avail=0"), "{out}");
    assert!(out.contains("client=0"), "{out}");
    assert!(out.contains("NVIDIA H100 80GB HBM3 #1"), "{out}");
    assert!(
        out.contains("daemon=0"),
        "the daemon survived to a clean stop: {out}"
    );
}

#[test]
fn sighup_and_sigpipe_are_ignored_and_publishing_goes_on() {
    let (sb, mut daemon) = live("hup", &two_gpus(), "50ms");
    for signal in [Signal::SIGHUP, Signal::SIGPIPE, Signal::SIGHUP] {
        daemon.signal(signal);
        let generation = sb.segment().generation();
        sb.wait_generation(generation + 2, &daemon);
    }
    assert!(daemon.log().contains("SIGHUP ignored"), "{}", daemon.log());
    daemon.signal(Signal::SIGTERM);
    assert_eq!(daemon.wait_exit(), Some(0));
}

#[test]
fn a_daemon_whose_stderr_is_a_closed_pipe_keeps_publishing() {
    let sb = Sandbox::new("epipe");
    sb.write_scenario(&two_gpus());
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let mut cmd = sb.daemon_command("50ms");
    let child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::from(write))
        .spawn()
        .unwrap();
    let mut daemon = gpupeek_e2e::Daemon::from_child(child, sb.dir.join("none.log"));
    // Its log lines (one at start, then on SIGHUP) all fail with EPIPE.
    sb.wait_live(&daemon);
    daemon.signal(Signal::SIGHUP);
    let generation = sb.segment().generation();
    sb.wait_generation(generation + 3, &daemon);
    daemon.signal(Signal::SIGTERM);
    assert_eq!(daemon.wait_exit(), Some(0));
}

#[test]
fn closed_standard_descriptors_are_harmless_to_daemon_and_client() {
    let sb = Sandbox::new("closedfds");
    sb.write_scenario(&two_gpus());
    // `exec >&- 2>&- <&-` closes them for real, before gpupeekd starts.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", r#"exec "$@" <&- >&- 2>&-"#, "sh"])
        .arg(&bins().daemon)
        .args(["--foreground", "--shm", &sb.shm, "--interval", "50ms"])
        .arg("--nvml-lib")
        .arg(&bins().fake_nvml)
        .env("FAKE_NVML_SCENARIO", sb.scenario_path())
        .env("GPUPEEK_LOCK_DIR", &sb.dir)
        // History state stays in the sandbox (a root daemon's default is
        // /var/lib/gpupeek).
        .env("GPUPEEK_STATE_DIR", sb.dir.join("state"));
    let daemon = sb.spawn_daemon(cmd);
    sb.wait_live(&daemon);
    let generation = sb.segment().generation();
    sb.wait_generation(generation + 2, &daemon);
    let lock = sb.dir.join(format!("gpupeekd-{}.lock", sb.shm));
    assert_eq!(
        std::fs::read(&lock).unwrap(),
        b"",
        "log text went into a descriptor that reused fd 1 or 2"
    );
    let mut client = Command::new("sh");
    client
        .args(["-c", r#""$@" >&-; echo "client=$?" >&2"#, "sh"])
        .arg(&bins().client)
        .args(["--shm", &sb.shm]);
    let out = run_with_watchdog(client);
    assert_eq!(stderr(&out).trim(), "client=0", "{}", stderr(&out));
}

#[test]
fn a_client_whose_stderr_is_a_closed_pipe_still_exits_with_its_status() {
    let sb = Sandbox::new("clientepipe");
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let status = Command::new(&bins().client)
        .args(["--shm", &sb.shm])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::from(write))
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3), "no daemon, said to nobody");
}

#[test]
fn the_watch_view_survives_terminal_resizes_and_quits_cleanly() {
    let Some(tmux) = gpupeek_e2e::tool("tmux", "tmux") else {
        return;
    };
    let (sb, daemon) = live("resize", &two_gpus(), "50ms");
    let tmux = Tmux {
        tmux,
        socket: sb.shm.clone(),
    };
    let command = format!("{} --shm {} --watch 0.1", bins().client.display(), sb.shm);
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "w",
        "-x",
        "100",
        "-y",
        "30",
        &command,
    ]);
    tmux.run(&["set-option", "-t", "w", "remain-on-exit", "on"]);
    let screen = || tmux.run(&["capture-pane", "-p", "-t", "w"]);
    let pane = || {
        tmux.run(&[
            "list-panes",
            "-t",
            "w",
            "-F",
            "#{pane_dead} #{pane_dead_status} #{pane_dead_signal}",
        ])
    };
    wait_for("the first frame", &daemon, || screen().contains("#1"));
    // Every resize sends SIGWINCH; the view must keep drawing at each new size.
    for (x, y) in [(40, 10), (200, 60), (20, 5), (120, 40), (80, 24)] {
        tmux.run(&[
            "resize-window",
            "-t",
            "w",
            "-x",
            &x.to_string(),
            "-y",
            &y.to_string(),
        ]);
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(
            pane().trim(),
            "0",
            "gpupeek --watch died on a resize to {x}x{y}"
        );
    }
    wait_for("a frame at the last size", &daemon, || {
        screen().contains("NVIDIA H100 80GB HBM3 #1")
    });
    tmux.run(&["send-keys", "-t", "w", "q"]);
    // Dead, with exit status 0. tmux sometimes records neither a status nor a signal for a
    // pane whose process it reaped late; that is accepted, a non-zero status or a signal
    // is not.
    let mut last = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        last = pane();
        let fields: Vec<&str> = last.split_whitespace().collect();
        if fields == ["1", "0"] || fields == ["1"] {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "gpupeek --watch did not quit on q: pane {last:?}; screen:\n{}",
        screen()
    );
}
