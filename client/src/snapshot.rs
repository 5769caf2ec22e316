//! `gpupeek serve`'s `/snapshot`: the `gpupeek --json` document (gpustat's keys, see
//! [`crate::json`]) with two keys after gpustat's: `"node"`, the name the server goes by,
//! and `"daemon"`, the daemon's health as the segment tells it:
//! `{"state", "age_s", "stale", "error"}`. `state` is `gpupeek_daemon_state`'s word
//! (`live`, `stale`, `no_segment`, ...), `age_s` the seconds since the last heartbeat
//! (`null` without a segment), `stale` true whenever the numbers are not current (any
//! state but `live`), `error` the line `gpupeek` would print (`null` when live).
//!
//! A daemon that is not live has no GPUs here (`"gpus": []`), as it has no GPU samples
//! in `/metrics`: its numbers are not current. The reading, the state and the view (and
//! so what the document shows of processes: see [`Reading::view`]) are those of
//! `/metrics`, `/-/ready` and `/events`.

use serde::Serialize;

use crate::stream::{self, Reading};
use crate::{json, view};

#[derive(Serialize)]
struct Document<'a> {
    #[serde(flatten)]
    gpustat: json::Document<'a>,
    node: &'a str,
    daemon: Daemon,
}

#[derive(Serialize)]
struct Daemon {
    state: &'static str,
    age_s: Option<f64>,
    stale: bool,
    error: Option<String>,
}

/// The `/snapshot` document of segment `name` for node `node`, as text.
pub fn document(name: &str, node: &str) -> String {
    of(&stream::read(name), &stream::hostname(), node)
}

/// The document of `reading`, on host `hostname`, for node `node`.
pub(crate) fn of(reading: &Reading, hostname: &str, node: &str) -> String {
    let daemon = Daemon {
        state: reading.state,
        age_s: reading
            .snap
            .as_ref()
            .map(|s| reading.now_ns.saturating_sub(s.status.heartbeat_mono_ns) as f64 / 1e9),
        stale: reading.state != "live",
        error: reading.reason.clone(),
    };
    let view = reading.view();
    let published = view.as_ref().map_or_else(chrono::Local::now, |v| {
        crate::published_time(v.published_unix_ns)
    });
    let query_time = crate::iso_time(&published);
    let empty = view::View {
        driver_version: None,
        published_unix_ns: 0,
        gpus: Vec::new(),
        proc_policy: None,
        processes_age_ms: None,
    };
    let doc = Document {
        gpustat: json::document(view.as_ref().unwrap_or(&empty), hostname, &query_time),
        node,
        daemon,
    };
    json::to_text(&doc)
}
