//! `gpupeek fleet` over a cluster on one machine: N daemons on the fake NVML, each with
//! its own segment, and N `gpupeek serve` on loopback ports. The table shows every host;
//! the same cluster through a real Prometheus scraping the serves gives the same view.
//! Faults, HTTPS and `-i` are in `fleet_faults.rs`.

use std::net::TcpListener;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use gpupeek_e2e::{
    bins, http, run_with_watchdog, spawn_serve, start_prometheus, stderr, stdout, tool, Background,
    Daemon, Sandbox,
};
use nix::sys::signal::Signal;
use serde_json::{json, Value};

const GIB: u64 = 1 << 30;

/// A GPU of the fake: `util` %, `used_gib` of 80 GiB, and `procs` (pid, GiB) on it.
pub(crate) fn gpu(host: usize, i: usize, util: u32, used_gib: u64, procs: &[(u32, u64)]) -> Value {
    json!({
        "name": "NVIDIA H100 80GB HBM3", "uuid": format!("GPU-{host}-{i}"),
        "utilization_gpu_pct": util, "utilization_memory_pct": 1,
        "memory_total_bytes": 80 * GIB, "memory_used_bytes": used_gib * GIB,
        "clock_event_reasons": if util == 0 { 1 } else { 0 },
        "gpm": {"sm_activity_pct": util as f64, "sm_occupancy_pct": 1.0,
                "tensor_activity_pct": 0.0, "dram_bw_util_pct": 0.0,
                "pcie_tx_mib_per_s": 0.0, "pcie_rx_mib_per_s": 0.0,
                "nvlink_tx_mib_per_s": 0.0, "nvlink_rx_mib_per_s": 0.0},
        "processes": procs.iter().map(|(pid, gib)| json!({
            "pid": pid, "used_gpu_memory_bytes": gib * GIB
        })).collect::<Vec<_>>(),
    })
}

/// One host: its sandbox, daemon and serve (with per-process and per-user series, and
/// an idle threshold of 1 s), and the serve's address.
pub(crate) struct Host {
    pub(crate) sandbox: Sandbox,
    pub(crate) daemon: Daemon,
    _serve: Background,
    pub(crate) addr: String,
}

/// `n` hosts: host h has h+1 GPUs (host 0 two); on host 0, GPU 0 is busy with this test's process
/// and GPU 1 holds memory at 0 % (idle-holding after 1 s); the others are free.
pub(crate) fn cluster(tag: &str, n: usize) -> Vec<Host> {
    let me = std::process::id();
    let hosts: Vec<Host> = (0..n)
        .map(|h| {
            let sandbox = Sandbox::new(&format!("{tag}-{h}"));
            let gpus: Vec<Value> = (0..=h)
                .map(|i| match (h, i) {
                    (0, 0) => gpu(h, i, 90, 30, &[(me, 20)]),
                    (0, _) => gpu(h, i, 0, 20, &[(me, 10)]),
                    _ => gpu(h, i, 0, 0, &[]),
                })
                .collect();
            let gpus = if h == 0 {
                vec![gpus[0].clone(), gpu(0, 1, 0, 20, &[(me, 10)])]
            } else {
                gpus
            };
            sandbox.write_scenario(&json!({ "gpus": gpus }));
            let daemon = sandbox.start_daemon("100ms");
            sandbox.wait_live(&daemon);
            let mut serve = Command::new(&bins().client);
            serve.env("GPUPEEK_VERDICT_THRESHOLDS", "idle=1");
            let extra = ["--per-process", "--per-user"].map(std::ffi::OsStr::new);
            let (serve, url) = spawn_serve(&sandbox, serve, &extra);
            let addr = url.trim_start_matches("http://").to_owned();
            Host {
                sandbox,
                daemon,
                _serve: serve,
                addr,
            }
        })
        .collect();
    // Processes sampled, and host 0's GPU 1 idle for over a second.
    for h in &hosts {
        h.sandbox.wait_sampled(&h.daemon);
    }
    std::thread::sleep(Duration::from_millis(1300));
    hosts
}

pub(crate) fn fleet(args: &[&str]) -> Output {
    let mut cmd = Command::new(&bins().client);
    cmd.arg("fleet").args(args);
    run_with_watchdog(cmd)
}

pub(crate) fn host_args(hosts: &[&str]) -> Vec<String> {
    hosts
        .iter()
        .flat_map(|h| ["--host".to_owned(), h.to_string()])
        .collect()
}

