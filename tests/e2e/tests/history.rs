//! The segment's per-GPU history rings: a reader (or `gpupeek -i`) started late sees the
//! samples the daemon took before it existed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use gpupeek_e2e::{bins, wait_for, Background, Daemon, Sandbox, WATCHDOG};
use gpupeek_shm::layout::history_valid;
use serde_json::json;

fn scenario(util: u32, used_gib: u64) -> serde_json::Value {
    json!({"gpus": [
        {"name": "NVIDIA H100", "memory_total_bytes": 80u64 << 30,
         "memory_used_bytes": used_gib << 30, "utilization_gpu_pct": util,
         "utilization_memory_pct": 1, "temperature_c": 40, "power_usage_mw": 100_000}
    ]})
}

/// Steps the scenario through `phases`, waiting until the ring holds a sample of each.
fn record_phases(sandbox: &Sandbox, daemon: &Daemon, phases: &[(u32, u64)]) {
    for &(util, used_gib) in phases {
        sandbox.write_scenario(&scenario(util, used_gib));
        wait_for(&format!("a history sample at {util} %"), daemon, || {
            let history = sandbox.segment().history(0).unwrap().unwrap();
            history
                .samples
                .last()
                .is_some_and(|s| s.util_gpu_pct as u32 == util)
        });
    }
}

#[test]
fn a_reader_opened_late_sees_the_earlier_samples_in_order() {
    let sandbox = Sandbox::new("history-late");
    sandbox.write_scenario(&scenario(10, 8));
    let daemon = sandbox.start_daemon("100ms");
    sandbox.wait_live(&daemon);
    record_phases(&sandbox, &daemon, &[(10, 8), (60, 40), (90, 72)]);
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
    record_phases(&sandbox, &daemon, &[(0, 8), (100, 8)]);
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
