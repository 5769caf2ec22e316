//! `GET /snapshot`: the `gpupeek --json` document with the node's name and the daemon's
//! health ([`gpupeek::exporter::snapshot`]), read from the segment at each request like
//! `/metrics`. `gpupeek fleet` reads it from each host. `"node"` is `--node-name`, by
//! default the host name.

use crate::http::Response;

/// The `/snapshot` answer for segment `name`, with the kubelet's assignments `pods`
/// when it is asked (`--kubelet.pod-resources-socket`).
pub fn respond(name: &str, node: &str, pods: Option<&gpupeek_kube::State>) -> Response {
    Response {
        status: 200,
        content_type: "application/json",
        body: gpupeek::exporter::snapshot(name, node, pods),
        extra: Vec::new(),
    }
}
