//! `gpupeek-serve`, run as `gpupeek serve`: a Prometheus exporter over HTTP, as its own
//! unprivileged process.
//!
//! gpupeekd never opens a network socket; this reader does. Each request for `/metrics`
//! opens the segment, takes one snapshot and renders it ([`gpupeek::exporter::scrape`]),
//! so the exporter never holds state between scrapes and follows a daemon restart at
//! once. `/snapshot` is the same reading as `gpupeek --json`'s document, with the node's
//! name and the daemon's health ([`snapshot`]). `/-/healthy` and `/-/ready` answer probes
//! ([`probes`]), `/events` streams the daemon's updates ([`events`]), and `/metrics` ends
//! with `gpupeek_node_info`, the node's name. `/` is a short page pointing at them;
//! anything else is 404, and methods other than GET and HEAD are 405. The HTTP side
//! ([`http`]) is one thread that answers requests one at a time and bounds what any
//! number of clients can take: 64 connections at most (a new one closes the oldest),
//! each closed 10 s after it was accepted, however slowly it sends its request or reads
//! the answer; request heads over 8 KiB are refused.
//!
//! `--web.config.file` takes the web configuration file of Prometheus's exporters
//! ([`webconfig`]): HTTPS, basic authentication (every path answers 401 with
//! `WWW-Authenticate` without the right user and password) and extra headers. Answers are
//! gzip-compressed for a client that accepts it. The TLS, YAML, bcrypt and gzip code is
//! linked into this binary only: `gpupeek serve` executes it (see the `gpupeek` library's
//! `serve` module), so a one-shot `gpupeek` does not load it. Its flags, their parsing and
//! the metrics come from that library ([`gpupeek::exporter`]), as `gpupeek metrics`'s do.

mod events;
mod http;
mod probes;
mod snapshot;
mod webconfig;

use http::{Limits, Request, Response, Server};
use webconfig::{BasicAuth, WebConfig};

use gpupeek::exporter::{self, Args, Exit, EXIT_OS, EXIT_USAGE};

const INDEX: &str = "<!DOCTYPE html>
<html><head><title>gpupeek exporter</title></head>
<body><h1>gpupeek exporter</h1>
<p>GPU metrics from gpupeekd's shared memory: <a href=\"/metrics\">/metrics</a>;
as JSON: <a href=\"/snapshot\">/snapshot</a></p>
<p>Each daemon update as server-sent events: <a href=\"/events\">/events</a>;
probes: <a href=\"/-/healthy\">/-/healthy</a>, <a href=\"/-/ready\">/-/ready</a></p>
</body></html>
";

fn main() -> std::process::ExitCode {
    let result = exporter::command_line().and_then(|args| args.map_or(Ok(()), run));
    exporter::exit_status(result).into()
}

