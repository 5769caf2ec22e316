//! GPM metrics and verdicts, end to end: the daemon on the fake NVML (GPM calls and clock
//! event reasons from the scenario), the client's JSON, `-V` table and Prometheus output.
//! Each verdict case has its own GPU; every output must name the right verdict for each
//! and no other.

use std::time::{Duration, Instant};

use gpupeek_e2e::{stderr, stdout, Daemon, Sandbox};
use serde_json::{json, Value};

const GIB: u64 = 1 << 30;
const MIB: f64 = 1024.0 * 1024.0;

/// The verdict words, as the client prints them.
const VERDICTS: [&str; 6] = [
    "thermal",
    "power-capped",
    "hw-slowdown",
    "starved",
    "idle-holding",
    "healthy",
];

/// A Hopper-like GPU with GPM: utilisation, clock event reasons, SM activity, memory.
fn gpu(i: u32, util: u32, reasons: u64, sm_activity: Option<f64>, mem_gib: u64) -> Value {
    let mut g = json!({
        "name": "NVIDIA H100 80GB HBM3", "uuid": format!("GPU-{i}"),
        "temperature_c": 60, "utilization_gpu_pct": util, "utilization_memory_pct": 10,
        "memory_total_bytes": 80 * GIB, "memory_used_bytes": mem_gib * GIB,
        "power_usage_mw": 300_000, "power_limit_mw": 700_000,
        "clock_event_reasons": reasons,
    });
    if let Some(sm) = sm_activity {
        g["gpm"] = json!({
            "sm_activity_pct": sm, "sm_occupancy_pct": sm / 2.0, "tensor_activity_pct": 5.5,
            "dram_bw_util_pct": 40.25, "pcie_tx_mib_per_s": 100.0, "pcie_rx_mib_per_s": 2.5,
            "nvlink_tx_mib_per_s": 0.0, "nvlink_rx_mib_per_s": 0.0
        });
    }
    g
}

/// One GPU per case, in this order, and the verdict each must get.
fn cases() -> (Value, [Option<&'static str>; 6]) {
    let scenario = json!({"gpus": [
        gpu(0, 98, 0, Some(12.0), 40),                // busy but starved
        gpu(1, 97, 0x4, Some(85.0), 40),              // power-capped
        gpu(2, 95, 0x20 | 0x40, None, 40),            // thermal (no GPM needed)
        gpu(3, 0, 0x1, Some(0.0), 20),                // idle, holding 20 GiB
        gpu(4, 90, 0, Some(88.0), 40),                // healthy
        gpu(5, 98, 0, None, 40),                      // busy, no GPM: cannot tell
    ]});
    let want = [
        Some("starved"),
        Some("power-capped"),
        Some("thermal"),
        Some("idle-holding"),
        Some("healthy"),
        None,
    ];
    (scenario, want)
}

fn live(tag: &str, scenario: &Value) -> (Sandbox, Daemon) {
    let sandbox = Sandbox::new(tag);
    sandbox.write_scenario(scenario);
    let daemon = sandbox.start_daemon("20ms");
    sandbox.wait_live(&daemon);
    (sandbox, daemon)
}

/// Lets the daemon run `ticks` more ticks.
fn advance(sandbox: &Sandbox, daemon: &Daemon, ticks: u64) {
    let now = sandbox.segment().generation();
    sandbox.wait_generation(now + ticks, daemon);
}

fn json_gpus(sandbox: &Sandbox, env: &[(&str, &str)]) -> Vec<Value> {
    let out = sandbox.client_env(&["--json"], env);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["gpus"].as_array().unwrap().clone()
}

/// Waits (in daemon ticks) until GPU 0's GPM metrics are published.
fn wait_gpm(sandbox: &Sandbox, daemon: &Daemon) {
    for _ in 0..200 {
        if !json_gpus(sandbox, &[])[0]["gpm"].is_null() {
            return;
        }
        advance(sandbox, daemon, 2);
    }
    panic!("no GPM metrics published:\n{}", daemon.log());
}

/// The verdict words in a table line (after the utilisation).
fn words_in(line: &str) -> Vec<&'static str> {
    VERDICTS
        .into_iter()
        .filter(|w| line.split_whitespace().any(|x| x == *w))
        .collect()
}

