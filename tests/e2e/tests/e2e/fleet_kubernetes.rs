//! `gpupeek fleet --kubernetes`: the serves found through a fake Kubernetes API server (a
//! loopback HTTP or HTTPS server in the test that answers the EndpointSlice list and the
//! core Endpoints as the real one does, and checks the credentials) with a kubeconfig
//! written here. The same serves give the same table and JSON as `--host`; a not-ready
//! endpoint is a host with its fault; the API's refusals, a missing EndpointSlice API
//! (404, then Endpoints), an exec plugin and an unreachable server each end as
//! documented.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpupeek_e2e::{assert_one_line_failure, bins, run_with_watchdog, stderr, stdout, tool};
use serde_json::{json, Value};

use crate::fleet::{cluster, fleet, host_args, json_of};

/// One request the fake API server was sent.
#[derive(Debug, Clone)]
struct Request {
    /// The path and the decoded query, `PATH?k=v`.
    target: String,
    authorization: Option<String>,
}

/// What the fake answers: by `PATH?QUERY` (decoded), else 404; a request without
/// `authorization` (when set) is answered 401.
#[derive(Default)]
struct Routes {
    answers: HashMap<String, (u16, String)>,
    authorization: Option<String>,
    seen: Vec<Request>,
}

/// A fake Kubernetes API server on loopback; HTTPS when `tls` is given.
struct FakeApi {
    url: String,
    routes: Arc<Mutex<Routes>>,
}

const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/gpupeek/endpointslices?\
                      labelSelector=kubernetes.io/service-name=gpupeek";
const ENDPOINTS: &str = "/api/v1/namespaces/gpupeek/endpoints/gpupeek";

impl FakeApi {
    fn start(tls: Option<Arc<rustls::ServerConfig>>) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let routes = Arc::new(Mutex::new(Routes::default()));
        let shared = routes.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (routes, tls) = (shared.clone(), tls.clone());
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                    match tls {
                        None => serve_one(stream, &routes),
                        Some(config) => {
                            let Ok(conn) = rustls::ServerConnection::new(config) else {
                                return;
                            };
                            serve_one(rustls::StreamOwned::new(conn, stream), &routes);
                        }
                    }
                });
            }
        });
        FakeApi {
            url: format!("{scheme}://{addr}"),
            routes,
        }
    }

    fn answer(&self, target: &str, status: u16, body: Value) {
        let mut r = self.routes.lock().unwrap();
        r.answers
            .insert(target.to_owned(), (status, body.to_string()));
    }

    fn answer_text(&self, target: &str, status: u16, body: &str) {
        let mut r = self.routes.lock().unwrap();
        r.answers
            .insert(target.to_owned(), (status, body.to_owned()));
    }

    fn require(&self, authorization: &str) {
        self.routes.lock().unwrap().authorization = Some(authorization.to_owned());
    }

    fn seen(&self) -> Vec<Request> {
        self.routes.lock().unwrap().seen.clone()
    }
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

/// Reads one request from `stream` and answers it as `routes` say.
fn serve_one(stream: impl Read + Write, routes: &Mutex<Routes>) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let raw = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let mut authorization = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = header.split_once(':') {
            if k.eq_ignore_ascii_case("authorization") {
                authorization = Some(v.trim().to_owned());
            }
        }
    }
    let target = decode(&raw);
    let (status, body) = {
        let mut r = routes.lock().unwrap();
        r.seen.push(Request {
            target: target.clone(),
            authorization: authorization.clone(),
        });
        if r.authorization.is_some() && r.authorization != authorization {
            (401, status_body(401, "Unauthorized", "Unauthorized"))
        } else {
            r.answers.get(&target).cloned().unwrap_or_else(|| {
                let msg = format!("the server could not find the requested resource {target}");
                (404, status_body(404, "NotFound", &msg))
            })
        }
    };
    let reason = match status {
        200 => "OK",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        _ => "Error",
    };
    let stream = reader.get_mut();
    let _ = write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

/// The API's `Status` object for an error.
fn status_body(code: u16, reason: &str, message: &str) -> String {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
    .to_string()
}