/// Runs `gpupeek serve` until killed.
fn run(args: Args) -> Result<(), Exit> {
    let name = gpupeek_shm::resolve_name(args.shm.as_deref());
    let addr = resolve(&args.listen)?;
    let web = match &args.web_config {
        None => None,
        Some(path) => Some(
            WebConfig::load(path.as_ref())
                .map_err(|e| Exit::new(EXIT_USAGE, format!("bad --web.config.file {path}: {e}")))?,
        ),
    };
    let limits = Limits {
        streams: args.max_streams,
        ..Limits::default()
    };
    let mut server = Server::bind(addr, limits)
        .map_err(|e| Exit::new(EXIT_OS, format!("cannot listen on {}: {e}", args.listen)))?;
    let mut auth = None;
    let mut scheme = "http";
    if let Some(web) = web {
        if let Some(tls) = web.tls {
            server = server.tls(tls);
            scheme = "https";
        }
        server = server.headers(web.headers);
        auth = web.auth;
    }
    let bound = server
        .local_addr()
        .map_or_else(|_| args.listen.clone(), |a| a.to_string());
    eprintln!("gpupeek: serving segment '{name}' at {scheme}://{bound}/metrics");
    let kubelet = args.kubelet_socket.clone().map(|socket| {
        gpupeek_kube::Poller::spawn(
            "gpupeek",
            socket,
            std::time::Duration::from_secs(10),
            std::time::Duration::from_secs(2),
        )
    });
    let node = args.node_name.clone().unwrap_or_else(exporter::hostname);
    let waker = server
        .waker()
        .map_err(|e| Exit::new(EXIT_OS, format!("cannot make the event wake-up: {e}")))?;
    // The thread that follows the publishes starts with the first stream: an exporter
    // nobody streams from stays one thread.
    let mut watching = false;
    let mut publisher = events::Publisher::new(name.clone(), node.clone());
    server
        .run_with_events(
            |request| {
                let allowed = auth
                    .as_mut()
                    .is_none_or(|a: &mut BasicAuth| a.check(request.authorization));
                if !allowed {
                    return unauthorized();
                }
                if request.path == "/events" && !watching {
                    if let Err(e) = events::watch(name.clone(), waker.clone()) {
                        eprintln!("gpupeek: cannot start the event thread: {e}");
                        return unavailable("cannot follow the daemon's updates\n");
                    }
                    watching = true;
                }
                let kubelet = kubelet.as_ref();
                if let Some(response) = probe_and_stream_routes(request, &name, &node, kubelet) {
                    return response;
                }
                let mut response = respond(request, &name, &node, &args.options, kubelet);
                if request.path == "/metrics" && response.status == 200 {
                    response.body += &probes::node_info(&node);
                }
                response
            },
            || publisher.event(pods(kubelet.as_ref()).as_ref()),
        )
        .map_err(|e| Exit::new(EXIT_OS, format!("serving stopped: {e}")))
}

/// The first address `listen` resolves to.
fn resolve(listen: &str) -> Result<std::net::SocketAddr, Exit> {
    use std::net::ToSocketAddrs;
    let bad = |why: String| Exit::new(EXIT_USAGE, format!("bad --listen {listen:?}: {why}"));
    listen
        .to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .next()
        .ok_or_else(|| bad("resolves to no address".into()))
}

fn respond(
    request: &Request,
    name: &str,
    node: &str,
    options: &exporter::Options,
    kubelet: Option<&gpupeek_kube::Poller>,
) -> Response {
    let (status, content_type, body) = match (request.method, request.path) {
        ("GET" | "HEAD", "/metrics") => (
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            exporter::scrape_with(name, options, pods(kubelet).as_ref()).text,
        ),
        ("GET" | "HEAD", "/snapshot") => {
            return snapshot::respond(name, node, pods(kubelet).as_ref())
        }
        ("GET" | "HEAD", "/") => (200, "text/html; charset=utf-8", INDEX.into()),
        ("GET" | "HEAD", _) => (404, "text/plain; charset=utf-8", "not found\n".into()),
        _ => (
            405,
            "text/plain; charset=utf-8",
            "only GET and HEAD\n".into(),
        ),
    };
    Response {
        status,
        content_type,
        body,
        extra: Vec::new(),
    }
}

/// The kubelet's last answer (a copy), when it is asked: taken only by the answers that
/// name pods (`/metrics`, `/snapshot`, `/events`), not by probes and other paths.
fn pods(kubelet: Option<&gpupeek_kube::Poller>) -> Option<gpupeek_kube::State> {
    kubelet.map(gpupeek_kube::Poller::current)
}

/// The probes and the update stream (with the pods `kubelet` last said the GPUs are
/// assigned to).
fn probe_and_stream_routes(
    request: &Request,
    name: &str,
    node: &str,
    kubelet: Option<&gpupeek_kube::Poller>,
) -> Option<Response> {
    if !matches!(request.method, "GET" | "HEAD") {
        return None;
    }
    match request.path {
        "/events" => Some(events::open(name, node, pods(kubelet).as_ref())),
        path => probes::answer(path, name),
    }
}

fn unavailable(why: &str) -> Response {
    Response {
        status: 503,
        content_type: "text/plain; charset=utf-8",
        body: why.into(),
        extra: Vec::new(),
    }
}

fn unauthorized() -> Response {
    Response {
        status: 401,
        content_type: "text/plain; charset=utf-8",
        body: "Unauthorized\n".into(),
        extra: vec![("WWW-Authenticate", "Basic realm=\"gpupeek\"".into())],
    }
}
