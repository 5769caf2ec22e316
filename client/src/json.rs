//! gpustat's `--json` schema: the same keys, order and units (MiB, whole watts), so tools
//! written for `gpustat --json` read ours. Values gpupeek does not know are `null`, never
//! invented: `full_command`, `cpu_percent` and `cpu_memory_usage` until the daemon
//! publishes them. A GPU the daemon lets sleep has one key gpustat lacks, `"state"`
//! (`"suspended"` or `"idle"`), and `null` for every value. After gpustat's keys each GPU
//! has gpupeek's own: `"verdict"` (see `verdict.rs`; `null` when it cannot be told),
//! `"clock_event_reasons"` (nvidia-smi's names) and `"gpm"` (percentages 0-100, rates in
//! bytes per second; `null` without GPM), and for a GPU with MIG devices `"mig"`: one
//! object per device (`gpu_instance_id`, `compute_instance_id`, `profile`, `uuid`,
//! `memory.used`/`memory.total` in MiB, `sm_count`, `gpm` of its GPU instance, its
//! `verdict` (`verdict::judge_mig`), and the
//! `pids` of its processes, which are also in the GPU's `processes`). After `"gpus"`,
//! `"processes_age_ms"` says how old the process lists are (the daemon samples them
//! every `--process-interval`).
//!
//! A GPU that could not be sampled is gpustat's "invalid GPU": `index`, `name` saying
//! what is wrong (`"((GPU is lost))"`, `"((Unknown Error))"`, and for a GPU whose driver
//! has not answered within the daemon's timeout `"((Driver not responding))"`) and
//! `"processes": null`, so no tool reads it as a GPU at 0 %; then gpupeek's `"state"`
//! (`"lost"`, `"error"`, `"not responding"`) and `"uuid"` (kept, or `null`). A daemon
//! that let go of the driver on request publishes no GPU: there is no document then,
//! only the message on stderr and exit status 10, as for any daemon that is not live.
//!
//! A GPU's value keys are the field table's JSON column (`gpupeek_model::FIELDS`, which
//! the man page's FIELDS section lists; a test keeps the two in step); their order and
//! units are gpustat's, so they are written out here rather than walked from the table.

use serde::Serialize;

use crate::view::{GpuView, ProcView, View};

/// gpustat's document (see [`render`]); `gpupeek serve`'s `/snapshot` adds keys to it.
#[derive(Serialize)]
pub struct Document<'a> {
    hostname: &'a str,
    driver_version: Option<&'a str>,
    query_time: &'a str,
    gpus: Vec<Gpu<'a>>,
    // gpupeek's own key, after gpustat's.
    processes_age_ms: Option<u64>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Gpu<'a> {
    Healthy(Box<HealthyGpu<'a>>),
    Invalid {
        index: u32,
        name: &'static str,
        processes: Option<()>,
        // gpupeek's own keys, after gpustat's.
        state: &'static str,
        uuid: Option<&'a str>,
    },
}

#[derive(Serialize)]
struct HealthyGpu<'a> {
    index: u32,
    uuid: Option<&'a str>,
    name: Option<&'a str>,
    /// Only for a GPU that is asleep.
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'static str>,
    #[serde(rename = "temperature.gpu")]
    temperature_gpu: Option<i32>,
    #[serde(rename = "fan.speed")]
    fan_speed: Option<u32>,
    #[serde(rename = "utilization.gpu")]
    utilization_gpu: Option<u32>,
    #[serde(rename = "utilization.enc")]
    utilization_enc: Option<u32>,
    #[serde(rename = "utilization.dec")]
    utilization_dec: Option<u32>,
    #[serde(rename = "power.draw")]
    power_draw: Option<u64>,
    #[serde(rename = "enforced.power.limit")]
    enforced_power_limit: Option<u64>,
    #[serde(rename = "memory.used")]
    memory_used: Option<u64>,
    #[serde(rename = "memory.total")]
    memory_total: Option<u64>,
    processes: Option<Vec<Process<'a>>>,
    // gpupeek's own keys, after gpustat's.
    verdict: Option<&'static str>,
    clock_event_reasons: Option<&'a [&'static str]>,
    gpm: Option<Gpm>,
    /// Only for a GPU with MIG devices.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    mig: Vec<Mig<'a>>,
}

#[derive(Serialize)]
struct Mig<'a> {
    gpu_instance_id: u32,
    compute_instance_id: u32,
    profile: Option<&'a str>,
    uuid: Option<&'a str>,
    #[serde(rename = "memory.used")]
    memory_used: Option<u64>,
    #[serde(rename = "memory.total")]
    memory_total: Option<u64>,
    sm_count: Option<u32>,
    gpm: Option<MigGpm>,
    verdict: Option<&'static str>,
    /// Pids of its processes (each is in the GPU's `processes`, with these instance ids).
    pids: Vec<u32>,
}

#[derive(Serialize)]
struct MigGpm {
    sm_activity: Option<f64>,
    sm_occupancy: Option<f64>,
    tensor_activity: Option<f64>,
    dram_bandwidth_utilization: Option<f64>,
    interval_ms: u64,
}