/// An endpoint: its serve's `addr` (127.0.0.1:PORT), its node's name, readiness.
struct Ep<'a> {
    addr: &'a str,
    node: &'a str,
    ready: bool,
}

/// The EndpointSliceList the API server gives for the Service: a slice per endpoint,
/// since each serve has its own port here (a real Service's slices group endpoints by
/// their ports the same way).
fn slices(eps: &[Ep]) -> Value {
    let items: Vec<Value> = eps
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let (ip, port) = e.addr.rsplit_once(':').unwrap();
            json!({
                "metadata": {"name": format!("gpupeek-{i}"), "namespace": "gpupeek",
                             "labels": {"kubernetes.io/service-name": "gpupeek"}},
                "addressType": "IPv4",
                "endpoints": [{
                    "addresses": [ip],
                    "conditions": {"ready": e.ready, "serving": e.ready, "terminating": false},
                    "nodeName": e.node,
                    "targetRef": {"kind": "Pod", "namespace": "gpupeek",
                                  "name": format!("gpupeek-pod{i}")}
                }],
                "ports": [{"name": "metrics", "port": port.parse::<u16>().unwrap(),
                           "protocol": "TCP"}]
            })
        })
        .collect();
    json!({"kind": "EndpointSliceList", "apiVersion": "discovery.k8s.io/v1",
           "metadata": {"resourceVersion": "1"}, "items": items})
}

/// The core v1 Endpoints of the Service: a subset per endpoint.
fn endpoints(eps: &[Ep]) -> Value {
    let subsets: Vec<Value> = eps
        .iter()
        .map(|e| {
            let (ip, port) = e.addr.rsplit_once(':').unwrap();
            let address = json!({"ip": ip, "nodeName": e.node});
            let key = if e.ready {
                "addresses"
            } else {
                "notReadyAddresses"
            };
            json!({key: [address],
                   "ports": [{"name": "metrics", "port": port.parse::<u16>().unwrap()}]})
        })
        .collect();
    json!({"kind": "Endpoints", "apiVersion": "v1",
           "metadata": {"name": "gpupeek", "namespace": "gpupeek"}, "subsets": subsets})
}

/// A kubeconfig in `dir` whose current context is `cluster` at `server` and `user`
/// (YAML mappings' bodies).
fn kubeconfig(dir: &Path, server: &str, cluster: &str, user: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\n\
             contexts:\n  - name: other\n    context: {{cluster: nowhere, user: nobody}}\n  \
             - name: test\n    context: {{cluster: fake, user: me, namespace: default}}\n\
             clusters:\n  - name: fake\n    cluster:\n      server: {server}\n{cluster}\
             users:\n  - name: me\n    user:\n{user}"
        ),
    )
    .unwrap();
    path
}

/// `gpupeek fleet ARGS` with `env` and no kubeconfig of the machine's own.
fn kube_fleet(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(&bins().client);
    cmd.arg("fleet")
        .args(args)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .envs(env.iter().copied());
    run_with_watchdog(cmd)
}

/// A fleet JSON document without the daemons' heartbeat ages (a moment apart).
fn timeless(mut doc: Value) -> Value {
    for r in doc["hosts"].as_array_mut().into_iter().flatten() {
        r["daemon"]["age_s"] = Value::Null;
    }
    doc
}

const TOKEN: &str = "kube-token-123";

