//! `gpupeek fleet` when hosts misbehave: hosts that refuse, hang, answer slowly or answer
//! garbage, and a stopped daemon, are each shown with their reason, the rest within the
//! deadline; an HTTPS serve with basic auth, and its TLS and authentication failures;
//! `-i`'s idle flag from the last three rounds.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use gpupeek_e2e::{bins, spawn_serve, stderr, stdout, Sandbox};
use nix::sys::signal::Signal;
use serde_json::{json, Value};

use crate::fleet::{cluster, fleet, gpu, host_args, json_of, refusing};

/// A loopback server that answers each connection with `answer` after `delay` (`None`:
/// accepts and never answers); runs until the test process ends.
fn fake_server(delay: Option<Duration>, answer: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for mut stream in listener.incoming().flatten() {
            let Some(delay) = delay else {
                held.push(stream);
                continue;
            };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                std::thread::sleep(delay);
                let _ = stream.write_all(answer.as_bytes());
            });
        }
    });
    addr
}

#[test]
fn each_faulty_host_is_shown_with_its_reason_and_the_rest_within_the_deadline() {
    let mut hosts = cluster("fleet-faults", 2);
    hosts[1].daemon.signal(Signal::SIGTERM);
    hosts[1].daemon.wait_exit();
    let refused = refusing();
    let hang = fake_server(None, "");
    let slow = fake_server(Some(Duration::from_secs(15)), "HTTP/1.0 200 OK\r\n\r\n{}");
    let garbage = fake_server(
        Some(Duration::ZERO),
        "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n<html>oops</html>",
    );
    let addrs = [
        hosts[0].addr.as_str(),
        hosts[1].addr.as_str(),
        &refused,
        &hang,
        &slow,
        &garbage,
    ];
    let mut args = host_args(&addrs);
    args.extend(["--timeout", "1", "--json"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let start = Instant::now();
    let out = fleet(&args);
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(13), "{}", stderr(&out));
    // Well before the slow host would answer: the deadline, not the hosts, ends the round.
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let doc = json_of(&out);
    let kind = |addr: &str| {
        let r = doc["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["host"] == addr);
        let r = r.unwrap_or_else(|| panic!("{addr} missing: {doc}"));
        (r["error"]["kind"].clone(), r["error"]["reason"].clone())
    };
    assert_eq!(kind(addrs[0]).0, Value::Null);
    let (k, why) = kind(addrs[1]);
    assert_eq!(k, "stale_daemon");
    assert!(why.as_str().unwrap().contains("stopped"), "{why}");
    assert_eq!(kind(&refused).0, "refused");
    assert_eq!(kind(&hang).0, "timeout");
    assert_eq!(kind(&slow).0, "timeout");
    let (k, why) = kind(&garbage);
    assert_eq!(k, "bad_response");
    assert!(
        why.as_str().unwrap().contains("not a gpupeek /snapshot"),
        "{why}"
    );
    assert_eq!(doc["summary"]["hosts_failed"], 5);
    assert_eq!(doc["summary"]["gpus"], 2, "host 0's GPUs are all there");

    // The table says the same, a line per failed host.
    let args: Vec<&str> = args.iter().copied().filter(|a| *a != "--json").collect();
    let text = stdout(&fleet(&args));
    for (addr, word) in [
        (&refused, "refused"),
        (&hang, "timeout"),
        (&garbage, "bad_response"),
    ] {
        let line = text.lines().find(|l| l.starts_with(addr.as_str())).unwrap();
        assert!(line.contains(word), "{line}");
    }
}

/// A host whose answer carries terminal escape sequences (in its node, a GPU's name, a
/// user, a command, a pod, its daemon's error) cannot send them to the user's terminal:
/// the table, the groups and the JSON show `?` for each control character.
#[test]
fn a_hosts_terminal_escapes_never_reach_the_terminal() {
    const EVIL: &str = "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n\
        {\"hostname\": \"h\", \"driver_version\": \"550\", \"query_time\": \"t\", \
         \"gpus\": [{\"index\": 0, \"uuid\": \"GPU-e\", \"name\": \"H100\\u001b[2J\\u001b]0;pwned\\u0007\", \
           \"utilization.gpu\": 50, \"memory.used\": 2048, \"memory.total\": 81559, \
           \"processes\": [{\"username\": \"bob\\u009b31m\", \"command\": \"py\\u001bc\", \
             \"pid\": 7, \"gpu_memory_usage\": 2048, \"pod_uid\": \"u\\u001b[5m\"}]}], \
         \"node\": \"n\\u001b[8m\", \"pods\": null, \
         \"daemon\": {\"state\": \"live\", \"age_s\": 0.1, \"stale\": false, \"error\": null}}";
    const STALE: &str = "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n\
        {\"hostname\": \"h\", \"driver_version\": null, \"query_time\": \"t\", \"gpus\": [], \
         \"node\": \"s\", \"pods\": null, \"daemon\": {\"state\": \"stale\", \"age_s\": 9, \
         \"stale\": true, \"error\": \"gone\\u001b]52;c;cHduZWQ=\\u0007\"}}";
    let evil = fake_server(Some(Duration::ZERO), EVIL);
    let stale = fake_server(Some(Duration::ZERO), STALE);
    let hosts = host_args(&[evil.as_str(), stale.as_str()]);
    let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
    for extra in [
        &[][..],
        &["--group-by", "user"],
        &["--group-by", "pod"],
        &["--json"],
    ] {
        let args: Vec<&str> = hosts.iter().chain(extra).copied().collect();
        let out = fleet(&args);
        let text = stdout(&out);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{extra:?}: {text:?}"
        );
        assert!(!text.contains("\\u00"), "{extra:?}: {text}");
        if extra.is_empty() {
            assert!(text.contains("H100?[2J?]0;pwned?"), "{text}");
            assert!(text.contains("bob?31m"), "{text}");
            assert!(text.contains("gone?]52;c;cHduZWQ=?"), "{text}");
        }
    }
}

#[test]
fn fleet_reads_an_https_serve_with_basic_auth_and_names_tls_and_auth_failures() {
    let sandbox = Sandbox::new("fleet-https");
    let Some((cert, key)) = gpupeek_e2e::certificate(&sandbox.dir) else {
        return;
    };
    sandbox.write_scenario(&json!({"gpus": [gpu(0, 0, 50, 0, &[])]}));
    let daemon = sandbox.start_daemon("100ms");
    sandbox.wait_live(&daemon);
    let config = sandbox.dir.join("web.yml");
    std::fs::write(
        &config,
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\nbasic_auth_users:\n  \
             gpupeek: {}\n",
            cert.display(),
            key.display(),
            crate::serve_web::HASH
        ),
    )
    .unwrap();
    let flags = [
        std::ffi::OsStr::new("--web.config.file"),
        config.as_os_str(),
    ];
    let (_serve, url) = spawn_serve(&sandbox, Command::new(&bins().client), &flags);
    assert!(url.starts_with("https://"), "{url}");
    let password = sandbox.dir.join("password");
    std::fs::write(&password, "password\n").unwrap();
    let (cert, password) = (cert.to_str().unwrap(), password.to_str().unwrap());
    let auth = ["--user", "gpupeek", "--password-file", password];
    let run = |extra: &[&str]| {
        let mut args = vec!["--host", url.as_str(), "--json", "--timeout", "5"];
        args.extend_from_slice(extra);
        let out = fleet(&args);
        let doc = json_of(&out);
        (out.status.code(), doc["hosts"][0]["error"]["kind"].clone())
    };
    let with_ca: Vec<&str> = ["--tls-ca", cert].iter().chain(&auth).copied().collect();
    assert_eq!(run(&with_ca), (Some(0), Value::Null));
    let insecure: Vec<&str> = ["--insecure"].iter().chain(&auth).copied().collect();
    assert_eq!(run(&insecure), (Some(0), Value::Null));
    assert_eq!(run(&["--tls-ca", cert]), (Some(13), json!("unauthorized")));
    assert_eq!(
        run(&auth),
        (Some(13), json!("tls")),
        "not signed by a web root"
    );
}

