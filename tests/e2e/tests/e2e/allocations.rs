//! The daemon's steady-state ticks make no heap allocation of its own.
//!
//! tests/alloc-count/alloc_count.c, built here with the system C compiler and preloaded
//! into the daemon, counts every allocation by the object that asked for it: the daemon
//! (its own code, Rust std and crates linked into it), the fake NVML, or anything else
//! (libc internals, the loader). Between two points well after start-up, the first and
//! the last must not move while the fake NVML's count shows that ticks were counted.
//!
//! The GPU processes are real child processes, resolved through the real `/proc` under
//! the default (full) process policy, and the daemon's test hook
//! `GPUPEEKD_TEST_DETAILS_REFRESH_MS` makes it read their owner, command line, namespace
//! and container again every 100 ms instead of every 5 s, so that the counted ticks
//! cross many such refreshes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use gpupeek_e2e::{stderr, stdout, tool, wait_for, Sandbox};
use serde_json::json;

const REFRESH_ENV: &str = "GPUPEEKD_TEST_DETAILS_REFRESH_MS";

/// Builds the counting shim into `dir`; `None` (test skipped) without a C compiler
/// outside CI.
fn build_shim(dir: &Path) -> Option<PathBuf> {
    let cc = tool("cc", "gcc")?;
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../alloc-count/alloc_count.c");
    let shim = dir.join("libgpupeek_alloc_count.so");
    let out = Command::new(cc)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&shim)
        .arg(source)
        .output()
        .unwrap();
    assert!(out.status.success(), "shim build: {}", stderr(&out));
    Some(shim)
}

/// The shim's counters: [daemon, fake NVML, other objects, bytes].
fn counters(file: &Path) -> [u64; 4] {
    let bytes = std::fs::read(file).unwrap();
    assert_eq!(bytes.len(), 32, "the shim maps its 32-byte counter file");
    std::array::from_fn(|i| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap()))
}

/// Idle child processes standing for GPU jobs, killed when dropped.
struct Jobs(Vec<Child>);

impl Jobs {
    fn spawn(n: usize) -> Self {
        Jobs(
            (0..n)
                .map(|_| {
                    Command::new("sleep")
                        .arg("600")
                        .spawn()
                        .expect("sleep starts")
                })
                .collect(),
        )
    }

    fn pids(&self) -> Vec<u32> {
        self.0.iter().map(Child::id).collect()
    }
}

impl Drop for Jobs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn steady_state_ticks_make_no_allocation_in_the_daemon() {
    let sb = Sandbox::new("allocs");
    let Some(shim) = build_shim(&sb.dir) else {
        return;
    };
    let jobs = Jobs::spawn(4);
    let pids = jobs.pids();
    let gpu = |i: u32, pids: &[u32]| {
        json!({
            "name": "NVIDIA H100 80GB HBM3", "uuid": format!("GPU-{i:08}"),
            "pci_bus_id": format!("00000000:{:02x}:00.0", 0x18 + i),
            "memory_total_bytes": 80u64 << 30, "memory_used_bytes": 3u64 << 30,
            "utilization_gpu_pct": 40, "temperature_c": 50, "power_usage_mw": 200_000,
            "ecc_corrected_volatile": 1,
            "processes": pids.iter().map(|pid| json!({
                "pid": pid, "used_gpu_memory_bytes": 1u64 << 30,
                "utilization_pct": [30, 10, 0, 0]
            })).collect::<Vec<_>>()
        })
    };
    sb.write_scenario(&json!({"gpus": [gpu(0, &pids[..2]), gpu(1, &pids[2..])]}));
    // Runtime PM on, so that each tick reads the GPUs' power state in sysfs too.
    sb.add_sysfs_gpu("0000:18:00.0", "active", "auto");
    sb.add_sysfs_gpu("0000:19:00.0", "active", "auto");
    let count_file = sb.dir.join("allocs");
    let mut cmd = sb.daemon_command("50ms");
    // Every tick a slow one, so that everything a tick can do is counted, with the
    // default (full) process policy; process details read again every 100 ms.
    cmd.args(["--process-interval", "50ms", "--release-after", "60m"])
        .env(REFRESH_ENV, "100")
        .env("LD_PRELOAD", &shim)
        .env("GPUPEEK_ALLOC_COUNT", &count_file)
        // Per-call count files would be the fake's allocations, not the daemon's, but
        // they slow every tick down: leave them out.
        .env_remove("FAKE_NVML_CALLS_DIR");
    let daemon = sb.spawn_daemon(cmd);
    sb.wait_live(&daemon);
    assert!(
        daemon.log().contains(&format!("test hook {REFRESH_ENV}")),
        "the daemon refreshes process details every 100 ms; log:\n{}",
        daemon.log()
    );
    // The jobs are resolved through /proc: the full policy is at work.
    let doc: serde_json::Value = serde_json::from_str(&stdout(&sb.client(&["--json"]))).unwrap();
    let sleeps = doc["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|gpu| gpu["processes"].as_array().unwrap())
        .filter(|p| p["command"] == "sleep")
        .count();
    assert_eq!(sleeps, 4, "{doc}");
    // The events thread registers each GPU once it is known awake, up to 500 ms after
    // (and says so in one line): start-up work, not a tick's.
    wait_for("both GPUs' Xid registration", &daemon, || {
        daemon.log().contains("NVML has no events for [0, 1]")
    });
    // Warm-up: buffers grow to fit, the per-process utilisation settles.
    sb.let_ticks_pass(&daemon, 10);
    let before = counters(&count_file);
    // 40 ticks of 50 ms: about 20 refreshes of every process's details.
    sb.let_ticks_pass(&daemon, 40);
    let after = counters(&count_file);
    assert!(
        after[1] > before[1],
        "the fake NVML's allocations were counted"
    );
    assert_eq!(
        (after[0] - before[0], after[2] - before[2]),
        (0, 0),
        "allocations by the daemon and by other objects over 40 ticks; log:\n{}",
        daemon.log()
    );
}
