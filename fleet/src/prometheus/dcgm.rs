//! A target of NVIDIA's dcgm-exporter with no gpupeek series: the fleet reads
//! dcgm-exporter's own series, so `gpupeek fleet --prometheus` works on a cluster that
//! runs dcgm-exporter already (the GPU operator's default), on every node or some. The
//! series and labels are dcgm-exporter's template's (`gpu`, `UUID`, `modelName`,
//! `GPU_I_PROFILE` and `GPU_I_ID` on a MIG device's, `Hostname`, and
//! `namespace`/`pod`/`container` where its Kubernetes mapping names the pod), and `gpupeek serve --names dcgm`'s:
//!
//! - `DCGM_FI_DEV_GPU_UTIL`, percent: a GPU's utilisation (none for a MIG device);
//! - `DCGM_FI_DEV_FB_USED`, `_FREE` and `_RESERVED`, MiB: memory used, and the total as
//!   their sum (nvidia-smi's total);
//! - `DCGM_FI_PROF_GR_ENGINE_ACTIVE` (else `DCGM_FI_PROF_SM_ACTIVE`), 0..1: a MIG
//!   device's activity, by which one that holds under 1 GiB and no pod is free
//!   (dcgm-exporter names no process).
//!
//! A GPU split with MIG has series for its GPU instances only (dcgm-exporter's default
//! "flex" mode): it is a `MIG` row with a device row per instance (compute instance 0).
//! dcgm-exporter tells no process nor user: those columns stay empty. A host is a
//! target's node (`node` or `kubernetes_node`, which monitors set from the pod's node),
//! else the `Hostname` its series carry (the node's name where the exporter is given
//! `NODE_NAME`), else its `instance`.

use super::{pod, Sample};
use crate::model::{Gpu, Mig, Report};

/// The series read.
pub const NAMES: [&str; 6] = [
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_SM_ACTIVE",
];

/// Whether `name` is one of [`NAMES`].
pub fn read(name: &str) -> bool {
    NAMES.contains(&name)
}

/// How a dcgm-exporter target is named: its node, when its monitor labels it with one,
/// else the `Hostname` its series carry (`hostname`, when known), else its `instance`
/// (an exporter pod's address), after its `cluster`.
pub fn host(label: impl Fn(&str) -> Option<String>, hostname: Option<&String>) -> String {
    let node = label("node")
        .or_else(|| label("kubernetes_node"))
        .or_else(|| hostname.cloned())
        .or_else(|| label("instance"))
        .unwrap_or_default();
    match label("cluster") {
        Some(cluster) => format!("{cluster}/{node}"),
        None => node,
    }
}

/// Memory of one GPU or MIG device, MiB, as its samples come: used, free, reserved.
pub type Memory = [Option<u64>; 3];

/// Where a `DCGM_FI_DEV_FB_*` figure goes in [`Memory`].
fn memory_slot(name: &str) -> Option<usize> {
    match name {
        "DCGM_FI_DEV_FB_USED" => Some(0),
        "DCGM_FI_DEV_FB_FREE" => Some(1),
        "DCGM_FI_DEV_FB_RESERVED" => Some(2),
        _ => None,
    }
}

/// Adds sample `s` to `report`, keeping memory figures in `memory` (by GPU and GPU
/// instance) for [`finish`]. `pod_target`: the target carries its own pod as `pod`.
pub fn sample(
    report: &mut Report,
    s: &Sample,
    pod_target: bool,
    memory: &mut std::collections::BTreeMap<(String, u32, Option<u32>), Memory>,
) {
    let Ok(index) = s.label("gpu").parse::<u32>() else {
        return;
    };
    if report.node.is_none() {
        report.node = s.text("Hostname");
    }
    let g = match report.gpus.iter().position(|g| g.index == index) {
        Some(at) => &mut report.gpus[at],
        None => {
            report.gpus.push(Gpu::new(index));
            report.gpus.last_mut().expect("pushed")
        }
    };
    g.name = g.name.take().or_else(|| s.text("modelName"));
    g.uuid = g
        .uuid
        .take()
        .or_else(|| s.text("UUID").or_else(|| s.text("uuid")));
    let gi = s.label("GPU_I_ID").parse::<u32>().ok();
    let value = s.value();
    if let Some(slot) = memory_slot(s.name()) {
        memory.entry((report.host.clone(), index, gi)).or_default()[slot] = Some(value as u64);
    }
    let Some(gi) = gi else {
        g.pod = g.pod.take().or_else(|| pod(s, pod_target));
        if s.name() == "DCGM_FI_DEV_GPU_UTIL" {
            g.utilization_pct = Some(value.round() as u32);
        }
        return;
    };
    let m = match g.mig.iter().position(|m| m.gpu_instance_id == gi) {
        Some(at) => &mut g.mig[at],
        None => {
            g.mig.push(Mig {
                gpu_instance_id: gi,
                ..Default::default()
            });
            g.mig.last_mut().expect("pushed")
        }
    };
    m.profile = m.profile.take().or_else(|| s.text("GPU_I_PROFILE"));
    m.pod = m.pod.take().or_else(|| pod(s, pod_target));
    let activity = Some((value * 100.0).round() as u32);
    match s.name() {
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE" => m.activity_pct = activity,
        "DCGM_FI_PROF_SM_ACTIVE" if m.activity_pct.is_none() => m.activity_pct = activity,
        _ => {}
    }
}

/// Sets each GPU's and MIG device's memory from what [`sample`] kept: used, and the total
/// as used + free + reserved (no total without both used and free).
pub fn finish(
    reports: &mut [Report],
    memory: &std::collections::BTreeMap<(String, u32, Option<u32>), Memory>,
) {
    for r in reports {
        for g in &mut r.gpus {
            let of = |gi: Option<u32>| memory.get(&(r.host.clone(), g.index, gi));
            let (used, total) = figures(of(None));
            (g.memory_used_mib, g.memory_total_mib) = (used, total);
            for m in &mut g.mig {
                let (used, total) = figures(of(Some(m.gpu_instance_id)));
                (m.memory_used_mib, m.memory_total_mib) = (used, total);
            }
        }
    }
}

fn figures(memory: Option<&Memory>) -> (Option<u64>, Option<u64>) {
    let Some(&[used, free, reserved]) = memory else {
        return (None, None);
    };
    (
        used,
        used.zip(free).map(|(u, f)| u + f + reserved.unwrap_or(0)),
    )
}
