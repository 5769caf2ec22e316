//! `gpupeek fleet --kubernetes` and how it gets to the API server: the kubeconfig
//! cluster's `proxy-url` (an HTTP `CONNECT` proxy, or SOCKS5 as `ssh -D` gives) and
//! `tls-server-name` (the name the server's certificate is checked against, and the SNI),
//! the user's `as` fields (whom it acts as), and a credential plugin slower than
//! `--timeout`. The API server is the fake of `fake_kube_api.rs`; the proxies are
//! loopback ones that record what they were asked to reach.

use gpupeek_e2e::{assert_one_line_failure, stderr, tool};

use crate::fake_kube_api::{kube_fleet, kubeconfig, tls_server, token_api, FakeApi, Proxy};
use crate::fleet::{cluster, json_of};
use crate::fleet_kubernetes::{credential, exec_plugin, exec_runs};

/// `gpupeek fleet --kubernetes --kubeconfig CONFIG --json` from `home`.
fn fleet_with(home: &std::path::Path, config: &std::path::Path) -> std::process::Output {
    let config = config.to_str().unwrap();
    kube_fleet(
        home,
        &[],
        &["--kubernetes", "--kubeconfig", config, "--json"],
    )
}

/// The API server is asked through the cluster's `proxy-url`, HTTP or SOCKS5; the
/// serves are not (they are read at their pods' addresses, as kubectl's proxy is only
/// the API server's). A proxy that is not there is one line, status 14; a scheme
/// kubectl refuses, or an HTTP one with `tls-server-name`, one line, status 2.
#[test]
fn the_api_server_is_asked_through_the_clusters_proxy_url() {
    let hosts = cluster("fleet-k8s-proxy", 1);
    let dir = &hosts[0].sandbox.dir;
    let (api, _) = token_api(dir);
    api.list_one(&hosts[0].addr, "gpu-proxied");
    let api_addr = api.url.trim_start_matches("http://").to_owned();
    let user = "      tokenFile: secrets/token\n";
    for socks in [false, true] {
        let proxy = Proxy::start(socks);
        let cluster = format!("      proxy-url: {}\n", proxy.url);
        let config = kubeconfig(dir, &api.url, &cluster, user);
        let before = api.seen().len();
        let out = fleet_with(dir, &config);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            proxy.url,
            stderr(&out)
        );
        assert_eq!(json_of(&out)["hosts"][0]["host"], "gpu-proxied");
        assert!(
            api.seen().len() > before,
            "{}: the API was not asked",
            proxy.url
        );
        let asked = proxy.asked();
        assert!(!asked.is_empty(), "{}: the proxy was not used", proxy.url);
        assert!(
            asked.iter().all(|t| *t == api_addr),
            "{}: the proxy was asked for {asked:?}, not only the API server {api_addr}",
            proxy.url
        );
    }

    // A proxy that is not listening: the API server cannot be reached.
    let config = kubeconfig(dir, &api.url, "      proxy-url: http://127.0.0.1:1\n", user);
    let out = fleet_with(dir, &config);
    assert_one_line_failure(&out, 14, "a proxy that is not there");
    assert!(stderr(&out).contains(&api.url), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("through proxy-url http://127.0.0.1:1"),
        "{}",
        stderr(&out)
    );

    for (cluster, says) in [
        ("      proxy-url: ftp://127.0.0.1:21\n", "proxy-url"),
        ("      proxy-url: 127.0.0.1:3128\n", "proxy-url"),
    ] {
        let config = kubeconfig(dir, &api.url, cluster, user);
        let out = fleet_with(dir, &config);
        assert_one_line_failure(&out, 2, says);
        assert!(stderr(&out).contains(says), "{says}: {}", stderr(&out));
    }
}

