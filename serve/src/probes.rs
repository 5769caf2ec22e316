//! The probes and the node's name: `/-/healthy` (200 while the server runs: a liveness
//! probe), `/-/ready` (200 when the daemon's segment can be read and its daemon is live,
//! otherwise 503 with the one line a client would print: no daemon, stale, NVML error,
//! released, untrusted segment), and `gpupeek_node_info`, the only series that carries
//! `--node-name` (as `nodename`, node_exporter's name in `node_uname_info`): labels such
//! as `node` and `instance` are the scraping Prometheus's to set from its targets.

use gpupeek::exporter;

use crate::http::Response;

fn text(status: u16, body: String) -> Response {
    Response {
        status,
        content_type: "text/plain; charset=utf-8",
        body,
        extra: Vec::new(),
    }
}

/// The answer for a probe's `path` on segment `name`; `None` for other paths.
pub fn answer(path: &str, name: &str) -> Option<Response> {
    match path {
        "/-/healthy" => Some(text(200, "gpupeek serve is healthy\n".into())),
        "/-/ready" => Some(match exporter::readiness(name) {
            Ok(()) => text(200, "gpupeek serve is ready\n".into()),
            Err(why) => text(503, format!("{why}\n")),
        }),
        _ => None,
    }
}

/// `gpupeek_node_info` for node `node`, to append to an exposition.
pub fn node_info(node: &str) -> String {
    format!(
        "# HELP gpupeek_node_info The node this exporter runs on (--node-name), as label \
         nodename; always 1.\n# TYPE gpupeek_node_info gauge\n\
         gpupeek_node_info{{nodename=\"{}\"}} 1\n",
        exporter::escape(node)
    )
}
