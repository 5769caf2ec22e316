//! `gpupeek fleet --kubernetes`: the serves found through a fake Kubernetes API server (a
//! loopback HTTP or HTTPS server in the test that answers the EndpointSlice list and the
//! core Endpoints as the real one does, and checks the credentials) with a kubeconfig
//! written here. The same serves give the same table and JSON as `--host`; a not-ready
//! endpoint is a host with its fault; a list in pages is read to its last page, starting
//! over once when a continue token expires; the API's refusals, a missing EndpointSlice
//! API (404, then Endpoints), a list that never ends, an exec plugin and an unreachable
//! server each end as documented.

use std::process::Command;
use std::time::Duration;

use gpupeek_e2e::{assert_one_line_failure, bins, stderr, stdout, tool};
use serde_json::{json, Value};

use crate::fake_kube_api::{
    endpoints, kube_fleet, kubeconfig, mtls_server, slices, slices_after, slices_page, status_body,
    timeless, tls_server, token_api, Ep, FakeApi, ENDPOINTS, SLICES, TOKEN,
};
use crate::fleet::{cluster, fleet, host_args, json_of};

/// The hosts of a fleet JSON document, sorted.
fn hosts_of(doc: &Value) -> Vec<String> {
    let mut h: Vec<String> = doc["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["host"].as_str().unwrap().to_owned())
        .collect();
    h.sort();
    h
}

/// The targets `api` was asked, in order.
fn asked(api: &FakeApi) -> Vec<String> {
    api.seen().into_iter().map(|r| r.target).collect()
}

#[test]
fn fleet_kubernetes_gives_the_same_view_as_the_hosts_and_names_them_by_node() {
    let hosts = cluster("fleet-k8s", 3);
    let addrs: Vec<&str> = hosts.iter().map(|h| h.addr.as_str()).collect();
    let dir = &hosts[0].sandbox.dir;
    let (api, config) = token_api(dir);
    let config = config.to_str().unwrap();
    // Nodes named as the --host addresses: byte for byte the same table and JSON.
    let same: Vec<Ep> = addrs
        .iter()
        .map(|a| Ep {
            addr: a,
            node: a,
            ready: true,
        })
        .collect();
    api.answer(SLICES, 200, slices(&same));
    let args = host_args(&addrs);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let kube = ["--kubernetes", "--kubeconfig", config];
    for extra in [&[][..], &["--json"], &["--json", "--group-by", "user"]] {
        let direct = fleet(&[&args[..], extra].concat());
        let through = kube_fleet(dir, &[], &[&kube[..], extra].concat());
        assert_eq!(through.status.code(), Some(0), "{}", stderr(&through));
        if extra.is_empty() {
            assert_eq!(stdout(&through), stdout(&direct));
        } else {
            assert_eq!(timeless(json_of(&through)), timeless(json_of(&direct)));
        }
    }
    let seen = api.seen();
    assert!(seen.iter().all(|r| r.target == SLICES), "{seen:?}");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(&*format!("Bearer {TOKEN}"))
    );

    // Real node names: the hosts are the nodes, asked at their endpoints' addresses.
    let named: Vec<Ep> = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| Ep {
            addr: a,
            node: ["gpu-node-a", "gpu-node-b", "gpu-node-c"][i],
            ready: true,
        })
        .collect();
    api.answer(SLICES, 200, slices(&named));
    let out = kube_fleet(dir, &[], &[&kube[..], &["--json"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(doc["summary"]["hosts"], 3);
    assert_eq!(doc["summary"]["gpus_free"], 5);
    for (i, node) in ["gpu-node-a", "gpu-node-b", "gpu-node-c"]
        .iter()
        .enumerate()
    {
        let r = doc["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["host"] == *node)
            .unwrap_or_else(|| panic!("{node}: {doc}"));
        assert_eq!(r["endpoint"], format!("http://{}/snapshot", addrs[i]));
        assert_eq!(r["error"], Value::Null);
        assert_eq!(
            r["gpus"].as_array().unwrap().len(),
            i + 1 + usize::from(i == 0)
        );
    }
    let text = stdout(&kube_fleet(dir, &[], &kube));
    assert!(
        text.starts_with("3 hosts (0 not read), 7 GPUs: 5 free"),
        "{text}"
    );
    assert!(text.contains("gpu-node-a"), "{text}");

    // $KUBECONFIG, its first existing file; and the 404 fallback to Endpoints.
    api.answer(SLICES, 404, json!({"kind": "Status", "code": 404}));
    api.answer(ENDPOINTS, 200, endpoints(&named));
    let list = format!("{0}/missing:{config}:{0}/other", dir.display());
    let out = kube_fleet(dir, &[("KUBECONFIG", &list)], &["--kubernetes", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        hosts_of(&json_of(&out)),
        ["gpu-node-a", "gpu-node-b", "gpu-node-c"]
    );
    assert!(api.seen().iter().any(|r| r.target == ENDPOINTS));
}

#[test]
fn a_not_ready_endpoint_is_a_host_with_its_fault() {
    let hosts = cluster("fleet-k8s-ready", 1);
    let dir = &hosts[0].sandbox.dir;
    let (api, config) = token_api(dir);
    let config = config.to_str().unwrap();
    let down = crate::fleet::refusing();
    let eps = [
        Ep {
            addr: &hosts[0].addr,
            node: "gpu-up",
            ready: true,
        },
        Ep {
            addr: &down,
            node: "gpu-down",
            ready: false,
        },
    ];
    let kube = ["--kubernetes", "--kubeconfig", config];
    for (target, doc) in [(SLICES, slices(&eps)), (ENDPOINTS, endpoints(&eps))] {
        if target == ENDPOINTS {
            api.answer(SLICES, 404, json!({}));
        }
        api.answer(target, 200, doc);
        let out = kube_fleet(dir, &[], &[&kube[..], &["--json"]].concat());
        assert_eq!(out.status.code(), Some(13), "{}", stderr(&out));
        let doc = json_of(&out);
        assert_eq!(doc["summary"]["hosts"], 2, "{doc}");
        assert_eq!(doc["summary"]["hosts_failed"], 1, "{doc}");
        let r = doc["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["host"] == "gpu-down")
            .unwrap_or_else(|| panic!("{doc}"));
        assert_eq!(r["error"]["kind"], "not_ready", "{doc}");
        assert!(
            r["error"]["reason"].as_str().unwrap().contains("not ready"),
            "{doc}"
        );
        let text = stdout(&kube_fleet(dir, &[], &kube));
        let line = text.lines().find(|l| l.starts_with("gpu-down")).unwrap();
        assert!(line.contains("not_ready"), "{text}");
    }
}

#[test]
fn every_page_of_the_list_is_read_and_an_expired_token_starts_it_over_once() {
    let hosts = cluster("fleet-k8s-pages", 3);
    let dir = &hosts[0].sandbox.dir;
    let (api, config) = token_api(dir);
    let kube = [
        "--kubernetes",
        "--kubeconfig",
        config.to_str().unwrap(),
        "--json",
    ];
    let nodes = ["gpu-page-1", "gpu-page-2", "gpu-page-3"];
    let on_page = |i: usize| {
        [Ep {
            addr: &hosts[i].addr,
            node: nodes[i],
            ready: true,
        }]
    };
    api.answer(SLICES, 200, slices_page(&on_page(0), "a"));
    api.answer(&slices_after("a"), 200, slices_page(&on_page(1), "b"));
    api.answer(&slices_after("b"), 200, slices(&on_page(2)));
    let shows_every_page = |what: &str| {
        let out = kube_fleet(dir, &[], &kube);
        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
        assert_eq!(hosts_of(&json_of(&out)), nodes, "{what}");
    };
    shows_every_page("three pages");
    assert_eq!(
        asked(&api),
        [SLICES, &slices_after("a"), &slices_after("b")]
    );

    // The token of the first page expires once: the list starts over without it.
    let expired = status_body(
        410,
        "Expired",
        "The provided continue parameter is too old to display a consistent list result. \
         You can start a new list without the continue parameter.",
    );
    api.answer_once(&slices_after("a"), 410, &expired);
    shows_every_page("an expired token");
    assert_eq!(
        asked(&api)[3..],
        [
            SLICES,
            &slices_after("a"),
            SLICES,
            &slices_after("a"),
            &slices_after("b")
        ]
    );
}

#[test]
fn a_list_that_never_ends_or_expires_twice_is_one_line_and_status_14() {
    let sandbox = gpupeek_e2e::Sandbox::new("fleet-k8s-loop");
    let dir = &sandbox.dir;
    let (api, config) = token_api(dir);
    let kube = ["--kubernetes", "--kubeconfig", config.to_str().unwrap()];
    let ep = [Ep {
        addr: "127.0.0.1:9",
        node: "gpu-loop",
        ready: true,
    }];
    // Every page names the same next page.
    api.answer(SLICES, 200, slices_page(&ep, "again"));
    api.answer(&slices_after("again"), 200, slices_page(&ep, "again"));
    let out = kube_fleet(dir, &[], &kube);
    assert_one_line_failure(&out, 14, "a looping list");
    let err = stderr(&out);
    assert!(err.contains(&api.url), "{err}");
    assert!(
        err.contains("continue token \"again\" came back (the API server loops)"),
        "{err}"
    );

    // A token that expires, and expires again after the list starts over.
    let expired = status_body(410, "Expired", "The provided continue parameter is too old");
    api.answer_text(&slices_after("again"), 410, &expired);
    let out = kube_fleet(dir, &[], &kube);
    assert_one_line_failure(&out, 14, "expired twice");
    let err = stderr(&out);
    assert!(
        err.contains("HTTP 410 Expired: The provided continue"),
        "{err}"
    );
    let tail = asked(&api).split_off(2);
    let again = slices_after("again");
    assert_eq!(tail, [SLICES, &again, SLICES, &again]);
}

#[test]
fn api_refusals_and_an_unreachable_server_are_one_line_and_status_14() {
    let sandbox = gpupeek_e2e::Sandbox::new("fleet-k8s-api");
    let dir = &sandbox.dir;
    let (api, config) = token_api(dir);
    let config = config.to_str().unwrap();
    let kube = ["--kubernetes", "--kubeconfig", config];
    let forbidden = "endpointslices.discovery.k8s.io is forbidden: User \"system:serviceaccount:\
                     default:x\" cannot list resource \"endpointslices\" in API group \
                     \"discovery.k8s.io\" in the namespace \"gpupeek\"";
    api.answer_text(SLICES, 403, &status_body(403, "Forbidden", forbidden));
    let out = kube_fleet(dir, &[], &kube);
    assert_one_line_failure(&out, 14, "403");
    let err = stderr(&out);
    assert!(err.contains(&api.url), "{err}");
    assert!(err.contains("HTTP 403 Forbidden"), "{err}");
    assert!(err.contains("cannot list resource"), "{err}");

    // A wrong token: 401.
    std::fs::write(dir.join("secrets/token"), "wrong\n").unwrap();
    let out = kube_fleet(dir, &[], &kube);
    assert_one_line_failure(&out, 14, "401");
    assert!(stderr(&out).contains("HTTP 401"), "{}", stderr(&out));
    std::fs::write(dir.join("secrets/token"), TOKEN).unwrap();

    // Not the API's JSON.
    api.answer_text(SLICES, 200, "<html>login</html>");
    let out = kube_fleet(dir, &[], &kube);
    assert_one_line_failure(&out, 14, "garbage");
    assert!(
        stderr(&out).contains("not an EndpointSliceList"),
        "{}",
        stderr(&out)
    );

    // No endpoint at all (no such Service, or a namespace without it).
    api.answer(SLICES, 200, slices(&[]));
    let out = kube_fleet(dir, &[], &kube);
    assert_one_line_failure(&out, 14, "empty");
    assert!(
        stderr(&out).contains("no endpoint of Service gpupeek in namespace gpupeek"),
        "{}",
        stderr(&out)
    );

    // Another namespace and Service are other paths; neither API knows them.
    let out = kube_fleet(
        dir,
        &[],
        &[&kube[..], &["--namespace", "ml", "--service", "peek"]].concat(),
    );
    assert_one_line_failure(&out, 14, "no Service");
    assert!(
        stderr(&out).contains("no Service peek in namespace ml"),
        "{}",
        stderr(&out)
    );
    let seen = asked(&api);
    let ml = SLICES
        .replace("/namespaces/gpupeek/", "/namespaces/ml/")
        .replace("service-name=gpupeek", "service-name=peek");
    assert!(seen.contains(&ml), "{seen:?}");
    assert!(seen.contains(&"/api/v1/namespaces/ml/endpoints/peek".to_owned()));

    // Basic authentication from the kubeconfig's username and password (the empty list
    // is the answer past the authentication).
    use base64::Engine;
    let basic = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
    api.require(&format!("Basic {basic}"));
    let config = kubeconfig(
        dir,
        &api.url,
        "",
        "      username: alice\n      password: s3cret\n",
    );
    let out = kube_fleet(
        dir,
        &[],
        &["--kubernetes", "--kubeconfig", config.to_str().unwrap()],
    );
    assert_one_line_failure(&out, 14, "basic");
    assert!(stderr(&out).contains("no endpoint"), "{}", stderr(&out));

    // Nothing listening.
    let refused = crate::fleet::refusing();
    let config = kubeconfig(dir, &format!("http://{refused}"), "", "      token: t\n");
    let out = kube_fleet(
        dir,
        &[],
        &["--kubernetes", "--kubeconfig", config.to_str().unwrap()],
    );
    assert_one_line_failure(&out, 14, "refused");
    let err = stderr(&out);
    assert!(
        err.contains(&refused) && err.contains("connection refused"),
        "{err}"
    );
}

#[test]
fn kubeconfigs_that_cannot_be_used_are_one_line_and_status_2() {
    let sandbox = gpupeek_e2e::Sandbox::new("fleet-k8s-config");
    let dir = &sandbox.dir;
    // An exec plugin of the protocol version Kubernetes 1.24 removed.
    let exec = kubeconfig(
        dir,
        "https://127.0.0.1:6443",
        "",
        "      exec:\n        apiVersion: client.authentication.k8s.io/v1alpha1\n        \
         command: aws\n        args: [eks, get-token, --cluster-name, c]\n",
    );
    let exec = exec.to_str().unwrap();
    let out = kube_fleet(dir, &[], &["--kubernetes", "--kubeconfig", exec]);
    assert_one_line_failure(&out, 2, "an exec plugin's old apiVersion");
    assert!(
        stderr(&out)
            .contains("exec plugin aws: apiVersion \"client.authentication.k8s.io/v1alpha1\""),
        "{}",
        stderr(&out)
    );
    let bad = |args: &[&str], env: &[(&str, &str)], says: &str| {
        let out = kube_fleet(dir, env, args);
        assert_one_line_failure(&out, 2, says);
        assert!(stderr(&out).contains(says), "{says}: {}", stderr(&out));
    };
    bad(
        &["--kubernetes", "--kubeconfig", exec, "--context", "nope"],
        &[],
        "no context named \"nope\"",
    );
    bad(
        &["--kubernetes", "--kubeconfig", "/nonexistent/kubeconfig"],
        &[],
        "cannot read kubeconfig /nonexistent/kubeconfig",
    );
    // No kubeconfig anywhere, and not in a pod.
    bad(&["--kubernetes"], &[], "no kubeconfig");
    let missing = format!("{}/missing", dir.display());
    bad(
        &["--kubernetes"],
        &[("KUBECONFIG", &missing)],
        "no kubeconfig",
    );
    // --kubeconfig and the rest go with --kubernetes; --kubernetes is a source of its own.
    bad(
        &["--host", "x", "--kubeconfig", exec],
        &[],
        "goes with --kubernetes",
    );
    bad(
        &["--host", "x", "--namespace", "ns"],
        &[],
        "goes with --kubernetes",
    );
    bad(&["--kubernetes", "--host", "x"], &[], "choose one");
    bad(
        &["--kubernetes", "--prometheus", "http://p"],
        &[],
        "choose one",
    );
}

#[test]
fn watch_shows_the_api_server_as_a_failed_host_when_a_later_list_fails() {
    let hosts = cluster("fleet-k8s-watch", 1);
    let dir = &hosts[0].sandbox.dir;
    let (api, config) = token_api(dir);
    api.list_one(&hosts[0].addr, "gpu-0");
    let mut cmd = Command::new(&bins().client);
    cmd.args(["fleet", "--kubernetes", "--kubeconfig"])
        .arg(&config)
        .args(["--json", "-i", "0.2"])
        .env("HOME", dir)
        .env_remove("KUBECONFIG");
    let routes = api.routes.clone();
    let forbid = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        let body = status_body(403, "Forbidden", "token revoked");
        routes
            .lock()
            .unwrap()
            .answers
            .insert(SLICES.to_owned(), (403, body));
    });
    let out = gpupeek_e2e::run_with_limit(cmd, Duration::from_secs(3));
    forbid.join().unwrap();
    let docs: Vec<Value> = serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Value>()
        .map_while(Result::ok)
        .collect();
    assert!(docs.len() >= 3, "{} rounds: {}", docs.len(), stderr(&out));
    assert_eq!(docs[0]["hosts"][0]["host"], "gpu-0", "{:#}", docs[0]);
    let last = docs.last().unwrap();
    assert_eq!(last["hosts"][0]["host"], api.url.as_str(), "{last:#}");
    assert_eq!(
        last["hosts"][0]["error"]["kind"], "unauthorized",
        "{last:#}"
    );
    let why = last["hosts"][0]["error"]["reason"].as_str().unwrap();
    assert!(why.contains("token revoked"), "{why}");
}

#[test]
fn an_https_api_server_with_a_client_certificate_and_the_kubeconfigs_ca() {
    let Some(tool) = tool("openssl", "openssl") else {
        return;
    };
    let hosts = cluster("fleet-k8s-tls", 1);
    let dir = &hosts[0].sandbox.dir;
    let pki = dir.join("pki");
    let config = mtls_server(&tool, &pki);
    let api = FakeApi::start(Some(config));
    api.list_one(&hosts[0].addr, "gpu-tls");
    use base64::Engine;
    let b64 = |name: &str| {
        base64::engine::general_purpose::STANDARD.encode(std::fs::read(pki.join(name)).unwrap())
    };
    // The CA as a file relative to the kubeconfig, the client's certificate and key as data.
    let user = format!(
        "      client-certificate-data: {}\n      client-key-data: {}\n",
        b64("client.crt"),
        b64("client.key")
    );
    let config = kubeconfig(
        dir,
        &api.url,
        "      certificate-authority: pki/ca.crt\n",
        &user,
    );
    let kube = [
        "--kubernetes",
        "--kubeconfig",
        config.to_str().unwrap(),
        "--json",
    ];
    let out = kube_fleet(dir, &[], &kube);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&out)["hosts"][0]["host"], "gpu-tls");

    // The CA as data instead: the same.
    let ca = format!("      certificate-authority-data: {}\n", b64("ca.crt"));
    let config = kubeconfig(dir, &api.url, &ca, &user);
    let kube = [
        "--kubernetes",
        "--kubeconfig",
        config.to_str().unwrap(),
        "--json",
    ];
    let out = kube_fleet(dir, &[], &kube);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Without the CA the server is not trusted; without the client certificate the
    // handshake is refused: each one line, status 14.
    let config = kubeconfig(dir, &api.url, "", &user);
    let out = kube_fleet(
        dir,
        &[],
        &["--kubernetes", "--kubeconfig", config.to_str().unwrap()],
    );
    assert_one_line_failure(&out, 14, "no CA");
    assert!(stderr(&out).contains(&api.url), "{}", stderr(&out));
    let config = kubeconfig(dir, &api.url, &ca, "      token: t\n");
    let out = kube_fleet(
        dir,
        &[],
        &["--kubernetes", "--kubeconfig", config.to_str().unwrap()],
    );
    assert_one_line_failure(&out, 14, "no client certificate");
    // insecure-skip-tls-verify: trusted without the CA.
    let config = kubeconfig(
        dir,
        &api.url,
        "      insecure-skip-tls-verify: true\n",
        &user,
    );
    let out = kube_fleet(
        dir,
        &[],
        &["--kubernetes", "--kubeconfig", config.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// An exec credential plugin in `dir` (`get-token`, a shell script running `body`) that
/// counts its runs in `dir/runs`, and the kubeconfig's user entry that runs it.
pub(crate) fn exec_plugin(dir: &std::path::Path, body: &str) -> String {
    let script = dir.join("get-token");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho run >> '{}/runs'\n{body}\n", dir.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let _ = std::fs::remove_file(dir.join("runs"));
    "      exec:\n        apiVersion: client.authentication.k8s.io/v1\n        \
     command: ./get-token\n        interactiveMode: Never\n        \
     installHint: install get-token\n"
        .into()
}

pub(crate) fn exec_runs(dir: &std::path::Path) -> usize {
    std::fs::read_to_string(dir.join("runs")).map_or(0, |s| s.lines().count())
}

/// The shell command that answers an `ExecCredential` whose status is `status` (JSON,
/// without a single quote).
pub(crate) fn credential(status: &str) -> String {
    format!(
        "printf '%s\\n' '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\
         \"kind\":\"ExecCredential\",\"status\":{status}}}'"
    )
}

/// Managed clusters (EKS, GKE, AKS, OIDC) give kubectl its credentials through an exec
/// plugin: fleet runs it as kubectl does, keeps its token, runs it again when the API
/// server refuses the token, and says in one line (status 14) when it fails or is not
/// installed.
#[test]
fn an_exec_plugins_token_reaches_the_api_server_and_its_failures_are_one_line() {
    let hosts = cluster("fleet-k8s-exec", 1);
    let dir = &hosts[0].sandbox.dir;
    let api = FakeApi::start(None);
    api.require(&format!("Bearer {TOKEN}"));
    api.list_one(&hosts[0].addr, "gpu-exec");
    let run = |user: &str, extra: &[&str]| {
        let config = kubeconfig(dir, &api.url, "", user);
        let args = [
            &["--kubernetes", "--kubeconfig", config.to_str().unwrap()][..],
            extra,
        ];
        kube_fleet(dir, &[], &args.concat())
    };
    let user = exec_plugin(dir, &credential(&format!("{{\"token\":\"{TOKEN}\"}}")));
    let out = run(&user, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&out)["hosts"][0]["host"], "gpu-exec");
    assert_eq!(exec_runs(dir), 1);

    // Watching, the token is kept (no expiry): one run for several rounds.
    let mut cmd = Command::new(&bins().client);
    let config = kubeconfig(dir, &api.url, "", &user);
    cmd.args(["fleet", "--kubernetes", "--kubeconfig"])
        .arg(&config)
        .args(["--json", "-i", "0.2"])
        .env("HOME", dir)
        .env_remove("KUBECONFIG");
    let _ = std::fs::remove_file(dir.join("runs"));
    let out = gpupeek_e2e::run_with_limit(cmd, Duration::from_secs(2));
    let rounds = serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Value>()
        .map_while(Result::ok)
        .filter(|d| d["hosts"][0]["host"] == "gpu-exec")
        .count();
    assert!(rounds >= 3, "{rounds} rounds: {}", stderr(&out));
    assert_eq!(exec_runs(dir), 1, "the token is kept between rounds");

    // A stale token (the first run's) is refused: the plugin runs again and the list is
    // asked once more.
    let body = format!(
        "if [ \"$(wc -l < '{0}/runs')\" -le 1 ]; then {1}; else {2}; fi",
        dir.display(),
        credential("{\"token\":\"stale\"}"),
        credential(&format!("{{\"token\":\"{TOKEN}\"}}")),
    );
    let user = exec_plugin(dir, &body);
    let out = run(&user, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(exec_runs(dir), 2);

    // Failing, not installed, answering garbage: one line each, status 14.
    let user = exec_plugin(
        dir,
        "echo 'error: SSO session expired, run login' >&2; exit 1",
    );
    let out = run(&user, &[]);
    assert_one_line_failure(&out, 14, "a failing exec plugin");
    let err = stderr(&out);
    assert!(
        err.contains("exec plugin ./get-token failed (exit status: 1): error: SSO session expired"),
        "{err}"
    );
    let user = exec_plugin(dir, "echo not json");
    let out = run(&user, &[]);
    assert_one_line_failure(&out, 14, "an exec plugin's garbage");
    assert!(
        stderr(&out).contains("not an ExecCredential"),
        "{}",
        stderr(&out)
    );
    let user = exec_plugin(dir, "").replace("./get-token", "gpupeek-no-such-plugin");
    let out = run(&user, &[]);
    assert_one_line_failure(&out, 14, "a missing exec plugin");
    assert!(
        stderr(&out)
            .contains("exec plugin gpupeek-no-such-plugin is not installed (install get-token)"),
        "{}",
        stderr(&out)
    );
}

/// A plugin that answers a client certificate (as Teleport's does): the API server that
/// requires one accepts it.
#[test]
fn an_exec_plugins_client_certificate_is_presented() {
    let Some(tool) = tool("openssl", "openssl") else {
        return;
    };
    let hosts = cluster("fleet-k8s-exec-tls", 1);
    let dir = &hosts[0].sandbox.dir;
    let pki = dir.join("pki");
    let api = FakeApi::start(Some(mtls_server(&tool, &pki)));
    api.list_one(&hosts[0].addr, "gpu-exec-tls");
    let pem = |name: &str| {
        serde_json::to_string(&std::fs::read_to_string(pki.join(name)).unwrap()).unwrap()
    };
    let status = format!(
        "{{\"clientCertificateData\":{},\"clientKeyData\":{}}}",
        pem("client.crt"),
        pem("client.key")
    );
    let user = exec_plugin(dir, &credential(&status));
    let config = kubeconfig(
        dir,
        &api.url,
        "      certificate-authority: pki/ca.crt\n",
        &user,
    );
    let out = kube_fleet(
        dir,
        &[],
        &[
            "--kubernetes",
            "--kubeconfig",
            config.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&out)["hosts"][0]["host"], "gpu-exec-tls");
    assert_eq!(exec_runs(dir), 1);
}

#[test]
fn the_bundles_role_grants_what_fleet_asks_on_the_port_it_reads() {
    let dir = gpupeek_e2e::repo().join("contrib/kubernetes");
    let read = |name: &str| -> serde_yaml::Value {
        serde_yaml::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
    };
    let role = read("fleet-role.yaml");
    assert_eq!(role["kind"], "Role");
    let grants = |group: &str, resource: &str, verb: &str, name: Option<&str>| {
        role["rules"].as_sequence().unwrap().iter().any(|r| {
            let has = |key: &str, v: &str| {
                r[key]
                    .as_sequence()
                    .is_some_and(|s| s.iter().any(|x| x.as_str() == Some(v)))
            };
            has("apiGroups", group)
                && has("resources", resource)
                && has("verbs", verb)
                && name.is_none_or(|n| r["resourceNames"].is_null() || has("resourceNames", n))
        })
    };
    // SLICES is a list, ENDPOINTS a get of the Service's own.
    assert!(grants("discovery.k8s.io", "endpointslices", "list", None));
    assert!(grants("", "endpoints", "get", Some("gpupeek")));
    // --api-proxy reads each serve through the pods' proxy.
    assert!(grants("", "pods/proxy", "get", None));
    // The Service and the names fleet asks for by default.
    let service = read("service.yaml");
    assert_eq!(service["metadata"]["name"], "gpupeek");
    assert_eq!(service["metadata"]["namespace"], "gpupeek");
    assert_eq!(service["spec"]["clusterIP"], "None");
    // fleet reads the port named metrics (fleet/src/kubernetes/endpoints.rs, PORT_NAME).
    assert_eq!(service["spec"]["ports"][0]["name"], "metrics");
    let kustomization = read("kustomization.yaml");
    assert!(kustomization["resources"]
        .as_sequence()
        .unwrap()
        .iter()
        .any(|r| r == "fleet-role.yaml"));
}

/// In a pod, with no kubeconfig, the fleet asks the API server the pod's environment
/// names (`KUBERNETES_SERVICE_HOST`/`_PORT`) over HTTPS, trusting the service account's
/// `ca.crt` and sending its `token`, as mounted at
/// `/var/run/secrets/kubernetes.io/serviceaccount` (here in a mount namespace of its
/// own). Without the CA the server is not trusted: one line, status 14.
#[test]
fn in_a_pod_the_service_account_reaches_the_api_server_with_no_kubeconfig() {
    if !gpupeek_e2e::root_or_skip("in-cluster fleet") {
        return;
    }
    let Some(tool) = tool("openssl", "openssl") else {
        return;
    };
    let hosts = cluster("fleet-k8s-pod", 1);
    let dir = &hosts[0].sandbox.dir;
    let pki = dir.join("pki");
    let api = FakeApi::start(Some(tls_server(&tool, &pki, false)));
    api.require(&format!("Bearer {TOKEN}"));
    api.list_one(&hosts[0].addr, "gpu-in-cluster");
    let account = dir.join("serviceaccount");
    std::fs::create_dir_all(&account).unwrap();
    std::fs::write(account.join("token"), TOKEN).unwrap();
    std::fs::copy(pki.join("ca.crt"), account.join("ca.crt")).unwrap();
    let port = api.url.rsplit(':').next().unwrap().to_owned();
    // /var/run (a link to /run on most systems) made private, with the service account
    // where a pod has it.
    let run = std::path::Path::new("/var/run").canonicalize().unwrap();
    let in_pod = |account: &std::path::Path| {
        let script = "mount -t tmpfs tmpfs \"$1\" && \
            mkdir -p \"$1/secrets/kubernetes.io/serviceaccount\" && \
            mount --bind \"$2\" \"$1/secrets/kubernetes.io/serviceaccount\" && \
            shift 2 && exec \"$@\"";
        let mut cmd = gpupeek_e2e::sh_in_private_mounts(script);
        cmd.arg(&run)
            .arg(account)
            .arg(&bins().client)
            .args(["fleet", "--kubernetes", "--json"])
            .env("HOME", dir)
            .env_remove("KUBECONFIG")
            .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
            .env("KUBERNETES_SERVICE_PORT", &port);
        gpupeek_e2e::run_with_watchdog(cmd)
    };
    let out = in_pod(&account);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&out)["hosts"][0]["host"], "gpu-in-cluster");
    let seen = api.seen();
    assert_eq!(
        seen.last().unwrap().authorization.as_deref(),
        Some(&*format!("Bearer {TOKEN}"))
    );

    let untrusted = dir.join("no-ca");
    std::fs::create_dir_all(&untrusted).unwrap();
    std::fs::write(untrusted.join("token"), TOKEN).unwrap();
    let out = in_pod(&untrusted);
    assert_one_line_failure(&out, 14, "in-cluster without the CA");
    assert!(stderr(&out).contains("in-cluster"), "{}", stderr(&out));
}

/// From a machine with no route to the pods (a laptop with a kubeconfig), `--api-proxy`
/// reads each serve through the API server's pod proxy with the kubeconfig's credential;
/// without it the same endpoints cannot be reached.
#[test]
fn api_proxy_reads_each_serve_through_the_api_server_s_pod_proxy() {
    let hosts = cluster("fleet-k8s-proxy", 2);
    let dir = &hosts[0].sandbox.dir;
    let (api, config) = token_api(dir);
    let config = config.to_str().unwrap();
    // The endpoints' addresses cannot be reached from here: a closed port on loopback
    // stands for a pod network with no route.
    let eps: Vec<Ep> = ["gpu-a", "gpu-b"]
        .iter()
        .map(|node| Ep {
            addr: "127.0.0.1:1",
            node,
            ready: true,
        })
        .collect();
    api.answer(SLICES, 200, slices(&eps));
    // The API server's pod proxy answers each pod's /snapshot with its serve's.
    for (i, h) in hosts.iter().enumerate() {
        let (status, body) = gpupeek_e2e::http("GET", &h.addr, "/snapshot");
        assert_eq!(status, 200, "{body}");
        let path = format!("/api/v1/namespaces/gpupeek/pods/gpupeek-pod{i}:1/proxy/snapshot");
        api.answer_text(&path, 200, &body);
    }
    let kube = ["--kubernetes", "--kubeconfig", config, "--json"];
    let direct = kube_fleet(dir, &[], &kube);
    assert_eq!(direct.status.code(), Some(13), "{}", stderr(&direct));
    assert!(json_of(&direct)["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .all(|h| h["error"]["kind"] == "refused"
            && h["error"]["reason"]
                .as_str()
                .unwrap()
                .contains("--api-proxy reads them through the API server")));

    let out = kube_fleet(dir, &[], &[&kube[..], &["--api-proxy"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(hosts_of(&doc), ["gpu-a", "gpu-b"]);
    for h in doc["hosts"].as_array().unwrap() {
        assert_eq!(h["error"], Value::Null, "{h}");
        assert_eq!(h["gpus"].as_array().unwrap().len(), 2, "{h}");
        assert!(h["endpoint"].as_str().unwrap().starts_with(&api.url), "{h}");
    }
    let proxied: Vec<_> = api
        .seen()
        .into_iter()
        .filter(|r| r.target.contains("/proxy/"))
        .collect();
    assert_eq!(proxied.len(), 2, "{proxied:?}");
    for r in &proxied {
        assert_eq!(
            r.authorization.as_deref(),
            Some(&*format!("Bearer {TOKEN}"))
        );
    }
    // --api-proxy goes with --kubernetes.
    let bad = kube_fleet(dir, &[], &["--host", "x", "--api-proxy"]);
    assert_one_line_failure(&bad, 2, "--api-proxy without --kubernetes");
}
