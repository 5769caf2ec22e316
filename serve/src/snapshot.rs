//! `GET /snapshot`: the `gpupeek --json` document with the node's name and the daemon's
//! health ([`gpupeek::exporter::snapshot`]), read from the segment at each request like
//! `/metrics`. `gpupeek fleet` reads it from each host. `"node"` is `--node-name`, by
//! default the host name.

use crate::http::Response;

/// The `/snapshot` answer for segment `name`.
pub fn respond(name: &str, node: &str) -> Response {
    Response {
        status: 200,
        content_type: "application/json",
        body: gpupeek::exporter::snapshot(name, node),
        extra: Vec::new(),
    }
}
