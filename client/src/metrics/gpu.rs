//! The per-GPU families of `gpupeek metrics`: identity and state for every GPU, values
//! only for GPUs sampled normally, and only the fields each GPU supports.

use gpupeek_shm::layout::{gpu_valid as v, GpuState};
use gpupeek_shm::{text, GpuRecord, Snapshot};

use super::{escape, Out, Value};
use crate::verdict::{judge, Thresholds, Verdict};

/// One per-GPU family: name, type, help, and the samples of one GPU as
/// (extra label, value) pairs; no pair when the value is unknown.
struct GpuFamily {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    values: fn(&GpuRecord) -> Vec<(&'static str, Value)>,
}

fn one(g: &GpuRecord, bit: u64, value: impl Into<Value>) -> Vec<(&'static str, Value)> {
    if g.valid & bit != 0 {
        vec![("", value.into())]
    } else {
        Vec::new()
    }
}

fn ratio(pct: u32) -> f64 {
    f64::from(pct) / 100.0
}

const MHZ: u64 = 1_000_000;

/// Families every GPU sampled normally has (when it supports the field).
const GPU_FAMILIES: &[GpuFamily] = &[
    GpuFamily {
        name: "gpupeek_gpu_utilization_ratio",
        kind: "gauge",
        help: "Fraction of time a kernel ran on the GPU over NVML's sample window.",
        values: |g| one(g, v::UTILIZATION, ratio(g.util_gpu_pct)),
    },
    GpuFamily {
        name: "gpupeek_gpu_memory_utilization_ratio",
        kind: "gauge",
        help: "Fraction of time device memory was read or written.",
        values: |g| one(g, v::UTILIZATION, ratio(g.util_mem_pct)),
    },
    GpuFamily {
        name: "gpupeek_gpu_encoder_utilization_ratio",
        kind: "gauge",
        help: "Video encoder utilisation.",
        values: |g| one(g, v::UTIL_ENC, ratio(g.util_enc_pct)),
    },
    GpuFamily {
        name: "gpupeek_gpu_decoder_utilization_ratio",
        kind: "gauge",
        help: "Video decoder utilisation.",
        values: |g| one(g, v::UTIL_DEC, ratio(g.util_dec_pct)),
    },
    GpuFamily {
        name: "gpupeek_gpu_memory_total_bytes",
        kind: "gauge",
        help: "Device memory visible to the driver.",
        values: |g| one(g, v::MEMORY, g.mem_total_bytes),
    },
    GpuFamily {
        name: "gpupeek_gpu_memory_used_bytes",
        kind: "gauge",
        help: "Device memory in use.",
        values: |g| one(g, v::MEMORY, g.mem_used_bytes),
    },
    GpuFamily {
        name: "gpupeek_gpu_memory_free_bytes",
        kind: "gauge",
        help: "Device memory free.",
        values: |g| one(g, v::MEMORY, g.mem_free_bytes),
    },
    GpuFamily {
        name: "gpupeek_gpu_memory_reserved_bytes",
        kind: "gauge",
        help: "Device memory reserved by the driver.",
        values: |g| one(g, v::MEM_RESERVED, g.mem_reserved_bytes),
    },
    GpuFamily {
        name: "gpupeek_gpu_temperature_celsius",
        kind: "gauge",
        help: "GPU core temperature.",
        values: |g| one(g, v::TEMPERATURE, g.temp_gpu_c.max(0) as u64),
    },
    GpuFamily {
        name: "gpupeek_gpu_fan_speed_ratio",
        kind: "gauge",
        help: "Fan 0 speed as a fraction of its maximum.",
        values: |g| one(g, v::FAN_SPEED, ratio(g.fan_speed_pct)),
    },
    GpuFamily {
        name: "gpupeek_gpu_power_draw_watts",
        kind: "gauge",
        help: "Power draw.",
        values: |g| one(g, v::POWER_DRAW, f64::from(g.power_draw_mw) / 1000.0),
    },
    GpuFamily {
        name: "gpupeek_gpu_power_limit_watts",
        kind: "gauge",
        help: "Enforced power limit.",
        values: |g| one(g, v::POWER_LIMIT, f64::from(g.power_limit_mw) / 1000.0),
    },
    GpuFamily {
        name: "gpupeek_gpu_energy_joules_total",
        kind: "counter",
        help: "Energy consumed since the driver was loaded.",
        values: |g| one(g, v::ENERGY, g.energy_mj as f64 / 1000.0),
    },
    GpuFamily {
        name: "gpupeek_gpu_clock_hertz",
        kind: "gauge",
        help: "Current clock of each clock domain.",
        values: |g| {
            clocks(
                g,
                [
                    (v::CLOCK_GRAPHICS, g.clock_graphics_mhz),
                    (v::CLOCK_SM, g.clock_sm_mhz),
                    (v::CLOCK_MEM, g.clock_mem_mhz),
                ],
            )
        },
    },
    GpuFamily {
        name: "gpupeek_gpu_clock_max_hertz",
        kind: "gauge",
        help: "Maximum clock of each clock domain.",
        values: |g| {
            clocks(
                g,
                [
                    (v::CLOCK_GRAPHICS_MAX, g.clock_graphics_max_mhz),
                    (v::CLOCK_SM_MAX, g.clock_sm_max_mhz),
                    (v::CLOCK_MEM_MAX, g.clock_mem_max_mhz),
                ],
            )
        },
    },
    GpuFamily {
        name: "gpupeek_gpu_performance_state",
        kind: "gauge",
        help: "Performance state: 0 (P0, fastest) to 15.",
        values: |g| one(g, v::PSTATE, u64::from(g.pstate)),
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
        values: |g| one(g, v::PCIE_TX, u64::from(g.pcie_tx_kbytes_per_s) * 1024),
    },
    GpuFamily {
        name: "gpupeek_gpu_pcie_receive_bytes_per_second",
        kind: "gauge",
        help: "PCIe receive throughput.",
        values: |g| one(g, v::PCIE_RX, u64::from(g.pcie_rx_kbytes_per_s) * 1024),
    },
    GpuFamily {
        name: "gpupeek_gpu_pcie_link_generation",
        kind: "gauge",
        help: "Current PCIe link generation.",
        values: |g| one(g, v::PCIE_LINK_GEN, u64::from(g.pcie_link_gen)),
    },
    GpuFamily {
        name: "gpupeek_gpu_pcie_link_width",
        kind: "gauge",
        help: "Current PCIe link width in lanes.",
        values: |g| one(g, v::PCIE_LINK_WIDTH, u64::from(g.pcie_link_width)),
    },
    GpuFamily {
        name: "gpupeek_gpu_ecc_corrected_errors_total",
        kind: "counter",
        help: "Corrected ECC errors since the driver was loaded.",
        values: |g| one(g, v::ECC_CORRECTED, g.ecc_corrected_volatile_count),
    },
    GpuFamily {
        name: "gpupeek_gpu_ecc_uncorrected_errors_total",
        kind: "counter",
        help: "Uncorrected ECC errors since the driver was loaded.",
        values: |g| one(g, v::ECC_UNCORRECTED, g.ecc_uncorrected_volatile_count),
    },
    GpuFamily {
        name: "gpupeek_gpu_processes",
        kind: "gauge",
        help: "Processes using the GPU.",
        values: |g| one(g, v::PROCESSES, u64::from(g.process_count)),
    },
    GpuFamily {
        name: "gpupeek_gpu_sm_activity_ratio",
        kind: "gauge",
        help: "GPM: fraction of time an SM had a warp, averaged over all SMs (Hopper+).",
        values: |g| one(g, v::GPM_SM_ACTIVITY, centi(g.gpm_sm_activity_centipct)),
    },
    GpuFamily {
        name: "gpupeek_gpu_sm_occupancy_ratio",
        kind: "gauge",
        help: "GPM: resident warps relative to the SMs' maximum (Hopper+).",
        values: |g| one(g, v::GPM_SM_OCCUPANCY, centi(g.gpm_sm_occupancy_centipct)),
    },
    GpuFamily {
        name: "gpupeek_gpu_tensor_activity_ratio",
        kind: "gauge",
        help: "GPM: fraction of time the SMs did tensor-core work (Hopper+).",
        values: |g| {
            one(
                g,
                v::GPM_TENSOR_ACTIVITY,
                centi(g.gpm_tensor_activity_centipct),
            )
        },
    },
    GpuFamily {
        name: "gpupeek_gpu_dram_bandwidth_ratio",
        kind: "gauge",
        help: "GPM: DRAM bandwidth used relative to the peak (Hopper+).",
        values: |g| one(g, v::GPM_DRAM_BW, centi(g.gpm_dram_bw_util_centipct)),
    },
    GpuFamily {
        name: "gpupeek_gpu_gpm_pcie_bytes_per_second",
        kind: "gauge",
        help: "GPM: PCIe traffic by direction (Hopper+).",
        values: |g| {
            pair(
                g,
                v::GPM_PCIE,
                (g.gpm_pcie_tx_bytes_per_s, g.gpm_pcie_rx_bytes_per_s),
            )
        },
    },
    GpuFamily {
        name: "gpupeek_gpu_nvlink_bytes_per_second",
        kind: "gauge",
        help: "GPM: NVLink traffic over all links by direction (Hopper+).",
        values: |g| {
            pair(
                g,
                v::GPM_NVLINK,
                (g.gpm_nvlink_tx_bytes_per_s, g.gpm_nvlink_rx_bytes_per_s),
            )
        },
    },
    GpuFamily {
        name: "gpupeek_gpu_verdict",
        kind: "gauge",
        help: "1 for the verdict that applies, 0 for the others (thermal, power-capped, \
               hw-slowdown, starved, idle-holding, healthy); no sample when it cannot be told.",
        values: verdict_sample,
    },
];

fn centi(centipct: u32) -> f64 {
    f64::from(centipct) / 10_000.0
}

fn pair(g: &GpuRecord, bit: u64, (tx, rx): (u64, u64)) -> Vec<(&'static str, Value)> {
    if g.valid & bit == 0 {
        return Vec::new();
    }
    vec![
        ("direction=\"tx\"", Value::Int(tx)),
        ("direction=\"rx\"", Value::Int(rx)),
    ]
}

fn verdict_sample(g: &GpuRecord) -> Vec<(&'static str, Value)> {
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

fn clocks(g: &GpuRecord, domains: [(u64, u32); 3]) -> Vec<(&'static str, Value)> {
    let names = ["clock=\"graphics\"", "clock=\"sm\"", "clock=\"memory\""];
    names
        .into_iter()
        .zip(domains)
        .filter(|(_, (bit, _))| g.valid & bit != 0)
        .map(|(label, (_, mhz))| (label, Value::Int(u64::from(mhz) * MHZ)))
        .collect()
}

/// NVML clock event reason bits by nvidia-smi's names.
/// `reason` labels for [`gpupeek_shm::layout::clock_event_reason::NAMES`], in its order
/// (a test keeps the two in step).
const EVENT_REASONS: [(u64, &str); 9] = [
    (0x1, "reason=\"gpu_idle\""),
    (0x2, "reason=\"applications_clocks_setting\""),
    (0x4, "reason=\"sw_power_cap\""),
    (0x8, "reason=\"hw_slowdown\""),
    (0x10, "reason=\"sync_boost\""),
    (0x20, "reason=\"sw_thermal_slowdown\""),
    (0x40, "reason=\"hw_thermal_slowdown\""),
    (0x80, "reason=\"hw_power_brake_slowdown\""),
    (0x100, "reason=\"display_clock_setting\""),
];

fn event_reasons(g: &GpuRecord) -> Vec<(&'static str, Value)> {
    if g.valid & v::CLOCK_EVENT_REASONS == 0 {
        return Vec::new();
    }
    EVENT_REASONS
        .iter()
        .map(|&(bit, label)| {
            (
                label,
                Value::Int(u64::from(g.clock_event_reasons & bit != 0)),
            )
        })
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
pub(super) fn families(out: &mut Out, snap: &Snapshot) {
    let labels: Vec<String> = snap.gpus.iter().map(gpu_labels).collect();
    out.family(
        "gpupeek_gpu_info",
        "gauge",
        "Identity of each GPU (always 1).",
    );
    for (g, l) in snap.gpus.iter().zip(&labels) {
        let bus = (g.valid & v::PCI_BUS_ID != 0).then(|| text::decode(&g.pci_bus_id));
        let bus = escape(&bus.unwrap_or_default());
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
    for (g, l) in snap.gpus.iter().zip(&labels) {
        let state = GpuState::from_raw(g.state).unwrap_or(GpuState::Error);
        for (s, label) in GPU_STATES {
            let value = u64::from(s == state);
            out.sample(
                "gpupeek_gpu_state",
                &format!("{l},state=\"{label}\""),
                value,
            );
        }
    }
    let current: Vec<(&GpuRecord, &String)> = snap
        .gpus
        .iter()
        .zip(&labels)
        .filter(|(g, _)| GpuState::from_raw(g.state) == Some(GpuState::Ok))
        .collect();
    for family in GPU_FAMILIES {
        let samples: Vec<(String, Value)> = current
            .iter()
            .flat_map(|(g, l)| {
                (family.values)(g).into_iter().map(move |(extra, value)| {
                    let labels = if extra.is_empty() {
                        (*l).clone()
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

/// `gpu="0",uuid="GPU-...",name="..."`.
fn gpu_labels(g: &GpuRecord) -> String {
    let uuid = (g.valid & v::UUID != 0).then(|| text::decode(&g.uuid));
    let name = (g.valid & v::NAME != 0).then(|| text::decode(&g.name));
    format!(
        "gpu=\"{}\",uuid=\"{}\",name=\"{}\"",
        g.index,
        escape(&uuid.unwrap_or_default()),
        escape(&name.unwrap_or_default())
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
        for ((bit, label), (shared_bit, name)) in EVENT_REASONS.iter().zip(shared) {
            assert_eq!(
                (*bit, *label),
                (shared_bit, format!("reason=\"{name}\"").as_str())
            );
        }
    }
}
