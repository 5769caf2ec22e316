//! The entries of the field table, in the order templates and the man page list them
//! (see `fields.rs` for what an entry is).

use super::{field, Aggregate, Field, Getter, Unit, Value};
use crate::gpu::{ClockEventReasons, Gpm, Gpu};
use crate::text;
use crate::units;
use gpupeek_shm::layout::{
    clock_event_reason as reason, gpu_valid as v, gpu_valid2 as v2, gpu_valid3 as v3,
};

pub(super) fn int(x: Option<impl Into<u64>>) -> Option<Value<'static>> {
    x.map(|x| Value::Int(x.into()))
}

pub(super) fn text(t: Option<text::Text>) -> Option<Value> {
    t.map(Value::Text)
}

fn bytes(b: Option<units::Bytes>) -> Option<Value<'static>> {
    int(b.map(|b| b.0))
}

fn mhz(c: Option<units::MegaHertz>) -> Option<Value<'static>> {
    int(c.map(|c| c.0))
}

fn mw(p: Option<units::MilliWatts>) -> Option<Value<'static>> {
    int(p.map(|p| p.0))
}

pub(super) fn hex(x: Option<impl Into<u64>>, digits: u8) -> Option<Value<'static>> {
    x.map(|x| Value::Hex(x.into(), digits))
}

/// nvidia-smi's words for a mode.
pub(super) fn enabled(on: Option<bool>) -> Option<Value<'static>> {
    on.map(|on| Value::Name(if on { "Enabled" } else { "Disabled" }))
}

/// nvidia-smi's words for a yes-or-no state.
pub(super) fn yes(on: Option<bool>) -> Option<Value<'static>> {
    on.map(|on| Value::Name(if on { "Yes" } else { "No" }))
}

/// Whether one clock event reason holds the clocks down, in nvidia-smi's words. The
/// getter is picked by the reason's bit, as entries are `const` and cannot capture it.
const fn reason(name: &'static str, bit: u64, smi: &'static [&'static [&'static str]]) -> Field {
    let get: Getter = match bit {
        reason::GPU_IDLE => |g| active(g, reason::GPU_IDLE),
        reason::APPLICATIONS_CLOCKS_SETTING => |g| active(g, reason::APPLICATIONS_CLOCKS_SETTING),
        reason::SW_POWER_CAP => |g| active(g, reason::SW_POWER_CAP),
        reason::HW_SLOWDOWN => |g| active(g, reason::HW_SLOWDOWN),
        reason::HW_THERMAL_SLOWDOWN => |g| active(g, reason::HW_THERMAL_SLOWDOWN),
        reason::HW_POWER_BRAKE_SLOWDOWN => |g| active(g, reason::HW_POWER_BRAKE_SLOWDOWN),
        reason::SW_THERMAL_SLOWDOWN => |g| active(g, reason::SW_THERMAL_SLOWDOWN),
        _ => |g| active(g, reason::SYNC_BOOST),
    };
    field(name, Text, Join, get)
        .not_in_templates()
        .valid(v::CLOCK_EVENT_REASONS)
        .about("whether this clock event reason holds the clocks down: Active or Not Active")
        .smi(smi)
}

fn active(g: &Gpu, bit: u64) -> Option<Value<'static>> {
    let on = g.clock_event_reasons?.any(ClockEventReasons(bit));
    Some(Value::Name(if on { "Active" } else { "Not Active" }))
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

