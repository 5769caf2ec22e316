//! End to end: `gpupeek history` and `gpupeek plot` on a daemon whose two GPUs change
//! load over a few seconds, GPU 1 runtime-suspended for a while in the middle (a gap in
//! its history), then woken.

use std::collections::BTreeMap;

use std::process::Output;

use gpupeek_e2e::{assert_one_line_failure, stderr, stdout, wait_for, Daemon, Sandbox};
use gpupeek_shm::layout::history_valid;
use serde_json::{json, Value};

const GPU0: &str = "0000:01:00.0";
const GPU1: &str = "0000:02:00.0";
const NAME: &str = "NVIDIA H100 80GB HBM3";

/// GPU `i` at `util` %: memory, power and temperature follow it.
fn gpu(i: u32, util: u32) -> Value {
    json!({
        "name": NAME, "uuid": format!("GPU-{i}aaaaaaa"),
        "pci_bus_id": format!("00000000:0{}:00.0", i + 1),
        "memory_total_bytes": 80u64 << 30, "memory_used_bytes": u64::from(util) << 28,
        "utilization_gpu_pct": util, "utilization_memory_pct": 1,
        "temperature_c": 30 + util / 2, "power_usage_mw": 60_000 + util * 5_000,
    })
}

fn two(util0: u32, util1: u32) -> Value {
    json!({"gpus": [gpu(0, util0), gpu(1, util1)]})
}

/// The newest history sample of GPU `slot`: its utilisation, `None` for a gap.
fn newest(sb: &Sandbox, slot: usize) -> Option<Option<u8>> {
    let ring = sb.segment().history(slot).ok()??;
    let s = ring.samples.last()?;
    Some((s.valid & history_valid::UTILIZATION != 0).then_some(s.util_gpu_pct))
}

/// Waits until GPU `slot` has `n` more samples whose utilisation is `util`.
fn wait_samples(sb: &Sandbox, daemon: &Daemon, slot: usize, util: Option<u8>, n: usize) {
    let mut seen = 0;
    let mut last_written = 0;
    wait_for(
        &format!("{n} samples of GPU {slot} at {util:?}"),
        daemon,
        || {
            let ring = sb.segment().history(slot).unwrap().unwrap();
            if ring.written != last_written {
                last_written = ring.written;
                let s = ring.samples.last().unwrap();
                let v = (s.valid & history_valid::UTILIZATION != 0).then_some(s.util_gpu_pct);
                if v == util {
                    seen += 1;
                }
            }
            seen >= n
        },
    );
}

/// A daemon whose history holds: both GPUs at 10/20 %, then 60/70 %, then GPU 1 asleep
/// (a gap) while GPU 0 is at 60 %, then both awake at 90/80 %.
fn recorded(tag: &str) -> (Sandbox, Daemon) {
    let sb = Sandbox::new(tag);
    sb.write_scenario(&two(10, 20));
    sb.add_sysfs_gpu(GPU0, "active", "on");
    sb.add_sysfs_gpu(GPU1, "active", "on");
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    wait_samples(&sb, &daemon, 1, Some(20), 2);
    sb.write_scenario(&two(60, 70));
    wait_samples(&sb, &daemon, 1, Some(70), 2);
    sb.set_runtime_pm(GPU1, "suspended", "auto");
    wait_samples(&sb, &daemon, 1, None, 2);
    sb.write_scenario(&two(90, 80));
    sb.set_runtime_pm(GPU1, "active", "on");
    wait_samples(&sb, &daemon, 1, Some(80), 2);
    assert_eq!(newest(&sb, 0), Some(Some(90)));
    (sb, daemon)
}

/// Each GPU's utilisation per sample, as the segment's rings hold them.
fn rings(sb: &Sandbox) -> Vec<Vec<Option<u8>>> {
    (0..2)
        .map(|slot| {
            let ring = sb.segment().history(slot).unwrap().unwrap();
            ring.samples
                .iter()
                .map(|s| (s.valid & history_valid::UTILIZATION != 0).then_some(s.util_gpu_pct))
                .collect()
        })
        .collect()
}