#[test]
fn watch_flags_memory_held_at_zero_percent_for_three_rounds() {
    let sandbox = Sandbox::new("fleet-watch");
    let me = std::process::id();
    // Memory held at 0 %, but idle for less than the verdict's 300 s: only -i's
    // history can flag it.
    sandbox.write_scenario(&json!({"gpus": [gpu(0, 0, 0, 20, &[(me, 10)])]}));
    let daemon = sandbox.start_daemon("100ms");
    sandbox.wait_live(&daemon);
    sandbox.wait_sampled(&daemon);
    let (_serve, url) = spawn_serve(&sandbox, Command::new(&bins().client), &[]);
    let mut cmd = Command::new(&bins().client);
    cmd.args(["fleet", "--host", &url, "--json", "-i", "0.2"]);
    let out = gpupeek_e2e::run_with_limit(cmd, Duration::from_secs(3));
    let docs: Vec<Value> = serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Value>()
        .map_while(Result::ok)
        .collect();
    assert!(docs.len() >= 4, "{} rounds: {}", docs.len(), stderr(&out));
    assert_eq!(docs[0]["hosts"][0]["error"], Value::Null, "{:#}", docs[0]);
    let idle: Vec<&Value> = docs
        .iter()
        .map(|d| &d["hosts"][0]["gpus"][0]["idle_allocated"])
        .collect();
    for d in &docs {
        assert_ne!(d["hosts"][0]["gpus"][0]["verdict"], "idle-holding");
    }
    assert_eq!(idle[..2], [&json!(false), &json!(false)], "{idle:?}");
    assert!(idle[2..].iter().all(|v| **v == json!(true)), "{idle:?}");
}