/// The per-GPU fields up to ABI 1.5's, in the order templates and the man page list
/// them.
pub(super) const FIELDS: &[Field] = &[
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
        .smi(&[
            &["power.draw"],
            &["power.draw.average", "gpu.power.draw.average"],
        ])
        .gpustat("power.draw")
        .prom("gpupeek_gpu_power_draw_watts", "gauge", "Power draw."),
    field("power_limit", MilliWatts, Sum, |g| {
        int(g.power_limit.map(|p| p.0))
    })
    .valid(v::POWER_LIMIT)
    .about("enforced power limit")
    .smi(&[
        &["power.limit", "gpu.power.requested_limit"],
        &["enforced.power.limit", "gpu.power.current_limit"],
    ])
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
        .smi(&[&["pcie.link.gen.current"], &["pcie.link.gen.gpucurrent"]])
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
    // nvidia-smi's --query-gpu fields beyond the core set (ABI 1.4's gpu_valid2).
    field("serial", Text, Join, |g| text(g.details.serial))
        .valid2(v2::SERIAL)
        .not_in_templates()
        .about("board serial number")
        .identity()
        .smi(&[&["serial", "gpu_serial"]]),
    field("vbios_version", Text, Join, |g| {
        text(g.details.vbios_version)
    })
    .valid2(v2::VBIOS_VERSION)
    .not_in_templates()
    .about("VBIOS version")
    .identity()
    .smi(&[&["vbios_version"]]),
    field("pci_domain", Count, Join, |g| {
        hex(g.details.pci.map(|p| p.domain), 4)
    })
    .valid2(v2::PCI_INFO)
    .not_in_templates()
    .about("PCI domain, hexadecimal")
    .identity()
    .smi(&[&["pci.domain"]]),
    field("pci_bus", Count, Join, |g| {
        hex(g.details.pci.map(|p| p.bus), 2)
    })
    .valid2(v2::PCI_INFO)
    .not_in_templates()
    .about("PCI bus, hexadecimal")
    .identity()
    .smi(&[&["pci.bus"]]),
    field("pci_device", Count, Join, |g| {
        hex(g.details.pci.map(|p| p.device), 2)
    })
    .valid2(v2::PCI_INFO)
    .not_in_templates()
    .about("PCI device, hexadecimal")
    .identity()
    .smi(&[&["pci.device"]]),
    field("pci_device_id", Count, Join, |g| {
        hex(g.details.pci.map(|p| p.device_id), 8)
    })
    .valid2(v2::PCI_INFO)
    .not_in_templates()
    .about("PCI device and vendor id, hexadecimal")
    .identity()
    .smi(&[&["pci.device_id"]]),
    field("pci_sub_device_id", Count, Join, |g| {
        hex(g.details.pci.map(|p| p.subsystem_id), 8)
    })
    .valid2(v2::PCI_INFO)
    .not_in_templates()
    .about("PCI subsystem id, hexadecimal")
    .identity()
    .smi(&[&["pci.sub_device_id"]]),
    field("compute_cap", Text, Join, |g| {
        g.details.compute_cap.map(|(a, b)| Value::Dotted(a, b))
    })
    .valid2(v2::COMPUTE_CAP)
    .not_in_templates()
    .about("CUDA compute capability, major.minor")
    .identity()
    .smi(&[&["compute_cap"]]),
    field("pcie_gen_max", Count, Max, |g| {
        int(g.details.pcie_link_gen_max)
    })
    .valid2(v2::PCIE_LINK_GEN_MAX)
    .not_in_templates()
    .about("maximum PCIe link generation of the GPU and system")
    .identity()
    .smi(&[&["pcie.link.gen.max"]]),
    field("pcie_width_max", Count, Max, |g| {
        int(g.details.pcie_link_width_max)
    })
    .valid2(v2::PCIE_LINK_WIDTH_MAX)
    .not_in_templates()
    .about("maximum PCIe link width, lanes")
    .identity()
    .smi(&[&["pcie.link.width.max"]]),
    field("power_default_limit", MilliWatts, Sum, |g| {
        mw(g.details.power_default_limit)
    })
    .valid2(v2::POWER_DEFAULT_LIMIT)
    .not_in_templates()
    .about("default power limit")
    .identity()
    .smi(&[&["power.default_limit", "gpu.power.default_limit"]]),
    field("power_min_limit", MilliWatts, Sum, |g| {
        mw(g.details.power_min_limit)
    })
    .valid2(v2::POWER_LIMIT_RANGE)
    .not_in_templates()
    .about("smallest power limit that can be set")
    .identity()
    .smi(&[&["power.min_limit", "gpu.power.min_limit"]]),
    field("power_max_limit", MilliWatts, Sum, |g| {
        mw(g.details.power_max_limit)
    })
    .valid2(v2::POWER_LIMIT_RANGE)
    .not_in_templates()
    .about("largest power limit that can be set")
    .identity()
    .smi(&[&["power.max_limit", "gpu.power.max_limit"]]),
    field("clock_event_reasons_supported", Text, Join, |g| {
        hex(g.details.clock_event_reasons_supported, 16)
    })
    .not_in_templates()
    .valid2(v2::CLOCK_EVENT_REASONS_SUPPORTED)
    .not_in_templates()
    .about("clock event reasons the GPU can report, NVML's bits")
    .identity()
    .smi(&[
        &["clocks_event_reasons.supported"],
        &["clocks_throttle_reasons.supported"],
    ]),
    field("power_instant", MilliWatts, Sum, |g| {
        mw(g.details.power_draw_instant)
    })
    .valid2(v2::POWER_DRAW_INSTANT)
    .not_in_templates()
    .about("instantaneous power draw")
    .smi(&[&["power.draw.instant", "gpu.power.draw.instant"]]),
    field("temp_mem", Celsius, Max, |g| {
        g.details.temp_memory_c.map(|t| Value::Signed(t.into()))
    })
    .valid2(v2::TEMP_MEMORY)
    .not_in_templates()
    .about("memory (HBM) temperature")
    .smi(&[&["temperature.memory"]]),
    field("clock_video", MegaHertz, Max, |g| {
        mhz(g.details.clock_video)
    })
    .valid2(v2::CLOCK_VIDEO)
    .not_in_templates()
    .about("video clock")
    .smi(&[&["clocks.current.video", "clocks.video"]]),
    field("clock_app_gr", MegaHertz, Max, |g| {
        mhz(g.details.clock_app.0)
    })
    .valid2(v2::CLOCK_APP_GRAPHICS)
    .not_in_templates()
    .about("applications graphics clock")
    .smi(&[&["clocks.applications.graphics", "clocks.applications.gr"]]),
    field("clock_app_mem", MegaHertz, Max, |g| {
        mhz(g.details.clock_app.1)
    })
    .valid2(v2::CLOCK_APP_MEM)
    .not_in_templates()
    .about("applications memory clock")
    .smi(&[&["clocks.applications.memory", "clocks.applications.mem"]]),
    field("clock_default_app_gr", MegaHertz, Max, |g| {
        mhz(g.details.clock_default_app.0)
    })
    .valid2(v2::CLOCK_DEFAULT_APP_GRAPHICS)
    .not_in_templates()
    .about("default applications graphics clock")
    .smi(&[&[
        "clocks.default_applications.graphics",
        "clocks.default_applications.gr",
    ]]),
    field("clock_default_app_mem", MegaHertz, Max, |g| {
        mhz(g.details.clock_default_app.1)
    })
    .valid2(v2::CLOCK_DEFAULT_APP_MEM)
    .not_in_templates()
    .about("default applications memory clock")
    .smi(&[&[
        "clocks.default_applications.memory",
        "clocks.default_applications.mem",
    ]]),
    field("persistence_mode", Text, Join, |g| {
        enabled(g.details.persistence_mode)
    })
    .valid2(v2::PERSISTENCE_MODE)
    .not_in_templates()
    .about("persistence mode: Enabled or Disabled")
    .smi(&[&["persistence_mode"]]),
    field("compute_mode", Text, Join, |g| {
        g.details.compute_mode.map(|m| Value::Name(m.name()))
    })
    .valid2(v2::COMPUTE_MODE)
    .not_in_templates()
    .about("compute mode: Default, Exclusive_Thread, Prohibited or Exclusive_Process")
    .smi(&[&["compute_mode"]]),
    field("display_mode", Text, Join, |g| {
        enabled(g.details.display_mode)
    })
    .valid2(v2::DISPLAY_MODE)
    .not_in_templates()
    .about("whether a display may be attached: Enabled or Disabled")
    .smi(&[&["display_mode"]]),
    field("display_active", Text, Join, |g| {
        enabled(g.details.display_active)
    })
    .valid2(v2::DISPLAY_ACTIVE)
    .not_in_templates()
    .about("whether a display is initialised: Enabled or Disabled")
    .smi(&[&["display_active"]]),
    field("ecc_mode", Text, Join, |g| {
        enabled(g.details.ecc_mode.map(|m| m.current))
    })
    .valid2(v2::ECC_MODE)
    .not_in_templates()
    .about("ECC mode now: Enabled or Disabled")
    .smi(&[&["ecc.mode.current"]]),
    field("ecc_mode_pending", Text, Join, |g| {
        enabled(g.details.ecc_mode.map(|m| m.pending))
    })
    .valid2(v2::ECC_MODE)
    .not_in_templates()
    .about("ECC mode after the next reboot: Enabled or Disabled")
    .smi(&[&["ecc.mode.pending"]]),
    field("mig_mode", Text, Join, |g| {
        enabled(g.mig_mode.map(|m| m.current))
    })
    .valid(v::MIG_MODE)
    .not_in_templates()
    .about("MIG mode now: Enabled or Disabled")
    .smi(&[&["mig.mode.current"]]),
    field("mig_mode_pending", Text, Join, |g| {
        enabled(g.mig_mode.map(|m| m.pending))
    })
    .valid(v::MIG_MODE)
    .not_in_templates()
    .about("MIG mode after the next GPU reset: Enabled or Disabled")
    .smi(&[&["mig.mode.pending"]]),
    field("accounting_mode", Text, Join, |g| {
        enabled(g.details.accounting_mode)
    })
    .valid2(v2::ACCOUNTING_MODE)
    .not_in_templates()
    .about("accounting mode: Enabled or Disabled")
    .smi(&[&["accounting.mode"]]),
    field("accounting_buffer_size", Count, Max, |g| {
        int(g.details.accounting_buffer_size)
    })
    .valid2(v2::ACCOUNTING_BUFFER_SIZE)
    .not_in_templates()
    .about("processes the accounting buffer holds")
    .smi(&[&["accounting.buffer_size"]]),
    field("ecc_corrected_aggregate", Count, Sum, |g| {
        int(g.details.ecc_corrected_aggregate)
    })
    .valid2(v2::ECC_CORRECTED_AGGREGATE)
    .not_in_templates()
    .about("corrected ECC errors over the GPU's life")
    .smi(&[&["ecc.errors.corrected.aggregate.total"]]),
    field("ecc_uncorrected_aggregate", Count, Sum, |g| {
        int(g.details.ecc_uncorrected_aggregate)
    })
    .valid2(v2::ECC_UNCORRECTED_AGGREGATE)
    .not_in_templates()
    .about("uncorrected ECC errors over the GPU's life")
    .smi(&[&["ecc.errors.uncorrected.aggregate.total"]]),
    field("retired_pages_sbe", Count, Sum, |g| {
        int(g.details.retired_pages.map(|r| r.single_bit))
    })
    .valid2(v2::RETIRED_PAGES)
    .not_in_templates()
    .about("pages retired for multiple single-bit ECC errors")
    .smi(&[&["retired_pages.single_bit_ecc.count", "retired_pages.sbe"]]),
    field("retired_pages_dbe", Count, Sum, |g| {
        int(g.details.retired_pages.map(|r| r.double_bit))
    })
    .valid2(v2::RETIRED_PAGES)
    .not_in_templates()
    .about("pages retired for a double-bit ECC error")
    .smi(&[&["retired_pages.double_bit.count", "retired_pages.dbe"]]),
    field("retired_pages_pending", Text, Join, |g| {
        yes(g.details.retired_pages_pending)
    })
    .valid2(v2::RETIRED_PAGES_PENDING)
    .not_in_templates()
    .about("whether pages wait to be retired at the next reboot: Yes or No")
    .smi(&[&["retired_pages.pending"]]),
    field("remapped_rows_correctable", Count, Sum, |g| {
        int(g.details.remapped_rows.map(|r| r.correctable))
    })
    .valid2(v2::REMAPPED_ROWS)
    .not_in_templates()
    .about("rows remapped for correctable errors")
    .smi(&[&["remapped_rows.correctable", "remapped_rows.sbe"]]),
    field("remapped_rows_uncorrectable", Count, Sum, |g| {
        int(g.details.remapped_rows.map(|r| r.uncorrectable))
    })
    .valid2(v2::REMAPPED_ROWS)
    .not_in_templates()
    .about("rows remapped for uncorrectable errors")
    .smi(&[&["remapped_rows.uncorrectable", "remapped_rows.dbe"]]),
    field("remapped_rows_pending", Text, Join, |g| {
        yes(g.details.remapped_rows.map(|r| r.pending))
    })
    .valid2(v2::REMAPPED_ROWS)
    .not_in_templates()
    .about("whether a remapping waits for a GPU reset: Yes or No")
    .smi(&[&["remapped_rows.pending"]]),
    field("remapped_rows_failure", Text, Join, |g| {
        yes(g.details.remapped_rows.map(|r| r.failure))
    })
    .valid2(v2::REMAPPED_ROWS)
    .not_in_templates()
    .about("whether a remapping failed: Yes or No")
    .smi(&[&["remapped_rows.failure"]]),
    field("encoder_sessions", Count, Sum, |g| {
        int(g.details.encoder_stats.map(|e| e.sessions))
    })
    .valid2(v2::ENCODER_STATS)
    .not_in_templates()
    .about("active encoder sessions")
    .smi(&[&["encoder.stats.sessionCount"]]),
    field("encoder_fps", Count, Mean, |g| {
        int(g.details.encoder_stats.map(|e| e.average_fps))
    })
    .valid2(v2::ENCODER_STATS)
    .not_in_templates()
    .about("average encoder frames per second")
    .smi(&[&["encoder.stats.averageFps"]]),
    field("encoder_latency", Count, Mean, |g| {
        int(g.details.encoder_stats.map(|e| e.average_latency_us))
    })
    .valid2(v2::ENCODER_STATS)
    .not_in_templates()
    .about("average encoder latency, microseconds")
    .smi(&[&["encoder.stats.averageLatency"]]),
    field("ecc_corrected_volatile_l1_cache", Count, Sum, |g| {
        int(g.details.ecc_by_location[0])
    })
    .not_in_templates()
    .valid2(v2::ECC_CORRECTED_VOLATILE_L1_CACHE)
    .about("corrected volatile ECC errors in the L1 cache")
    .smi(&[&["ecc.errors.corrected.volatile.l1_cache"]]),
    field("ecc_corrected_volatile_l2_cache", Count, Sum, |g| {
        int(g.details.ecc_by_location[1])
    })
    .not_in_templates()
    .valid2(v2::ECC_CORRECTED_VOLATILE_L2_CACHE)
    .about("corrected volatile ECC errors in the L2 cache")
    .smi(&[&["ecc.errors.corrected.volatile.l2_cache"]]),
    field("ecc_corrected_volatile_device_memory", Count, Sum, |g| {
        int(g.details.ecc_by_location[2])
    })
    .not_in_templates()
    .valid2(v2::ECC_CORRECTED_VOLATILE_DEVICE_MEMORY)
    .about("corrected volatile ECC errors in the device memory (DRAM)")
    .smi(&[
        &["ecc.errors.corrected.volatile.device_memory"],
        &["ecc.errors.corrected.volatile.dram"],
    ]),
    field("ecc_corrected_volatile_register_file", Count, Sum, |g| {
        int(g.details.ecc_by_location[3])
    })
    .not_in_templates()
    .valid2(v2::ECC_CORRECTED_VOLATILE_REGISTER_FILE)
    .about("corrected volatile ECC errors in the register file")
    .smi(&[&["ecc.errors.corrected.volatile.register_file"]]),
    field("ecc_corrected_volatile_texture_memory", Count, Sum, |g| {
        int(g.details.ecc_by_location[4])
    })
    .not_in_templates()
    .valid2(v2::ECC_CORRECTED_VOLATILE_TEXTURE_MEMORY)
    .about("corrected volatile ECC errors in the texture memory")
    .smi(&[&["ecc.errors.corrected.volatile.texture_memory"]]),
    field("ecc_corrected_volatile_cbu", Count, Sum, |g| {
        int(g.details.ecc_by_location[5])
    })
    .not_in_templates()
    .valid2(v2::ECC_CORRECTED_VOLATILE_CBU)
    .about("corrected volatile ECC errors in the CBU")
    .smi(&[&["ecc.errors.corrected.volatile.cbu"]]),
    field("ecc_corrected_volatile_sram", Count, Sum, |g| {
        int(g.details.ecc_by_location[6])
    })
    .not_in_templates()
    .valid2(v2::ECC_CORRECTED_VOLATILE_SRAM)
    .about("corrected volatile ECC errors in the SRAM")
    .smi(&[&["ecc.errors.corrected.volatile.sram"]]),
    field("ecc_corrected_aggregate_l1_cache", Count, Sum, |g| {
        int(g.details.ecc_by_location[7])
    })
    .not_in_templates()
    .valid2(v2::ECC_CORRECTED_AGGREGATE_L1_CACHE)
    .about("corrected aggregate ECC errors in the L1 cache")
    .smi(&[&["ecc.errors.corrected.aggregate.l1_cache"]]),
    field("ecc_corrected_aggregate_l2_cache", Count, Sum, |g| {
        int(g.details.ecc_by_location[8])
    })
    .not_in_templates()
    .valid2(v2::ECC_CORRECTED_AGGREGATE_L2_CACHE)
    .about("corrected aggregate ECC errors in the L2 cache")
    .smi(&[&["ecc.errors.corrected.aggregate.l2_cache"]]),
    field("ecc_corrected_aggregate_device_memory", Count, Sum, |g| {
        int(g.details.ecc_by_location[9])
    })
    .not_in_templates()
    .valid2(v2::ECC_CORRECTED_AGGREGATE_DEVICE_MEMORY)
    .about("corrected aggregate ECC errors in the device memory (DRAM)")
    .smi(&[
        &["ecc.errors.corrected.aggregate.device_memory"],
        &["ecc.errors.corrected.aggregate.dram"],
    ]),
    field("ecc_corrected_aggregate_register_file", Count, Sum, |g| {
        int(g.details.ecc_by_location[10])
    })
    .not_in_templates()
    .valid2(v2::ECC_CORRECTED_AGGREGATE_REGISTER_FILE)
    .about("corrected aggregate ECC errors in the register file")
    .smi(&[&["ecc.errors.corrected.aggregate.register_file"]]),
    field("ecc_corrected_aggregate_texture_memory", Count, Sum, |g| {
        int(g.details.ecc_by_location[11])
    })
    .not_in_templates()
    .valid2(v2::ECC_CORRECTED_AGGREGATE_TEXTURE_MEMORY)
    .about("corrected aggregate ECC errors in the texture memory")
    .smi(&[&["ecc.errors.corrected.aggregate.texture_memory"]]),
    field("ecc_corrected_aggregate_cbu", Count, Sum, |g| {
        int(g.details.ecc_by_location[12])
    })
    .not_in_templates()
    .valid2(v2::ECC_CORRECTED_AGGREGATE_CBU)
    .about("corrected aggregate ECC errors in the CBU")
    .smi(&[&["ecc.errors.corrected.aggregate.cbu"]]),
    field("ecc_corrected_aggregate_sram", Count, Sum, |g| {
        int(g.details.ecc_by_location[13])
    })
    .not_in_templates()
    .valid2(v2::ECC_CORRECTED_AGGREGATE_SRAM)
    .about("corrected aggregate ECC errors in the SRAM")
    .smi(&[&["ecc.errors.corrected.aggregate.sram"]]),
    field("ecc_uncorrected_volatile_l1_cache", Count, Sum, |g| {
        int(g.details.ecc_by_location[14])
    })
    .not_in_templates()
    .valid2(v2::ECC_UNCORRECTED_VOLATILE_L1_CACHE)
    .about("uncorrected volatile ECC errors in the L1 cache")
    .smi(&[&["ecc.errors.uncorrected.volatile.l1_cache"]]),
    field("ecc_uncorrected_volatile_l2_cache", Count, Sum, |g| {
        int(g.details.ecc_by_location[15])
    })
    .not_in_templates()
    .valid2(v2::ECC_UNCORRECTED_VOLATILE_L2_CACHE)
    .about("uncorrected volatile ECC errors in the L2 cache")
    .smi(&[&["ecc.errors.uncorrected.volatile.l2_cache"]]),
    field("ecc_uncorrected_volatile_device_memory", Count, Sum, |g| {
        int(g.details.ecc_by_location[16])
    })
    .not_in_templates()
    .valid2(v2::ECC_UNCORRECTED_VOLATILE_DEVICE_MEMORY)
    .about("uncorrected volatile ECC errors in the device memory (DRAM)")
    .smi(&[
        &["ecc.errors.uncorrected.volatile.device_memory"],
        &["ecc.errors.uncorrected.volatile.dram"],
    ]),
    field("ecc_uncorrected_volatile_register_file", Count, Sum, |g| {
        int(g.details.ecc_by_location[17])
    })
    .not_in_templates()
    .valid2(v2::ECC_UNCORRECTED_VOLATILE_REGISTER_FILE)
    .about("uncorrected volatile ECC errors in the register file")
    .smi(&[&["ecc.errors.uncorrected.volatile.register_file"]]),
    field("ecc_uncorrected_volatile_texture_memory", Count, Sum, |g| {
        int(g.details.ecc_by_location[18])
    })
    .not_in_templates()
    .valid2(v2::ECC_UNCORRECTED_VOLATILE_TEXTURE_MEMORY)
    .about("uncorrected volatile ECC errors in the texture memory")
    .smi(&[&["ecc.errors.uncorrected.volatile.texture_memory"]]),
    field("ecc_uncorrected_volatile_cbu", Count, Sum, |g| {
        int(g.details.ecc_by_location[19])
    })
    .not_in_templates()
    .valid2(v2::ECC_UNCORRECTED_VOLATILE_CBU)
    .about("uncorrected volatile ECC errors in the CBU")
    .smi(&[&["ecc.errors.uncorrected.volatile.cbu"]]),
    field("ecc_uncorrected_volatile_sram", Count, Sum, |g| {
        int(g.details.ecc_by_location[20])
    })
    .not_in_templates()
    .valid2(v2::ECC_UNCORRECTED_VOLATILE_SRAM)
    .about("uncorrected volatile ECC errors in the SRAM")
    .smi(&[&["ecc.errors.uncorrected.volatile.sram"]]),
    field("ecc_uncorrected_aggregate_l1_cache", Count, Sum, |g| {
        int(g.details.ecc_by_location[21])
    })
    .not_in_templates()
    .valid2(v2::ECC_UNCORRECTED_AGGREGATE_L1_CACHE)
    .about("uncorrected aggregate ECC errors in the L1 cache")
    .smi(&[&["ecc.errors.uncorrected.aggregate.l1_cache"]]),
    field("ecc_uncorrected_aggregate_l2_cache", Count, Sum, |g| {
        int(g.details.ecc_by_location[22])
    })
    .not_in_templates()
    .valid2(v2::ECC_UNCORRECTED_AGGREGATE_L2_CACHE)
    .about("uncorrected aggregate ECC errors in the L2 cache")
    .smi(&[&["ecc.errors.uncorrected.aggregate.l2_cache"]]),
    field("ecc_uncorrected_aggregate_device_memory", Count, Sum, |g| {
        int(g.details.ecc_by_location[23])
    })
    .not_in_templates()
    .valid2(v2::ECC_UNCORRECTED_AGGREGATE_DEVICE_MEMORY)
    .about("uncorrected aggregate ECC errors in the device memory (DRAM)")
    .smi(&[
        &["ecc.errors.uncorrected.aggregate.device_memory"],
        &["ecc.errors.uncorrected.aggregate.dram"],
    ]),
    field("ecc_uncorrected_aggregate_register_file", Count, Sum, |g| {
        int(g.details.ecc_by_location[24])
    })
    .not_in_templates()
    .valid2(v2::ECC_UNCORRECTED_AGGREGATE_REGISTER_FILE)
    .about("uncorrected aggregate ECC errors in the register file")
    .smi(&[&["ecc.errors.uncorrected.aggregate.register_file"]]),
    field(
        "ecc_uncorrected_aggregate_texture_memory",
        Count,
        Sum,
        |g| int(g.details.ecc_by_location[25]),
    )
    .not_in_templates()
    .valid2(v2::ECC_UNCORRECTED_AGGREGATE_TEXTURE_MEMORY)
    .about("uncorrected aggregate ECC errors in the texture memory")
    .smi(&[&["ecc.errors.uncorrected.aggregate.texture_memory"]]),
    field("ecc_uncorrected_aggregate_cbu", Count, Sum, |g| {
        int(g.details.ecc_by_location[26])
    })
    .not_in_templates()
    .valid2(v2::ECC_UNCORRECTED_AGGREGATE_CBU)
    .about("uncorrected aggregate ECC errors in the CBU")
    .smi(&[&["ecc.errors.uncorrected.aggregate.cbu"]]),
    field("ecc_uncorrected_aggregate_sram", Count, Sum, |g| {
        int(g.details.ecc_by_location[27])
    })
    .not_in_templates()
    .valid2(v2::ECC_UNCORRECTED_AGGREGATE_SRAM)
    .about("uncorrected aggregate ECC errors in the SRAM")
    .smi(&[&["ecc.errors.uncorrected.aggregate.sram"]]),
    field("inforom_img", Text, Join, |g| text(g.details.inforom_img))
        .valid2(v2::INFOROM_IMG)
        .not_in_templates()
        .about("infoROM image version")
        .identity()
        .smi(&[&["inforom.img", "inforom.image"]]),
    field("inforom_oem", Text, Join, |g| text(g.details.inforom_oem))
        .valid2(v2::INFOROM_OEM)
        .not_in_templates()
        .about("version of the infoROM's OEM configuration object")
        .identity()
        .smi(&[&["inforom.oem"]]),
    field("inforom_ecc", Text, Join, |g| text(g.details.inforom_ecc))
        .valid2(v2::INFOROM_ECC)
        .not_in_templates()
        .about("version of the infoROM's ECC recording object")
        .identity()
        .smi(&[&["inforom.ecc"]]),
    field("inforom_pwr", Text, Join, |g| text(g.details.inforom_pwr))
        .valid2(v2::INFOROM_PWR)
        .not_in_templates()
        .about("version of the infoROM's power management object")
        .identity()
        .smi(&[&["inforom.pwr", "inforom.power"]]),
    field("gom", Text, Join, |g| {
        g.details.gom.map(|m| Value::Name(m.current.name()))
    })
    .valid2(v2::GOM)
    .not_in_templates()
    .about("GPU operation mode now: All On, Compute or Low Double Precision")
    .smi(&[&["gom.current", "gpu_operation_mode.current"]]),
    field("gom_pending", Text, Join, |g| {
        g.details.gom.map(|m| Value::Name(m.pending.name()))
    })
    .valid2(v2::GOM)
    .not_in_templates()
    .about("GPU operation mode after the next reboot")
    .smi(&[&["gom.pending", "gpu_operation_mode.pending"]]),
    field("fabric_state", Text, Join, |g| {
        g.details.fabric?.state_name().map(Value::Name)
    })
    .valid2(v2::FABRIC)
    .not_in_templates()
    .about("NVLink fabric registration: Not Supported, Not Started, In Progress or Completed")
    .smi(&[&["fabric.state"]]),
    field("fabric_status", Text, Join, |g| {
        g.details.fabric?.status_name().map(Value::Name)
    })
    .valid2(v2::FABRIC)
    .not_in_templates()
    .about("outcome of the fabric registration, e.g. Success")
    .smi(&[&["fabric.status"]]),
    field("gpu_recovery_action", Text, Join, |g| {
        g.details.recovery_action.map(|a| Value::Name(a.name()))
    })
    .valid2(v2::RECOVERY_ACTION)
    .not_in_templates()
    .about(
        "what the driver recommends to recover the GPU: None, GPU Reset, Node Reboot, \
         Drain P2P or Drain and Reset",
    )
    .smi(&[&["gpu_recovery_action"]]),
    reason(
        "gpu_idle",
        reason::GPU_IDLE,
        &[
            &["clocks_event_reasons.gpu_idle"],
            &["clocks_throttle_reasons.gpu_idle"],
        ],
    ),
    reason(
        "applications_clocks_setting",
        reason::APPLICATIONS_CLOCKS_SETTING,
        &[
            &["clocks_event_reasons.applications_clocks_setting"],
            &["clocks_throttle_reasons.applications_clocks_setting"],
        ],
    ),
    reason(
        "sw_power_cap",
        reason::SW_POWER_CAP,
        &[
            &["clocks_event_reasons.sw_power_cap"],
            &["clocks_throttle_reasons.sw_power_cap"],
        ],
    ),
    reason(
        "hw_slowdown",
        reason::HW_SLOWDOWN,
        &[
            &["clocks_event_reasons.hw_slowdown"],
            &["clocks_throttle_reasons.hw_slowdown"],
        ],
    ),
    reason(
        "hw_thermal_slowdown",
        reason::HW_THERMAL_SLOWDOWN,
        &[
            &["clocks_event_reasons.hw_thermal_slowdown"],
            &["clocks_throttle_reasons.hw_thermal_slowdown"],
        ],
    ),
    reason(
        "hw_power_brake_slowdown",
        reason::HW_POWER_BRAKE_SLOWDOWN,
        &[
            &["clocks_event_reasons.hw_power_brake_slowdown"],
            &["clocks_throttle_reasons.hw_power_brake_slowdown"],
        ],
    ),
    reason(
        "sw_thermal_slowdown",
        reason::SW_THERMAL_SLOWDOWN,
        &[
            &["clocks_event_reasons.sw_thermal_slowdown"],
            &["clocks_throttle_reasons.sw_thermal_slowdown"],
        ],
    ),
    reason(
        "sync_boost",
        reason::SYNC_BOOST,
        &[
            &["clocks_event_reasons.sync_boost"],
            &["clocks_throttle_reasons.sync_boost"],
        ],
    ),
    counter(
        0,
        v3::CLOCKS_EVENT_US_SW_POWER_CAP,
        &[&["clocks_event_reasons_counters.sw_power_cap"]],
    ),
    counter(
        1,
        v3::CLOCKS_EVENT_US_SYNC_BOOST,
        &[&["clocks_event_reasons_counters.sync_boost"]],
    ),
    counter(
        2,
        v3::CLOCKS_EVENT_US_SW_THERMAL_SLOWDOWN,
        &[&["clocks_event_reasons_counters.sw_thermal_slowdown"]],
    ),
    counter(
        3,
        v3::CLOCKS_EVENT_US_HW_THERMAL_SLOWDOWN,
        &[&["clocks_event_reasons_counters.hw_thermal_slowdown"]],
    ),
    counter(
        4,
        v3::CLOCKS_EVENT_US_HW_POWER_BRAKE_SLOWDOWN,
        &[&["clocks_event_reasons_counters.hw_power_brake_slowdown"]],
    ),
    field("pcie_gen_gpumax", Count, Max, |g| {
        int(g.details.pcie_link_gen_gpumax)
    })
    .valid3(v3::PCIE_LINK_GEN_GPUMAX)
    .not_in_templates()
    .about("maximum PCIe link generation of the GPU alone, whatever the slot")
    .smi(&[&["pcie.link.gen.gpumax"]]),
    field("util_jpeg", Percent, Mean, |g| int(g.details.util_jpeg_pct))
        .valid3(v3::UTIL_JPEG)
        .not_in_templates()
        .about("JPEG decoder (NVJPG) utilisation")
        .smi(&[&["utilization.jpeg"]]),
    field("util_ofa", Percent, Mean, |g| int(g.details.util_ofa_pct))
        .valid3(v3::UTIL_OFA)
        .not_in_templates()
        .about("optical flow accelerator (OFA) utilisation")
        .smi(&[&["utilization.ofa"]]),
];