pub(crate) fn json_of(out: &Output) -> Value {
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

#[test]
fn fleet_shows_every_host_free_gpus_first_and_flags_idle_memory() {
    let hosts = cluster("fleet-table", 3);
    let addrs: Vec<&str> = hosts.iter().map(|h| h.addr.as_str()).collect();
    let args = host_args(&addrs);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = fleet(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    // Hosts as words among the flags, as pdsh takes them: the same table.
    let words = fleet(&[addrs[0], "--timeout", "5", addrs[1], "--host", addrs[2]]);
    assert_eq!(stdout(&words), text, "{}", stderr(&words));
    assert!(
        text.starts_with("3 hosts (0 not read), 7 GPUs: 5 free, 1 idle-allocated\n"),
        "{text}"
    );
    // Hosts with the most free GPUs first: host 2 (3 free), host 1 (2), host 0 (0).
    let order: Vec<usize> = addrs.iter().map(|a| text.find(a).expect(a)).collect();
    assert!(order[2] < order[1] && order[1] < order[0], "{text}");
    let host0: Vec<&str> = text[order[0]..].lines().collect();
    assert!(
        host0[0].contains(" busy ") && host0[0].contains("90%"),
        "{text}"
    );
    assert!(host0[1].contains(" IDLE "), "{text}");
    assert!(host0[1].contains("20480 / 81920"), "{text}");

    let mut json_args = args.clone();
    json_args.push("--json");
    let doc = json_of(&fleet(&json_args));
    assert_eq!(doc["summary"]["hosts"], 3);
    assert_eq!(doc["summary"]["gpus_free"], 5);
    let reports = doc["hosts"].as_array().unwrap();
    let keys: Vec<&str> = reports[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    // serde_json's map sorts the keys.
    assert_eq!(
        keys,
        ["daemon", "endpoint", "error", "gpus", "host", "node"]
    );
    let h0 = reports.iter().find(|r| r["host"] == addrs[0]).unwrap();
    assert_eq!(h0["daemon"]["state"], "live");
    assert_eq!(h0["daemon"]["stale"], false);
    assert_eq!(h0["error"], Value::Null);
    let g1 = &h0["gpus"][1];
    assert_eq!(g1["index"], 1);
    assert_eq!(g1["idle_allocated"], true);
    assert_eq!(g1["verdict"], "idle-holding");
    assert_eq!(g1["memory_used_mib"], 20480);
    assert_eq!(g1["processes"][0]["pid"], std::process::id());
    assert_eq!(g1["processes"][0]["memory_mib"], 10240);
    assert_eq!(g1["users"].as_array().unwrap().len(), 1);

    // Grouped by user: the test's user holds both of host 0's GPUs.
    let mut by_user = json_args.clone();
    by_user.extend(["--group-by", "user"]);
    let doc = json_of(&fleet(&by_user));
    let groups = doc["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{doc}");
    assert_eq!(groups[0]["processes"], 2);
    assert_eq!(groups[0]["memory_mib"], 30720);
    assert_eq!(groups[0]["gpus"].as_array().unwrap().len(), 2);
}

#[test]
fn serve_snapshot_is_gpupeeks_json_with_the_node_and_the_daemons_health() {
    let mut hosts = cluster("fleet-snapshot", 1);
    let h = &mut hosts[0];
    let (status, body) = http("GET", &h.addr, "/snapshot");
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&body).unwrap();
    let keys: Vec<&str> = doc
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys.len(), 8, "{keys:?}");
    // No kubelet to ask: no pod assignments.
    assert_eq!(doc["pods"], Value::Null);
    // gpustat's keys, then node, daemon and pods, in this order in the text.
    let at = |k: &str| {
        body.find(&format!("\n    \"{k}\":"))
            .unwrap_or_else(|| panic!("{k}"))
    };
    let order = [
        "hostname",
        "driver_version",
        "query_time",
        "gpus",
        "processes_age_ms",
        "node",
        "daemon",
        "pods",
    ];
    for pair in order.windows(2) {
        assert!(at(pair[0]) < at(pair[1]), "{pair:?} in {body}");
    }
    assert_eq!(doc["daemon"]["state"], "live");
    assert_eq!(doc["gpus"][0]["utilization.gpu"], 90);
    // The same GPUs as `gpupeek --json` (the serve reads the same segment).
    let local: Value = serde_json::from_str(&stdout(&h.sandbox.client(&["--json"]))).unwrap();
    assert_eq!(
        doc["gpus"][1]["memory.used"],
        local["gpus"][1]["memory.used"]
    );
    assert_eq!(
        doc["gpus"][0]["processes"][0]["pid"],
        local["gpus"][0]["processes"][0]["pid"]
    );

    h.daemon.signal(Signal::SIGTERM);
    h.daemon.wait_exit();
    let (status, body) = http("GET", &h.addr, "/snapshot");
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(doc["daemon"]["state"], "stopped");
    assert_eq!(doc["daemon"]["stale"], true);
    assert!(
        doc["daemon"]["error"].as_str().unwrap().contains("stopped"),
        "{doc}"
    );
    assert_eq!(doc["gpus"], json!([]));
}

/// `gpupeek fleet "$SLURM_JOB_NODELIST"`: a Slurm hostlist stands for its hosts. Here
/// `127.0.0.[1-2]:PORT` is the serve (on 127.0.0.1) and a loopback address nothing
/// listens on.
#[test]
fn a_slurm_hostlist_stands_for_its_hosts() {
    let hosts = cluster("fleet-hostlist", 1);
    let port = hosts[0].addr.rsplit(':').next().unwrap();
    let out = fleet(&[&format!("127.0.0.[1-2]:{port}"), "--json"]);
    assert_eq!(out.status.code(), Some(13), "{}", stderr(&out));
    let doc = json_of(&out);
    let seen: Vec<Value> = doc["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| json!([r["host"], r["error"]["kind"]]))
        .collect();
    assert_eq!(
        seen,
        [
            json!([format!("127.0.0.1:{port}"), null]),
            json!([format!("127.0.0.2:{port}"), "refused"])
        ],
        "{doc:#}"
    );
    let out = fleet(&["node[3-1]"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "gpupeek: bad host \"node[3-1]\": [3-1]: \"3-1\" counts down\n"
    );
}

#[test]
fn bad_fleet_usage_is_one_line_and_status_2() {
    for args in [
        &[][..],
        &["--host", "ftp://x"],
        &["--host", "x:0"],
        &["--host", "x", "--prometheus", "http://p"],
        &["--prometheus", "p:9090"],
        &["--hostfile", "/nonexistent/hosts"],
        &["--host", "x", "--timeout", "0"],
        &["--host", "x", "--group-by", "gpu"],
        &["--host", "x", "--user", "u"],
        &["ftp://x"],
        &["x", "--prometheus", "http://p"],
    ] {
        let out = fleet(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out).lines().count(),
            1,
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn a_hostfile_lists_hosts_with_comments() {
    let hosts = cluster("fleet-hostfile", 1);
    let file = hosts[0].sandbox.dir.join("hosts");
    std::fs::write(
        &file,
        format!("# the cluster\n\n{}  # gpu node\n", hosts[0].addr),
    )
    .unwrap();
    let out = fleet(&["--hostfile", file.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&out)["summary"]["hosts"], 1);

    // A DeepSpeed or MPI job's hostfile as it is, on standard input (`-`).
    let mut cmd = Command::new(&bins().client);
    cmd.args(["fleet", "--hostfile", "-", "--json"]);
    let hostfile = format!(
        "{} slots=8\n{} slots=8 max_slots=8\n",
        hosts[0].addr,
        refusing()
    );
    let out = gpupeek_e2e::run_with_input(cmd, hostfile.as_bytes());
    assert_eq!(out.status.code(), Some(13), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(doc["summary"]["hosts"], 2, "{doc:#}");
    assert_eq!(doc["summary"]["hosts_failed"], 1, "{doc:#}");

    // Anything else after a host is one line naming the file's line, status 2.
    std::fs::write(&file, "gpu1 gpu2\n").unwrap();
    let out = fleet(&["--hostfile", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let said = stderr(&out);
    assert!(
        said.contains("line 1: ") && said.contains("slots=N") && said.lines().count() == 1,
        "{said}"
    );
}

/// A loopback port nothing listens on.
pub(crate) fn refusing() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// What two views must agree on: per host, its fault kind or its GPUs' shown values.
fn comparable(doc: &Value) -> Value {
    let hosts = doc["hosts"].as_array().unwrap();
    Value::Array(
        hosts
            .iter()
            .map(|r| {
                let gpus: Vec<Value> = r["gpus"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|g| {
                        json!([
                            g["index"],
                            g["name"],
                            g["uuid"],
                            g["state"],
                            g["utilization_pct"],
                            g["memory_used_mib"],
                            g["memory_total_mib"],
                            g["verdict"],
                            g["free"],
                            g["idle_allocated"],
                            g["users"],
                            g["processes"]
                        ])
                    })
                    .collect();
                json!([r["host"], r["error"]["kind"], gpus])
            })
            .collect(),
    )
}

#[test]
fn fleet_through_prometheus_agrees_with_fleet_from_the_hosts() {
    let Some(prometheus) = tool("prometheus", "prometheus") else {
        return;
    };
    let hosts = cluster("fleet-prometheus", 3);
    let refused = refusing();
    let mut targets: Vec<String> = hosts.iter().map(|h| format!("'{}'", h.addr)).collect();
    targets.push(format!("'{refused}'"));
    let sandbox = &hosts[0].sandbox;
    let (_prometheus, web) = start_prometheus(
        &prometheus,
        sandbox,
        &format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  \
             - job_name: gpupeek\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ),
    );
    let url = format!("http://{web}");
    let mut host_list: Vec<&str> = hosts.iter().map(|h| h.addr.as_str()).collect();
    host_list.push(&refused);
    let mut args = host_args(&host_list);
    args.push("--json".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // Until Prometheus has scraped every target at least once and its view matches (a
    // scrape is at most a second old; the hosts' numbers do not change).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let direct = comparable(&json_of(&fleet(&args)));
        let through = fleet(&["--prometheus", &url, "--json"]);
        let through = serde_json::from_str(&stdout(&through)).ok();
        if through.as_ref().map(comparable) == Some(direct.clone()) {
            let text = stdout(&fleet(&["--prometheus", &url]));
            assert!(
                text.starts_with("4 hosts (1 not read), 7 GPUs: 5 free"),
                "{text}"
            );
            let line = text.lines().find(|l| l.starts_with(&refused)).unwrap();
            assert!(line.contains("refused"), "{line}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the views never agreed:\ndirect: {direct:#}\nthrough Prometheus: {:#}\nlog: {}",
            through.as_ref().map(comparable).unwrap_or_default(),
            std::fs::read_to_string(sandbox.dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