/// A Prometheus-compatible server behind a bearer token that wants a tenant header (Mimir
/// and Cortex's `X-Scope-OrgID`, Thanos or Prometheus behind an OAuth proxy): fleet sends
/// `--bearer-token-file`'s token and every `--header` with each request; a refused token
/// is the server's row with the flag to check.
#[test]
fn prometheus_behind_a_bearer_token_gets_it_and_every_header() {
    let sb = Sandbox::new("fleet-prom-auth");
    let api = crate::fake_kube_api::FakeApi::start(None);
    api.require("Bearer tok-1");
    let sample = |name: &str, labels: Value, value: &str| {
        let mut metric = json!({"__name__": name, "job": "gpupeek", "instance": "gpu-a"});
        metric
            .as_object_mut()
            .unwrap()
            .extend(labels.as_object().unwrap().clone());
        json!({"metric": metric, "value": [1.7e9, value]})
    };
    let result = [
        sample("up", json!({}), "1"),
        sample("gpupeek_daemon_state", json!({"state": "live"}), "1"),
        sample("gpupeek_heartbeat_age_seconds", json!({}), "0.2"),
        sample(
            "gpupeek_gpu_info",
            json!({"gpu": "0", "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-a0"}),
            "1",
        ),
        sample("gpupeek_gpu_utilization_ratio", json!({"gpu": "0"}), "0.5"),
    ];
    api.answer(
        "/api/v1/query",
        200,
        json!({"status": "success", "data": {"resultType": "vector", "result": result}}),
    );
    let token = sb.dir.join("token");
    std::fs::write(&token, "tok-1\n").unwrap();
    let run = |extra: &[&str]| {
        let mut cmd = Command::new(&bins().client);
        cmd.args(["fleet", "--prometheus", &api.url, "--json"])
            .args(extra);
        gpupeek_e2e::run_with_watchdog(cmd)
    };
    let token_arg = ["--bearer-token-file", token.to_str().unwrap()];
    let tenant = ["--header", "X-Scope-OrgID: team-a", "--header", "X-Extra:x"];
    let out = run(&[&token_arg[..], &tenant].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(doc["hosts"][0]["host"], "gpu-a", "{doc}");
    assert_eq!(doc["hosts"][0]["gpus"][0]["utilization_pct"], 50, "{doc}");
    let seen = api.seen();
    assert!(!seen.is_empty());
    for r in &seen {
        assert_eq!(r.authorization.as_deref(), Some("Bearer tok-1"), "{r:?}");
        let has = |k: &str, v: &str| {
            r.headers
                .iter()
                .any(|(hk, hv)| hk.eq_ignore_ascii_case(k) && hv == v)
        };
        assert!(
            has("X-Scope-OrgID", "team-a") && has("X-Extra", "x"),
            "{r:?}"
        );
    }

    // Another token: the server's row says it refused it, and which flag to check.
    std::fs::write(&token, "tok-2\n").unwrap();
    let out = run(&token_arg);
    assert_eq!(out.status.code(), Some(13), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(doc["hosts"][0]["error"]["kind"], "unauthorized", "{doc}");
    let why = doc["hosts"][0]["error"]["reason"].as_str().unwrap();
    assert!(why.contains("--bearer-token-file"), "{why}");

    // Bad usage is one line and status 2, before any request.
    let before = api.seen().len();
    let missing = sb.dir.join("missing");
    for (args, says) in [
        (
            vec!["--header", "X-Scope-OrgID team-a"],
            "expected NAME: VALUE",
        ),
        (
            vec!["--header", "Authorization: Bearer x"],
            "--bearer-token-file",
        ),
        (vec!["--header", "Bad Name: x"], "HTTP field name"),
        (
            vec![
                "--bearer-token-file",
                token.to_str().unwrap(),
                "--user",
                "u",
            ],
            "choose one",
        ),
        (
            vec!["--bearer-token-file", missing.to_str().unwrap()],
            "cannot read --bearer-token-file",
        ),
    ] {
        let out = run(&args);
        gpupeek_e2e::assert_one_line_failure(&out, 2, says);
        assert!(stderr(&out).contains(says), "{says}: {}", stderr(&out));
    }
    assert_eq!(api.seen().len(), before);
}
