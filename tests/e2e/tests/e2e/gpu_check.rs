//! `scripts/gpu-check`, the real-GPU check, kept working where there is no GPU: run on
//! the fake NVML with a stand-in `nvidia-smi`, every section must come out with
//! gpupeek's side filled in, so that a session lent a GPU does not spend it on a broken
//! script. (What the real driver reports is recorded in docs/real-gpu.md.)

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use gpupeek_e2e::{bins, driver_library, profiles, repo, run_with_limit, stderr, stdout, Sandbox};
use serde_json::json;

/// Builds what gpu-check runs besides gpupeekd and gpupeek, next to the binaries under
/// test: `dump-segment` (the example it prints every field with) and `nvml-latency`
/// (the bench binary that times each NVML call).
fn build_extras() {
    for target in [
        ["gpupeek-shm", "--example", "dump-segment"],
        ["gpupeek-benches", "--bin", "nvml-latency"],
    ] {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .current_dir(repo())
            .args(["build", "-q", "-p"])
            .args(target);
        if !cfg!(debug_assertions) {
            build.arg("--release");
        }
        assert!(build.status().expect("cargo runs").success());
    }
}

/// A stand-in `nvidia-smi` in `dir/bin` that says what it was asked.
fn stand_in_nvidia_smi(dir: &Path) -> std::path::PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let smi = bin.join("nvidia-smi");
    std::fs::write(&smi, "#!/bin/sh\necho \"stand-in nvidia-smi $*\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn gpu_check_runs_every_section_on_the_fake_nvml_and_cleans_up() {
    build_extras();
    let sb = Sandbox::new("gpu-check");
    let mut worker = Command::new("sleep").arg("60").spawn().unwrap();
    // A call gpupeekd never makes, slowed down, for nvml-latency's table.
    sb.write_scenario(&json!({
        "latency_us_by_function": {"nvmlDeviceGetPowerManagementLimit": 20_000},
        "gpus": [{
        "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-check-0",
        "utilization_gpu_pct": 97, "utilization_memory_pct": 10,
        "temperature_c": 60, "memory_total_bytes": 80u64 << 30,
        "memory_used_bytes": 40u64 << 30, "power_usage_mw": 300_000,
        "power_limit_mw": 700_000, "clock_event_reasons": 0,
        "gpm": {"sm_activity_pct": 12.0, "sm_occupancy_pct": 6.0,
                "tensor_activity_pct": 5.5, "dram_bw_util_pct": 40.25,
                "pcie_tx_mib_per_s": 100.0, "pcie_rx_mib_per_s": 2.5,
                "nvlink_tx_mib_per_s": 0.0, "nvlink_rx_mib_per_s": 0.0},
        "processes": [{"pid": worker.id(), "used_gpu_memory_bytes": 3u64 << 30,
                       "utilization_pct": [42, 7, 0, 0]}]
    }]}));
    let path = format!(
        "{}:{}",
        stand_in_nvidia_smi(&sb.dir).display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let profile_dir = bins().daemon.parent().unwrap();
    let mut cmd = Command::new(repo().join("scripts/gpu-check"));
    cmd.arg("1")
        .env("PATH", path)
        .env("GPU_CHECK_BIN", profile_dir)
        .env(
            "GPU_CHECK_DAEMON_FLAGS",
            format!(
                "--nvml-lib {} --sysfs-root {}",
                bins().fake_nvml.display(),
                sb.sysfs_root().display()
            ),
        )
        .env(
            "GPU_CHECK_LATENCY_FLAGS",
            // A 535.98 driver (no `_v3`), to see entry points it lacks reported, not
            // fatal, next to GPM and field values, which it has.
            format!(
                "--nvml-lib {} --rounds 5 --init-cycles 1",
                driver_library(profiles::R535_98).display()
            ),
        )
        .env("GPU_CHECK_LOAD", "sleep 6")
        .env("FAKE_NVML_SCENARIO", sb.scenario_path())
        .env("FAKE_NVML_SYSFS_ROOT", sb.sysfs_root())
        .env("GPUPEEK_LOCK_DIR", &sb.dir)
        // History state stays in the sandbox (a root daemon's default is
        // /var/lib/gpupeek).
        .env("GPUPEEK_STATE_DIR", sb.dir.join("state"));
    let run = run_with_limit(cmd, Duration::from_secs(90));
    let _ = worker.kill();
    let _ = worker.wait();
    let (out, err) = (stdout(&run), stderr(&run));
    assert!(run.status.success(), "gpu-check failed:\n{out}\n{err}");

    let section = |title: &str| -> &str {
        let start = out
            .find(&format!("== {title}"))
            .unwrap_or_else(|| panic!("no section {title:?} in:\n{out}"));
        let rest = &out[start..];
        let end = rest[3..].find("\n== ").map_or(rest.len(), |e| e + 3);
        &rest[..end]
    };
    let has = |title: &str, want: &str| {
        let text = section(title);
        assert!(text.contains(want), "{title:?} lacks {want:?}:\n{text}");
    };
    has(
        "round 1: nvidia-smi",
        "stand-in nvidia-smi --query-gpu=index,name,uuid",
    );
    has(
        "round 1: gpupeek query",
        "0, NVIDIA H100 80GB HBM3, GPU-check-0",
    );
    has("round 1: gpupeek\n", "root:sleep/");
    has("round 1: gpupeek\n", "gpu0.uuid=GPU-check-0");
    has(
        "minor numbers and MIG placements",
        "stand-in nvidia-smi mig -lgi",
    );
    has("minor numbers and MIG placements", "gpu0.minor_number=0");
    // The JSON line (index, verdict, reasons, GPM): GPM may need one more tick here.
    has("GPM and verdicts at rest", "\n0 ");
    has("GPM under load: sleep 6", "gpupeek_gpu_sm_activity_ratio");
    has("GPM under load: sleep 6", "starved");
    has("processes under load", &format!(" {} ", worker.id()));
    has("processes under load", "sleep");
    has("GPM after the load", "starved");
    has("gpupeekd log", "NVML initialised");
    check_latency_table(section("NVML call latency"));

    let shm = Path::new("/dev/shm").join(format!("gpupeek-check-{}", run_pid(&out)));
    assert!(!shm.exists(), "{} left behind", shm.display());
}

/// The script's pid, from the segment name its daemon log or output mentions.
fn run_pid(out: &str) -> String {
    let at = out
        .find("gpupeek-check-")
        .expect("segment name in the output");
    out[at + "gpupeek-check-".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect()
}

/// The cells of `name`'s row in nvml-latency's Markdown table: code, calls, min,
/// median, p90, max.
fn latency_row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    let line = table
        .lines()
        .find(|l| l.split('|').nth(1).map(str::trim) == Some(name))
        .unwrap_or_else(|| panic!("no row {name:?} in:\n{table}"));
    line.split('|')
        .skip(2)
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// nvml-latency on the fake NVML: a call the scenario slows down by 20 ms takes at least
/// that (a lower bound the sleep guarantees, not a speed target); a value the scenario
/// leaves out is NOT_SUPPORTED; an entry point the driver lacks (535.98's `_v3`) is
/// reported, not fatal.
fn check_latency_table(table: &str) {
    let slow = latency_row(table, "nvmlDeviceGetPowerManagementLimit");
    assert_eq!(slow[..2], ["SUCCESS", "5"], "{table}");
    let median_us: f64 = slow[3].parse().expect("a median in microseconds");
    assert!(median_us >= 20_000.0, "median {median_us} us:\n{table}");
    assert_eq!(latency_row(table, "nvmlDeviceGetPowerUsage")[0], "SUCCESS");
    assert_eq!(
        latency_row(table, "nvmlDeviceGetFanSpeed")[0],
        "NOT_SUPPORTED"
    );
    assert_eq!(
        latency_row(table, "nvmlDeviceGetComputeRunningProcesses_v3"),
        ["FUNCTION_NOT_FOUND", "0", "-", "-", "-", "-"]
    );
    assert_eq!(
        latency_row(table, "nvmlDeviceGetFieldValues(5 ids)")[0],
        "SUCCESS"
    );
    assert_eq!(latency_row(table, "nvmlGpmSampleGet")[0], "SUCCESS");
    assert_eq!(
        latency_row(table, "nvmlInit_v2 (after nvmlShutdown)")[..2],
        ["SUCCESS", "1"]
    );
}
