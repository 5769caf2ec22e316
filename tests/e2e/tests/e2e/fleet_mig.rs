//! `gpupeek fleet` on a host whose GPU is split into MIG devices: a row per device under
//! its GPU with its own memory, processes, status and the pod the kubelet assigns it to
//! (a device with nothing in it is free unless a pod holds it, then it is idle-allocated;
//! the split GPU itself is never free), counted in the summary and by `--group-by pod`,
//! the same read directly and through a real Prometheus.

use std::process::Command;
use std::time::{Duration, Instant};

use gpupeek_e2e::{bins, spawn_serve, start_prometheus, stdout, tool, Daemon, Sandbox};
use serde_json::{json, Value};

use gpupeek_kube::fake::FakeKubelet;

use crate::fleet::{fleet, json_of};
use crate::mig::{four_sleepers, instance, process, scenario, Sleeper};
use crate::pod_views::allocations;

/// A host whose H100 is split into 3g.40gb (GPU instance 1, a process of 3000 MiB),
/// 2g.20gb (5) and 1g.10gb (13), each with the GPM SM activity in `gpm`, beside a whole
/// H100; its daemon live and sampled, and the process running (killed when dropped).
pub(crate) fn split_host(tag: &str, gpm: [Option<f64>; 3]) -> (Sandbox, Daemon, [Sleeper; 4]) {
    let (sleepers, pids) = four_sleepers();
    let sandbox = Sandbox::new(tag);
    sandbox.write_scenario(&scenario(
        vec![
            instance(1, 9, gpm[0]),
            instance(5, 14, gpm[1]),
            instance(13, 19, gpm[2]),
        ],
        vec![process(pids[0], 3000, 1)],
    ));
    let daemon = sandbox.start_daemon("100ms");
    sandbox.wait_live(&daemon);
    sandbox.wait_sampled(&daemon);
    (sandbox, daemon, sleepers)
}

