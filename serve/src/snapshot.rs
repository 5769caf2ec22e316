//! `GET /snapshot`: the `gpupeek --json` document with the node's name and the daemon's
//! health ([`gpupeek::exporter::snapshot`]), read from the segment at each request like
//! `/metrics`. `gpupeek fleet` reads it from each host.

use crate::http::Response;

/// The name this server reports as `"node"`: the host name.
pub fn node_name() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The `/snapshot` answer for segment `name`.
pub fn respond(name: &str, node: &str) -> Response {
    Response {
        status: 200,
        content_type: "application/json",
        body: gpupeek::exporter::snapshot(name, node),
        extra: Vec::new(),
    }
}
