//! gpupeekd's alerts, end to end: the daemon in the foreground on the fake NVML, its
//! stderr captured, the scenario changed over time. Each episode logs once when it
//! starts and once when it ends, however many ticks it lasts.

use gpupeek_e2e::{Daemon, Sandbox};
use gpupeek_shm::GpuState;
use serde_json::{json, Value};

const GIB: u64 = 1 << 30;

/// GPU 0 with the given temperature, memory used (GiB of 80), power (W of 700) and
/// clock event reasons; GPU 1 healthy, or lost.
fn scenario(temp: u32, mem_gib: u64, power_w: u32, reasons: u64, gpu1_lost: bool) -> Value {
    let mut gpu1 = json!({
        "name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-2", "temperature_c": 30,
        "memory_total_bytes": 40 * GIB, "memory_used_bytes": 0
    });
    if gpu1_lost {
        gpu1["errors"] = json!({"*": "GPU_IS_LOST"});
    }
    json!({"gpus": [
        {
            "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "temperature_c": temp,
            "memory_total_bytes": 80 * GIB, "memory_used_bytes": mem_gib * GIB,
            "power_usage_mw": power_w * 1000, "power_limit_mw": 700000,
            "clock_event_reasons": reasons
        },
        gpu1
    ]})
}

/// Lets the daemon run `ticks` more ticks on the current scenario.
fn advance(sandbox: &Sandbox, daemon: &Daemon, ticks: u64) {
    let now = sandbox.segment().generation();
    sandbox.wait_generation(now + ticks, daemon);
}

/// Applies a scenario and lets it settle: until every GPU's record shows it (lost, or
/// with its temperature, memory, power and clock event reasons: on a loaded machine a tick's sample can come
/// late, and a lost GPU's return takes a new handle), then the five ticks a step always
/// gave (an episode ends after three ticks without its cause).
fn step(sandbox: &Sandbox, daemon: &Daemon, scenario: Value) {
    sandbox.write_scenario(&scenario);
    let gpus = scenario["gpus"].as_array().unwrap().clone();
    sandbox.snapshot_when(daemon, "the new scenario published", |s| {
        s.gpus.len() == gpus.len()
            && s.gpus.iter().zip(&gpus).all(|(g, want)| {
                let num = |key: &str| want[key].as_u64().unwrap_or_default();
                if want["errors"]["*"] == "GPU_IS_LOST" {
                    return g.state == GpuState::Lost as u32;
                }
                g.state == GpuState::Ok as u32
                    && u64::try_from(g.temp_gpu_c).ok() == Some(num("temperature_c"))
                    && g.mem_used_bytes == num("memory_used_bytes")
                    && u64::from(g.power_draw_mw) == num("power_usage_mw")
                    && g.clock_event_reasons == num("clock_event_reasons")
            })
    });
    advance(sandbox, daemon, 5);
}

fn count(daemon: &Daemon, needle: &str) -> usize {
    daemon.log().matches(needle).count()
}

const GPU0: &str = "GPU 0 (NVIDIA H100 80GB HBM3, GPU-1)";