/// Each MIG device of each GPU of a fleet document, without what only a host's own
/// `/snapshot` tells (its users: Prometheus has no per-device process series).
fn devices(doc: &Value) -> Value {
    let gpus = doc["hosts"][0]["gpus"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let devices: Vec<Value> = gpus
        .iter()
        .flat_map(|g| g["mig"].as_array().cloned().unwrap_or_default())
        .map(|mut m| {
            m.as_object_mut().unwrap().remove("users");
            m
        })
        .collect();
    json!(devices)
}

#[test]
fn a_gpu_split_into_mig_devices_shows_each_device_free_or_busy_from_each_source() {
    let Some(prometheus) = tool("prometheus", "prometheus") else {
        return;
    };
    // 3g.40gb (GI 1) runs a process of 3000 MiB; 2g.20gb (GI 5) and 1g.10gb (GI 13)
    // hold nothing. The kubelet assigns GI 1 to ml/train (by MIG UUID) and GI 13 to
    // ml/idle (as GKE names it).
    let (sandbox, _daemon, _sleepers) = split_host("fleet-mig", [None; 3]);
    let socket = std::env::temp_dir().join(format!(
        "gpupeek-e2e-kubelet-fleet-mig-{}.sock",
        std::process::id()
    ));
    let train = format!("MIG-{:08x}-7d1c-5b8e-9d2a-{:012x}", 1, 9);
    let _kubelet = FakeKubelet::start(
        &socket,
        allocations(&[("train", &train), ("idle", "nvidia0/gi13")]),
    );
    let extra = [
        "--per-process".as_ref(),
        "--per-user".as_ref(),
        "--kubelet.pod-resources-socket".as_ref(),
        socket.as_os_str(),
    ];
    let (_serve, url) = spawn_serve(&sandbox, Command::new(&bins().client), &extra);
    let addr = url.trim_start_matches("http://").to_owned();

    let text = stdout(&fleet(&["--host", &addr]));
    assert!(
        text.starts_with(
            "1 hosts (0 not read), 2 GPUs: 0 free, 0 idle-allocated; \
             3 MIG devices: 1 free, 1 idle-allocated\n"
        ),
        "{text}"
    );
    let rows: Vec<&str> = text.lines().skip(2).collect();
    assert!(
        rows[0].contains(" 0  NVIDIA H100 80GB HBM3") && rows[0].contains("  MIG  "),
        "{text}"
    );
    assert!(
        rows[1].contains("├ MIG 3g.40gb (1/0)") && rows[1].contains("busy"),
        "{text}"
    );
    assert!(
        rows[1].ends_with("root [ml/train]"),
        "the device's user and pod: {text}"
    );
    assert!(
        rows[2].contains("├ MIG 2g.20gb (5/0)") && rows[2].ends_with("free"),
        "{text}"
    );
    assert!(
        rows[3].contains("└ MIG 1g.10gb (13/0)") && rows[3].ends_with("IDLE    [ml/idle]"),
        "held by a pod, nothing in it: {text}"
    );
    let by_pod = stdout(&fleet(&["--host", &addr, "--group-by", "pod"]));
    let by_pod: Vec<&str> = by_pod.lines().skip(1).collect();
    assert_eq!(
        by_pod,
        [
            "POD       HOSTS   GPUS  PROCS  MEMORY (MiB)",
            "ml/train      1      1      1          3000",
            "ml/idle       1      1      0             0",
        ]
    );

    let direct = json_of(&fleet(&["--host", &addr, "--json"]));
    let got: Vec<(u64, bool, u64)> = direct["hosts"][0]["gpus"][0]["mig"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let id = m["gpu_instance_id"].as_u64().unwrap();
            (
                id,
                m["free"].as_bool().unwrap(),
                m["processes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [(1, false, 1), (5, true, 0), (13, false, 0)],
        "{direct:#}"
    );
    assert_eq!(direct["summary"]["mig_devices_free"], 1);
    assert_eq!(direct["hosts"][0]["gpus"][0]["mig"][2]["pod"], "ml/idle");
    // The serve's /snapshot and the documents of its /events name the same pods.
    let (_, snapshot) = gpupeek_e2e::http("GET", &addr, "/snapshot");
    let snapshot: Value = serde_json::from_str(&snapshot).unwrap();
    let pods = |doc: &Value| -> Vec<(Value, Value, Value)> {
        let pods = doc["pods"].as_array().cloned().unwrap_or_default();
        pods.iter()
            .map(|p| {
                (
                    p["gpu"].clone(),
                    p["gpu_instance_id"].clone(),
                    p["pod"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(
        pods(&snapshot),
        [
            (json!(0), json!(1), json!("train")),
            (json!(0), json!(13), json!("idle"))
        ],
        "{snapshot:#}"
    );
    let stream = std::net::TcpStream::connect(&addr).unwrap();
    let mut stream = crate::serve_stream::subscribe(stream, &addr);
    let (text, _) = crate::serve_stream::read_for(&mut stream, Duration::from_millis(1500));
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l.strip_prefix("data: ")?).ok())
        .collect();
    assert!(events.len() >= 2, "{text}");
    for event in &events {
        assert_eq!(pods(event), pods(&snapshot), "{event:#}");
    }
    assert!(
        direct["hosts"][0]["gpus"][1].get("mig").is_none(),
        "{direct:#}"
    );

    let (_prometheus, web) = start_prometheus(
        &prometheus,
        &sandbox,
        &format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  \
             - job_name: gpupeek\n    static_configs:\n      - targets: ['{addr}']\n"
        ),
    );
    let url = format!("http://{web}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let through = fleet(&["--prometheus", &url, "--json"]);
        let through: Option<Value> = serde_json::from_str(&stdout(&through)).ok();
        if through.as_ref().map(devices) == Some(devices(&direct)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the views of the MIG devices never agreed:\ndirect: {:#}\nthrough Prometheus: {:#}",
            devices(&direct),
            through.as_ref().map(devices).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // The pod dashboard's variables, as Grafana asks Prometheus for them (the label
    // values of their series selector over the time range): the pods holding a MIG
    // device only are there, and their namespace.
    for (variable, want) in [
        ("namespace", json!(["ml"])),
        ("pod", json!(["idle", "train"])),
    ] {
        let selector = pod_dashboard_selector(variable).replace("$namespace", "ml");
        let path = format!(
            "/api/v1/label/{variable}/values?match[]={}",
            percent_encoded(&selector)
        );
        let (status, body) = gpupeek_e2e::http("GET", &web, &path);
        let answer: Value = serde_json::from_str(&body).unwrap_or_default();
        assert_eq!(
            (status, &answer["data"]),
            (200, &want),
            "{selector}: {body}"
        );
    }
}

/// The series selector of the pod dashboard's variable `name` (`label_values(SELECTOR,
/// label)`).
fn pod_dashboard_selector(name: &str) -> String {
    let path = gpupeek_e2e::repo().join("contrib/kubernetes/dashboards/gpupeek-pod.json");
    let dashboard: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    let variable = variables.iter().find(|v| v["name"] == name).unwrap();
    let query = variable["query"]["query"].as_str().unwrap();
    let rest = query
        .strip_prefix("label_values(")
        .expect("a label_values variable");
    crate::exporters::label_values_selector(rest).to_owned()
}

/// `text` with every byte but ASCII letters and digits percent-encoded.
fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b.is_ascii_alphanumeric() {
            true => (b as char).to_string(),
            false => format!("%{b:02X}"),
        })
        .collect()
}
