//! The segment's per-GPU history rings: a reader (or `gpupeek -i`) started late sees the
//! samples the daemon took before it existed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use gpupeek_e2e::{bins, record_history_phases, wait_for, Background, Sandbox, WATCHDOG};
use gpupeek_shm::layout::history_valid;
use serde_json::json;

fn scenario(util: u32, used_gib: u64) -> serde_json::Value {
    json!({"gpus": [
        {"name": "NVIDIA H100", "memory_total_bytes": 80u64 << 30,
         "memory_used_bytes": used_gib << 30, "utilization_gpu_pct": util,
         "utilization_memory_pct": 1, "temperature_c": 40, "power_usage_mw": 100_000}
    ]})
}

#[test]
fn a_reader_opened_late_sees_the_earlier_samples_in_order() {
    let sandbox = Sandbox::new("history-late");
    sandbox.write_scenario(&scenario(10, 8));
    let daemon = sandbox.start_daemon("100ms");
    sandbox.wait_live(&daemon);
    record_history_phases(&sandbox, &daemon, scenario, &[(10, 8), (60, 40), (90, 72)]);
    let history = sandbox.segment().history(0).unwrap().unwrap();
    assert_eq!(
        history.step_ns, 1_000_000_000,
        "100 ms period: one sample a second"
    );
    let samples = &history.samples;
    assert!(samples
        .windows(2)
        .all(|w| w[0].sample_mono_ns < w[1].sample_mono_ns));
    let mut phases: Vec<(u8, u32)> = samples
        .iter()
        .map(|s| (s.util_gpu_pct, s.mem_used_mib))
        .collect();
    phases.dedup();
    // Samples taken while the scenario was being rewritten may mix two phases' values.
    phases.retain(|p| [(10, 8 << 10), (60, 40 << 10), (90, 72 << 10)].contains(p));
    assert_eq!(phases, vec![(10, 8 << 10), (60, 40 << 10), (90, 72 << 10)]);
    let last = samples.last().unwrap();
    let all = history_valid::UTILIZATION
        | history_valid::UTIL_MEM
        | history_valid::MEMORY
        | history_valid::POWER_DRAW
        | history_valid::TEMPERATURE;
    assert_eq!(last.valid, all);
    assert_eq!((last.power_draw_mw, last.temp_gpu_c), (100_000, 40));
}

#[test]
fn a_fresh_watch_draws_the_earlier_minutes_in_its_first_frame() {
    let sandbox = Sandbox::new("history-watch");
    sandbox.write_scenario(&scenario(0, 8));
    let daemon = sandbox.start_daemon("100ms");
    sandbox.wait_live(&daemon);
    record_history_phases(&sandbox, &daemon, scenario, &[(0, 8), (100, 8)]);
    let child = Command::new(&bins().client)
        .args(["--shm", &sandbox.shm, "--watch", "5"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let mut child = Background { child };
    std::thread::spawn(move || {
        std::thread::sleep(WATCHDOG);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    });
    let stdout = BufReader::new(child.child.stdout.take().unwrap());
    // Off a terminal, frames are printed one after another; the first one is enough.
    let line = stdout
        .lines()
        .map(Result::unwrap)
        .find(|l| l.starts_with("[0] util"))
        .expect("a sparkline in the first frame");
    let util = line["[0] util ".len()..].split(" mem").next().unwrap();
    assert!(
        util.contains("▁█"),
        "idle then busy, before this client ran: {line:?}"
    );
}

/// The bars `{util:sparkN}` should draw for the newest `n` samples of GPU 0's ring.
fn expected_bars(sandbox: &Sandbox, n: usize) -> String {
    let history = sandbox.segment().history(0).unwrap().unwrap();
    let samples = &history.samples[history.samples.len().saturating_sub(n)..];
    let pad = " ".repeat(n - samples.len());
    let bars: String = samples
        .iter()
        .map(|s| {
            if s.valid & history_valid::UTILIZATION == 0 {
                ' '
            } else {
                gpupeek_render::BARS[(usize::from(s.util_gpu_pct) * 7).div_ceil(100).min(7)]
            }
        })
        .collect();
    pad + &bars
}

#[test]
fn a_format_sparkline_draws_the_rings_newest_samples_and_moves_with_the_load() {
    let sandbox = Sandbox::new("history-spark");
    sandbox.write_scenario(&scenario(0, 0));
    let daemon = sandbox.start_daemon_with("100ms", &[]);
    sandbox.wait_live(&daemon);
    record_history_phases(&sandbox, &daemon, scenario, &[(0, 0), (50, 0), (100, 0)]);
    let template = "[{util:spark6}] [{0.util:spark3}] {mem_used:spark2}";
    // Retry if a sample was appended between the client's read and ours.
    let line = (0..5)
        .find_map(|_| {
            let before = sandbox.segment().history(0).unwrap().unwrap().written;
            let out = sandbox.client(&["--format", template]);
            assert!(out.status.success(), "{out:?}");
            let line = String::from_utf8(out.stdout).unwrap();
            let want = format!(
                "[{}] [{}] ▁▁\n",
                expected_bars(&sandbox, 6),
                expected_bars(&sandbox, 3)
            );
            let after = sandbox.segment().history(0).unwrap().unwrap().written;
            (before == after).then(|| {
                assert_eq!(line, want);
                line
            })
        })
        .expect("the ring kept changing under the client");
    // 0 %, then 50 %, then 100 %: the newest three samples climb.
    assert!(line.contains("▁▅█]"), "{line}");
    drop(daemon);
}

#[test]
fn a_sparkline_of_a_field_without_history_is_a_usage_error_at_its_column() {
    let sandbox = Sandbox::new("history-spark-bad");
    let out = sandbox.client(&["--format", "{name:spark}"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("column 7") && err.contains("no history"),
        "{err}"
    );
}

#[test]
fn a_gpu_slow_to_give_its_first_answer_has_no_gap_at_the_start_of_its_history() {
    let sandbox = Sandbox::new("history-first");
    let mut doc = scenario(30, 8);
    // The first job outlasts the first tick's wait (three quarters of 50 ms).
    doc["latency_us_by_function"] = json!({"nvmlDeviceGetMemoryInfo_v2": 80_000});
    sandbox.write_scenario(&doc);
    let daemon = sandbox.start_daemon("50ms");
    sandbox.wait_live(&daemon);
    wait_for("a history sample", &daemon, || {
        sandbox.segment().history(0).unwrap().unwrap().written >= 1
    });
    let ring = sandbox.segment().history(0).unwrap().unwrap();
    let first = ring.samples[0];
    assert_ne!(
        first.valid, 0,
        "a gap before the GPU's first answer: {first:?}"
    );
    assert_eq!(first.util_gpu_pct, 30);
    drop(daemon);
}
