//! The entries of the field table, in the order templates and the man page list them
//! (see `fields.rs` for what an entry is).

use super::{field, Aggregate, Field, Unit, Value};
use crate::gpu::{Gpm, Gpu};
use crate::text;
use crate::units;
use gpupeek_shm::layout::gpu_valid as v;

fn int(x: Option<impl Into<u64>>) -> Option<Value<'static>> {
    x.map(|x| Value::Int(x.into()))
}

fn text(t: Option<text::Text>) -> Option<Value> {
    t.map(Value::Text)
}

fn bytes(b: Option<units::Bytes>) -> Option<Value<'static>> {
    int(b.map(|b| b.0))
}

fn mhz(c: Option<units::MegaHertz>) -> Option<Value<'static>> {
    int(c.map(|c| c.0))
}

fn gpm(g: &Gpu, get: fn(&Gpm) -> Option<units::CentiPercent>) -> Option<Value<'static>> {
    g.gpm.as_ref().and_then(get).map(Value::Centi)
}

fn rate(g: &Gpu, get: fn(&Gpm) -> Option<u64>) -> Option<Value<'static>> {
    int(g.gpm.as_ref().and_then(get))
}

const GPM_PCIE: &str = "GPM: PCIe traffic by direction (Hopper+).";
const GPM_NVLINK: &str = "GPM: NVLink traffic over all links by direction (Hopper+).";
const CLOCK: &str = "Current clock of each clock domain.";
const CLOCK_MAX: &str = "Maximum clock of each clock domain.";

use Aggregate::{Join, Max, Mean, Sum};
use Unit::*;