#[test]
fn each_case_gets_its_verdict_and_no_other_in_json_table_and_metrics() {
    let (scenario, want) = cases();
    let (sandbox, daemon) = live("verdicts-cases", &scenario);
    wait_gpm(&sandbox, &daemon);
    // "For a while": GPU 3 must have been idle for a second (the threshold set below).
    std::thread::sleep(Duration::from_millis(1200));
    advance(&sandbox, &daemon, 2);
    let env = [("GPUPEEK_VERDICT_THRESHOLDS", "idle=1")];

    let gpus = json_gpus(&sandbox, &env);
    for (i, w) in want.iter().enumerate() {
        assert_eq!(gpus[i]["verdict"], json!(w), "GPU {i}: {}", gpus[i]);
    }
    assert_eq!(
        gpus[1]["clock_event_reasons"],
        json!(["sw_power_cap"]),
        "decoded reasons"
    );
    assert_eq!(
        gpus[2]["clock_event_reasons"],
        json!(["sw_thermal_slowdown", "hw_thermal_slowdown"])
    );

    let out = sandbox.client_env(&["--no-color", "-V"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(lines.len(), 6, "{text}");
    for (i, w) in want.iter().enumerate() {
        let expected: Vec<&str> = w.iter().copied().collect();
        assert_eq!(words_in(lines[i]), expected, "GPU {i}: {}", lines[i]);
    }
    assert!(lines[0].contains(" 98 % starved "), "{}", lines[0]);

    let out = sandbox.client_env(&["metrics"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for (i, w) in want.iter().enumerate() {
        let samples: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.starts_with("gpupeek_gpu_verdict{") && l.contains(&format!("{{gpu=\"{i}\","))
            })
            .collect();
        match w {
            // Every verdict has a sample: 1 for the right one, 0 for each other.
            Some(w) => {
                assert_eq!(samples.len(), VERDICTS.len(), "GPU {i}: {samples:?}");
                for verdict in VERDICTS {
                    let line = samples
                        .iter()
                        .find(|l| l.contains(&format!("verdict=\"{verdict}\"")))
                        .unwrap_or_else(|| panic!("GPU {i}: no {verdict} in {samples:?}"));
                    let want = if verdict == *w { " 1" } else { " 0" };
                    assert!(line.ends_with(want), "GPU {i}: {line}");
                }
            }
            None => assert!(samples.is_empty(), "GPU {i}: {samples:?}"),
        }
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("gpupeek_gpu_sm_activity_ratio{") && l.ends_with(" 0.12")),
        "{text}"
    );
}

#[test]
fn idle_holding_needs_the_idle_time_and_busy_work_resets_it() {
    let (scenario, _) = cases();
    let (sandbox, daemon) = live("verdicts-idle", &scenario);
    advance(&sandbox, &daemon, 3);
    // Default threshold (300 s): idle for a moment only, so healthy.
    assert_eq!(json_gpus(&sandbox, &[])[3]["verdict"], json!("healthy"));

    std::thread::sleep(Duration::from_millis(1200));
    advance(&sandbox, &daemon, 2);
    let env = [("GPUPEEK_VERDICT_THRESHOLDS", "idle=1")];
    assert_eq!(
        json_gpus(&sandbox, &env)[3]["verdict"],
        json!("idle-holding")
    );

    // A kernel runs: the idle clock starts again when it stops.
    let mut busy = scenario.clone();
    busy["gpus"][3]["utilization_gpu_pct"] = json!(5);
    sandbox.write_scenario(&busy);
    advance(&sandbox, &daemon, 5);
    assert_eq!(json_gpus(&sandbox, &env)[3]["verdict"], json!("healthy"));
    sandbox.write_scenario(&scenario);
    advance(&sandbox, &daemon, 5);
    assert_eq!(json_gpus(&sandbox, &env)[3]["verdict"], json!("healthy"));

    // Memory freed: idle as long as you like, nothing is held.
    let mut freed = scenario.clone();
    freed["gpus"][3]["memory_used_bytes"] = json!(0);
    sandbox.write_scenario(&freed);
    std::thread::sleep(Duration::from_millis(1200));
    advance(&sandbox, &daemon, 2);
    assert_eq!(json_gpus(&sandbox, &env)[3]["verdict"], json!("healthy"));
}

#[test]
fn gpm_metrics_follow_the_load_over_windows_of_at_least_100_ms() {
    let (scenario, _) = cases();
    let started = Instant::now();
    let (sandbox, mut daemon) = live("verdicts-gpm", &scenario);
    wait_gpm(&sandbox, &daemon);
    let gpus = json_gpus(&sandbox, &[]);
    let gpm = &gpus[0]["gpm"];
    assert_eq!(gpm["sm_activity"], json!(12.0), "{gpm}");
    assert_eq!(gpm["sm_occupancy"], json!(6.0));
    assert_eq!(gpm["tensor_activity"], json!(5.5));
    assert_eq!(gpm["dram_bandwidth_utilization"], json!(40.25));
    assert_eq!(gpm["pcie_tx_bytes_per_second"], json!((100.0 * MIB) as u64));
    assert_eq!(gpm["pcie_rx_bytes_per_second"], json!((2.5 * MIB) as u64));
    assert!(gpm["interval_ms"].as_u64().unwrap() >= 100, "{gpm}");
    for i in [2, 5] {
        assert!(gpus[i]["gpm"].is_null(), "GPU {i} has no GPM: {}", gpus[i]);
    }

    // The load changes: so do the figures.
    let mut loaded = scenario.clone();
    loaded["gpus"][0]["gpm"]["sm_activity_pct"] = json!(91.0);
    sandbox.write_scenario(&loaded);
    advance(&sandbox, &daemon, 15);
    let gpus = json_gpus(&sandbox, &[]);
    assert_eq!(gpus[0]["gpm"]["sm_activity"], json!(91.0));
    assert_eq!(gpus[0]["verdict"], json!("healthy"));

    // At a 20 ms period the daemon samples GPM at most once per 100 ms per GPU (the fake
    // refuses closer samples), asks for support once per GPU, and frees what it allocates.
    let pid = daemon.pid();
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(daemon.wait_exit(), Some(0), "{}", daemon.log());
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let calls = sandbox.nvml_call_file(pid).expect("daemon calls");
    let n = |name: &str| calls.get(name).copied().unwrap_or(0);
    assert_eq!(n("nvmlGpmQueryDeviceSupport"), 6, "{calls:?}");
    let gpm_gpus = 4;
    assert!(n("nvmlGpmSampleGet") >= gpm_gpus * 2, "{calls:?}");
    assert!(
        n("nvmlGpmSampleGet") <= gpm_gpus * (elapsed_ms / 100 + 1),
        "{calls:?} in {elapsed_ms} ms"
    );
    assert_eq!(n("nvmlGpmSampleAlloc"), n("nvmlGpmSampleFree"), "{calls:?}");
    assert!(!daemon.log().contains("error"), "{}", daemon.log());
}
