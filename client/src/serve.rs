//! `gpupeek serve`: a Prometheus exporter over HTTP, as its own unprivileged process.
//!
//! gpupeekd never opens a network socket; this reader does. Each request for `/metrics`
//! opens the segment, takes one snapshot and renders it ([`crate::metrics`]), so the
//! exporter never holds state between scrapes and follows a daemon restart at once. `/`
//! is a short page pointing at `/metrics`; anything else is 404, and methods other than
//! GET and HEAD are 405. HTTP parsing is tiny_http's. Requests are answered one at a time:
//! a scrape costs microseconds, and one at a time bounds what a flood of clients can take.

use argh::FromArgs;
use tiny_http::{Header, Method, Request, Response, Server};

use crate::{metrics, Exit, EXIT_OS, EXIT_USAGE};

/// Default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9477";

/// Serve the GPUs as Prometheus metrics at http://ADDR/metrics, reading the segment at
/// each scrape.
#[derive(FromArgs, Debug)]
#[argh(
    note = "Run it as an unprivileged user (it needs only to read /dev/shm/gpupeek); \
contrib/systemd/gpupeek-exporter.service does. Use --listen 0.0.0.0:9477 to be scraped \
from other hosts. Stop it with SIGTERM or SIGINT."
)]
pub struct Args {
    /// address to listen on, HOST:PORT (default 127.0.0.1:9477; port 0 picks a free one)
    #[argh(option, default = "DEFAULT_LISTEN.to_owned()")]
    pub listen: String,

    /// shared-memory segment name (default: $GPUPEEK_SHM, else "gpupeek")
    #[argh(option)]
    pub shm: Option<String>,
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
    let server = Server::http(addr)
        .map_err(|e| Exit::new(EXIT_OS, format!("cannot listen on {}: {e}", args.listen)))?;
    let bound = server
        .server_addr()
        .to_ip()
        .map_or_else(|| args.listen.clone(), |a| a.to_string());
    eprintln!("gpupeek: serving segment '{name}' at http://{bound}/metrics");
    for request in server.incoming_requests() {
        respond(request, &name);
    }
    Ok(())
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

fn respond(request: Request, name: &str) {
    let path = request.url().split('?').next().unwrap_or("");
    let (status, content_type, body) = match (request.method(), path) {
        (Method::Get | Method::Head, "/metrics") => (
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics::scrape(name).text,
        ),
        (Method::Get | Method::Head, "/") => (200, "text/html; charset=utf-8", INDEX.into()),
        (Method::Get | Method::Head, _) => (404, "text/plain; charset=utf-8", "not found\n".into()),
        _ => (
            405,
            "text/plain; charset=utf-8",
            "only GET and HEAD\n".into(),
        ),
    };
    let header = |name: &str, value: &str| {
        Header::from_bytes(name, value).expect("constant headers are valid")
    };
    let mut response = Response::from_string(body)
        .with_status_code(status)
        .with_header(header("Content-Type", content_type));
    if status == 405 {
        response.add_header(header("Allow", "GET, HEAD"));
    }
    // tiny_http leaves the body out for HEAD. A client that went away mid-response is its
    // own problem, not the exporter's.
    let _ = request.respond(response);
}
