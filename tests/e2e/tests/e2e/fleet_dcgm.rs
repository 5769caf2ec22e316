//! `gpupeek fleet --prometheus` on a Prometheus that scrapes dcgm-exporter and no gpupeek
//! (the GPU operator's default): here `gpupeek serve --names dcgm`, which writes
//! dcgm-exporter's series and labels, stands for it. The fleet reads dcgm-exporter's
//! series: the plain GPU with its name, utilisation and memory, the MIG GPU as its GPU
//! instances with their memory, the idle ones free, and the host named by the node its
//! scrape job labels. What dcgm-exporter does not tell (processes, users, verdicts)
//! stays empty. The same GPUs read directly (`--host`, gpupeek's own `/snapshot`) agree.

use std::process::Command;
use std::time::{Duration, Instant};

use gpupeek_e2e::{bins, spawn_serve, start_prometheus, stdout, tool};
use serde_json::{json, Value};

use crate::fleet::{fleet, json_of};
use crate::fleet_mig::split_host;

/// What both views tell of each GPU and MIG device: index, name, utilisation, memory
/// used and total (MiB), and each device's instance, profile, memory and whether it is
/// free.
fn gpus(doc: &Value) -> Value {
    let gpus = doc["hosts"][0]["gpus"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    json!(gpus
        .iter()
        .map(|g| {
            let whole = !g["mig"].is_array();
            json!({
                "index": g["index"],
                "name": g["name"],
                "utilization_pct": g["utilization_pct"],
                "memory_used_mib": if whole { g["memory_used_mib"].clone() } else { Value::Null },
                "memory_total_mib": if whole { g["memory_total_mib"].clone() } else { Value::Null },
                "mig": g["mig"].as_array().map(|m| m.iter().map(|m| json!({
                    "gpu_instance_id": m["gpu_instance_id"],
                    "profile": m["profile"],
                    "memory_used_mib": m["memory_used_mib"],
                    "memory_total_mib": m["memory_total_mib"],
                    "free": m["free"],
                })).collect::<Vec<_>>()),
            })
        })
        .collect::<Vec<_>>())
}

/// Whether `a` and `b` ([`gpus`]) agree: every figure the same, but a memory total,
/// which dcgm-exporter gives as three figures each rounded down to MiB (used, free,
/// reserved), may be up to 2 MiB under gpupeek's.
fn agree(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter().all(|(k, va)| match (k.as_str(), b.get(k)) {
                    ("memory_total_mib", Some(vb)) => match (va.as_u64(), vb.as_u64()) {
                        (Some(x), Some(y)) => x.abs_diff(y) <= 2,
                        _ => va == vb,
                    },
                    (_, Some(vb)) => agree(va, vb),
                    (_, None) => false,
                })
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| agree(x, y))
        }
        _ => a == b,
    }
}

