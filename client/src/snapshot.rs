//! `gpupeek serve`'s `/snapshot`: the `gpupeek --json` document (gpustat's keys, see
//! [`crate::json`]) with two keys after gpustat's: `"node"`, the name the server goes by,
//! and `"daemon"`, the daemon's health as the segment tells it:
//! `{"state", "age_s", "stale", "error"}`. `state` is `gpupeek_daemon_state`'s word
//! (`live`, `stale`, `no_segment`, ...), `age_s` the seconds since the last heartbeat
//! (`null` without a segment), `stale` true whenever the numbers are not current (any
//! state but `live`), `error` the line `gpupeek` would print (`null` when live).
//!
//! With the kubelet's pod-resources API (`serve --kubelet.pod-resources-socket`), a last
//! key, `"pods"`: each GPU or MIG device (`gpu`, and `gpu_instance_id` or `null`)
//! assigned to one container, with its `namespace`, `pod` and `container`, as the
//! metrics' pod labels name them ([`crate::metrics::pods`]), and for a device of NVIDIA's
//! DRA driver its `claim` (`{"name", "namespace", "driver", "pool", "device"}`; no key
//! for a device plugin's), under the same rule: only
//! when the daemon publishes every process's owner (its `full` policy). `null` when
//! there is no kubelet to ask or the daemon withholds processes.
//!
//! A daemon that is not live has no GPUs here (`"gpus": []`), as it has no GPU samples
//! in `/metrics`: its numbers are not current. The reading, the state and the view (and
//! so what the document shows of processes: see [`Reading::view`]) are those of
//! `/metrics`, `/-/ready` and `/events`.

use gpupeek_model::Model;
use serde::Serialize;

use crate::metrics::pods;
use crate::stream::{self, Reading};
use crate::{json, view};

#[derive(Serialize)]
struct Document<'a> {
    #[serde(flatten)]
    gpustat: json::Document<'a>,
    node: &'a str,
    daemon: Daemon,
    pods: Option<Vec<Assignment>>,
}

/// A GPU or MIG device assigned to one container.
#[derive(Serialize)]
pub(crate) struct Assignment {
    gpu: u32,
    gpu_instance_id: Option<u32>,
    #[serde(flatten)]
    owner: gpupeek_kube::Owner,
}

#[derive(Serialize)]
struct Daemon {
    state: &'static str,
    age_s: Option<f64>,
    stale: bool,
    error: Option<String>,
}

/// The `/snapshot` document of segment `name` for node `node`, as text, with the pods
/// `kube` (the kubelet's answer, when asked) assigns the GPUs to.
pub fn document(name: &str, node: &str, kube: Option<&gpupeek_kube::State>) -> String {
    of(&stream::read(name), &stream::hostname(), node, kube)
}

/// The document of `reading`, on host `hostname`, for node `node`.
pub(crate) fn of(
    reading: &Reading,
    hostname: &str,
    node: &str,
    kube: Option<&gpupeek_kube::State>,
) -> String {
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
        pods: pods(reading, kube),
    };
    json::to_text(&doc)
}

/// The document's `pods` (and each `/events` event's): what `kube` assigns the GPUs of
/// a live `reading` to, `None` without a kubelet, a live daemon or every process's owner.
pub(crate) fn pods(
    reading: &Reading,
    kube: Option<&gpupeek_kube::State>,
) -> Option<Vec<Assignment>> {
    kube.and_then(|kube| assignments(reading.live()?, kube))
}

/// Each GPU and MIG device of `snap` that `kube` assigns to one container
/// ([`pods::assignments`]); `None` when the daemon does not publish every process's owner.
fn assignments(
    snap: &gpupeek_shm::Snapshot,
    kube: &gpupeek_kube::State,
) -> Option<Vec<Assignment>> {
    let found = pods::assignments(&Model::new(snap), kube)?;
    let assignment = |(gpu, gpu_instance_id, owner)| Assignment {
        gpu,
        gpu_instance_id,
        owner,
    };
    Some(found.into_iter().map(assignment).collect())
}
