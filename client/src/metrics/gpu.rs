//! The per-GPU families of `gpupeek metrics`: identity and state for every GPU, values
//! only for GPUs sampled normally, and only the fields each GPU supports.

use gpupeek_model::{CentiPercent, Clocks, Gpu, GpuState, Model, Text, TxRx};

use super::{escape, Out, Value};
use crate::verdict::{judge, Thresholds, Verdict};

/// One per-GPU family: name, type, help, and the samples of one GPU as
/// (extra label, value) pairs; no pair when the value is unknown.
struct GpuFamily {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    values: fn(&Gpu) -> Vec<(&'static str, Value)>,
}

fn one<T: Into<Value>>(value: Option<T>) -> Vec<(&'static str, Value)> {
    value.map(|v| ("", v.into())).into_iter().collect()
}

fn ratio(pct: Option<u32>) -> Option<f64> {
    pct.map(|p| f64::from(p) / 100.0)
}

/// Families every GPU sampled normally has (when it supports the field).
const GPU_FAMILIES: &[GpuFamily] = &[
    GpuFamily {
        name: "gpupeek_gpu_utilization_ratio",
        kind: "gauge",
        help: "Fraction of time a kernel ran on the GPU over NVML's sample window.",
        values: |g| one(ratio(g.util_pct)),
    },
    GpuFamily {
        name: "gpupeek_gpu_memory_utilization_ratio",
        kind: "gauge",
        help: "Fraction of time device memory was read or written.",
        values: |g| one(ratio(g.util_mem_pct)),
    },
    GpuFamily {
        name: "gpupeek_gpu_encoder_utilization_ratio",
        kind: "gauge",
        help: "Video encoder utilisation.",
        values: |g| one(ratio(g.util_enc_pct)),
    },
    GpuFamily {
        name: "gpupeek_gpu_decoder_utilization_ratio",
        kind: "gauge",
        help: "Video decoder utilisation.",
        values: |g| one(ratio(g.util_dec_pct)),
    },
    GpuFamily {
        name: "gpupeek_gpu_memory_total_bytes",
        kind: "gauge",
        help: "Device memory visible to the driver.",
        values: |g| one(g.memory.map(|m| m.total.0)),
    },
    GpuFamily {
        name: "gpupeek_gpu_memory_used_bytes",
        kind: "gauge",
        help: "Device memory in use.",
        values: |g| one(g.memory.map(|m| m.used.0)),
    },
    GpuFamily {
        name: "gpupeek_gpu_memory_free_bytes",
        kind: "gauge",
        help: "Device memory free.",
        values: |g| one(g.memory.map(|m| m.free.0)),
    },
    GpuFamily {
        name: "gpupeek_gpu_memory_reserved_bytes",
        kind: "gauge",
        help: "Device memory reserved by the driver.",
        values: |g| one(g.mem_reserved.map(|b| b.0)),
    },
    GpuFamily {
        name: "gpupeek_gpu_temperature_celsius",
        kind: "gauge",
        help: "GPU core temperature.",
        values: |g| one(g.temp_c.map(|t| t.max(0) as u64)),
    },
    GpuFamily {
        name: "gpupeek_gpu_fan_speed_ratio",
        kind: "gauge",
        help: "Fan 0 speed as a fraction of its maximum.",
        values: |g| one(ratio(g.fan_pct)),
    },
    GpuFamily {
        name: "gpupeek_gpu_power_draw_watts",
        kind: "gauge",
        help: "Power draw.",
        values: |g| one(g.power_draw.map(|p| p.watts())),
    },
    GpuFamily {
        name: "gpupeek_gpu_power_limit_watts",
        kind: "gauge",
        help: "Enforced power limit.",
        values: |g| one(g.power_limit.map(|p| p.watts())),
    },
    GpuFamily {
        name: "gpupeek_gpu_energy_joules_total",
        kind: "counter",
        help: "Energy consumed since the driver was loaded.",
        values: |g| one(g.energy.map(|e| e.joules())),
    },
    GpuFamily {
        name: "gpupeek_gpu_clock_hertz",
        kind: "gauge",
        help: "Current clock of each clock domain.",
        values: |g| clocks(g.clock),
    },
    GpuFamily {
        name: "gpupeek_gpu_clock_max_hertz",
        kind: "gauge",
        help: "Maximum clock of each clock domain.",
        values: |g| clocks(g.clock_max),
    },
    GpuFamily {
        name: "gpupeek_gpu_performance_state",
        kind: "gauge",
        help: "Performance state: 0 (P0, fastest) to 15.",
        values: |g| one(g.pstate.map(u64::from)),
    },
    GpuFamily {
        name: "gpupeek_gpu_clock_event_reason",
        kind: "gauge",
        help: "1 when this reason (nvidia-smi's clocks_event_reasons name) holds the clocks down.",
        values: event_reasons,
    },
    GpuFamily {
        name: "gpupeek_gpu_pcie_transmit_bytes_per_second",
        kind: "gauge",
        help: "PCIe transmit throughput.",
        values: |g| one(g.pcie_tx.map(|r| r.bytes_per_s())),
    },
    GpuFamily {
        name: "gpupeek_gpu_pcie_receive_bytes_per_second",
        kind: "gauge",
        help: "PCIe receive throughput.",
        values: |g| one(g.pcie_rx.map(|r| r.bytes_per_s())),
    },
    GpuFamily {
        name: "gpupeek_gpu_pcie_link_generation",
        kind: "gauge",
        help: "Current PCIe link generation.",
        values: |g| one(g.pcie_link_gen.map(u64::from)),
    },
    GpuFamily {
        name: "gpupeek_gpu_pcie_link_width",
        kind: "gauge",
        help: "Current PCIe link width in lanes.",
        values: |g| one(g.pcie_link_width.map(u64::from)),
    },
    GpuFamily {
        name: "gpupeek_gpu_ecc_corrected_errors_total",
        kind: "counter",
        help: "Corrected ECC errors since the driver was loaded.",
        values: |g| one(g.ecc_corrected),
    },
    GpuFamily {
        name: "gpupeek_gpu_ecc_uncorrected_errors_total",
        kind: "counter",
        help: "Uncorrected ECC errors since the driver was loaded.",
        values: |g| one(g.ecc_uncorrected),
    },
    GpuFamily {
        name: "gpupeek_gpu_processes",
        kind: "gauge",
        help: "Processes using the GPU.",
        values: |g| one(g.process_count.map(u64::from)),
    },
    GpuFamily {
        name: "gpupeek_gpu_sm_activity_ratio",
        kind: "gauge",
        help: "GPM: fraction of time an SM had a warp, averaged over all SMs (Hopper+).",
        values: |g| gpm(g, |m| m.sm_activity),
    },
    GpuFamily {
        name: "gpupeek_gpu_sm_occupancy_ratio",
        kind: "gauge",
        help: "GPM: resident warps relative to the SMs' maximum (Hopper+).",
        values: |g| gpm(g, |m| m.sm_occupancy),
    },
    GpuFamily {
        name: "gpupeek_gpu_tensor_activity_ratio",
        kind: "gauge",
        help: "GPM: fraction of time the SMs did tensor-core work (Hopper+).",
        values: |g| gpm(g, |m| m.tensor_activity),
    },
    GpuFamily {
        name: "gpupeek_gpu_dram_bandwidth_ratio",
        kind: "gauge",
        help: "GPM: DRAM bandwidth used relative to the peak (Hopper+).",
        values: |g| gpm(g, |m| m.dram_bw_util),
    },
    GpuFamily {
        name: "gpupeek_gpu_gpm_pcie_bytes_per_second",
        kind: "gauge",
        help: "GPM: PCIe traffic by direction (Hopper+).",
        values: |g| pair(g.gpm.and_then(|m| m.pcie)),
    },
    GpuFamily {
        name: "gpupeek_gpu_nvlink_bytes_per_second",
        kind: "gauge",
        help: "GPM: NVLink traffic over all links by direction (Hopper+).",
        values: |g| pair(g.gpm.and_then(|m| m.nvlink)),
    },
    GpuFamily {
        name: "gpupeek_gpu_verdict",
        kind: "gauge",
        help: "1 for the verdict that applies, 0 for the others (thermal, power-capped, \
               hw-slowdown, starved, idle-holding, healthy); no sample when it cannot be told.",
        values: verdict_sample,
    },
];

fn gpm(
    g: &Gpu,
    get: fn(&gpupeek_model::Gpm) -> Option<CentiPercent>,
) -> Vec<(&'static str, Value)> {
    one(g.gpm.as_ref().and_then(get).map(|c| c.ratio()))
}

fn pair(rates: Option<TxRx>) -> Vec<(&'static str, Value)> {
    let Some(r) = rates else {
        return Vec::new();
    };
    vec![
        ("direction=\"tx\"", Value::Int(r.tx)),
        ("direction=\"rx\"", Value::Int(r.rx)),
    ]
}

fn verdict_sample(g: &Gpu) -> Vec<(&'static str, Value)> {
    const LABELS: [&str; 6] = [
        "verdict=\"thermal\"",
        "verdict=\"power-capped\"",
        "verdict=\"hw-slowdown\"",
        "verdict=\"starved\"",
        "verdict=\"idle-holding\"",
        "verdict=\"healthy\"",
    ];
    let Some(verdict) = judge(g, &Thresholds::current()) else {
        return Vec::new();
    };
    // Every verdict, as gpupeek_gpu_state has every state: a series that only existed
    // while it applied could not be alerted on with `== 0` or counted over time.
    Verdict::ALL
        .iter()
        .zip(LABELS)
        .map(|(v, label)| (label, Value::Int(u64::from(*v == verdict))))
        .collect()
}

fn clocks(c: Clocks) -> Vec<(&'static str, Value)> {
    let names = ["clock=\"graphics\"", "clock=\"sm\"", "clock=\"memory\""];
    names
        .into_iter()
        .zip([c.graphics, c.sm, c.mem])
        .filter_map(|(label, mhz)| Some((label, Value::Int(mhz?.hz()))))
        .collect()
}

/// `reason` labels for [`gpupeek_shm::layout::clock_event_reason::NAMES`], in its order
/// (a test keeps the two in step).
const EVENT_REASONS: [&str; 9] = [
    "reason=\"gpu_idle\"",
    "reason=\"applications_clocks_setting\"",
    "reason=\"sw_power_cap\"",
    "reason=\"hw_slowdown\"",
    "reason=\"sync_boost\"",
    "reason=\"sw_thermal_slowdown\"",
    "reason=\"hw_thermal_slowdown\"",
    "reason=\"hw_power_brake_slowdown\"",
    "reason=\"display_clock_setting\"",
];

fn event_reasons(g: &Gpu) -> Vec<(&'static str, Value)> {
    let Some(reasons) = g.clock_event_reasons else {
        return Vec::new();
    };
    EVENT_REASONS
        .into_iter()
        .zip(reasons.each())
        .map(|(label, (_, on))| (label, Value::Int(u64::from(on))))
        .collect()
}

/// Every state `gpupeek_gpu_state` reports, with its label value: the state's name with
/// `_` for a space (Prometheus-friendly, as the daemon states are).
const GPU_STATES: [(GpuState, &str); 6] = [
    (GpuState::Ok, "ok"),
    (GpuState::Lost, "lost"),
    (GpuState::Error, "error"),
    (GpuState::Suspended, "suspended"),
    (GpuState::Idle, "idle"),
    (GpuState::NotResponding, "not_responding"),
];

/// Every per-GPU family, each GPU a sample.
pub(super) fn families(out: &mut Out, model: &Model) {
    let labels: Vec<String> = model.gpus.iter().map(gpu_labels).collect();
    out.family(
        "gpupeek_gpu_info",
        "gauge",
        "Identity of each GPU (always 1).",
    );
    for (g, l) in model.gpus.iter().zip(&labels) {
        let bus = escape(&text(g.pci_bus_id));
        out.sample(
            "gpupeek_gpu_info",
            &format!("{l},pci_bus_id=\"{bus}\""),
            1u64,
        );
    }
    out.family(
        "gpupeek_gpu_state",
        "gauge",
        "State of each GPU: 1 for the current state (ok, lost, error, suspended, idle or \
         not_responding: the driver has not answered within gpupeekd's timeout).",
    );
    for (g, l) in model.gpus.iter().zip(&labels) {
        for (s, label) in GPU_STATES {
            let value = u64::from(s == g.state);
            out.sample(
                "gpupeek_gpu_state",
                &format!("{l},state=\"{label}\""),
                value,
            );
        }
    }
    // Values only of GPUs sampled normally: not even the maximum clocks the model keeps
    // as identity of an asleep or lost GPU.
    for family in GPU_FAMILIES {
        let samples: Vec<(String, Value)> = model
            .gpus
            .iter()
            .zip(&labels)
            .filter(|(g, _)| g.is_current())
            .flat_map(|(g, l)| {
                (family.values)(g).into_iter().map(move |(extra, value)| {
                    let labels = if extra.is_empty() {
                        l.clone()
                    } else {
                        format!("{l},{extra}")
                    };
                    (labels, value)
                })
            })
            .collect();
        if samples.is_empty() {
            continue;
        }
        out.family(family.name, family.kind, family.help);
        for (labels, value) in samples {
            out.sample(family.name, &labels, value);
        }
    }
}

fn text(t: Option<Text>) -> String {
    t.map(Text::decode).unwrap_or_default()
}

/// `gpu="0",uuid="GPU-...",name="..."`.
fn gpu_labels(g: &Gpu) -> String {
    format!(
        "gpu=\"{}\",uuid=\"{}\",name=\"{}\"",
        g.index,
        escape(&text(g.uuid)),
        escape(&text(g.name))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_labels_are_the_shared_names_with_underscores() {
        for (state, label) in GPU_STATES {
            assert_eq!(label, state.name().replace(' ', "_"));
        }
        let mut every: Vec<u32> = (0..=u32::from(u8::MAX))
            .filter_map(GpuState::from_raw)
            .filter(|&s| s != GpuState::Empty)
            .map(|s| s as u32)
            .collect();
        every.sort_unstable();
        let mut listed: Vec<u32> = GPU_STATES.iter().map(|&(s, _)| s as u32).collect();
        listed.sort_unstable();
        assert_eq!(listed, every, "a state of a published GPU is missing");
    }

    #[test]
    fn reason_labels_are_the_shared_names() {
        let shared = gpupeek_shm::layout::clock_event_reason::NAMES;
        assert_eq!(EVENT_REASONS.len(), shared.len());
        for (label, (_, name)) in EVENT_REASONS.iter().zip(shared) {
            assert_eq!(*label, format!("reason=\"{name}\""));
        }
    }
}