#[test]
fn a_prometheus_of_dcgm_exporter_series_is_read_as_the_same_gpus() {
    let Some(prometheus) = tool("prometheus", "prometheus") else {
        return;
    };
    // GPU 0 split: 3g.40gb (GI 1) runs a process of 3000 MiB and is 40 % active;
    // 2g.20gb (GI 5) and 1g.10gb (GI 13) hold nothing and are idle. GPU 1 is whole.
    let (sandbox, _daemon, _sleepers) =
        split_host("fleet-dcgm", [Some(40.0), Some(0.0), Some(0.0)]);
    let (_ours, ours) = spawn_serve(&sandbox, Command::new(&bins().client), &[]);
    let dcgm_names = ["--names", "dcgm"].map(std::ffi::OsStr::new);
    let (_dcgm, dcgm) = spawn_serve(&sandbox, Command::new(&bins().client), &dcgm_names);
    let direct = json_of(&fleet(&[
        "--host",
        ours.trim_start_matches("http://"),
        "--json",
    ]));

    let target = dcgm.trim_start_matches("http://");
    let (_prometheus, web) = start_prometheus(
        &prometheus,
        &sandbox,
        &format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  \
             - job_name: nvidia-dcgm-exporter\n    static_configs:\n      - targets: ['{target}']\n        \
             labels:\n          kubernetes_node: gpu-node-1\n"
        ),
    );
    let url = format!("http://{web}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let through = loop {
        let out = fleet(&["--prometheus", &url, "--json"]);
        let doc: Option<Value> = serde_json::from_str(&stdout(&out)).ok();
        if let Some(doc) = doc.filter(|d| agree(&gpus(d), &gpus(&direct))) {
            break doc;
        }
        assert!(
            Instant::now() < deadline,
            "the views never agreed:\ndirect: {:#}\nthrough dcgm-exporter's series: {}",
            gpus(&direct),
            stdout(&fleet(&["--prometheus", &url, "--json"]))
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let host = &through["hosts"][0];
    assert_eq!(host["host"], "gpu-node-1");
    assert_eq!(through["summary"]["mig_devices_free"], 2, "{through:#}");
    // No process, user or verdict: dcgm-exporter names none.
    assert!(host["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .all(|g| g["processes"] == json!([]) && g["users"] == json!([])));

    let text = stdout(&fleet(&["--prometheus", &url]));
    assert!(
        text.starts_with(
            "1 hosts (0 not read), 2 GPUs: 0 free, 0 idle-allocated; \
             3 MIG devices: 2 free, 0 idle-allocated\n"
        ),
        "{text}"
    );
}

/// A cluster while gpupeek is rolled out: one Prometheus scrapes gpupeek on some nodes,
/// only dcgm-exporter on others, and both on one. Every node is shown, each GPU once:
/// gpu-node-1 (both) and gpu-node-2 through gpupeek's series, gpu-node-3 through
/// dcgm-exporter's, gpu-node-4, whose dcgm-exporter refuses, and gpu-node-5, whose gpupeek
/// does (in a job named after neither), with their scrape errors; another job's target
/// that is down is no host.
#[test]
fn a_prometheus_of_gpupeek_on_some_nodes_and_dcgm_exporter_on_others_shows_every_node_once() {
    let Some(prometheus) = tool("prometheus", "prometheus") else {
        return;
    };
    let (sandbox, _daemon, _sleepers) =
        split_host("fleet-mixed", [Some(40.0), Some(0.0), Some(0.0)]);
    let dcgm_names = ["--names", "dcgm"].map(std::ffi::OsStr::new);
    let (_ours, ours) = spawn_serve(&sandbox, Command::new(&bins().client), &[]);
    let (_theirs, theirs) = spawn_serve(&sandbox, Command::new(&bins().client), &dcgm_names);
    let hosts = crate::fleet::cluster("fleet-mixed-more", 2);
    let (_third, third) = spawn_serve(&hosts[1].sandbox, Command::new(&bins().client), &dcgm_names);
    let down = crate::fleet::refusing();
    let (down5, other) = (crate::fleet::refusing(), crate::fleet::refusing());
    let addr = |url: &str| url.trim_start_matches("http://").to_owned();
    let target = |addr: &str, labels: &str| {
        format!("      - targets: ['{addr}']\n        labels: {{{labels}}}\n")
    };
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  \
         - job_name: gpu-exporters\n    static_configs:\n{}{}{}  \
         - job_name: nvidia-dcgm-exporter\n    static_configs:\n{}{}{}  \
         - job_name: node-exporter\n    static_configs:\n{}",
        target(&addr(&ours), "instance: gpu-node-1, node: gpu-node-1"),
        target(&hosts[0].addr, "instance: gpu-node-2, node: gpu-node-2"),
        target(&down5, "instance: gpu-node-5, node: gpu-node-5"),
        target(&addr(&theirs), "kubernetes_node: gpu-node-1"),
        target(&addr(&third), "kubernetes_node: gpu-node-3"),
        target(&down, "kubernetes_node: gpu-node-4"),
        target(&other, "instance: cpu-node-1"),
    );
    let (_prometheus, web) = start_prometheus(&prometheus, &sandbox, &config);
    let url = format!("http://{web}");
    // What each host shows: its name, its MIG devices whose process count is known
    // (gpupeek's series tell it, dcgm-exporter's do not), its GPUs, and its error's kind.
    let shown = |doc: &Value| -> Value {
        json!(doc["hosts"].as_array().map(|hosts| hosts
            .iter()
            .map(|h| json!([
                h["host"],
                h["gpus"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|g| g["mig"].as_array().cloned().unwrap_or_default())
                    .filter(|m| m["processes"].is_u64())
                    .count(),
                h["gpus"].as_array().map_or(0, Vec::len),
                h["error"]["kind"],
            ]))
            .collect::<Vec<_>>()))
    };
    let want = json!([
        ["gpu-node-1", 3, 2, null],
        ["gpu-node-2", 0, 2, null],
        ["gpu-node-3", 0, 2, null],
        ["gpu-node-4", 0, 0, "refused"],
        ["gpu-node-5", 0, 0, "refused"],
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let doc = loop {
        let doc: Value = serde_json::from_str(&stdout(&fleet(&["--prometheus", &url, "--json"])))
            .unwrap_or_default();
        let mut now = shown(&doc);
        if let Some(hosts) = now.as_array_mut() {
            hosts.sort_by_key(|h| h[0].as_str().unwrap_or_default().to_owned());
        }
        if now == want {
            break doc;
        }
        assert!(
            Instant::now() < deadline,
            "never every node once: {now:#}\n{doc:#}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    // Node 1's GPUs are gpupeek's rows, dcgm-exporter's not added beside them.
    let uuids: Vec<&str> = doc["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|h| h["gpus"].as_array().unwrap())
        .filter_map(|g| g["uuid"].as_str())
        .collect();
    let mut once = uuids.clone();
    once.sort();
    once.dedup();
    assert_eq!(once.len(), uuids.len(), "a GPU shown twice: {uuids:?}");
    assert_eq!(uuids.len(), 6, "{doc:#}");
}
