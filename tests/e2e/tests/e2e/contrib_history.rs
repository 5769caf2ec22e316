//! The history rings as the third-party readers in contrib/ read them: the C example
//! reader (`gpupeek-read --history`) and the Python module (`gpupeek.py --history`)
//! must print, for every sample they return, exactly what the Rust reader returns for
//! the same sample of a live daemon on the fake NVML; and both must refuse a header
//! whose history fields do not fit the segment.

use std::collections::BTreeMap;
use std::process::{Command, Output};

use gpupeek_e2e::{
    compile_c_reader, hostile, record_history_phases, repo, run_with_watchdog, stderr, stdout,
    tool, Sandbox,
};
use gpupeek_shm::layout::history_valid;
use gpupeek_shm::History;
use serde_json::json;

/// The two contrib readers, run with `--history` on segment `name`.
fn run_readers(sandbox: &Sandbox, name: &str) -> Vec<(&'static str, Output)> {
    let mut runs = Vec::new();
    if let Some(exe) = compile_c_reader(sandbox) {
        let mut cmd = Command::new(exe);
        cmd.args(["--history", name]);
        runs.push(("C", run_with_watchdog(cmd)));
    }
    if let Some(python) = tool("python3", "python3") {
        let mut cmd = Command::new(python);
        cmd.arg(repo().join("contrib/python/gpupeek.py"))
            .args(["--history", name])
            .env("PYTHONDONTWRITEBYTECODE", "1");
        runs.push(("Python", run_with_watchdog(cmd)));
    }
    runs
}

fn scenario(util: u32, used_gib: u64) -> serde_json::Value {
    json!({"gpus": [
        {"name": "NVIDIA H100", "memory_total_bytes": 80u64 << 30,
         "memory_used_bytes": used_gib << 30, "utilization_gpu_pct": util,
         "utilization_memory_pct": util / 10, "temperature_c": 40 + util / 10,
         "power_usage_mw": 100_000 + util * 1000},
        {"name": "NVIDIA A100", "memory_total_bytes": 40u64 << 30}
    ]})
}

/// `KEY=VALUE` pairs of one output line.
fn pairs(line: &str) -> BTreeMap<String, String> {
    line.split(' ')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// A sample as the contrib readers print it, from the Rust reader's copy.
fn expected(gpu: usize, n: u64, history: &History) -> BTreeMap<String, String> {
    let first = history.written - history.samples.len() as u64;
    let s = &history.samples[(n - first) as usize];
    let value = |bit: u16, v: String| if s.valid & bit != 0 { v } else { "N/A".into() };
    BTreeMap::from([
        ("gpu".into(), gpu.to_string()),
        ("n".into(), n.to_string()),
        ("sample_mono_ns".into(), s.sample_mono_ns.to_string()),
        (
            "util_gpu_pct".into(),
            value(history_valid::UTILIZATION, s.util_gpu_pct.to_string()),
        ),
        (
            "util_mem_pct".into(),
            value(history_valid::UTIL_MEM, s.util_mem_pct.to_string()),
        ),
        (
            "mem_used_mib".into(),
            value(history_valid::MEMORY, s.mem_used_mib.to_string()),
        ),
        (
            "power_draw_mw".into(),
            value(history_valid::POWER_DRAW, s.power_draw_mw.to_string()),
        ),
        (
            "temp_gpu_c".into(),
            value(history_valid::TEMPERATURE, s.temp_gpu_c.to_string()),
        ),
    ])
}

/// Checks one reader's `history`/`sample` lines against the Rust reader's rings, read
/// after it: every sample it printed that the ring still holds must be identical.
fn check_reader(which: &str, out: &Output, rings: &[History]) {
    assert_eq!(out.status.code(), Some(0), "{which}: {}", stderr(out));
    let text = stdout(out);
    let heads: Vec<_> = text
        .lines()
        .filter(|l| l.starts_with("history "))
        .map(pairs)
        .collect();
    assert_eq!(heads.len(), rings.len(), "{which}: a ring per GPU:\n{text}");
    for (gpu, (head, ring)) in heads.iter().zip(rings).enumerate() {
        assert_eq!(head["step_ns"], ring.step_ns.to_string(), "{which}");
        let written: u64 = head["written"].parse().unwrap();
        assert!(
            written <= ring.written,
            "{which}: read before the Rust reader"
        );
        let samples: Vec<_> = text
            .lines()
            .filter(|l| l.starts_with(&format!("sample gpu={gpu} ")))
            .map(pairs)
            .collect();
        assert_eq!(head["samples"], samples.len().to_string(), "{which}");
        assert!(samples.len() >= 3, "{which}: too few samples:\n{text}");
        let first = ring.written - ring.samples.len() as u64;
        let mut last_n = None;
        for sample in &samples {
            let n: u64 = sample["n"].parse().unwrap();
            assert!(last_n.is_none_or(|l| n == l + 1), "{which}: oldest first");
            last_n = Some(n);
            if n >= first {
                assert_eq!(sample, &expected(gpu, n, ring), "{which}: sample {n}");
            }
        }
        assert_eq!(last_n, Some(written - 1), "{which}: up to the newest");
    }
}

#[test]
fn c_and_python_readers_return_the_history_the_rust_reader_does() {
    let sandbox = Sandbox::new("contrib-history");
    sandbox.write_scenario(&scenario(10, 8));
    let daemon = sandbox.start_daemon("100ms");
    sandbox.wait_live(&daemon);
    record_history_phases(&sandbox, &daemon, scenario, &[(10, 8), (60, 40), (90, 72)]);
    let runs = run_readers(&sandbox, &sandbox.shm);
    let segment = sandbox.segment();
    let rings: Vec<History> = (0..2)
        .map(|slot| segment.history(slot).unwrap().unwrap())
        .collect();
    for (which, out) in &runs {
        check_reader(which, out, &rings);
        let text = stdout(out);
        for util in ["10", "60", "90"] {
            assert!(
                text.contains(&format!(" util_gpu_pct={util} ")),
                "{which}: each phase is in the ring:\n{text}"
            );
        }
        assert!(
            text.contains("sample gpu=1 ") && text.contains("temp_gpu_c=N/A"),
            "{which}: a value the GPU does not report is N/A:\n{text}"
        );
    }
}

/// A header whose history ring is far larger than the segment: corrupt (exit 8), one
/// line, and nothing printed, from both readers.
#[test]
fn c_and_python_readers_refuse_a_history_region_outside_the_segment() {
    let sandbox = Sandbox::new("contrib-history-bad");
    let mut image = hostile::valid_image(2, 2);
    image[100..104].copy_from_slice(&60_000u32.to_ne_bytes()); // history_slots
    let name = format!("{}-bad", sandbox.shm);
    hostile::place(&name, &image);
    let runs = run_readers(&sandbox, &name);
    hostile::remove(&name);
    for (which, out) in runs {
        assert_eq!(out.status.code(), Some(8), "{which}: {}", stderr(&out));
        assert_eq!(stderr(&out).lines().count(), 1, "{which}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("history"),
            "{which}: {}",
            stderr(&out)
        );
        assert!(stdout(&out).is_empty(), "{which}");
    }
}
