//! Per-process and per-user series, each opt-in (`--per-process`, `--per-user`): a
//! series per process comes and goes with every job, which a Prometheus server pays for,
//! so nothing per process is exported unless asked, and never more than [`MAX_SERIES`]
//! series of a family per scrape (the processes using the most GPU memory first; how many
//! were left out is `gpupeek_process_series_omitted`).
//!
//! `gpupeek_process_gpu_memory_bytes{gpu,uuid,pid,user,command}` (a process in a MIG
//! device adds `gpu_instance_id` and `compute_instance_id`) and, per user and GPU,
//! `gpupeek_user_gpu_memory_bytes{gpu,uuid,user}` and `gpupeek_user_processes`. With
//! `--names nvidia_gpu_exporter`, `--per-process` gives that exporter's
//! `nvidia_smi_compute_app_info` and `nvidia_smi_compute_app_used_memory_bytes`
//! (`uuid`, `pid`, `process_name`) instead. Only processes on GPUs sampled now count;
//! a user or command the daemon withholds (hidepid) is an empty label.

use std::collections::BTreeMap;

use gpupeek_model::{Gpu, Model, Process, Text};

use super::gpu::text;
use super::pods::Pods;
use super::{escape, Families, Names, Options, Out, Value};

/// Most series of one family in one scrape.
pub const MAX_SERIES: usize = 256;

/// The per-process and per-user families `options` asks for.
pub(super) fn families(out: &mut Out, model: &Model, options: &Options, pods: &Pods) {
    if !options.per_process && !options.per_user {
        return;
    }
    let mut procs: Vec<(&Process, &Gpu)> = model
        .processes
        .iter()
        .filter_map(|p| Some((p, model.gpu(p.gpu_index).filter(|g| g.is_current())?)))
        .collect();
    procs.sort_by_key(|(p, g)| (std::cmp::Reverse(p.gpu_mem.map(|b| b.0)), g.index, p.pid));
    let mut families = Families::default();
    if options.per_process {
        per_process(&mut families, &procs, options.names, pods);
    }
    if options.per_user {
        per_user(&mut families, &procs);
    }
    families.write(out);
}

fn per_process(families: &mut Families, procs: &[(&Process, &Gpu)], names: Names, pods: &Pods) {
    let omitted = procs.len().saturating_sub(MAX_SERIES);
    for (p, g) in procs.iter().take(MAX_SERIES) {
        let command = escape(&text(p.command));
        if names == Names::NvidiaGpuExporter {
            let uuid = super::nvidia_smi::uuid(g);
            let l = format!(
                "uuid=\"{uuid}\",pid=\"{}\",process_name=\"{command}\"{}",
                p.pid,
                pods.process(p, g),
            );
            families.add(
                "nvidia_smi_compute_app_info",
                "gauge",
                "A metric with a constant '1' value labeled by the identity of a process \
                 with a compute context on a GPU.",
                l.clone(),
                Value::Int(1),
            );
            if let Some(mem) = p.gpu_mem {
                families.add(
                    "nvidia_smi_compute_app_used_memory_bytes",
                    "gauge",
                    "GPU memory used by the process.",
                    l,
                    Value::Int(mem.0),
                );
            }
            continue;
        }
        let Some(mem) = p.gpu_mem else { continue };
        let mut l = format!(
            "gpu=\"{}\",uuid=\"{}\",pid=\"{}\",user=\"{}\",command=\"{command}\"{}",
            g.index,
            escape(&text(g.uuid)),
            p.pid,
            escape(&user(p)),
            pods.process(p, g),
        );
        if let Some((gi, ci)) = p.mig {
            l += &format!(",gpu_instance_id=\"{gi}\",compute_instance_id=\"{ci}\"");
        }
        families.add(
            "gpupeek_process_gpu_memory_bytes",
            "gauge",
            "GPU memory used by each process (--per-process; the largest first, at most 256).",
            l,
            Value::Int(mem.0),
        );
    }
    families.add(
        "gpupeek_process_series_omitted",
        "gauge",
        "Processes left out of the per-process series by their cap.",
        String::new(),
        Value::Int(omitted as u64),
    );
}

fn per_user(families: &mut Families, procs: &[(&Process, &Gpu)]) {
    // (GPU, user) -> (uuid, memory, processes), in GPU and user order.
    let mut users: BTreeMap<(u32, String), (String, u64, u64)> = BTreeMap::new();
    for (p, g) in procs {
        let entry = users
            .entry((g.index, user(p)))
            .or_insert_with(|| (text(g.uuid), 0, 0));
        entry.1 += p.gpu_mem.map_or(0, |b| b.0);
        entry.2 += 1;
    }
    for ((gpu, user), (uuid, mem, count)) in users.into_iter().take(MAX_SERIES) {
        let l = format!(
            "gpu=\"{gpu}\",uuid=\"{}\",user=\"{}\"",
            escape(&uuid),
            escape(&user)
        );
        families.add(
            "gpupeek_user_gpu_memory_bytes",
            "gauge",
            "GPU memory used by each user's processes on each GPU (--per-user).",
            l.clone(),
            Value::Int(mem),
        );
        families.add(
            "gpupeek_user_processes",
            "gauge",
            "Processes of each user on each GPU (--per-user).",
            l,
            Value::Int(count),
        );
    }
}

/// The user's name, or uid when the name is unknown; empty when withheld.
fn user(p: &Process) -> String {
    match p.user {
        Some((_, name)) if !name.is_empty() => Text::decode(name),
        Some((uid, _)) => uid.to_string(),
        None => String::new(),
    }
}