#[derive(Serialize)]
struct Gpm {
    sm_activity: Option<f64>,
    sm_occupancy: Option<f64>,
    tensor_activity: Option<f64>,
    dram_bandwidth_utilization: Option<f64>,
    pcie_tx_bytes_per_second: Option<u64>,
    pcie_rx_bytes_per_second: Option<u64>,
    nvlink_tx_bytes_per_second: Option<u64>,
    nvlink_rx_bytes_per_second: Option<u64>,
    interval_ms: u64,
}

#[derive(Serialize)]
struct Process<'a> {
    username: Option<&'a str>,
    command: Option<&'a str>,
    full_command: Option<&'a [String]>,
    gpu_memory_usage: Option<u64>,
    cpu_percent: Option<f64>,
    cpu_memory_usage: Option<u64>,
    pid: u32,
    // gpupeek's own keys, after gpustat's.
    host_pid: u32,
    uid: Option<u32>,
    #[serde(rename = "type")]
    kind: &'static str,
    sm_utilization: Option<u32>,
    memory_utilization: Option<u32>,
    encoder_utilization: Option<u32>,
    decoder_utilization: Option<u32>,
    running_time: Option<u64>,
    gpu_instance_id: Option<u32>,
    compute_instance_id: Option<u32>,
    container: Option<Container<'a>>,
}

#[derive(Serialize)]
struct Container<'a> {
    runtime: &'a str,
    id: &'a str,
    pod_uid: Option<&'a str>,
}

/// The JSON document, indented by four spaces like gpustat's, with a final newline.
pub fn render(view: &View, hostname: &str, query_time: &str) -> String {
    to_text(&document(view, hostname, query_time))
}

/// The document [`render`] writes.
pub fn document<'a>(view: &'a View, hostname: &'a str, query_time: &'a str) -> Document<'a> {
    Document {
        hostname,
        driver_version: view.driver_version.as_deref(),
        query_time,
        gpus: view.gpus.iter().map(gpu).collect(),
        processes_age_ms: view.processes_age_ms,
    }
}

/// A stream event's data: the document on one line, `"generation"` (the publish it
/// shows) first, and `pods` last, as `/snapshot` has them ([`crate::snapshot`]).
pub fn event<P: Serialize>(
    view: &View,
    hostname: &str,
    query_time: &str,
    generation: u64,
    pods: P,
) -> String {
    #[derive(Serialize)]
    struct Event<'a, P> {
        generation: u64,
        #[serde(flatten)]
        document: Document<'a>,
        pods: P,
    }
    let event = Event {
        generation,
        document: document(view, hostname, query_time),
        pods,
    };
    serde_json::to_string(&event).expect("serialising plain structs cannot fail")
}

fn gpu(g: &GpuView) -> Gpu<'_> {
    if let Some(problem) = g.problem() {
        return Gpu::Invalid {
            index: g.index,
            name: problem,
            processes: None,
            state: g.state.name(),
            uuid: g.uuid.as_deref(),
        };
    }
    Gpu::Healthy(Box::new(HealthyGpu {
        index: g.index,
        uuid: g.uuid.as_deref(),
        name: g.name.as_deref(),
        state: g.asleep(),
        temperature_gpu: g.temperature_c,
        fan_speed: g.fan_pct,
        utilization_gpu: g.util_pct,
        utilization_enc: g.enc_pct,
        utilization_dec: g.dec_pct,
        power_draw: g.power_draw_w,
        enforced_power_limit: g.power_limit_w,
        memory_used: g.mem_used_mib,
        memory_total: g.mem_total_mib,
        processes: g
            .processes
            .as_ref()
            .map(|list| list.iter().map(process).collect()),
        verdict: g.verdict.map(|v| v.name()),
        clock_event_reasons: g.clock_event_reasons.as_deref(),
        gpm: g.gpm.map(|m| Gpm {
            sm_activity: m.sm_activity.map(|c| c.pct()),
            sm_occupancy: m.sm_occupancy.map(|c| c.pct()),
            tensor_activity: m.tensor_activity.map(|c| c.pct()),
            dram_bandwidth_utilization: m.dram_bw_util.map(|c| c.pct()),
            pcie_tx_bytes_per_second: m.pcie.map(|r| r.tx),
            pcie_rx_bytes_per_second: m.pcie.map(|r| r.rx),
            nvlink_tx_bytes_per_second: m.nvlink.map(|r| r.tx),
            nvlink_rx_bytes_per_second: m.nvlink.map(|r| r.rx),
            interval_ms: m.interval_ns / 1_000_000,
        }),
        mig: g
            .mig
            .iter()
            .map(|m| Mig {
                gpu_instance_id: m.ids.0,
                compute_instance_id: m.ids.1,
                profile: m.profile.as_deref(),
                uuid: m.uuid.as_deref(),
                memory_used: m.mem_used_mib,
                memory_total: m.mem_total_mib,
                sm_count: m.sm_count,
                gpm: m.gpm.map(|m| MigGpm {
                    sm_activity: m.sm_activity.map(|c| c.pct()),
                    sm_occupancy: m.sm_occupancy.map(|c| c.pct()),
                    tensor_activity: m.tensor_activity.map(|c| c.pct()),
                    dram_bandwidth_utilization: m.dram_bw_util.map(|c| c.pct()),
                    interval_ms: m.interval_ns / 1_000_000,
                }),
                verdict: m.verdict.map(|v| v.name()),
                pids: g.processes_in(m).map(|p| p.pid).collect(),
            })
            .collect(),
    }))
}

