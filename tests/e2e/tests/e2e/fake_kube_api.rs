//! A fake Kubernetes API server for `gpupeek fleet --kubernetes`'s tests
//! (`fleet_kubernetes.rs`): a loopback HTTP or HTTPS server that answers the EndpointSlice
//! list (in pages, by its `continue` tokens) and the core Endpoints as the real one does
//! (JSON documents and `Status` errors), checks the `Authorization` header, and records
//! what it was asked; the documents, kubeconfigs and certificates the tests give it.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpupeek_e2e::{bins, run_with_watchdog, stderr};
use serde_json::{json, Value};

/// One request the fake API server was sent.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// The path and the decoded query, `PATH?k=v`.
    pub(crate) target: String,
    /// Its `Authorization` header.
    pub(crate) authorization: Option<String>,
    /// Every header, as sent.
    pub(crate) headers: Vec<(String, String)>,
}

/// What the fake answers: by `PATH?QUERY` (decoded), first its answers given once in
/// turn, then its standing answer (by `PATH?QUERY`, else by `PATH` alone), else 404; a
/// request without `authorization` (when set) is answered 401.
#[derive(Default)]
pub(crate) struct Routes {
    pub(crate) answers: HashMap<String, (u16, String)>,
    once: HashMap<String, VecDeque<(u16, String)>>,
    authorization: Option<String>,
    seen: Vec<Request>,
    /// The server names (SNI) its TLS clients sent.
    names: Vec<String>,
}

/// A fake Kubernetes API server on loopback; HTTPS when `tls` is given.
pub(crate) struct FakeApi {
    pub(crate) url: String,
    pub(crate) routes: Arc<Mutex<Routes>>,
}

/// The first page of the Service's EndpointSliceList, as the fleet asks for it.
pub(crate) const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/gpupeek/endpointslices?\
                      labelSelector=kubernetes.io/service-name=gpupeek&limit=500";

/// The page of the EndpointSliceList that the continue token `token` names.
pub(crate) fn slices_after(token: &str) -> String {
    format!("{SLICES}&continue={token}")
}
pub(crate) const ENDPOINTS: &str = "/api/v1/namespaces/gpupeek/endpoints/gpupeek";

