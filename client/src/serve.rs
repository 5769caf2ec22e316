//! `gpupeek serve`: a Prometheus exporter over HTTP, as its own unprivileged process.
//!
//! gpupeekd never opens a network socket; this reader does. Each request for `/metrics`
//! opens the segment, takes one snapshot and renders it ([`crate::metrics`]), so the
//! exporter never holds state between scrapes and follows a daemon restart at once. `/`
//! is a short page pointing at `/metrics`; anything else is 404, and methods other than
//! GET and HEAD are 405. The HTTP side ([`http`]) is one thread that answers requests one
//! at a time and bounds what any number of clients can take: 64 connections at most (a
//! new one closes the oldest), each closed 10 s after it was accepted.

mod http;

use http::{Limits, Request, Response, Server};

use crate::{metrics, Exit, EXIT_OS, EXIT_USAGE};

/// Default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9477";

/// The flags of `gpupeek serve` (their table is `crate::commands::SERVE`).
#[derive(Debug)]
pub struct Args {
    /// `--listen`.
    pub listen: String,

    /// `--shm`.
    pub shm: Option<String>,

    /// What the exposition holds (`--names`).
    pub options: metrics::Options,
}

const INDEX: &str = "<!DOCTYPE html>
<html><head><title>gpupeek exporter</title></head>
<body><h1>gpupeek exporter</h1>
<p>GPU metrics from gpupeekd's shared memory: <a href=\"/metrics\">/metrics</a></p>
</body></html>
";

/// Runs `gpupeek serve` until killed.
pub fn run(args: Args) -> Result<(), Exit> {
    let name = gpupeek_shm::resolve_name(args.shm.as_deref());
    let addr = resolve(&args.listen)?;
    let mut server = Server::bind(addr, Limits::default())
        .map_err(|e| Exit::new(EXIT_OS, format!("cannot listen on {}: {e}", args.listen)))?;
    let bound = server
        .local_addr()
        .map_or_else(|_| args.listen.clone(), |a| a.to_string());
    eprintln!("gpupeek: serving segment '{name}' at http://{bound}/metrics");
    server
        .run(|request| respond(request, &name, &args.options))
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

fn respond(request: &Request, name: &str, options: &metrics::Options) -> Response {
    let (status, content_type, body) = match (request.method, request.path) {
        ("GET" | "HEAD", "/metrics") => (
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics::scrape(name, options).text,
        ),
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
    }
}