/// A server reached by a name its certificate does not hold (here `localhost`, for a
/// certificate of `127.0.0.1` and `kubernetes.test`) is refused, one line, status 14;
/// with `tls-server-name: kubernetes.test` it is trusted, and that name is the SNI. So
/// through a SOCKS5 or an HTTP `CONNECT` proxy too (the cluster's `proxy-url`, or the
/// environment's), which is asked for the server's address (`CONNECT 127.0.0.1:PORT`),
/// not for the tls-server-name it cannot resolve.
#[test]
fn the_clusters_tls_server_name_is_what_its_certificate_is_checked_against() {
    let Some(tool) = tool("openssl", "openssl") else {
        return;
    };
    let hosts = cluster("fleet-k8s-sni", 1);
    let dir = &hosts[0].sandbox.dir;
    let pki = dir.join("pki");
    let api = FakeApi::start(Some(tls_server(&tool, &pki, false)));
    api.list_one(&hosts[0].addr, "gpu-sni");
    let port = api.url.rsplit(':').next().unwrap();
    let by_name = format!("https://localhost:{port}");
    let ca = "      certificate-authority: pki/ca.crt\n";

    let config = kubeconfig(dir, &by_name, ca, "      token: t\n");
    let out = fleet_with(dir, &config);
    assert_one_line_failure(&out, 14, "a certificate without the server's name");
    assert!(stderr(&out).contains(&by_name), "{}", stderr(&out));
    assert!(api.seen().is_empty(), "asked despite the certificate");

    let cluster = format!("{ca}      tls-server-name: kubernetes.test\n");
    let config = kubeconfig(dir, &by_name, &cluster, "      token: t\n");
    let out = fleet_with(dir, &config);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&out)["hosts"][0]["host"], "gpu-sni");
    assert_eq!(api.seen().len(), 1);
    assert!(
        api.names().iter().any(|n| n == "kubernetes.test"),
        "SNI sent: {:?}",
        api.names()
    );

    let by_address = format!("https://127.0.0.1:{port}");
    let address = format!("127.0.0.1:{port}");
    for (socks, from_env) in [(true, false), (true, true), (false, false), (false, true)] {
        let proxy = Proxy::start(socks);
        let mut cluster = format!("{ca}      tls-server-name: kubernetes.test\n");
        let mut env = vec![("NO_PROXY", ""), ("no_proxy", "")];
        match (from_env, socks) {
            (true, true) => env.push(("ALL_PROXY", &proxy.url)),
            (true, false) => env.extend([("ALL_PROXY", ""), ("HTTPS_PROXY", &proxy.url)]),
            (false, _) => cluster.push_str(&format!("      proxy-url: {}\n", proxy.url)),
        }
        let config = kubeconfig(dir, &by_address, &cluster, "      token: t\n");
        let names = api.names().len();
        let config = config.to_str().unwrap();
        let args = ["--kubernetes", "--kubeconfig", config, "--json"];
        let out = kube_fleet(dir, &env, &args);
        let case = format!("{} (from the environment: {from_env})", proxy.url);
        assert_eq!(out.status.code(), Some(0), "{case}: {}", stderr(&out));
        assert_eq!(json_of(&out)["hosts"][0]["host"], "gpu-sni", "{case}");
        // (The environment's proxy is the serves' too: asked for them as well.)
        let asked = proxy.asked();
        assert!(
            asked.contains(&address) && !asked.iter().any(|t| t.starts_with("kubernetes")),
            "{case}: the proxy was asked for {asked:?}, not {address}"
        );
        let sni = &api.names()[names..];
        assert!(
            !sni.is_empty() && sni.iter().all(|n| n == "kubernetes.test"),
            "{case}: SNI sent: {sni:?}"
        );
    }
}

