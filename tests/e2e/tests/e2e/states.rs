//! ABI 1.3's states as every reader shows them, on a segment this test publishes itself
//! (the daemon side, `gpupeekd --release` and the NVML deadline, comes separately): a GPU
//! whose driver is not responding is never shown as a healthy GPU, and a daemon that let
//! go of the driver on request is never shown as a dead one.

use std::process::Command;

use gpupeek_e2e::{compile_c_reader, run_with_watchdog, stderr, stdout, tool, Sandbox};
use gpupeek_shm::layout::{gpu_valid as v, DaemonState, GpuState};
use gpupeek_shm::{text, GpuRecord, Options, Publisher, StatusRecord};

/// A segment named after `sandbox`, published once: the daemon in `state`, and GPU 0
/// healthy and GPU 1 not responding when `state` is live (none otherwise). Its
/// heartbeat stays fresh for the test: the period is a minute.
fn publish(sandbox: &Sandbox, state: DaemonState) -> Publisher {
    let options = Options {
        gpu_capacity: 2,
        proc_capacity: 4,
        lock_dir: sandbox.dir.clone(),
        ..Options::new(0x5eed, std::process::id())
    };
    let publisher = Publisher::create(&sandbox.shm, &options).expect("publisher");
    let gpus = if state == DaemonState::Live { 2 } else { 0 };
    for slot in 0..gpus {
        let mut gpu = GpuRecord {
            index: slot,
            state: GpuState::Ok as u32,
            valid: v::NAME | v::UUID | v::MEMORY | v::UTILIZATION | v::TEMPERATURE,
            mem_total_bytes: 80 << 30,
            mem_used_bytes: 10 << 30,
            util_gpu_pct: 40,
            temp_gpu_c: 50,
            ..Default::default()
        };
        if slot == 1 {
            // What the daemon publishes for a GPU whose call did not return: the kept
            // identity only.
            gpu.state = GpuState::NotResponding as u32;
            gpu.valid = v::NAME | v::UUID | v::CLOCK_SM_MAX;
            gpu.clock_sm_max_mhz = 1980;
        }
        text::encode(&mut gpu.name, "NVIDIA H100 80GB HBM3");
        text::encode(&mut gpu.uuid, &format!("GPU-{slot}"));
        publisher.write_gpu(slot as usize, &gpu);
    }
    publisher.set_status(&StatusRecord {
        state: state as u32,
        gpu_count: gpus,
        period_ns: 60_000_000_000,
        heartbeat_mono_ns: gpupeek_shm::mono_now_ns(),
        ..Default::default()
    });
    publisher.bump_generation();
    publisher
}

#[test]
fn a_released_daemon_is_exit_10_in_one_shot_commands_and_its_own_state_elsewhere() {
    let sandbox = Sandbox::new("released");
    let _publisher = publish(&sandbox, DaemonState::Released);
    for args in [
        &[][..],
        &["--json"],
        &["--by-user"],
        &["--format", "{util}"],
    ] {
        let out = sandbox.client(args);
        assert_eq!(out.status.code(), Some(10), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{args:?}");
        assert!(
            stderr(&out).contains("let go of the driver on request"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let out = sandbox.client_env(&["query", "--query-gpu=index", "--format=csv"], &[]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let out = sandbox.client(&["--output", "waybar"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["class"], "released");
    let out = sandbox.client_env(&["metrics"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let metrics = stdout(&out);
    assert!(
        metrics.contains("gpupeek_daemon_state{state=\"released\"} 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("gpupeek_up 0\n"), "{metrics}");
    promtool_accepts(&metrics);
    if let Some(exe) = compile_c_reader(&sandbox) {
        let out = run_with_watchdog({
            let mut cmd = Command::new(&exe);
            cmd.arg(&sandbox.shm);
            cmd
        });
        assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("let go of the driver"),
            "{}",
            stderr(&out)
        );
    }
    if let Some(python) = tool("python3", "python3") {
        let out = run_with_watchdog({
            let mut cmd = Command::new(python);
            cmd.arg(gpupeek_e2e::repo().join("contrib/python/gpupeek.py"))
                .arg(&sandbox.shm)
                .env("PYTHONDONTWRITEBYTECODE", "1");
            cmd
        });
        assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    }
}

#[test]
fn a_gpu_whose_driver_is_not_responding_is_shown_as_such_by_every_reader() {
    let sandbox = Sandbox::new("not-responding");
    let _publisher = publish(&sandbox, DaemonState::Live);
    let out = sandbox.client(&["--no-color"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let table = stdout(&out);
    assert!(table.contains("[1] ((Driver not responding))"), "{table}");
    let out = sandbox.client(&["--json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["gpus"][1]["state"], "not responding");
    assert_eq!(doc["gpus"][1]["processes"], serde_json::Value::Null);
    let out = sandbox.client_env(
        &[
            "query",
            "--query-gpu=index,uuid,clocks.max.sm,utilization.gpu",
            "--format=csv,noheader",
        ],
        &[],
    );
    assert_eq!(
        stdout(&out),
        "0, GPU-0, [N/A], 40 %\n1, GPU-1, 1980 MHz, [Unknown Error]\n",
        "{}",
        stderr(&out)
    );
    let out = sandbox.client(&["--format", "{util}%"]);
    assert_eq!(stdout(&out), "40% [GPU 1 not responding]\n");
    let out = sandbox.client_env(&["metrics"], &[]);
    let metrics = stdout(&out);
    assert!(
        metrics.contains(r#"name="NVIDIA H100 80GB HBM3",state="not_responding"} 1"#),
        "{metrics}"
    );
    promtool_accepts(&metrics);
    if let Some(exe) = compile_c_reader(&sandbox) {
        let out = run_with_watchdog({
            let mut cmd = Command::new(&exe);
            cmd.arg(&sandbox.shm);
            cmd
        });
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let hung = stdout(&out)
            .lines()
            .find(|l| l.starts_with("gpu index=1 "))
            .unwrap()
            .to_owned();
        assert!(hung.contains("state=not_responding"), "{hung}");
        assert!(hung.contains("util_gpu_pct=N/A"), "{hung}");
    }
}

/// `promtool check metrics` accepts `text` (skipped without promtool).
fn promtool_accepts(text: &str) {
    let Some(promtool) = tool("promtool", "prometheus") else {
        return;
    };
    let (ok, said) = gpupeek_e2e::promtool_check(&promtool, text);
    assert!(ok, "{said}\n{text}");
}
