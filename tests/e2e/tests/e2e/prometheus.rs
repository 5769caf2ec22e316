//! `gpupeek metrics` and `gpupeek serve` against Prometheus's own tools: the exposition
//! passes `promtool check metrics` (syntax and naming lints), and a real Prometheus
//! server on loopback scrapes `gpupeek serve` and answers a query for a gpupeek metric.
//! promtool and prometheus come from Debian's `prometheus` package; without them the
//! tests that need them are skipped with a message, except under CI, where they fail.

use std::process::Command;
use std::time::{Duration, Instant};

use gpupeek_e2e::{
    bins, http, promtool_check, run_with_watchdog, start_prometheus, stderr, stdout, tool,
    Background, Daemon, Sandbox,
};
use nix::sys::signal::Signal;
use serde_json::{json, Value};

const GIB: u64 = 1 << 30;

/// GPU 0 reports most fields (no fan); GPU 1's name needs escaping in a label.
fn live(tag: &str) -> (Sandbox, Daemon) {
    let sandbox = Sandbox::new(tag);
    sandbox.write_scenario(&json!({"gpus": [
        {
            "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
            "pci_bus_id": "00000000:1B:00.0",
            "memory_total_bytes": 80 * GIB, "memory_used_bytes": 10 * GIB, "memory_reserved_bytes": 0,
            "utilization_gpu_pct": 45, "utilization_memory_pct": 12, "temperature_c": 41,
            "power_usage_mw": 123456, "power_limit_mw": 700000, "energy_mj": 5500,
            "clocks_mhz": {"graphics": 1755, "sm": 1755, "memory": 2619},
            "max_clocks_mhz": {"graphics": 1980, "sm": 1980, "memory": 2619},
            "pstate": 2, "clock_event_reasons": 0x44, "ecc_corrected_volatile": 3
        },
        {"name": "Quirky \"GPU\" \\ 2", "uuid": "GPU-2", "temperature_c": 30}
    ]}));
    let daemon = sandbox.start_daemon("100ms");
    sandbox.wait_live(&daemon);
    (sandbox, daemon)
}

fn metrics(sandbox: &Sandbox) -> std::process::Output {
    let mut cmd = Command::new(&bins().client);
    cmd.args(["metrics", "--shm", &sandbox.shm]);
    run_with_watchdog(cmd)
}

const GPU0: &str =
    r#"gpu="0",uuid="GPU-11111111-2222-3333-4444-555555555555",name="NVIDIA H100 80GB HBM3""#;

#[test]
fn metrics_are_in_base_units_with_unsupported_fields_left_out() {
    let (sandbox, _daemon) = live("metrics-values");
    let out = metrics(&sandbox);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for line in [
        "gpupeek_up 1".to_owned(),
        "gpupeek_gpus 2".to_owned(),
        format!("gpupeek_gpu_memory_used_bytes{{{GPU0}}} 10737418240"),
        format!("gpupeek_gpu_memory_total_bytes{{{GPU0}}} 85899345920"),
        format!("gpupeek_gpu_utilization_ratio{{{GPU0}}} 0.45"),
        format!("gpupeek_gpu_temperature_celsius{{{GPU0}}} 41"),
        format!("gpupeek_gpu_power_draw_watts{{{GPU0}}} 123.456"),
        format!("gpupeek_gpu_power_limit_watts{{{GPU0}}} 700"),
        format!("gpupeek_gpu_energy_joules_total{{{GPU0}}} 5.5"),
        format!("gpupeek_gpu_clock_hertz{{{GPU0},clock=\"sm\"}} 1755000000"),
        format!("gpupeek_gpu_clock_max_hertz{{{GPU0},clock=\"memory\"}} 2619000000"),
        format!("gpupeek_gpu_performance_state{{{GPU0}}} 2"),
        format!("gpupeek_gpu_clock_event_reason{{{GPU0},reason=\"hw_thermal_slowdown\"}} 1"),
        format!("gpupeek_gpu_clock_event_reason{{{GPU0},reason=\"gpu_idle\"}} 0"),
        format!("gpupeek_gpu_ecc_corrected_errors_total{{{GPU0}}} 3"),
        r#"gpupeek_gpu_temperature_celsius{gpu="1",uuid="GPU-2",name="Quirky \"GPU\" \\ 2"} 30"#
            .to_owned(),
        "# TYPE gpupeek_gpu_energy_joules_total counter".to_owned(),
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in:\n{text}"
        );
    }
    // No fan on either GPU, no memory on GPU 1: left out, never 0.
    assert!(!text.contains("gpupeek_gpu_fan_speed_ratio"), "{text}");
    assert!(
        !text.contains(r#"gpupeek_gpu_memory_used_bytes{gpu="1""#),
        "{text}"
    );
}