/// The field of clock event reason counter `i` of [`crate::details::Details`]
/// (`clocks_event_us_NAME`): time the reason held the clocks down since the driver
/// loaded, in microseconds as nvidia-smi prints it.
const fn counter(i: usize, bit: u64, smi: &'static [&'static [&'static str]]) -> Field {
    let get: Getter = match i {
        0 => |g| int(g.details.clocks_event_counters_us[0]),
        1 => |g| int(g.details.clocks_event_counters_us[1]),
        2 => |g| int(g.details.clocks_event_counters_us[2]),
        3 => |g| int(g.details.clocks_event_counters_us[3]),
        _ => |g| int(g.details.clocks_event_counters_us[4]),
    };
    field(COUNTER_NAMES[i], Unit::Microseconds, Aggregate::Sum, get)
        .valid3(bit)
        .not_in_templates()
        .about(COUNTER_ABOUT[i])
        .smi(smi)
}

const COUNTER_NAMES: [&str; 5] = [
    "clocks_event_us_sw_power_cap",
    "clocks_event_us_sync_boost",
    "clocks_event_us_sw_thermal_slowdown",
    "clocks_event_us_hw_thermal_slowdown",
    "clocks_event_us_hw_power_brake_slowdown",
];

const COUNTER_ABOUT: [&str; 5] = [
    "time the software power cap held the clocks down since the driver loaded",
    "time the clocks were held down to match the sync boost group",
    "time software thermal capping held the clocks down since the driver loaded",
    "time hardware thermal slowdown held the clocks down since the driver loaded",
    "time the external power brake held the clocks down since the driver loaded",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::FIELDS;
    use std::collections::BTreeSet;

    use crate::fields::Tier;

    use gpupeek_shm::layout::GpuState;
    use gpupeek_shm::GpuRecord;

    fn every_bit(state: GpuState) -> GpuRecord {
        GpuRecord {
            state: state as u32,
            valid: u64::MAX,
            valid2: u64::MAX,
            valid3: u64::MAX,
            valid4: u64::MAX,
            power_limit_mw: 1,
            fabric_state: 3,
            // A fabric health summary, and each condition answered.
            fabric_health_summary: 1,
            fabric_health_mask: 0x1155,
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
            for bit in (0..64).map(|i| 1u64 << i).filter(|b| f.valid3 & b != 0) {
                let without = GpuRecord {
                    valid3: all.valid3 & !bit,
                    ..all
                };
                assert!(
                    (f.get)(&Gpu::new(&without)).is_none(),
                    "{}: valid3 {bit:#x}",
                    f.name
                );
                let deprecated = GpuRecord {
                    deprecated3: bit,
                    ..without
                };
                assert!(f.deprecated(&Gpu::new(&deprecated)), "{}", f.name);
            }
            for bit in (0..64).map(|i| 1u64 << i).filter(|b| f.valid4 & b != 0) {
                let without = GpuRecord {
                    valid4: all.valid4 & !bit,
                    ..all
                };
                assert!(
                    (f.get)(&Gpu::new(&without)).is_none(),
                    "{}: valid4 {bit:#x}",
                    f.name
                );
            }
            for bit in (0..64).map(|i| 1u64 << i).filter(|b| f.valid2 & b != 0) {
                let without = GpuRecord {
                    valid2: all.valid2 & !bit,
                    ..all
                };
                assert!(
                    (f.get)(&Gpu::new(&without)).is_none(),
                    "{}: valid2 {bit:#x}",
                    f.name
                );
                let deprecated = GpuRecord {
                    deprecated2: bit,
                    ..without
                };
                assert!(f.deprecated(&Gpu::new(&deprecated)), "{}", f.name);
            }
            let others = GpuRecord {
                valid: f.valid,
                valid2: f.valid2,
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
