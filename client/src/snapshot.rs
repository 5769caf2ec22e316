//! `gpupeek serve`'s `/snapshot`: the `gpupeek --json` document (gpustat's keys, see
//! [`crate::json`]) with two keys after gpustat's: `"node"`, the name the server goes by,
//! and `"daemon"`, the daemon's health as the segment tells it:
//! `{"state", "age_s", "stale", "error"}`. `state` is `gpupeek_daemon_state`'s word
//! (`live`, `stale`, `no_segment`, ...), `age_s` the seconds since the last heartbeat
//! (`null` without a segment), `stale` true whenever the numbers are not current (any
//! state but `live`), `error` the line `gpupeek` would print (`null` when live).
//!
//! A daemon that is not live has no GPUs here (`"gpus": []`), as it has no GPU samples
//! in `/metrics`: its numbers are not current. Privacy: the document holds what the
//! segment shows this reader and nothing more: processes as the daemon published them
//! (its process policy decides), never filled in from the server's own `/proc` as a
//! one-shot `gpupeek` fills in its user's own processes.

use serde::Serialize;

use gpupeek_shm::Segment;

use crate::{json, metrics, view};

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
    let hostname = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let now = gpupeek_shm::mono_now_ns();
    let (snap, daemon) = match Segment::open(name).and_then(|s| s.snapshot()) {
        Ok(snap) => {
            let liveness = snap.liveness(now);
            let state = metrics::live_state(&liveness);
            let daemon = Daemon {
                state,
                age_s: Some(now.saturating_sub(snap.status.heartbeat_mono_ns) as f64 / 1e9),
                stale: state != "live",
                error: liveness.describe(name, snap.status.period_ns),
            };
            (Some(snap).filter(|_| state == "live"), daemon)
        }
        Err(e) => (
            None,
            Daemon {
                state: metrics::error_state(&e),
                age_s: None,
                stale: true,
                error: Some(e.to_string()),
            },
        ),
    };
    let view = snap.as_ref().and_then(|s| {
        // No `local`: the server's own /proc is not the client's to see.
        view::View::new(s, None, &view::Context::default()).ok()
    });
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
        gpustat: json::document(view.as_ref().unwrap_or(&empty), &hostname, &query_time),
        node,
        daemon,
    };
    json::to_text(&doc)
}
