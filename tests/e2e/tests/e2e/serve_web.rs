//! `gpupeek serve --web.config.file`: HTTPS with a self-signed certificate (made by the
//! openssl command), basic authentication with a bcrypt hash, gzip when asked, and a
//! client that never finishes its TLS handshake or request being closed. curl is the
//! client, as an operator's would be; without curl or openssl the tests are skipped,
//! except under CI.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use gpupeek_e2e::{
    bins, certificate, run_with_watchdog, start_prometheus, stderr, stdout, tool, Background,
    Sandbox,
};
use serde_json::json;

/// The bcrypt hash of "password" (from dcgm-exporter's test configuration).
pub(crate) const HASH: &str = "$2y$10$CWCEbs7mt8QFrToJR9OcG.tduEKpx9SROhWnaDHQgQX4Q6hqWNASa";

/// A live daemon on one GPU.
fn live(tag: &str) -> (Sandbox, gpupeek_e2e::Daemon) {
    let sandbox = Sandbox::new(tag);
    sandbox.write_scenario(&json!({"gpus": [
        {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "temperature_c": 41}
    ]}));
    let daemon = sandbox.start_daemon("100ms");
    sandbox.wait_live(&daemon);
    (sandbox, daemon)
}

/// `gpupeek serve` with web configuration `yaml`; its address and scheme.
fn serve(sandbox: &Sandbox, yaml: &str) -> (Background, String) {
    let config = sandbox.dir.join("web.yml");
    std::fs::write(&config, yaml).unwrap();
    let flags = [
        std::ffi::OsStr::new("--web.config.file"),
        config.as_os_str(),
    ];
    gpupeek_e2e::spawn_serve(sandbox, Command::new(&bins().client), &flags)
}

/// curl's status code, response headers and body for `url` with `args`.
fn curl(url: &str, args: &[&str]) -> (u16, String, String) {
    let curl = tool("curl", "curl").expect("checked by the caller");
    let mut cmd = Command::new(curl);
    cmd.args([
        "-sS",
        "--max-time",
        "20",
        "-D",
        "/dev/stderr",
        "-o",
        "/dev/stdout",
    ])
    .args(args)
    .arg(url);
    let out = run_with_watchdog(cmd);
    assert!(
        out.status.success(),
        "curl {args:?} {url}: {}",
        stderr(&out)
    );
    let headers = stderr(&out);
    let status = headers
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {headers:?}"));
    (status, headers, stdout(&out))
}

#[test]
fn https_with_basic_auth_answers_the_right_password_only_and_gzips_when_asked() {
    let (sandbox, _daemon) = live("serve-https");
    let Some((cert, _key)) = certificate(&sandbox.dir) else {
        return;
    };
    if tool("curl", "curl").is_none() {
        return;
    }
    // One absolute path, one relative to the configuration file's directory.
    let yaml = format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: key.pem\n\
         http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n\
         basic_auth_users:\n  alice: {HASH}\n",
        cert.display()
    );
    let (_serve, base) = serve(&sandbox, &yaml);
    assert!(base.starts_with("https://"), "{base}");
    let url = format!("{base}/metrics");
    let ca = cert.to_str().unwrap();
    let (status, headers, body) = curl(&url, &["--cacert", ca, "-u", "alice:password"]);
    assert_eq!(status, 200, "{headers}");
    assert!(body.contains("\ngpupeek_up 1\n"), "{body}");
    assert!(
        headers.contains("X-Content-Type-Options: nosniff"),
        "{headers}"
    );
    assert!(!headers.contains("Content-Encoding"), "{headers}");

    let (status, headers, body) = curl(&url, &["--cacert", ca, "-u", "alice:wrong"]);
    assert_eq!(status, 401, "{headers}");
    assert!(
        headers.contains("WWW-Authenticate: Basic realm=\"gpupeek\""),
        "{headers}"
    );
    assert!(!body.contains("gpupeek_up"), "{body}");
    assert_eq!(curl(&url, &["--cacert", ca]).0, 401);
    assert_eq!(curl(&url, &["--cacert", ca, "-u", "bob:password"]).0, 401);

    let (status, headers, body) = curl(
        &url,
        &["--cacert", ca, "-u", "alice:password", "--compressed"],
    );
    assert_eq!(status, 200, "{headers}");
    assert!(headers.contains("Content-Encoding: gzip"), "{headers}");
    assert!(body.contains("\ngpupeek_up 1\n"), "curl decoded it: {body}");
}

#[test]
fn a_client_that_never_finishes_its_handshake_is_closed_at_the_deadline() {
    let (sandbox, _daemon) = live("serve-slow-tls");
    let Some((cert, _key)) = certificate(&sandbox.dir) else {
        return;
    };
    let yaml = format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: key.pem\n",
        cert.display()
    );
    let (_serve, base) = serve(&sandbox, &yaml);
    let addr = base.trim_start_matches("https://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // The first bytes of a TLS record, then nothing.
    stream.write_all(&[0x16, 0x03, 0x01]).unwrap();
    let mut byte = [0u8; 1];
    let closed = match stream.read(&mut byte) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    };
    assert!(closed, "the server left a stalled handshake open");
}