/// A user whose kubeconfig acts as another (`as`, `as-groups`) sends the
/// `Impersonate-*` headers with the list and with each pod-proxy read, as kubectl does;
/// without them the API server would judge the request as the user's own.
#[test]
fn the_users_as_fields_go_to_the_api_server_as_impersonation_headers() {
    let hosts = cluster("fleet-k8s-as", 1);
    let dir = &hosts[0].sandbox.dir;
    let (api, _) = token_api(dir);
    api.list_one("127.0.0.1:1", "gpu-as");
    let (status, body) = gpupeek_e2e::http("GET", &hosts[0].addr, "/snapshot");
    assert_eq!(status, 200, "{body}");
    let proxy_path = "/api/v1/namespaces/gpupeek/pods/gpupeek-pod0:1/proxy/snapshot";
    api.answer_text(proxy_path, 200, &body);
    let user = "      tokenFile: secrets/token\n      as: gpu-viewer\n      \
                as-groups: [sre, ml]\n";
    let config = kubeconfig(dir, &api.url, "", user);
    let config = config.to_str().unwrap();
    let out = kube_fleet(
        dir,
        &[],
        &[
            "--kubernetes",
            "--kubeconfig",
            config,
            "--api-proxy",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&out)["hosts"][0]["error"], serde_json::Value::Null);
    let seen = api.seen();
    assert!(
        seen.iter().any(|r| r.target.contains("/proxy/")),
        "{seen:?}"
    );
    for r in &seen {
        let values = |name: &str| -> Vec<&str> {
            r.headers
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
                .collect()
        };
        assert_eq!(values("Impersonate-User"), ["gpu-viewer"], "{}", r.target);
        assert_eq!(values("Impersonate-Group"), ["sre", "ml"], "{}", r.target);
    }
}

/// A credential plugin slower than `--timeout` (EKS's `aws eks get-token` starts Python
/// and asks STS: seconds) does not use up the round: `--timeout` bounds the servers'
/// answers, the plugin has its own limit. In `-i`, a plugin run again each round (its
/// credential expired) does not either.
#[test]
fn a_credential_plugin_slower_than_timeout_does_not_use_up_the_round() {
    let hosts = cluster("fleet-k8s-slow-exec", 1);
    let dir = &hosts[0].sandbox.dir;
    let api = FakeApi::start(None);
    api.require("Bearer slow-token");
    api.list_one(&hosts[0].addr, "gpu-slow");
    // Valid for 3 s from its answer, as a cloud's token is for minutes.
    let status = r#"{"token":"slow-token","expirationTimestamp":"'"$(date -u -d '+3 seconds' +%Y-%m-%dT%H:%M:%SZ)"'"}"#;
    let user = exec_plugin(dir, &format!("sleep 1.2\n{}", credential(status)));
    let config = kubeconfig(dir, &api.url, "", &user);
    let config = config.to_str().unwrap();
    let once = [
        "--kubernetes",
        "--kubeconfig",
        config,
        "--timeout",
        "1",
        "--json",
    ];
    let out = kube_fleet(dir, &[], &once);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(doc["hosts"][0]["host"], "gpu-slow", "{doc:#}");
    assert_eq!(doc["hosts"][0]["error"], serde_json::Value::Null, "{doc:#}");

    let mut cmd = std::process::Command::new(&gpupeek_e2e::bins().client);
    cmd.arg("fleet")
        .args(once)
        .args(["-i", "0.2"])
        .env("HOME", dir)
        .env_remove("KUBECONFIG");
    let out = gpupeek_e2e::run_with_limit(cmd, std::time::Duration::from_secs(8));
    let docs: Vec<serde_json::Value> = serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<serde_json::Value>()
        .map_while(Result::ok)
        .collect();
    assert!(docs.len() >= 2, "{} rounds: {}", docs.len(), stderr(&out));
    for doc in &docs {
        assert_eq!(doc["hosts"][0]["host"], "gpu-slow", "{doc:#}");
        assert_eq!(doc["hosts"][0]["error"], serde_json::Value::Null, "{doc:#}");
    }
    // Once for the one-shot, then at -i's start and when that credential expired.
    assert!(
        exec_runs(dir) >= 3,
        "the expired credential was not asked for again"
    );
}