#[test]
fn metrics_pass_promtool_check_metrics() {
    let Some(promtool) = tool("promtool", "prometheus") else {
        return;
    };
    let (sandbox, mut daemon) = live("metrics-promtool");
    let live_text = stdout(&metrics(&sandbox));
    let (ok, said) = promtool_check(&promtool, &live_text);
    assert!(ok && said.is_empty(), "promtool: {said}\n{live_text}");
    daemon.signal(Signal::SIGTERM);
    daemon.wait_exit();
    let stopped = metrics(&sandbox);
    let (ok, said) = promtool_check(&promtool, &stdout(&stopped));
    assert!(ok && said.is_empty(), "promtool: {said}");
}

#[test]
fn without_a_daemon_metrics_say_down_exit_0_and_explain_on_stderr() {
    let sandbox = Sandbox::new("metrics-nodaemon");
    let out = metrics(&sandbox);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.contains("\ngpupeek_up 0\n"), "{text}");
    assert!(
        text.contains("gpupeek_daemon_state{state=\"no_segment\"} 1\n"),
        "{text}"
    );
    assert!(!text.contains("gpupeek_gpu"), "{text}");
    let err = stderr(&out);
    assert!(
        err.starts_with("gpupeek: ") && err.lines().count() == 1,
        "{err}"
    );
}

/// `gpupeek serve` on a free loopback port; returns it and its address.
fn serve(sandbox: &Sandbox) -> (Background, String) {
    serve_with_fd_limit(sandbox, None)
}

/// [`serve`], with at most `fd_limit` open descriptors when given.
fn serve_with_fd_limit(sandbox: &Sandbox, fd_limit: Option<u32>) -> (Background, String) {
    let command = match fd_limit {
        None => Command::new(&bins().client),
        Some(n) => {
            let mut sh = Command::new("sh");
            sh.args(["-c", "ulimit -n \"$1\" && shift && exec \"$@\"", "sh"])
                .arg(n.to_string())
                .arg(&bins().client);
            sh
        }
    };
    let (server, url) = gpupeek_e2e::spawn_serve(sandbox, command, &[]);
    let addr = url.strip_prefix("http://").unwrap_or(&url).to_owned();
    (server, addr)
}

#[test]
fn serve_answers_metrics_an_index_and_errors_and_follows_the_daemon() {
    let (sandbox, mut daemon) = live("serve-http");
    let (_serve, addr) = serve(&sandbox);
    let (status, body) = http("GET", &addr, "/metrics");
    assert_eq!(status, 200);
    assert!(body.contains("\ngpupeek_up 1\n"), "{body}");
    assert!(body.contains(&format!("gpupeek_gpu_temperature_celsius{{{GPU0}}} 41\n")));
    let (status, body) = http("GET", &addr, "/");
    assert_eq!(status, 200);
    assert!(body.contains("href=\"/metrics\""), "{body}");
    assert_eq!(http("GET", &addr, "/nope").0, 404);
    assert_eq!(http("POST", &addr, "/metrics").0, 405);
    assert_eq!(http("HEAD", &addr, "/metrics"), (200, String::new()));
    // Each scrape reads the segment afresh: a stopped daemon shows at once.
    daemon.signal(Signal::SIGTERM);
    daemon.wait_exit();
    let (status, body) = http("GET", &addr, "/metrics");
    assert_eq!(status, 200);
    assert!(body.contains("\ngpupeek_up 0\n"), "{body}");
    assert!(
        body.contains("gpupeek_daemon_state{state=\"stopped\"} 1\n"),
        "{body}"
    );
}

/// Threads and open descriptors of process `pid`.
fn threads_and_fds(pid: u32) -> (usize, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    (threads, fds)
}

