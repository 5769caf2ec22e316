//! nvitop 1.7.2 (`nvitop -1`, the one-shot mode the benchmarks time) runs on the fake NVML
//! without a missing function: every NVML query it makes is answered, and what the
//! scenario says (persistence mode, power cap, display, compute mode) reaches its output.
//! This keeps the fake complete enough for `benches/run` to compare against nvitop.
//!
//! `$GPUPEEK_NVITOP` names the nvitop executable (`scripts/test` installs it from PyPI
//! into the same virtual environment as gpustat); without it the test is skipped, except
//! in CI.

use std::path::PathBuf;
use std::process::Command;

use gpupeek_e2e::{bins, run_with_watchdog, stderr, stdout, Sandbox};
use serde_json::json;

fn nvitop() -> Option<PathBuf> {
    match std::env::var_os("GPUPEEK_NVITOP") {
        Some(path) => Some(PathBuf::from(path)),
        None => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must set GPUPEEK_NVITOP to an nvitop 1.7.2 executable"
            );
            eprintln!("skipped: set GPUPEEK_NVITOP to check nvitop on the fake NVML");
            None
        }
    }
}

#[test]
fn nvitop_finds_every_nvml_function_it_needs_in_the_fake() {
    let Some(nvitop) = nvitop() else {
        return;
    };
    let sb = Sandbox::new("nvitop");
    let lib_dir = sb.scenario_path().with_file_name("lib");
    std::fs::create_dir_all(&lib_dir).unwrap();
    std::os::unix::fs::symlink(&bins().fake_nvml, lib_dir.join("libnvidia-ml.so.1")).unwrap();
    sb.write_scenario(&json!({"driver_version": "550.54.15", "gpus": [{
        "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "pci_bus_id": "00000000:18:00.0",
        "memory_total_bytes": 85520809984u64, "memory_used_bytes": 10u64 << 30,
        "utilization_gpu_pct": 45, "utilization_memory_pct": 3, "temperature_c": 41,
        "fan_speed_pct": 30, "power_usage_mw": 123456, "power_limit_mw": 700000,
        "persistence_mode": 1, "compute_mode": 0, "display_active": 0
    }]}));
    let mut cmd = Command::new(nvitop);
    cmd.arg("-1")
        .env("LD_LIBRARY_PATH", &lib_dir)
        .env("FAKE_NVML_SCENARIO", sb.scenario_path())
        .env_remove("FAKE_NVML_CALLS_DIR");
    let out = run_with_watchdog(cmd);
    let (text, errors) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "nvitop: {errors}");
    assert!(
        !errors.contains("FunctionNotFound") && !errors.contains("undefined symbol"),
        "nvitop called an NVML function the fake lacks:\n{errors}"
    );
    let gpu_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("H100 80GB HBM3"))
        .collect();
    assert_eq!(gpu_lines.len(), 1, "one GPU line in:\n{text}");
    assert!(
        gpu_lines[0].contains(" On "),
        "persistence mode on:\n{text}"
    );
    assert!(gpu_lines[0].contains(" Off "), "no display active:\n{text}");
    assert!(text.contains("123W / 700W"), "power and its cap:\n{text}");
    assert!(text.contains("Default"), "compute mode:\n{text}");
}