#[test]
fn each_threshold_episode_is_logged_once_when_it_starts_and_once_when_it_ends() {
    let sandbox = Sandbox::new("alerts-episodes");
    sandbox.write_scenario(&scenario(40, 8, 100, 0, false));
    let daemon = sandbox.start_daemon("20ms");
    sandbox.wait_live(&daemon);
    advance(&sandbox, &daemon, 3);
    assert!(!daemon.log().contains("warn: GPU"), "{}", daemon.log());

    let hot = format!("warn: {GPU0}: temperature 90 °C reached the alert threshold of 85 °C");
    step(&sandbox, &daemon, scenario(90, 8, 100, 0, false));
    assert_eq!(count(&daemon, &hot), 1, "{}", daemon.log());
    // Inside the 5 °C margin the episode goes on, silently.
    step(&sandbox, &daemon, scenario(82, 8, 100, 0, false));
    step(&sandbox, &daemon, scenario(88, 8, 100, 0, false));
    assert_eq!(count(&daemon, "temperature"), 1, "{}", daemon.log());
    step(&sandbox, &daemon, scenario(70, 8, 100, 0, false));
    let cool = format!("info: {GPU0}: temperature back to 70 °C (alert threshold 85 °C)");
    assert_eq!(count(&daemon, &cool), 1, "{}", daemon.log());

    step(&sandbox, &daemon, scenario(70, 78, 700, 0, false));
    assert_eq!(
        count(&daemon, &format!("warn: {GPU0}: memory 97% used (79872 of 81920 MiB) reached the alert threshold of 95%")),
        1,
        "{}",
        daemon.log()
    );
    assert_eq!(
        count(
            &daemon,
            &format!(
                "warn: {GPU0}: power draw 700 W is 100% of the 700 W limit (alert threshold 100%)"
            )
        ),
        1,
        "{}",
        daemon.log()
    );
    step(&sandbox, &daemon, scenario(70, 8, 300, 0, false));
    assert_eq!(
        count(&daemon, "memory use back to 10%"),
        1,
        "{}",
        daemon.log()
    );
    assert_eq!(
        count(&daemon, "power draw back to 300 W"),
        1,
        "{}",
        daemon.log()
    );
    assert_eq!(count(&daemon, "warn: GPU"), 3, "{}", daemon.log());
}

#[test]
fn throttling_alerts_name_the_reason_and_ignore_the_routine_power_cap() {
    let sandbox = Sandbox::new("alerts-throttle");
    sandbox.write_scenario(&scenario(40, 8, 100, 0x4, false));
    // Clock event reasons are read on the slow tier: make every tick a slow one. Ticks
    // of 60 ms keep a one-tick flicker (the test reacting to a generation) well apart
    // from the three ticks that end an episode, on a loaded machine too.
    let daemon = sandbox.start_daemon_with("60ms", &["--process-interval", "60ms"]);
    sandbox.wait_live(&daemon);
    advance(&sandbox, &daemon, 5);
    assert!(
        !daemon.log().contains("clocks"),
        "sw_power_cap is not an alert by default"
    );

    step(&sandbox, &daemon, scenario(40, 8, 100, 0x44, false));
    let slowed = format!(
        "warn: {GPU0}: clocks slowed by a hardware thermal slowdown (hw_thermal_slowdown; clock event reasons 0x44)"
    );
    assert_eq!(count(&daemon, &slowed), 1, "{}", daemon.log());
    // Flickering off for one tick at a time does not end the episode.
    for _ in 0..3 {
        sandbox.write_scenario(&scenario(40, 8, 100, 0x4, false));
        advance(&sandbox, &daemon, 1);
        step(&sandbox, &daemon, scenario(40, 8, 100, 0x44, false));
    }
    step(&sandbox, &daemon, scenario(40, 8, 100, 0, false));
    assert_eq!(count(&daemon, "clocks slowed"), 1, "{}", daemon.log());
    let over = format!(
        "info: {GPU0}: clocks no longer slowed by a hardware thermal slowdown (hw_thermal_slowdown)"
    );
    assert_eq!(count(&daemon, &over), 1, "{}", daemon.log());
}

#[test]
fn a_lost_gpu_is_logged_once_and_its_return_once() {
    let sandbox = Sandbox::new("alerts-lost");
    sandbox.write_scenario(&scenario(40, 8, 100, 0, false));
    let daemon = sandbox.start_daemon("20ms");
    sandbox.wait_live(&daemon);
    advance(&sandbox, &daemon, 2);
    step(&sandbox, &daemon, scenario(40, 8, 100, 0, true));
    step(&sandbox, &daemon, scenario(40, 8, 100, 0, true));
    let gpu1 = "GPU 1 (NVIDIA A100-SXM4-40GB, GPU-2)";
    assert_eq!(
        count(&daemon, &format!("warn: {gpu1}: GPU is lost")),
        1,
        "{}",
        daemon.log()
    );
    step(&sandbox, &daemon, scenario(40, 8, 100, 0, false));
    assert_eq!(
        count(&daemon, &format!("info: {gpu1}: GPU is back")),
        1,
        "{}",
        daemon.log()
    );
    // Dropping out of NVML's list is a loss too.
    let mut one_gpu = scenario(40, 8, 100, 0, false);
    one_gpu["gpus"].as_array_mut().unwrap().truncate(1);
    step(&sandbox, &daemon, one_gpu);
    assert_eq!(
        count(
            &daemon,
            &format!("warn: {gpu1}: GPU is no longer listed by NVML")
        ),
        1,
        "{}",
        daemon.log()
    );
}