#[test]
fn plain_http_gzips_when_asked_and_a_bad_config_is_refused() {
    let (sandbox, _daemon) = live("serve-gzip");
    if tool("curl", "curl").is_none() {
        return;
    }
    let (_serve, base) = serve(&sandbox, &format!("basic_auth_users:\n  alice: {HASH}\n"));
    let url = format!("{base}/metrics");
    let (status, headers, body) = curl(&url, &["-u", "alice:password", "--compressed"]);
    assert_eq!(status, 200);
    assert!(headers.contains("Content-Encoding: gzip"), "{headers}");
    assert!(body.contains("\ngpupeek_up 1\n"), "{body}");

    let config = sandbox.dir.join("bad.yml");
    std::fs::write(&config, "tls_server_config:\n  min_version: TLS10\n").unwrap();
    let mut cmd = Command::new(&bins().client);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--shm", &sandbox.shm])
        .arg("--web.config.file")
        .arg(&config);
    let out = run_with_watchdog(cmd);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--web.config.file") && stderr(&out).lines().count() == 1,
        "{}",
        stderr(&out)
    );
}

/// A CA and a client certificate it signed, in `dir`: (CA, client certificate, key).
fn client_certificate(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let openssl = tool("openssl", "openssl").expect("checked by the caller");
    let run = |args: &[&str]| {
        let mut cmd = Command::new(&openssl);
        cmd.args(args).current_dir(dir);
        let out = run_with_watchdog(cmd);
        assert!(out.status.success(), "openssl {args:?}: {}", stderr(&out));
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    run(&[
        &["req", "-x509"][..],
        &ec,
        &[
            "-days",
            "2",
            "-subj",
            "/CN=gpupeek-test-ca",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ],
        &["-addext", "basicConstraints=critical,CA:TRUE"],
        &["-addext", "keyUsage=critical,keyCertSign"],
    ]
    .concat());
    run(&[
        &["req"][..],
        &ec,
        &[
            "-subj",
            "/CN=scraper",
            "-keyout",
            "client.key",
            "-out",
            "client.csr",
        ],
    ]
    .concat());
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "client.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "client.ext",
        "-out",
        "client.pem",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("client.pem"),
        dir.join("client.key"),
    )
}

#[test]
fn a_required_client_certificate_must_be_signed_by_the_client_ca() {
    let (sandbox, _daemon) = live("serve-mtls");
    let Some((cert, _key)) = certificate(&sandbox.dir) else {
        return;
    };
    let Some(curl_path) = tool("curl", "curl") else {
        return;
    };
    let (ca, client, client_key) = client_certificate(&sandbox.dir);
    let yaml = format!(
        "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n\
         \x20 client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {}\n",
        ca.display()
    );
    let (_serve, base) = serve(&sandbox, &yaml);
    let url = format!("{base}/metrics");
    let server_ca = cert.to_str().unwrap();
    let (status, headers, body) = curl(
        &url,
        &[
            "--cacert",
            server_ca,
            "--cert",
            client.to_str().unwrap(),
            "--key",
            client_key.to_str().unwrap(),
        ],
    );
    assert_eq!(status, 200, "{headers}");
    assert!(body.contains("\ngpupeek_up 1\n"), "{body}");
    let mut without = Command::new(curl_path);
    without.args(["-sS", "--max-time", "20", "--cacert", server_ca, &url]);
    let out = run_with_watchdog(without);
    assert!(
        !out.status.success() && !stdout(&out).contains("gpupeek_up"),
        "answered without a client certificate: {}",
        stdout(&out)
    );
}

#[test]
fn a_real_prometheus_scrapes_serve_over_https_with_basic_auth_and_gzip() {
    let Some(prometheus) = tool("prometheus", "prometheus") else {
        return;
    };
    let (sandbox, _daemon) = live("serve-prometheus-https");
    let Some((cert, _key)) = certificate(&sandbox.dir) else {
        return;
    };
    let yaml = format!(
        "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n\
         basic_auth_users:\n  alice: {HASH}\n"
    );
    let (_serve, base) = serve(&sandbox, &yaml);
    let target = base.trim_start_matches("https://");
    // Prometheus asks for gzip by default; the contrib rules are loaded too.
    let rules = gpupeek_e2e::repo().join("contrib/prometheus/gpupeek-rules.yml");
    let (_prometheus, web) = start_prometheus(
        &prometheus,
        &sandbox,
        &format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files: ['{}']\n\
             scrape_configs:\n  - job_name: gpupeek\n    scheme: https\n\
             \x20   tls_config: {{ca_file: '{}'}}\n\
             \x20   basic_auth: {{username: alice, password: password}}\n\
             \x20   static_configs:\n      - targets: ['{target}']\n",
            rules.display(),
            cert.display()
        ),
    );
    let query = "/api/v1/query?query=gpupeek_up";
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let answer = std::net::TcpStream::connect(&web)
            .ok()
            .map(|_| gpupeek_e2e::http("GET", &web, query));
        if let Some((200, body)) = answer {
            let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
            let result = &doc["data"]["result"][0];
            if result["value"][1] == "1" {
                assert_eq!(result["metric"]["job"], "gpupeek");
                break;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Prometheus never scraped gpupeek_up 1 over HTTPS; its log:\n{}",
            std::fs::read_to_string(sandbox.dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // Every rule evaluates without error (health "ok" once it has run).
    loop {
        let (status, body) = gpupeek_e2e::http("GET", &web, "/api/v1/rules");
        assert_eq!(status, 200);
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        let groups = doc["data"]["groups"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(groups.len(), 2, "{body}");
        let health: Vec<String> = groups
            .iter()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .map(|r| r["health"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert!(health.iter().all(|h| h != "err"), "{body}");
        if health.iter().all(|h| h == "ok") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{body}");
        std::thread::sleep(Duration::from_millis(250));
    }
}