impl FakeApi {
    pub(crate) fn start(tls: Option<Arc<rustls::ServerConfig>>) -> FakeApi {
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
                            let Ok(mut conn) = rustls::ServerConnection::new(config) else {
                                return;
                            };
                            let mut stream = stream;
                            while conn.is_handshaking() {
                                if conn.complete_io(&mut stream).is_err() {
                                    return;
                                }
                            }
                            if let Some(name) = conn.server_name() {
                                routes.lock().unwrap().names.push(name.to_owned());
                            }
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

    /// Lists one ready endpoint, a serve at `addr` on node `node`.
    pub(crate) fn list_one(&self, addr: &str, node: &str) {
        let ep = [Ep {
            addr,
            node,
            ready: true,
        }];
        self.answer(SLICES, 200, slices(&ep));
    }

    pub(crate) fn answer(&self, target: &str, status: u16, body: Value) {
        let mut r = self.routes.lock().unwrap();
        r.answers
            .insert(target.to_owned(), (status, body.to_string()));
    }

    /// Answers `target` so once, before its other answers.
    pub(crate) fn answer_once(&self, target: &str, status: u16, body: &str) {
        let mut r = self.routes.lock().unwrap();
        r.once
            .entry(target.to_owned())
            .or_default()
            .push_back((status, body.to_owned()));
    }

    pub(crate) fn answer_text(&self, target: &str, status: u16, body: &str) {
        let mut r = self.routes.lock().unwrap();
        r.answers
            .insert(target.to_owned(), (status, body.to_owned()));
    }

    pub(crate) fn require(&self, authorization: &str) {
        self.routes.lock().unwrap().authorization = Some(authorization.to_owned());
    }

    pub(crate) fn seen(&self) -> Vec<Request> {
        self.routes.lock().unwrap().seen.clone()
    }

    /// The server names its TLS clients sent (SNI), in turn.
    pub(crate) fn names(&self) -> Vec<String> {
        self.routes.lock().unwrap().names.clone()
    }
}

/// A proxy on loopback, HTTP (`CONNECT`) or SOCKS5, that joins each client to the
/// target it asks for, and records those targets (`HOST:PORT`).
pub(crate) struct Proxy {
    /// `http://127.0.0.1:PORT` or `socks5://127.0.0.1:PORT`.
    pub(crate) url: String,
    asked: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    pub(crate) fn start(socks: bool) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let shared = asked.clone();
        std::thread::spawn(move || {
            for mut client in listener.incoming().flatten() {
                let asked = shared.clone();
                std::thread::spawn(move || {
                    let _ = client.set_read_timeout(Some(Duration::from_secs(10)));
                    let target = match socks {
                        true => socks_target(&mut client),
                        false => connect_target(&mut client),
                    };
                    let Some(target) = target else { return };
                    asked.lock().unwrap().push(target.clone());
                    let Ok(server) = TcpStream::connect(&target) else {
                        return;
                    };
                    let reply: &[u8] = match socks {
                        true => &[5, 0, 0, 1, 0, 0, 0, 0, 0, 0],
                        false => b"HTTP/1.1 200 Connection established\r\n\r\n",
                    };
                    if client.write_all(reply).is_err() {
                        return;
                    }
                    let (mut c, mut s) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut c, &mut s);
                        let _ = s.shutdown(std::net::Shutdown::Write);
                    });
                    let (mut c, mut s) = (client, server);
                    let _ = std::io::copy(&mut s, &mut c);
                    let _ = c.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        let scheme = if socks { "socks5" } else { "http" };
        Proxy {
            url: format!("{scheme}://127.0.0.1:{port}"),
            asked,
        }
    }

    /// The targets asked for so far.
    pub(crate) fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

/// The target of an HTTP `CONNECT` request read from `client` (byte by byte, so that
/// nothing after its head is taken).
fn connect_target(client: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        client.read_exact(&mut byte).ok()?;
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).ok()?;
    let mut words = head.split_whitespace();
    (words.next()? == "CONNECT").then_some(())?;
    words.next().map(str::to_owned)
}

/// The target of a SOCKS5 `CONNECT` read from `client`, after its greeting is answered
/// (no authentication).
fn socks_target(client: &mut TcpStream) -> Option<String> {
    let mut two = [0u8; 2];
    client.read_exact(&mut two).ok()?;
    let mut methods = vec![0u8; two[1] as usize];
    client.read_exact(&mut methods).ok()?;
    client.write_all(&[5, 0]).ok()?;
    let mut head = [0u8; 4];
    client.read_exact(&mut head).ok()?;
    let host = match head[3] {
        1 => {
            let mut ip = [0u8; 4];
            client.read_exact(&mut ip).ok()?;
            std::net::Ipv4Addr::from(ip).to_string()
        }
        3 => {
            let mut len = [0u8];
            client.read_exact(&mut len).ok()?;
            let mut name = vec![0u8; len[0] as usize];
            client.read_exact(&mut name).ok()?;
            String::from_utf8(name).ok()?
        }
        _ => return None,
    };
    client.read_exact(&mut two).ok()?;
    Some(format!("{host}:{}", u16::from_be_bytes(two)))
}

pub(crate) fn decode(s: &str) -> String {
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
pub(crate) fn serve_one(stream: impl Read + Write, routes: &Mutex<Routes>) {
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
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = header.split_once(':') {
            if k.eq_ignore_ascii_case("authorization") {
                authorization = Some(v.trim().to_owned());
            }
            headers.push((k.to_owned(), v.trim().to_owned()));
        }
    }
    let target = decode(&raw);
    let (status, body) = {
        let mut r = routes.lock().unwrap();
        r.seen.push(Request {
            target: target.clone(),
            authorization: authorization.clone(),
            headers,
        });
        if r.authorization.is_some() && r.authorization != authorization {
            (401, status_body(401, "Unauthorized", "Unauthorized"))
        } else if let Some(once) = r.once.get_mut(&target).and_then(VecDeque::pop_front) {
            once
        } else {
            let path = target.split('?').next().unwrap_or_default();
            let standing = r.answers.get(&target).or_else(|| r.answers.get(path));
            standing.cloned().unwrap_or_else(|| {
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
        410 => "Gone",
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
pub(crate) fn status_body(code: u16, reason: &str, message: &str) -> String {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
    .to_string()
}

/// An endpoint: its serve's `addr` (127.0.0.1:PORT), its node's name, readiness.
pub(crate) struct Ep<'a> {
    pub(crate) addr: &'a str,
    pub(crate) node: &'a str,
    pub(crate) ready: bool,
}

/// The EndpointSliceList the API server gives for the Service: a slice per endpoint,
/// since each serve has its own port here (a real Service's slices group endpoints by
/// their ports the same way).
pub(crate) fn slices(eps: &[Ep]) -> Value {
    slices_page(eps, "")
}

/// A page of the Service's EndpointSliceList: [`slices`] of `eps`, whose continue token
/// `next` asks for the next page (`""` on the last).
pub(crate) fn slices_page(eps: &[Ep], next: &str) -> Value {
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
    // The API leaves an empty token out (`omitempty`).
    let mut metadata = json!({"resourceVersion": "1"});
    if !next.is_empty() {
        metadata["continue"] = json!(next);
    }
    json!({"kind": "EndpointSliceList", "apiVersion": "discovery.k8s.io/v1",
           "metadata": metadata, "items": items})
}

/// The core v1 Endpoints of the Service: a subset per endpoint.
pub(crate) fn endpoints(eps: &[Ep]) -> Value {
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
pub(crate) fn kubeconfig(dir: &Path, server: &str, cluster: &str, user: &str) -> PathBuf {
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
pub(crate) fn kube_fleet(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
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
pub(crate) fn timeless(mut doc: Value) -> Value {
    for r in doc["hosts"].as_array_mut().into_iter().flatten() {
        r["daemon"]["age_s"] = Value::Null;
    }
    doc
}

pub(crate) const TOKEN: &str = "kube-token-123";

/// A fake API server that wants [`TOKEN`], and a kubeconfig whose user has it in a
/// token file named relative to the kubeconfig.
pub(crate) fn token_api(dir: &Path) -> (FakeApi, PathBuf) {
    let api = FakeApi::start(None);
    api.require(&format!("Bearer {TOKEN}"));
    std::fs::create_dir_all(dir.join("secrets")).unwrap();
    std::fs::write(dir.join("secrets/token"), format!("{TOKEN}\n")).unwrap();
    let config = kubeconfig(dir, &api.url, "", "      tokenFile: secrets/token\n");
    (api, config)
}

/// `openssl ARGS` in `dir`.
pub(crate) fn openssl(openssl: &Path, dir: &Path, args: &[&str]) {
    let mut cmd = Command::new(openssl);
    cmd.args(args).current_dir(dir);
    let out = run_with_watchdog(cmd);
    assert!(out.status.success(), "openssl {args:?}: {}", stderr(&out));
}

/// A certificate `name` signed by `ca.crt` in `dir`, with `ext` (openssl's extension
/// lines): `name.crt` and `name.key`.
pub(crate) fn signed(tool: &Path, dir: &Path, name: &str, cn: &str, ext: &str) {
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

/// A server configuration for [`FakeApi`] under a CA made in `pki` (`ca.crt`): its
/// certificate for 127.0.0.1 (`server.crt`), and a client certificate signed by the CA
/// required of every client; `client.crt` and `client.key` are one for the kubeconfig.
pub(crate) fn mtls_server(tool: &Path, pki: &Path) -> Arc<rustls::ServerConfig> {
    tls_server(tool, pki, true)
}

/// [`mtls_server`], with client certificates required only when `client_auth`.
pub(crate) fn tls_server(tool: &Path, pki: &Path, client_auth: bool) -> Arc<rustls::ServerConfig> {
    std::fs::create_dir_all(pki).unwrap();
    openssl(
        tool,
        pki,
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
        tool,
        pki,
        "server",
        "/CN=kube-apiserver",
        "subjectAltName=IP:127.0.0.1,DNS:kubernetes.test\nbasicConstraints=critical,CA:FALSE\n\
         extendedKeyUsage=serverAuth\n",
    );
    signed(
        tool,
        pki,
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
    let verifier: Arc<dyn rustls::server::danger::ClientCertVerifier> = if client_auth {
        rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .unwrap()
    } else {
        rustls::server::WebPkiClientVerifier::no_client_auth()
    };
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            certs("server.crt"),
            PrivateKeyDer::from_pem_file(pki.join("server.key")).unwrap(),
        )
        .unwrap();
    Arc::new(config)
}
