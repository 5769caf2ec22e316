//! Side by side with the real gpustat 1.1.1: both read the same fake NVML (gpustat loads
//! it as `libnvidia-ml.so.1`; gpupeek through the daemon) with the same real processes, and
//! must print the same GPU lines and the same people, commands and memory figures.
//!
//! `$GPUPEEK_GPUSTAT` names the gpustat executable (`.ci/run` installs gpustat 1.1.1 from
//! PyPI into a virtual environment); without it the test is skipped, except in CI.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Output};

use gpupeek_e2e::{bins, run_with_watchdog, stderr, stdout, Sandbox};
use serde_json::{json, Value};

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The gpustat 1.1.1 to compare with (`$GPUPEEK_GPUSTAT`); `None` skips, except in CI.
pub(crate) fn gpustat() -> Option<PathBuf> {
    match std::env::var_os("GPUPEEK_GPUSTAT") {
        Some(path) => Some(PathBuf::from(path)),
        None => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must set GPUPEEK_GPUSTAT to a gpustat 1.1.1 executable"
            );
            eprintln!("skipped: set GPUPEEK_GPUSTAT to compare with gpustat");
            None
        }
    }
}

/// Runs gpustat on the sandbox's scenario, through the fake NVML.
fn run_gpustat(gpustat: &PathBuf, sb: &Sandbox, lib_dir: &PathBuf, args: &[&str]) -> Output {
    let mut cmd = Command::new(gpustat);
    cmd.args(args)
        .env("LD_LIBRARY_PATH", lib_dir)
        .env("FAKE_NVML_SCENARIO", sb.scenario_path())
        .env_remove("FAKE_NVML_CALLS_DIR");
    let out = run_with_watchdog(cmd);
    assert_eq!(out.status.code(), Some(0), "gpustat: {}", stderr(&out));
    out
}

#[test]
fn gpustat_and_gpupeek_show_the_same_gpus_people_commands_and_memory() {
    let Some(gpustat) = gpustat() else {
        return;
    };
    let sb = Sandbox::new("gpustat");
    let lib_dir = sb.scenario_path().with_file_name("lib");
    std::fs::create_dir_all(&lib_dir).unwrap();
    std::os::unix::fs::symlink(&bins().fake_nvml, lib_dir.join("libnvidia-ml.so.1")).unwrap();
    let sleeper = Proc(Command::new("sleep").args(["600", "7"]).spawn().unwrap());
    let python = Proc(
        Command::new("sleep")
            .arg0("/opt/conda/bin/python3")
            .arg("600")
            .spawn()
            .unwrap(),
    );
    let (a, b) = (sleeper.0.id(), python.0.id());
    sb.write_scenario(&json!({"driver_version": "550.54.15", "gpus": [
        {
            "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
            "memory_total_bytes": 85520809984u64, "memory_used_bytes": 10u64 << 30,
            "utilization_gpu_pct": 45, "utilization_memory_pct": 3, "temperature_c": 41,
            "fan_speed_pct": 30, "power_usage_mw": 123456, "power_limit_mw": 700000,
            "encoder_utilization_pct": 0, "decoder_utilization_pct": 7,
            "processes": [
                {"pid": a, "used_gpu_memory_bytes": 8u64 << 30},
                {"pid": b, "used_gpu_memory_bytes": 1u64 << 30, "type": "graphics"}
            ]
        },
        {
            "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-66666666-2222-3333-4444-555555555555",
            "memory_total_bytes": 85520809984u64, "memory_used_bytes": 0,
            "utilization_gpu_pct": 0, "utilization_memory_pct": 0, "temperature_c": 30,
            "fan_speed_pct": 20, "power_usage_mw": 70000, "power_limit_mw": 700000,
            "encoder_utilization_pct": 0, "decoder_utilization_pct": 0,
            "processes": [{"pid": b, "used_gpu_memory_bytes": 512u64 << 20}]
        }
    ]}));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);

    for flags in [
        &["-cup"][..],
        &["-a"],
        &[],
        &["-u", "-e"],
        &["-c", "-P", "draw"],
    ] {
        let mut args = vec!["--no-color", "--no-header"];
        args.extend_from_slice(flags);
        let theirs = stdout(&run_gpustat(&gpustat, &sb, &lib_dir, &args));
        let ours = sb.client(&args);
        assert_eq!(ours.status.code(), Some(0), "{}", stderr(&ours));
        assert_eq!(
            stdout(&ours),
            theirs,
            "gpupeek {args:?} differs from gpustat"
        );
    }

    let theirs: Value =
        serde_json::from_slice(&run_gpustat(&gpustat, &sb, &lib_dir, &["--json"]).stdout).unwrap();
    let ours: Value = serde_json::from_slice(&sb.client(&["--json"]).stdout).unwrap();
    for (tg, og) in theirs["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .zip(ours["gpus"].as_array().unwrap())
    {
        for (key, value) in tg.as_object().unwrap() {
            if key != "processes" {
                assert_eq!(&og[key], value, "GPU key {key}");
            }
        }
        let (tp, op) = (
            tg["processes"].as_array().unwrap(),
            og["processes"].as_array().unwrap(),
        );
        assert_eq!(tp.len(), op.len());
        for (t, o) in tp.iter().zip(op) {
            // Every gpustat key is there, with the same value...
            for key in [
                "username",
                "command",
                "full_command",
                "gpu_memory_usage",
                "pid",
            ] {
                assert_eq!(&o[key], &t[key], "process key {key}");
            }
            // ...but for the CPU figures, which gpustat samples itself: its one-shot
            // cpu_percent is always 0.0 (psutil's first call); ours is the daemon's
            // measurement. Host memory is the same resident size, read at another moment.
            assert!(o["cpu_percent"].is_number() || o["cpu_percent"].is_null());
            let (tm, om) = (
                t["cpu_memory_usage"].as_f64().unwrap(),
                o["cpu_memory_usage"].as_f64().unwrap(),
            );
            assert!((tm - om).abs() <= tm * 0.05, "host memory {tm} vs {om}");
        }
    }
    assert_eq!(
        ours["gpus"][0]["processes"][1]["full_command"],
        json!(["/opt/conda/bin/python3", "600"])
    );
}