#[test]
fn alert_flags_move_or_silence_the_thresholds() {
    let sandbox = Sandbox::new("alerts-flags");
    sandbox.write_scenario(&scenario(70, 78, 700, 0x40, true));
    let daemon = sandbox.start_daemon_with(
        "20ms",
        &[
            "--alert-temp",
            "65",
            "--alert-memory",
            "0",
            "--alert-power",
            "0",
            "--alert-throttle",
            "none",
        ],
    );
    sandbox.wait_live(&daemon);
    advance(&sandbox, &daemon, 5);
    let log = daemon.log();
    assert!(
        log.contains("temperature 70 °C reached the alert threshold of 65 °C"),
        "{log}"
    );
    assert!(log.contains("GPU is lost"), "{log}");
    assert_eq!(log.matches("warn: GPU").count(), 2, "{log}");

    let quiet = Sandbox::new("alerts-quiet");
    quiet.write_scenario(&scenario(99, 80, 800, 0xff, true));
    let daemon = quiet.start_daemon_with("20ms", &["--no-alerts"]);
    quiet.wait_live(&daemon);
    advance(&quiet, &daemon, 5);
    assert!(!daemon.log().contains("warn: GPU"), "{}", daemon.log());
}

#[test]
fn bad_alert_flags_are_usage_errors() {
    let sandbox = Sandbox::new("alerts-badflags");
    for args in [
        &["--alert-memory", "150"][..],
        &["--alert-throttle", "hw_thermal,warp_drive"][..],
        &["--alert-temp", "hot"][..],
    ] {
        let mut daemon = sandbox.start_daemon_with("20ms", args);
        assert_eq!(daemon.wait_exit(), Some(2), "{args:?}");
        let log = daemon.log();
        assert_eq!(log.lines().count(), 1, "one line: {log}");
    }
}

#[test]
fn under_the_journal_lines_carry_their_syslog_priority() {
    use std::os::unix::fs::MetadataExt;
    let sandbox = Sandbox::new("alerts-journal");
    sandbox.write_scenario(&scenario(95, 8, 100, 0, false));
    // The journal is whatever $JOURNAL_STREAM names: here, the file stderr goes to.
    let log = sandbox.dir.join("journal.log");
    let file = std::fs::File::create(&log).unwrap();
    let meta = file.metadata().unwrap();
    let child = std::process::Command::new(&gpupeek_e2e::bins().daemon)
        .args([
            "--foreground",
            "--shm",
            &sandbox.shm,
            "--interval",
            "20ms",
            "--nvml-lib",
        ])
        .arg(&gpupeek_e2e::bins().fake_nvml)
        .env("FAKE_NVML_SCENARIO", sandbox.scenario_path())
        .env("GPUPEEK_LOCK_DIR", &sandbox.dir)
        // History state stays in the sandbox (a root daemon's default is
        // /var/lib/gpupeek).
        .env("GPUPEEK_STATE_DIR", sandbox.dir.join("state"))
        .env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))
        .stderr(file)
        .spawn()
        .unwrap();
    let _daemon = gpupeek_e2e::Background { child };
    let text = || std::fs::read_to_string(&log).unwrap();
    let deadline = std::time::Instant::now() + gpupeek_e2e::WATCHDOG;
    while !text().contains("temperature 95") {
        assert!(
            std::time::Instant::now() < deadline,
            "no alert:\n{}",
            text()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let text = text();
    assert!(text.starts_with("<6>gpupeekd: info: "), "{text}");
    assert!(
        text.contains(&format!("\n<4>gpupeekd: warn: {GPU0}: temperature 95 °C")),
        "{text}"
    );
}