/// A fake API server that wants [`TOKEN`], and a kubeconfig whose user has it in a
/// token file named relative to the kubeconfig.
fn token_api(dir: &Path) -> (FakeApi, PathBuf) {
    let api = FakeApi::start(None);
    api.require(&format!("Bearer {TOKEN}"));
    std::fs::create_dir_all(dir.join("secrets")).unwrap();
    std::fs::write(dir.join("secrets/token"), format!("{TOKEN}\n")).unwrap();
    let config = kubeconfig(dir, &api.url, "", "      tokenFile: secrets/token\n");
    (api, config)
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
    let hosts_of = |doc: &Value| -> Vec<String> {
        let mut h: Vec<String> = doc["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["host"].as_str().unwrap().to_owned())
            .collect();
        h.sort();
        h
    };
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
    let seen: Vec<String> = api.seen().into_iter().map(|r| r.target).collect();
    assert!(seen.contains(
        &"/apis/discovery.k8s.io/v1/namespaces/ml/endpointslices?\
          labelSelector=kubernetes.io/service-name=peek"
            .to_owned()
    ));
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
    let exec = kubeconfig(
        dir,
        "https://127.0.0.1:6443",
        "",
        "      exec:\n        apiVersion: client.authentication.k8s.io/v1beta1\n        \
         command: aws\n        args: [eks, get-token, --cluster-name, c]\n",
    );
    let exec = exec.to_str().unwrap();
    let out = kube_fleet(dir, &[], &["--kubernetes", "--kubeconfig", exec]);
    assert_one_line_failure(&out, 2, "exec plugin");
    assert!(
        stderr(&out).contains("exec plugin (aws)"),
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
    let ep = [Ep {
        addr: &hosts[0].addr,
        node: "gpu-0",
        ready: true,
    }];
    api.answer(SLICES, 200, slices(&ep));
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

/// `openssl ARGS` in `dir`.
fn openssl(openssl: &Path, dir: &Path, args: &[&str]) {
    let mut cmd = Command::new(openssl);
    cmd.args(args).current_dir(dir);
    let out = run_with_watchdog(cmd);
    assert!(out.status.success(), "openssl {args:?}: {}", stderr(&out));
}

/// A certificate `name` signed by `ca.crt` in `dir`, with `ext` (openssl's extension
/// lines): `name.crt` and `name.key`.
fn signed(tool: &Path, dir: &Path, name: &str, cn: &str, ext: &str) {
    std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
    let (key, csr, crt, extfile) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
        format!("{name}.ext"),
    );
    openssl(
        tool,
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            cn,
            "-keyout",
            &key,
            "-out",
            &csr,
        ],
    );
    openssl(
        tool,
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &crt,
            "-extfile",
            &extfile,
        ],
    );
}

#[test]
fn an_https_api_server_with_a_client_certificate_and_the_kubeconfigs_ca() {
    let Some(tool) = tool("openssl", "openssl") else {
        return;
    };
    let hosts = cluster("fleet-k8s-tls", 1);
    let dir = &hosts[0].sandbox.dir;
    let pki = dir.join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    openssl(
        &tool,
        &pki,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=fake-kubernetes-ca",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ],
    );
    signed(
        &tool,
        &pki,
        "server",
        "/CN=kube-apiserver",
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n\
         extendedKeyUsage=serverAuth\n",
    );
    signed(
        &tool,
        &pki,
        "client",
        "/CN=alice/O=gpupeek-viewers",
        "basicConstraints=critical,CA:FALSE\nextendedKeyUsage=clientAuth\n",
    );
    // The server: its certificate, and client certificates signed by the CA required.
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = |name: &str| -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_file_iter(pki.join(name))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in certs("ca.crt") {
        roots.add(c).unwrap();
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            certs("server.crt"),
            PrivateKeyDer::from_pem_file(pki.join("server.key")).unwrap(),
        )
        .unwrap();
    let api = FakeApi::start(Some(Arc::new(config)));
    let ep = [Ep {
        addr: &hosts[0].addr,
        node: "gpu-tls",
        ready: true,
    }];
    api.answer(SLICES, 200, slices(&ep));
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
    // The Service and the names fleet asks for by default.
    let service = read("service.yaml");
    assert_eq!(service["metadata"]["name"], "gpupeek");
    assert_eq!(service["metadata"]["namespace"], "gpupeek");
    assert_eq!(service["spec"]["clusterIP"], "None");
    // fleet reads the port named metrics (fleet/src/kubernetes.rs, PORT_NAME).
    assert_eq!(service["spec"]["ports"][0]["name"], "metrics");
    let kustomization = read("kustomization.yaml");
    assert!(kustomization["resources"]
        .as_sequence()
        .unwrap()
        .iter()
        .any(|r| r == "fleet-role.yaml"));
}