/// Runs `args` until the rings did not change meanwhile; its output and the rings.
fn stable(sb: &Sandbox, args: &[&str]) -> (String, Vec<Vec<Option<u8>>>) {
    for _ in 0..10 {
        let before = rings(sb);
        let out = sb.client(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        if rings(sb) == before {
            return (stdout(&out), before);
        }
    }
    panic!("the rings kept changing under {args:?}");
}

/// Consecutive equal values as one, gaps kept.
fn phases(values: &[Option<u8>]) -> Vec<Option<u8>> {
    let mut v = values.to_vec();
    v.dedup();
    v
}

#[test]
fn history_exports_what_the_gpus_reported_with_a_gap_while_one_slept() {
    let (sb, daemon) = recorded("history-export");
    let (csv, rings) = stable(&sb, &["history", "--csv"]);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        header[..9],
        [
            "time",
            "unix_ns",
            "gpu",
            "uuid",
            "span_ns",
            "samples",
            "util_min",
            "util_mean",
            "util_max"
        ]
    );
    assert_eq!(header.len(), 6 + 3 * 6, "all six metrics by default");
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let mut utils: BTreeMap<u32, Vec<Option<u8>>> = BTreeMap::new();
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), header.len(), "{line}");
        let gpu: u32 = cells[col("gpu")].parse().unwrap();
        assert_eq!(cells[col("uuid")], format!("GPU-{gpu}aaaaaaa"));
        assert!(cells[col("time")].ends_with('Z'), "{line}");
        assert_eq!(cells[col("span_ns")], "1000000000", "a sample a second");
        let util = cells[col("util_mean")];
        assert_eq!(cells[col("util_min")], util);
        assert_eq!(cells[col("util_max")], util);
        if util.is_empty() {
            assert_eq!(cells[col("samples")], "0");
            assert!(cells[col("power_mean")].is_empty() && cells[col("temp_mean")].is_empty());
        } else {
            let u: u32 = util.parse().unwrap();
            assert_eq!(cells[col("power_mean")], (60 + u * 5).to_string(), "{line}");
            assert_eq!(cells[col("temp_mean")], (30 + u / 2).to_string(), "{line}");
            assert_eq!(cells[col("mem_used_mean")], (u * 256).to_string(), "{line}");
        }
        utils
            .entry(gpu)
            .or_default()
            .push((!util.is_empty()).then(|| util.parse().unwrap()));
    }
    assert_eq!(utils[&0], rings[0], "GPU 0, sample for sample");
    assert_eq!(utils[&1], rings[1], "GPU 1, sample for sample");
    assert_eq!(phases(&utils[&0]), [Some(10), Some(60), Some(90)]);
    assert_eq!(phases(&utils[&1]), [Some(20), Some(70), None, Some(80)]);

    let (text, rings) = stable(&sb, &["history", "--json", "-i", "1", "--metric", "util"]);
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        doc["metrics"],
        json!([{"name": "util", "unit": "%", "title": "GPU utilisation"}])
    );
    let gpus = doc["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 1, "only GPU 1");
    assert_eq!(
        (gpus[0]["index"].clone(), gpus[0]["name"].clone()),
        (json!(1), json!(NAME))
    );
    let points = gpus[0]["points"].as_array().unwrap();
    let got: Vec<Option<u8>> = points
        .iter()
        .map(|p| {
            assert_eq!(p["gap"], p["util"].is_null(), "{p}");
            assert!(p.get("power").is_none(), "{p}");
            p["util"]["mean"].as_f64().map(|u| u as u8)
        })
        .collect();
    assert_eq!(got, rings[1]);
    let from = doc["from_unix_ns"].as_u64().unwrap();
    let to = doc["to_unix_ns"].as_u64().unwrap();
    assert_eq!(to - from, 600_000_000_000, "the default window: 10 minutes");
    assert!(points
        .iter()
        .all(|p| (from..=to).contains(&p["unix_ns"].as_u64().unwrap())));
    drop(daemon);
}

/// The text of every `<text>` element of an SVG document, in order.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| t.split_once('>')?.1.split_once("</text>"))
        .map(|(text, _)| text.trim().to_owned())
        .collect()
}

/// The `<polyline>`s of an SVG drawn in `color` (`#RRGGBB`).
fn polylines<'a>(svg: &'a str, color: &str) -> Vec<&'a str> {
    svg.lines()
        .filter(|l| l.starts_with("<polyline") && l.contains(&format!("stroke=\"{color}\"")))
        .collect()
}