#[test]
fn gpustat_and_gpupeek_show_the_same_whole_long_names_and_command_lines() {
    let Some(gpustat) = gpustat() else {
        return;
    };
    let sb = Sandbox::new("gpustatlong");
    let lib_dir = sb.scenario_path().with_file_name("lib");
    std::fs::create_dir_all(&lib_dir).unwrap();
    std::os::unix::fs::symlink(&bins().fake_nvml, lib_dir.join("libnvidia-ml.so.1")).unwrap();
    // A 59-character program name (the kernel keeps 15 in comm; the segment's fixed
    // field 31) and a command line of about 2 KB (the fixed field holds 327 bytes).
    let program =
        lib_dir.with_file_name("a-training-program-whose-name-is-over-forty-characters-long");
    std::fs::copy("/bin/sleep", &program).unwrap();
    let operands: Vec<String> = (0..220).map(|i| format!("0.00{i:04}")).collect();
    let long = Proc(
        Command::new(&program)
            .arg("600")
            .args(&operands)
            .spawn()
            .unwrap(),
    );
    sb.write_scenario(&json!({"driver_version": "550.54.15", "gpus": [{
        "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "memory_total_bytes": 85520809984u64, "memory_used_bytes": 10u64 << 30,
        "utilization_gpu_pct": 45, "utilization_memory_pct": 3, "temperature_c": 41,
        "fan_speed_pct": 30, "power_usage_mw": 123456, "power_limit_mw": 700000,
        "encoder_utilization_pct": 0, "decoder_utilization_pct": 7,
        "processes": [{"pid": long.0.id(), "used_gpu_memory_bytes": 8u64 << 30}]
    }]}));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);

    for flags in [&[][..], &["-c"], &["-cup"]] {
        let mut args = vec!["--no-color", "--no-header"];
        args.extend_from_slice(flags);
        let theirs = stdout(&run_gpustat(&gpustat, &sb, &lib_dir, &args));
        let ours = sb.client(&args);
        assert_eq!(ours.status.code(), Some(0), "{}", stderr(&ours));
        assert_eq!(stdout(&ours), theirs, "gpupeek {args:?} differs");
    }
    // -f adds a line per process whose CPU, memory and running time each tool measures
    // at its own moment: the command lines after them are the same.
    let command_lines = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.split_once("): ").map(|(_, cmd)| cmd.to_owned()))
            .collect()
    };
    let args = ["--no-color", "--no-header", "-c", "-f"];
    let theirs = stdout(&run_gpustat(&gpustat, &sb, &lib_dir, &args));
    let ours = stdout(&sb.client(&args));
    let whole = format!("{} 600 {}", program.display(), operands.join(" "));
    assert_eq!(
        command_lines(&theirs),
        command_lines(&ours),
        "{theirs}\n{ours}"
    );
    assert_eq!(command_lines(&ours), [whole], "{ours}");
    assert_eq!(ours.lines().next(), theirs.lines().next());

    let theirs: Value =
        serde_json::from_slice(&run_gpustat(&gpustat, &sb, &lib_dir, &["--json"]).stdout).unwrap();
    let ours: Value = serde_json::from_slice(&sb.client(&["--json"]).stdout).unwrap();
    let (t, o) = (
        &theirs["gpus"][0]["processes"][0],
        &ours["gpus"][0]["processes"][0],
    );
    for key in ["command", "full_command"] {
        assert_eq!(o[key], t[key], "process key {key}");
    }
    assert_eq!(
        o["command"],
        "a-training-program-whose-name-is-over-forty-characters-long"
    );
    assert_eq!(o["full_command"].as_array().unwrap().len(), 222);

    // nvidia-smi's process_name is argv[0] as started: whole too.
    let out = sb.client(&[
        "query",
        "--query-compute-apps=pid,process_name",
        "--format=csv,noheader",
    ]);
    assert_eq!(
        stdout(&out),
        format!("{}, {}\n", long.0.id(), program.display()),
        "{}",
        stderr(&out)
    );
    // And the per-process series are labelled with the whole command name.
    let out = sb.client(&["metrics", "--per-process"]);
    let text = stdout(&out);
    assert!(
        text.contains(",command=\"a-training-program-whose-name-is-over-forty-characters-long\""),
        "{text}{}",
        stderr(&out)
    );
}