fn process(p: &ProcView) -> Process<'_> {
    let util = |i: usize| p.gpu_util_pct.map(|u| u[i]);
    Process {
        username: p.user.as_deref(),
        command: p.command.as_deref(),
        full_command: p.full_command.as_deref(),
        gpu_memory_usage: p.gpu_mem_mib,
        cpu_percent: p.cpu_percent,
        cpu_memory_usage: p.host_mem_bytes,
        pid: p.pid,
        host_pid: p.host_pid,
        uid: p.uid,
        kind: p.kind,
        sm_utilization: util(0),
        memory_utilization: util(1),
        encoder_utilization: util(2),
        decoder_utilization: util(3),
        running_time: p.running_secs,
        gpu_instance_id: p.mig.map(|(gi, _)| gi),
        compute_instance_id: p.mig.map(|(_, ci)| ci),
        container: p.container.as_ref().map(|c| Container {
            runtime: &c.runtime,
            id: &c.id,
            pod_uid: c.pod_uid.as_deref(),
        }),
    }
}

/// Serialises `doc` indented by four spaces like gpustat, with a final newline.
pub fn to_text(doc: &impl Serialize) -> String {
    let mut buf = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
    doc.serialize(&mut ser)
        .expect("serialising plain structs into a Vec cannot fail");
    let mut text = String::from_utf8(buf).expect("serde_json writes UTF-8");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpupeek_shm::layout::{gpu_valid as v, GpuState};
    use gpupeek_shm::{text, GpuRecord};

    fn document(states: &[GpuState]) -> serde_json::Value {
        let gpus: Vec<GpuRecord> = states
            .iter()
            .enumerate()
            .map(|(i, &state)| {
                let mut g = GpuRecord {
                    index: i as u32,
                    state: state as u32,
                    valid: v::NAME | v::UUID | v::UTILIZATION | v::MEMORY,
                    util_gpu_pct: 75,
                    mem_total_bytes: 80 << 30,
                    ..GpuRecord::default()
                };
                text::encode(&mut g.name, "H100");
                text::encode(&mut g.uuid, &format!("GPU-{i}"));
                g
            })
            .collect();
        let snap = crate::testing::live_snapshot(gpus);
        let view = View::new(&snap, None, &Default::default()).unwrap();
        serde_json::from_str(&render(&view, "host", "2024-01-01T00:00:00")).unwrap()
    }

    #[test]
    fn a_gpu_whose_driver_is_not_responding_is_gpustats_invalid_gpu_with_its_state() {
        let doc = document(&[GpuState::Ok, GpuState::NotResponding]);
        assert_eq!(doc["gpus"][0]["utilization.gpu"], 75);
        assert!(
            doc["gpus"][0].get("state").is_none(),
            "healthy: gpustat's keys"
        );
        assert_eq!(
            doc["gpus"][1],
            serde_json::json!({
                "index": 1,
                "name": "((Driver not responding))",
                "processes": null,
                "state": "not responding",
                "uuid": "GPU-1",
            })
        );
        let keys: Vec<&String> = doc["gpus"][1].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["index", "name", "processes", "state", "uuid"],
            "order"
        );
    }

    #[test]
    fn a_lost_gpu_says_lost_and_an_asleep_one_keeps_gpustats_shape() {
        let doc = document(&[GpuState::Lost, GpuState::Idle]);
        assert_eq!(doc["gpus"][0]["name"], "((GPU is lost))");
        assert_eq!(doc["gpus"][0]["state"], "lost");
        assert_eq!(doc["gpus"][1]["state"], "idle");
        assert_eq!(doc["gpus"][1]["name"], "H100");
        assert_eq!(doc["gpus"][1]["utilization.gpu"], serde_json::Value::Null);
    }

    #[test]
    fn a_gpus_keys_are_the_field_tables_json_keys_and_its_nested_lists() {
        let doc = document(&[GpuState::Ok, GpuState::Idle]);
        let mut keys: std::collections::BTreeSet<&str> = doc["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g.as_object().unwrap().keys().map(String::as_str))
            .collect();
        for f in gpupeek_model::FIELDS {
            if let Some(key) = f.gpustat {
                assert!(keys.remove(key), "the JSON lacks the table's {key}");
            }
        }
        // What is not one field: the process list, gpupeek's verdict and GPM block.
        let nested: std::collections::BTreeSet<&str> = ["processes", "verdict", "gpm"].into();
        assert_eq!(keys, nested, "a JSON key the field table does not declare");
    }
}