#[test]
fn plot_draws_a_panel_per_metric_a_line_per_gpu_broken_at_the_gap() {
    let (sb, daemon) = recorded("plot");
    let dir = sb.dir.to_str().unwrap().to_owned();
    let svg_path = format!("{dir}/x.svg");
    let env = [("TZ", "UTC")];
    let out = sb.client_env(&["plot", "--metric", "util,power", "-o", &svg_path], &env);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let texts = svg_texts(&svg);
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    assert!(
        texts[0].starts_with(&format!("gpupeek — {host} — ")),
        "{texts:?}"
    );
    // Seconds of history in a ten-minute window: the axis starts at the first sample.
    assert!(
        texts[0].ends_with("+00:00 (less than 10m of history)"),
        "{texts:?}"
    );
    for legend in [format!("[0] {NAME}"), format!("[1] {NAME}")] {
        assert_eq!(
            texts.iter().filter(|t| **t == legend).count(),
            1,
            "{legend}"
        );
    }
    for caption in ["GPU utilisation (%)", "Power draw (W)"] {
        assert_eq!(
            texts.iter().filter(|t| *t == caption).count(),
            1,
            "{caption}"
        );
    }
    assert!(
        !texts.iter().any(|t| t.starts_with("Temperature")),
        "only the metrics asked"
    );
    // Two panels: GPU 0 unbroken in each, GPU 1 broken once by its gap in each.
    assert_eq!(polylines(&svg, "#1F77B4").len(), 2, "{svg}");
    assert_eq!(polylines(&svg, "#FF7F0E").len(), 4, "{svg}");
    // The y axes: utilisation 0 to 100 %, power from 0 to a round number above 510 W.
    let util_axis = texts.iter().position(|t| t == "%").unwrap();
    let power_axis = texts.iter().position(|t| t == "W").unwrap();
    let numbers =
        |range: &[String]| -> Vec<f64> { range.iter().filter_map(|t| t.parse().ok()).collect() };
    let util_labels = numbers(&texts[util_axis..power_axis]);
    assert_eq!(util_labels.first(), Some(&0.0));
    assert_eq!(util_labels.iter().cloned().fold(0.0, f64::max), 100.0);
    let power_labels = numbers(&texts[power_axis..]);
    let top = power_labels.iter().cloned().fold(0.0, f64::max);
    assert!((510.0..=1000.0).contains(&top), "{power_labels:?}");
    // The time axis: HH:MM:SS labels (seconds apart), from the first sample to the last
    // update, in each panel.
    let times: Vec<&String> = texts
        .iter()
        .filter(|t| t.len() == 8 && t.as_bytes()[2] == b':' && t.as_bytes()[5] == b':')
        .collect();
    assert!(times.len() >= 2 * 2, "{texts:?}");
    let (first, last) = (times[0].as_str(), texts[0].split(" to ").nth(1).unwrap());
    let title_from = texts[0]
        .split(" — ")
        .nth(2)
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap();
    assert!(
        title_from <= first && first <= &last[..8],
        "{title_from} {first} {last}"
    );

    let png_path = format!("{dir}/x.png");
    let out = sb.client_env(
        &["plot", "-o", &png_path, "--width", "800", "--height", "900"],
        &env,
    );
    assert!(out.status.success(), "{out:?}");
    let file = std::fs::File::open(&png_path).unwrap();
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (800, 900));
    let count = |rgb: [u8; 3]| buf.chunks(3).filter(|p| *p == rgb).count();
    assert!(count([31, 119, 180]) > 300, "GPU 0's lines");
    assert!(count([255, 127, 14]) > 300, "GPU 1's lines");
    let dark = buf.chunks(3).filter(|p| p.iter().all(|&c| c < 80)).count();
    assert!(dark > 2000, "text and axes: {dark} dark pixels");
    if let Some(dir) = std::env::var_os("GPUPEEK_PLOT_KEEP") {
        std::fs::copy(&png_path, std::path::Path::new(&dir).join("e2e.png")).unwrap();
    }

    let out = sb.client_env(
        &["plot", "--width", "80"],
        &[("TZ", "UTC"), ("NO_COLOR", "")],
    );
    assert!(out.status.success(), "{out:?}");
    let chart = stdout(&out);
    assert!(!chart.contains('\x1b'), "no colour off a terminal");
    for line in chart.lines() {
        assert!(line.chars().count() <= 80, "{line:?}");
    }
    assert!(chart.contains("GPU utilisation (%)\n") && chart.contains("Temperature (°C)\n"));
    assert!(
        chart
            .chars()
            .any(|c| ('\u{2801}'..='\u{28ff}').contains(&c)),
        "{chart}"
    );
    let out = sb.client_env(&["plot"], &env);
    assert!(
        stdout(&out).lines().all(|l| l.chars().count() <= 80),
        "80 columns off a terminal"
    );
    drop(daemon);
}