/// Every published per-GPU field, in the order templates and the man page list them.
pub const FIELDS: &[Field] = &[
    field("index", Count, Join, |g| int(Some(g.index)))
        .about("NVML index")
        .identity()
        .smi(&[&["index"]])
        .gpustat("index"),
    field("name", Text, Join, |g| text(g.name))
        .valid(v::NAME)
        .about("product name")
        .identity()
        .smi(&[&["name", "gpu_name"]])
        .gpustat("name"),
    field("uuid", Text, Join, |g| text(g.uuid))
        .valid(v::UUID)
        .about("UUID")
        .identity()
        .smi(&[&["uuid", "gpu_uuid"]])
        .gpustat("uuid"),
    field("pci_bus_id", Text, Join, |g| text(g.pci_bus_id))
        .valid(v::PCI_BUS_ID)
        .about("PCI bus id")
        .identity()
        .smi(&[&["pci.bus_id", "gpu_bus_id"]]),
    field("state", Text, Join, |g| Some(Value::Name(g.state.name())))
        .about("the GPU's state: ok, lost, error, suspended, idle or not responding")
        .identity()
        .gpustat("state"),
    field("util", Percent, Mean, |g| int(g.util_pct))
        .valid(v::UTILIZATION)
        .about("GPU utilisation")
        .smi(&[&["utilization.gpu"]])
        .gpustat("utilization.gpu")
        .prom(
            "gpupeek_gpu_utilization_ratio",
            "gauge",
            "Fraction of time a kernel ran on the GPU over NVML's sample window.",
        ),
    field("util_mem", Percent, Mean, |g| int(g.util_mem_pct))
        .valid(v::UTILIZATION)
        .about("memory controller utilisation")
        .smi(&[&["utilization.memory"]])
        .prom(
            "gpupeek_gpu_memory_utilization_ratio",
            "gauge",
            "Fraction of time device memory was read or written.",
        ),
    field("util_enc", Percent, Mean, |g| int(g.util_enc_pct))
        .valid(v::UTIL_ENC)
        .about("encoder utilisation")
        .smi(&[&["utilization.encoder"]])
        .gpustat("utilization.enc")
        .prom(
            "gpupeek_gpu_encoder_utilization_ratio",
            "gauge",
            "Video encoder utilisation.",
        ),
    field("util_dec", Percent, Mean, |g| int(g.util_dec_pct))
        .valid(v::UTIL_DEC)
        .about("decoder utilisation")
        .smi(&[&["utilization.decoder"]])
        .gpustat("utilization.dec")
        .prom(
            "gpupeek_gpu_decoder_utilization_ratio",
            "gauge",
            "Video decoder utilisation.",
        ),
    field("mem_used", Bytes, Sum, |g| bytes(g.memory.map(|m| m.used)))
        .valid(v::MEMORY)
        .about("memory in use")
        .smi(&[&["memory.used"]])
        .gpustat("memory.used")
        .prom(
            "gpupeek_gpu_memory_used_bytes",
            "gauge",
            "Device memory in use.",
        ),
    field("mem_free", Bytes, Sum, |g| bytes(g.memory.map(|m| m.free)))
        .valid(v::MEMORY)
        .about("free memory")
        .smi(&[&["memory.free"]])
        .prom(
            "gpupeek_gpu_memory_free_bytes",
            "gauge",
            "Device memory free.",
        ),
    field("mem_total", Bytes, Sum, |g| {
        bytes(g.memory.map(|m| m.total))
    })
    .valid(v::MEMORY)
    .about("memory visible to the driver")
    .smi(&[&["memory.total"]])
    .gpustat("memory.total")
    .prom(
        "gpupeek_gpu_memory_total_bytes",
        "gauge",
        "Device memory visible to the driver.",
    ),
    field("mem_reserved", Bytes, Sum, |g| bytes(g.mem_reserved))
        .valid(v::MEM_RESERVED)
        .about("memory reserved by the driver")
        .smi(&[&["memory.reserved"]])
        .prom(
            "gpupeek_gpu_memory_reserved_bytes",
            "gauge",
            "Device memory reserved by the driver.",
        ),
    field("mem_pct", Percent, Mean, |g| {
        g.memory.map(|m| Value::Real(m.used_pct()))
    })
    .valid(v::MEMORY)
    .about("memory in use, percent of total"),
    field("temp", Celsius, Max, |g| {
        g.temp_c.map(|t| Value::Signed(t.into()))
    })
    .valid(v::TEMPERATURE)
    .about("core temperature")
    .smi(&[&["temperature.gpu"]])
    .gpustat("temperature.gpu")
    .prom(
        "gpupeek_gpu_temperature_celsius",
        "gauge",
        "GPU core temperature.",
    ),
    field("fan", Percent, Mean, |g| int(g.fan_pct))
        .valid(v::FAN_SPEED)
        .about("fan 0 speed")
        .smi(&[&["fan.speed"]])
        .gpustat("fan.speed")
        .prom(
            "gpupeek_gpu_fan_speed_ratio",
            "gauge",
            "Fan 0 speed as a fraction of its maximum.",
        ),
    field("power", MilliWatts, Sum, |g| int(g.power_draw.map(|p| p.0)))
        .valid(v::POWER_DRAW)
        .about("power draw")
        .smi(&[&["power.draw"]])
        .gpustat("power.draw")
        .prom("gpupeek_gpu_power_draw_watts", "gauge", "Power draw."),
    field("power_limit", MilliWatts, Sum, |g| {
        int(g.power_limit.map(|p| p.0))
    })
    .valid(v::POWER_LIMIT)
    .about("enforced power limit")
    .smi(&[&["power.limit"], &["enforced.power.limit"]])
    .gpustat("enforced.power.limit")
    .prom(
        "gpupeek_gpu_power_limit_watts",
        "gauge",
        "Enforced power limit.",
    ),
    field("power_pct", Percent, Mean, |g| {
        g.power_pct().map(Value::Real)
    })
    .valid(v::POWER_DRAW | v::POWER_LIMIT)
    .about("power draw, percent of the limit"),
    field("energy", MilliJoules, Sum, |g| int(g.energy.map(|e| e.0)))
        .valid(v::ENERGY)
        .about("energy since the driver was loaded")
        .prom(
            "gpupeek_gpu_energy_joules_total",
            "counter",
            "Energy consumed since the driver was loaded.",
        ),
    field("clock_gr", MegaHertz, Max, |g| mhz(g.clock.graphics))
        .valid(v::CLOCK_GRAPHICS)
        .about("graphics clock")
        .smi(&[&["clocks.current.graphics", "clocks.gr"]])
        .prom("gpupeek_gpu_clock_hertz", "gauge", CLOCK)
        .label("clock=\"graphics\""),
    field("clock_sm", MegaHertz, Max, |g| mhz(g.clock.sm))
        .valid(v::CLOCK_SM)
        .about("SM clock")
        .smi(&[&["clocks.current.sm", "clocks.sm"]])
        .prom("gpupeek_gpu_clock_hertz", "gauge", CLOCK)
        .label("clock=\"sm\""),
    field("clock_mem", MegaHertz, Max, |g| mhz(g.clock.mem))
        .valid(v::CLOCK_MEM)
        .about("memory clock")
        .smi(&[&["clocks.current.memory", "clocks.mem"]])
        .prom("gpupeek_gpu_clock_hertz", "gauge", CLOCK)
        .label("clock=\"memory\""),
    field("clock_gr_max", MegaHertz, Max, |g| {
        mhz(g.clock_max.graphics)
    })
    .valid(v::CLOCK_GRAPHICS_MAX)
    .about("maximum graphics clock")
    .identity()
    .smi(&[&["clocks.max.graphics", "clocks.max.gr"]])
    .prom("gpupeek_gpu_clock_max_hertz", "gauge", CLOCK_MAX)
    .label("clock=\"graphics\""),
    field("clock_sm_max", MegaHertz, Max, |g| mhz(g.clock_max.sm))
        .valid(v::CLOCK_SM_MAX)
        .about("maximum SM clock")
        .identity()
        .smi(&[&["clocks.max.sm"]])
        .prom("gpupeek_gpu_clock_max_hertz", "gauge", CLOCK_MAX)
        .label("clock=\"sm\""),
    field("clock_mem_max", MegaHertz, Max, |g| mhz(g.clock_max.mem))
        .valid(v::CLOCK_MEM_MAX)
        .about("maximum memory clock")
        .identity()
        .smi(&[&["clocks.max.memory", "clocks.max.mem"]])
        .prom("gpupeek_gpu_clock_max_hertz", "gauge", CLOCK_MAX)
        .label("clock=\"memory\""),
    field("pstate", Text, Join, |g| g.pstate.map(Value::PState))
        .valid(v::PSTATE)
        .about("performance state, P0 (fastest) to P15")
        .smi(&[&["pstate"]])
        .prom(
            "gpupeek_gpu_performance_state",
            "gauge",
            "Performance state: 0 (P0, fastest) to 15.",
        ),
    field("clock_event_reasons", Text, Join, |g| {
        g.clock_event_reasons.map(Value::Reasons)
    })
    .not_in_templates()
    .valid(v::CLOCK_EVENT_REASONS)
    .about("clock event (throttle) reasons in force")
    .smi(&[
        &["clocks_event_reasons.active"],
        &["clocks_throttle_reasons.active"],
    ])
    .gpustat("clock_event_reasons")
    .prom(
        "gpupeek_gpu_clock_event_reason",
        "gauge",
        "1 when this reason (nvidia-smi's clocks_event_reasons name) holds the clocks down.",
    ),
    field("pcie_tx", KiloBytesPerSec, Sum, |g| {
        int(g.pcie_tx.map(|r| r.0))
    })
    .valid(v::PCIE_TX)
    .about("PCIe transmit throughput")
    .prom(
        "gpupeek_gpu_pcie_transmit_bytes_per_second",
        "gauge",
        "PCIe transmit throughput.",
    ),
    field("pcie_rx", KiloBytesPerSec, Sum, |g| {
        int(g.pcie_rx.map(|r| r.0))
    })
    .valid(v::PCIE_RX)
    .about("PCIe receive throughput")
    .prom(
        "gpupeek_gpu_pcie_receive_bytes_per_second",
        "gauge",
        "PCIe receive throughput.",
    ),
    field("pcie_gen", Count, Max, |g| int(g.pcie_link_gen))
        .valid(v::PCIE_LINK_GEN)
        .about("current PCIe link generation")
        .smi(&[&["pcie.link.gen.current"]])
        .prom(
            "gpupeek_gpu_pcie_link_generation",
            "gauge",
            "Current PCIe link generation.",
        ),
    field("pcie_width", Count, Max, |g| int(g.pcie_link_width))
        .valid(v::PCIE_LINK_WIDTH)
        .about("current PCIe link width, lanes")
        .smi(&[&["pcie.link.width.current"]])
        .prom(
            "gpupeek_gpu_pcie_link_width",
            "gauge",
            "Current PCIe link width in lanes.",
        ),
    field("ecc_corrected", Count, Sum, |g| int(g.ecc_corrected))
        .valid(v::ECC_CORRECTED)
        .about("corrected volatile ECC errors")
        .smi(&[&["ecc.errors.corrected.volatile.total"]])
        .prom(
            "gpupeek_gpu_ecc_corrected_errors_total",
            "counter",
            "Corrected ECC errors since the driver was loaded.",
        ),
    field("ecc_uncorrected", Count, Sum, |g| int(g.ecc_uncorrected))
        .valid(v::ECC_UNCORRECTED)
        .about("uncorrected volatile ECC errors")
        .smi(&[&["ecc.errors.uncorrected.volatile.total"]])
        .prom(
            "gpupeek_gpu_ecc_uncorrected_errors_total",
            "counter",
            "Uncorrected ECC errors since the driver was loaded.",
        ),
    field("procs", Count, Sum, |g| int(g.process_count))
        .valid(v::PROCESSES)
        .about("processes NVML lists on the GPU")
        .prom("gpupeek_gpu_processes", "gauge", "Processes using the GPU."),
    field("gpm_sm_activity", Percent, Mean, |g| {
        gpm(g, |m| m.sm_activity)
    })
    .not_in_templates()
    .valid(v::GPM | v::GPM_SM_ACTIVITY)
    .about("GPM: time an SM had a warp, averaged over all SMs")
    .prom(
        "gpupeek_gpu_sm_activity_ratio",
        "gauge",
        "GPM: fraction of time an SM had a warp, averaged over all SMs (Hopper+).",
    ),
    field("gpm_sm_occupancy", Percent, Mean, |g| {
        gpm(g, |m| m.sm_occupancy)
    })
    .not_in_templates()
    .valid(v::GPM | v::GPM_SM_OCCUPANCY)
    .about("GPM: resident warps relative to the SMs' maximum")
    .prom(
        "gpupeek_gpu_sm_occupancy_ratio",
        "gauge",
        "GPM: resident warps relative to the SMs' maximum (Hopper+).",
    ),
    field("gpm_tensor_activity", Percent, Mean, |g| {
        gpm(g, |m| m.tensor_activity)
    })
    .not_in_templates()
    .valid(v::GPM | v::GPM_TENSOR_ACTIVITY)
    .about("GPM: time the SMs did tensor-core work")
    .prom(
        "gpupeek_gpu_tensor_activity_ratio",
        "gauge",
        "GPM: fraction of time the SMs did tensor-core work (Hopper+).",
    ),
    field("gpm_dram_bw", Percent, Mean, |g| gpm(g, |m| m.dram_bw_util))
        .not_in_templates()
        .valid(v::GPM | v::GPM_DRAM_BW)
        .about("GPM: DRAM bandwidth used relative to the peak")
        .prom(
            "gpupeek_gpu_dram_bandwidth_ratio",
            "gauge",
            "GPM: DRAM bandwidth used relative to the peak (Hopper+).",
        ),
    field("gpm_pcie_tx", BytesPerSec, Sum, |g| {
        rate(g, |m| Some(m.pcie?.tx))
    })
    .not_in_templates()
    .valid(v::GPM | v::GPM_PCIE)
    .about("GPM: PCIe bytes transmitted")
    .prom("gpupeek_gpu_gpm_pcie_bytes_per_second", "gauge", GPM_PCIE)
    .label("direction=\"tx\""),
    field("gpm_pcie_rx", BytesPerSec, Sum, |g| {
        rate(g, |m| Some(m.pcie?.rx))
    })
    .not_in_templates()
    .valid(v::GPM | v::GPM_PCIE)
    .about("GPM: PCIe bytes received")
    .prom("gpupeek_gpu_gpm_pcie_bytes_per_second", "gauge", GPM_PCIE)
    .label("direction=\"rx\""),
    field("gpm_nvlink_tx", BytesPerSec, Sum, |g| {
        rate(g, |m| Some(m.nvlink?.tx))
    })
    .not_in_templates()
    .valid(v::GPM | v::GPM_NVLINK)
    .about("GPM: NVLink bytes transmitted, all links")
    .prom("gpupeek_gpu_nvlink_bytes_per_second", "gauge", GPM_NVLINK)
    .label("direction=\"tx\""),
    field("gpm_nvlink_rx", BytesPerSec, Sum, |g| {
        rate(g, |m| Some(m.nvlink?.rx))
    })
    .not_in_templates()
    .valid(v::GPM | v::GPM_NVLINK)
    .about("GPM: NVLink bytes received, all links")
    .prom("gpupeek_gpu_nvlink_bytes_per_second", "gauge", GPM_NVLINK)
    .label("direction=\"rx\""),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    use crate::fields::Tier;

    use gpupeek_shm::layout::GpuState;
    use gpupeek_shm::GpuRecord;

    fn every_bit(state: GpuState) -> GpuRecord {
        GpuRecord {
            state: state as u32,
            valid: u64::MAX,
            power_limit_mw: 1,
            ..GpuRecord::default()
        }
    }

    #[test]
    fn a_fields_tier_is_what_the_model_keeps_of_a_gpu_not_sampled_now() {
        let ok = every_bit(GpuState::Ok);
        let asleep = every_bit(GpuState::Suspended);
        let (ok, asleep) = (Gpu::new(&ok), Gpu::new(&asleep));
        for f in FIELDS {
            assert!((f.get)(&ok).is_some(), "{} with every bit", f.name);
            let kept = (f.get)(&asleep).is_some();
            assert_eq!(kept, f.tier == Tier::Identity, "{}", f.name);
        }
    }

    #[test]
    fn a_field_has_a_value_exactly_when_its_validity_bits_are_set() {
        for f in FIELDS {
            let all = every_bit(GpuState::Ok);
            assert!((f.get)(&Gpu::new(&all)).is_some(), "{}", f.name);
            for bit in (0..64).map(|i| 1u64 << i).filter(|b| f.valid & b != 0) {
                let without = GpuRecord {
                    valid: all.valid & !bit,
                    ..all
                };
                assert!(
                    (f.get)(&Gpu::new(&without)).is_none(),
                    "{}: {bit:#x}",
                    f.name
                );
            }
            let others = GpuRecord {
                valid: f.valid,
                ..all
            };
            assert!((f.get)(&Gpu::new(&others)).is_some(), "{} alone", f.name);
        }
    }

    #[test]
    fn names_are_unique_in_every_language() {
        let (mut names, mut smi) = (BTreeSet::new(), BTreeSet::new());
        for f in FIELDS {
            assert!(names.insert(f.name), "{}", f.name);
            for name in f.smi.iter().flat_map(|n| n.iter()) {
                assert!(smi.insert(name), "{name}");
            }
        }
        let mut series = BTreeSet::new();
        for p in FIELDS.iter().filter_map(|f| f.prom) {
            assert!(series.insert((p.name, p.label)), "{} {}", p.name, p.label);
        }
    }
}