#[test]
fn a_flood_of_idle_connections_neither_stops_scrapes_nor_grows_the_exporter() {
    let (sandbox, _daemon) = live("serve-flood");
    // 40 descriptors: fewer than the 300 connections, and than the exporter's own bound
    // of 64, so running out of descriptors is met too.
    for fd_limit in [None, Some(40)] {
        let (mut serve, addr) = serve_with_fd_limit(&sandbox, fd_limit);
        let idle: Vec<std::net::TcpStream> = (0..300)
            .map(|_| std::net::TcpStream::connect(&addr).unwrap())
            .collect();
        let (status, body) = http("GET", &addr, "/metrics");
        assert_eq!(status, 200, "{fd_limit:?}");
        assert!(body.contains("\ngpupeek_up 1\n"), "{body}");
        let (threads, fds) = threads_and_fds(serve.child.id());
        assert_eq!(threads, 1, "{fd_limit:?}: one thread whatever the clients");
        assert!(fds <= 64 + 8, "{fd_limit:?}: {fds} descriptors open");
        assert!(
            serve.child.try_wait().unwrap().is_none(),
            "the exporter died"
        );
        drop(idle);
    }
}

#[test]
fn serve_refuses_a_bad_listen_address() {
    let sandbox = Sandbox::new("serve-badaddr");
    let mut cmd = Command::new(&bins().client);
    cmd.args(["serve", "--listen", "not-an-address", "--shm", &sandbox.shm]);
    let out = run_with_watchdog(cmd);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

/// `gpupeek serve` executes gpupeek-serve: the one next to gpupeek, else one on PATH.
/// Without either it says so in one line and exits 11; its help and its flag checks
/// need no gpupeek-serve.
#[test]
fn serve_without_gpupeek_serve_says_so_and_exits_11() {
    let sandbox = Sandbox::new("serve-missing");
    let alone = sandbox.dir.join("alone");
    let path = sandbox.dir.join("path");
    std::fs::create_dir_all(&alone).unwrap();
    std::fs::create_dir_all(&path).unwrap();
    let gpupeek = alone.join("gpupeek");
    std::fs::copy(&bins().client, &gpupeek).unwrap();
    let run = |path_var: &std::path::Path, args: &[&str]| {
        let mut cmd = Command::new(&gpupeek);
        cmd.arg("serve").args(args).env("PATH", path_var);
        run_with_watchdog(cmd)
    };
    let bad_listen = ["--listen", "not-an-address", "--shm", &sandbox.shm];

    let out = run(&path, &bad_listen);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(11), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("gpupeek: serve needs gpupeek-serve") && err.contains("alone"),
        "{err}"
    );
    let out = run(&path, &["--help"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("Usage: gpupeek serve"));
    assert_eq!(run(&path, &["--bogus"]).status.code(), Some(2));

    // On PATH: it runs, and its own check of --listen answers.
    std::os::unix::fs::symlink(&bins().serve, path.join("gpupeek-serve")).unwrap();
    let out = run(&path, &bad_listen);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("bad --listen"), "{}", stderr(&out));
}

#[test]
fn a_real_prometheus_scrapes_gpupeek_serve() {
    let Some(prometheus) = tool("prometheus", "prometheus") else {
        return;
    };
    let (sandbox, _daemon) = live("serve-prometheus");
    let (_serve, target) = serve(&sandbox);
    let (_prometheus, web) = start_prometheus(
        &prometheus,
        &sandbox,
        &format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: gpupeek\n    \
             static_configs:\n      - targets: ['{target}']\n"
        ),
    );
    let query = "/api/v1/query?query=gpupeek_gpu_temperature_celsius";
    let deadline = Instant::now() + Duration::from_secs(60);
    let result = loop {
        let answer = std::net::TcpStream::connect(&web)
            .ok()
            .map(|_| http("GET", &web, query));
        if let Some((200, body)) = answer {
            let doc: Value = serde_json::from_str(&body).unwrap();
            let result = doc["data"]["result"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if !result.is_empty() {
                break result;
            }
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never had gpupeek_gpu_temperature_celsius; its log:\n{}",
            std::fs::read_to_string(sandbox.dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let gpu0 = result
        .iter()
        .find(|r| r["metric"]["gpu"] == "0")
        .unwrap_or_else(|| panic!("no gpu=\"0\" series: {result:?}"));
    assert_eq!(gpu0["metric"]["job"], "gpupeek");
    assert_eq!(gpu0["metric"]["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(gpu0["value"][1], "41");
    let quirky = result.iter().find(|r| r["metric"]["gpu"] == "1").unwrap();
    assert_eq!(quirky["metric"]["name"], "Quirky \"GPU\" \\ 2");
}