/// Fails unless `out` failed with status `code` and one line on stderr that says `what`.
fn fails(out: &Output, code: i32, what: &str) {
    assert_one_line_failure(out, code, what);
    assert!(stderr(out).contains(what), "{what}: {}", stderr(out));
}

#[test]
fn bad_history_and_plot_requests_are_one_line_and_a_distinct_status() {
    let sb = Sandbox::new("plot-bad");
    let cases: [(&[&str], i32, &str); 6] = [
        (
            &["history", "--csv", "--metric", "util,gpu_util"],
            2,
            "unknown metric \"gpu_util\"",
        ),
        (
            &["history", "--csv", "--since", "10x"],
            2,
            "bad duration \"10x\"",
        ),
        (&["history"], 2, "needs --csv or --json"),
        (&["plot", "-o", "x.jpg"], 2, "name a .png or .svg file"),
        (&["history", "--json"], 3, "is gpupeekd running?"),
        (&["plot", "-o", "x.svg"], 3, "is gpupeekd running?"),
    ];
    for (args, code, what) in cases {
        fails(&sb.client(args), code, what);
    }

    sb.write_scenario(&two(10, 20));
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    wait_for("a sample", &daemon, || newest(&sb, 0).is_some());
    let out = sb.client(&["plot", "-o", "/proc/gpupeek-no/x.png"]);
    fails(&out, 9, "cannot write /proc/gpupeek-no/x.png");
    let out = sb.client(&["history", "--csv", "-i", "5"]);
    fails(&out, 2, "no GPU with index 5");

    // A daemon with no GPU keeps no history.
    let empty = Sandbox::new("plot-empty");
    empty.write_scenario(&json!({"gpus": []}));
    let daemon = empty.start_daemon("100ms");
    empty.wait_live(&daemon);
    for args in [&["history", "--csv"][..], &["plot"]] {
        fails(&empty.client(args), 12, "no history in the last 10m");
    }
}

#[test]
fn gpupeek_plot_checks_its_flags_then_runs_gpupeek_plot_or_says_it_is_missing() {
    let sb = Sandbox::new("plot-missing");
    let alone = sb.dir.join("alone");
    std::fs::create_dir_all(&alone).unwrap();
    let gpupeek = alone.join("gpupeek");
    std::fs::copy(&gpupeek_e2e::bins().client, &gpupeek).unwrap();
    let run = |args: &[&str]| {
        let mut cmd = std::process::Command::new(&gpupeek);
        cmd.arg("plot").args(args).env("PATH", sb.dir.join("empty"));
        gpupeek_e2e::run_with_watchdog(cmd)
    };
    let out = run(&["--shm", &sb.shm]);
    fails(&out, 11, "plot needs gpupeek-plot");
    // Flags are checked by gpupeek's table before the program is looked for.
    fails(&run(&["--metric", "nope"]), 2, "unknown metric \"nope\"");
    let out = run(&["--help"]);
    assert!(stdout(&out).starts_with("Usage: gpupeek plot"), "{out:?}");
}

#[test]
fn the_one_shot_client_links_no_plotting_code_nor_font() {
    // Panic locations and symbol-free strings name the crates a binary links code from.
    let has = |bin: &std::path::Path, what: &str| {
        let bytes = std::fs::read(bin).unwrap();
        bytes.windows(what.len()).any(|w| w == what.as_bytes())
    };
    let plot = &gpupeek_e2e::bins().plot;
    for what in ["plotters", "DejaVu Sans"] {
        assert!(has(plot, what), "the check finds no {what} in gpupeek-plot");
        assert!(
            !has(&gpupeek_e2e::bins().client, what),
            "gpupeek links {what}"
        );
    }
}
