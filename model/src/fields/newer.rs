//! The field table's entries for nvidia-smi 590's newer `--query-gpu` fields (ABI 1.6's
//! `valid3` bits), after `table.rs`'s. Each prints as nvidia-smi 590.48.01 prints it
//! for an H100 and 595.71.05 for a GeForce RTX 4080 SUPER (nvidia_gpu_exporter's
//! `internal/captures`): `46`, `0x3`, `Enabled`, `HMM`, `valid`, `2560`, `0`,
//! `00000000-0000-0000-0000-000000000000`, `No`, `0 MiB`.

use super::table::{enabled, hex, int, text, yes};
use super::Unit::{Bytes, Celsius, Count, MilliWatts, Percent, Text};
use super::{field, Aggregate, Field, Getter, Value};
use crate::details::{FabricHealth, RemapHistogram};
use crate::gpu::Gpu;
use gpupeek_shm::layout::gpu_valid3 as v3;

fn remap(g: &Gpu, get: fn(&RemapHistogram) -> u32) -> Option<Value<'static>> {
    int(g.details.newer.remap_histogram.as_ref().map(get))
}

/// The entries, in the order templates and the man page list them.
pub(super) const FIELDS: &[Field] = &[
    field("temp_tlimit", Celsius, Aggregate::Max, |g| {
        g.details
            .newer
            .temp_tlimit_c
            .map(|t| Value::Signed(t.into()))
    })
    .valid3(v3::TEMP_TLIMIT)
    .not_in_templates()
    .about("thermal margin: degrees below the nearest slowdown threshold (T.Limit)")
    .smi(&[&["temperature.gpu.tlimit"]]),
    field("pci_base_class", Count, Aggregate::Join, |g| {
        hex(g.details.newer.pci_class.map(|c| c.0), 1)
    })
    .valid3(v3::PCI_CLASS)
    .not_in_templates()
    .about("PCI base class code, hexadecimal")
    .smi(&[&["pci.baseClass"]]),
    field("pci_sub_class", Count, Aggregate::Join, |g| {
        hex(g.details.newer.pci_class.map(|c| c.1), 1)
    })
    .valid3(v3::PCI_CLASS)
    .not_in_templates()
    .about("PCI sub class code, hexadecimal")
    .smi(&[&["pci.subClass"]]),
    field("gsp_mode", Text, Aggregate::Join, |g| {
        enabled(g.details.newer.gsp_mode.map(|m| m.0))
    })
    .valid3(v3::GSP_MODE)
    .not_in_templates()
    .about("whether the GPU runs its GSP firmware: Enabled or Disabled")
    .smi(&[&["gsp.mode.current"]]),
    field("gsp_mode_default", Text, Aggregate::Join, |g| {
        enabled(g.details.newer.gsp_mode.map(|m| m.1))
    })
    .valid3(v3::GSP_MODE)
    .not_in_templates()
    .about("whether the GPU runs its GSP firmware by default")
    .smi(&[&["gsp.mode.default"]]),
    field("addressing_mode", Text, Aggregate::Join, |g| {
        g.details
            .newer
            .addressing_mode
            .map(|m| Value::Name(m.name()))
    })
    .valid3(v3::ADDRESSING_MODE)
    .not_in_templates()
    .about("how the GPU addresses system memory: HMM, ATS or None")
    .smi(&[&["addressing_mode"]]),
    field("c2c_mode", Text, Aggregate::Join, |g| {
        enabled(g.details.newer.c2c_mode)
    })
    .valid3(v3::C2C_MODE)
    .not_in_templates()
    .about("whether the GPU is in chip-to-chip (C2C) mode: Enabled or Disabled")
    .smi(&[&["c2c.mode"]]),
    field("inforom_checksum", Text, Aggregate::Join, |g| {
        let valid = g.details.newer.inforom_valid?;
        Some(Value::Name(if valid { "valid" } else { "invalid" }))
    })
    .valid3(v3::INFOROM_CHECKSUM)
    .not_in_templates()
    .about("whether the infoROM checksum validates: valid or invalid")
    .smi(&[&["inforom.checksum_validation"]]),
    // nvidia-smi 590's --help-query-gpu: 'Either "Supported" or "[Not Supported]"'.
    field("power_management", Text, Aggregate::Join, |g| {
        let on = g.details.newer.power_management?;
        Some(Value::Name(if on {
            "Supported"
        } else {
            "[Not Supported]"
        }))
    })
    .valid3(v3::POWER_MANAGEMENT)
    .not_in_templates()
    .about("whether power management is on: Supported or [Not Supported]")
    .smi(&[&["power.management"]]),
    field("remapped_rows_hist_max", Count, Aggregate::Sum, |g| {
        remap(g, |h| h.max)
    })
    .valid3(v3::REMAPPED_ROWS_HISTOGRAM)
    .not_in_templates()
    .about("memory banks with every spare row left for remapping")
    .smi(&[&["remapped_rows.histogram.max"]]),
    field("remapped_rows_hist_high", Count, Aggregate::Sum, |g| {
        remap(g, |h| h.high)
    })
    .valid3(v3::REMAPPED_ROWS_HISTOGRAM)
    .not_in_templates()
    .about("memory banks with high remap availability")
    .smi(&[&["remapped_rows.histogram.high"]]),
    field("remapped_rows_hist_partial", Count, Aggregate::Sum, |g| {
        remap(g, |h| h.partial)
    })
    .valid3(v3::REMAPPED_ROWS_HISTOGRAM)
    .not_in_templates()
    .about("memory banks with partial remap availability")
    .smi(&[&["remapped_rows.histogram.partial"]]),
    field("remapped_rows_hist_low", Count, Aggregate::Sum, |g| {
        remap(g, |h| h.low)
    })
    .valid3(v3::REMAPPED_ROWS_HISTOGRAM)
    .not_in_templates()
    .about("memory banks with low remap availability")
    .smi(&[&["remapped_rows.histogram.low"]]),
    field("remapped_rows_hist_none", Count, Aggregate::Sum, |g| {
        remap(g, |h| h.none)
    })
    .valid3(v3::REMAPPED_ROWS_HISTOGRAM)
    .not_in_templates()
    .about("memory banks with no spare row left for remapping")
    .smi(&[&["remapped_rows.histogram.none"]]),
    field("fabric_clique_id", Count, Aggregate::Join, |g| {
        int(g.details.newer.fabric_clique.map(|c| c.0))
    })
    .valid3(v3::FABRIC_CLIQUE)
    .not_in_templates()
    .about("id of the NVLink fabric clique the GPU belongs to")
    .smi(&[&["fabric.cliqueId"]]),
    field("fabric_cluster_uuid", Text, Aggregate::Join, |g| {
        g.details.newer.fabric_clique.map(|c| Value::Uuid(c.1))
    })
    .valid3(v3::FABRIC_CLIQUE)
    .not_in_templates()
    .about("UUID of the NVLink fabric cluster the GPU belongs to")
    .smi(&[&["fabric.clusterUuid"]]),
    field("fabric_health", Text, Aggregate::Join, |g| {
        health(g, |h| h.summary_name())
    })
    .valid3(v3::FABRIC_HEALTH)
    .not_in_templates()
    .about("NVLink fabric health: Healthy, Unhealthy or Limited Capacity")
    .smi(&[&["fabric.health.summary"]]),
    condition(
        "fabric_health_bandwidth",
        0,
        "NVLink fabric bandwidth: Full or Degraded",
        &[&["fabric.health.bandwidth"]],
    ),
    condition(
        "fabric_health_route_recovery",
        2,
        "whether an NVLink fabric route recovery is in progress: True or False",
        &[&["fabric.health.route_recovery_in_progress"]],
    ),
    condition(
        "fabric_health_route_unhealthy",
        4,
        "whether an NVLink fabric route is unhealthy: True or False",
        &[&["fabric.health.route_unhealthy"]],
    ),
    condition(
        "fabric_health_access_timeout",
        6,
        "whether the fabric recovers from an access timeout: True or False",
        &[&["fabric.health.access_timeout_recovery"]],
    ),
    field("fabric_health_configuration", Text, Aggregate::Join, |g| {
        health(g, |h| {
            h.summary_name()?;
            // nvml.h's NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_* values.
            Some(match (h.mask >> 8) & 0xF {
                1 => "None",
                2 => "Incorrect SysGuid",
                3 => "Incorrect Chassis SN",
                4 => "No Partition",
                5 => "Insufficient NVLinks",
                _ => return None,
            })
        })
    })
    .valid3(v3::FABRIC_HEALTH)
    .not_in_templates()
    .about("what is wrong with the NVLink fabric's configuration, or None")
    .smi(&[&["fabric.health.incorrect_configuration"]]),
    sram(0, "unique volatile uncorrectable parity errors in SRAM"),
    sram(1, "unique volatile uncorrectable SEC-DED errors in SRAM"),
    sram(2, "unique aggregate uncorrectable parity errors in SRAM"),
    sram(3, "unique aggregate uncorrectable SEC-DED errors in SRAM"),
    field("sram_threshold_exceeded", Text, Aggregate::Join, |g| {
        yes(g.details.newer.sram_ecc.map(|s| s.threshold_exceeded))
    })
    .valid3(v3::SRAM_ECC)
    .not_in_templates()
    .about("whether SRAM's uncorrectable error threshold was exceeded: Yes or No")
    .smi(&[&["ecc.errors.uncorrected.aggregate.sram.thresholdExceeded"]]),
    sram(
        4,
        "unique aggregate uncorrectable SRAM errors in the L2 cache",
    ),
    sram(5, "unique aggregate uncorrectable SRAM errors in the SMs"),
    sram(
        6,
        "unique aggregate uncorrectable SRAM errors in the microcontrollers",
    ),
    sram(
        7,
        "unique aggregate uncorrectable SRAM errors in the PCIe interface",
    ),
    sram(8, "unique aggregate uncorrectable SRAM errors elsewhere"),
    module(
        0,
        v3::MODULE_POWER_DRAW_AVERAGE,
        "module power draw averaged over a second (Grace superchips)",
        &[&["module.power.draw.average"]],
    ),
    module(
        1,
        v3::MODULE_POWER_DRAW_INSTANT,
        "instantaneous module power draw",
        &[&["module.power.draw.instant"]],
    ),
    module(
        2,
        v3::MODULE_POWER_LIMIT,
        "module power limit requested",
        &[&["module.power.limit", "module.power.requested_limit"]],
    ),
    module(
        3,
        v3::MODULE_ENFORCED_POWER_LIMIT,
        "module power limit enforced",
        &[&["module.enforced.power.limit", "module.power.current_limit"]],
    ),
    module(
        4,
        v3::MODULE_POWER_DEFAULT_LIMIT,
        "default module power limit",
        &[&["module.power.default_limit"]],
    ),
    module(
        5,
        v3::MODULE_POWER_MIN_LIMIT,
        "smallest module power limit that can be set",
        &[&["module.power.min_limit"]],
    ),
    module(
        6,
        v3::MODULE_POWER_MAX_LIMIT,
        "largest module power limit that can be set",
        &[&["module.power.max_limit"]],
    ),
    protected(0, "confidential-computing protected memory installed"),
    protected(1, "protected memory allocated by active contexts"),
    protected(2, "protected memory free"),
    field("dram_encryption", Text, Aggregate::Join, |g| {
        enabled(g.details.newer.dram_encryption.map(|m| m.0))
    })
    .valid3(v3::DRAM_ENCRYPTION)
    .not_in_templates()
    .about("DRAM encryption now: Enabled or Disabled")
    .smi(&[&["dramEncryption.mode.current"]]),
    field("dram_encryption_pending", Text, Aggregate::Join, |g| {
        enabled(g.details.newer.dram_encryption.map(|m| m.1))
    })
    .valid3(v3::DRAM_ENCRYPTION)
    .not_in_templates()
    .about("DRAM encryption after the next reboot")
    .smi(&[&["dramEncryption.mode.pending"]]),
    // The display mode's call, which nvidia-smi 590 makes for display_attached while it
    // prints display_mode as deprecated (nvidia_gpu_exporter's trace-verified NVML
    // backend, internal/nvmlnative).
    field("display_attached", Text, Aggregate::Join, |g| {
        yes(g.details.display_mode)
    })
    .valid2(crate::details::DISPLAY_MODE_BIT)
    .not_in_templates()
    .about("whether a display is connected to one of the GPU's connectors: Yes or No")
    .smi(&[&["display_attached"]]),
    field("platform_chassis_serial", Text, Aggregate::Join, |g| {
        text(g.details.newer.platform.map(|p| p.chassis_serial))
    })
    .valid3(v3::PLATFORM)
    .not_in_templates()
    .about("serial number of the chassis holding the GPU (empty outside an NVL rack)")
    .smi(&[&["platform.chassis_serial_number"]]),
    platform(
        0,
        "slot number in the chassis",
        &[&["platform.slot_number"]],
    ),
    platform(1, "tray index in the chassis", &[&["platform.tray_index"]]),
    platform(
        2,
        "index of the node within the slot",
        &[&["platform.host_id"]],
    ),
    field("platform_peer_type", Text, Aggregate::Join, |g| {
        let p = g.details.newer.platform?;
        Some(match p.peer_type_name() {
            Some(name) => Value::Name(name),
            None => Value::Int(p.ids[3].into()),
        })
    })
    .valid3(v3::PLATFORM)
    .not_in_templates()
    .about("NVLink peer type the platform gives, e.g. Direct Connected")
    .smi(&[&["platform.peer_type"]]),
    platform(
        4,
        "id of the GPU within the node",
        &[&["platform.module_id"]],
    ),
    field("platform_gpu_fabric_guid", Count, Aggregate::Join, |g| {
        hex(g.details.newer.platform.map(|p| p.gpu_fabric_guid), 16)
    })
    .valid3(v3::PLATFORM)
    .not_in_templates()
    .about("the GPU's fabric GUID, hexadecimal")
    .smi(&[&["platform.gpu_fabric_guid"]]),
    field("edpp_multiplier", Percent, Aggregate::Mean, |g| {
        let pct = g.details.newer.edpp_multiplier_pct?;
        Some(Value::Centi(crate::units::CentiPercent(
            pct.saturating_mul(100),
        )))
    })
    .valid3(v3::EDPP_MULTIPLIER)
    .not_in_templates()
    .about("the EDPp multiplier, percent")
    .smi(&[&["edpp_multiplier"]]),
    vgpu(
        0,
        "whether the driver runs vGPUs of different types together: Yes or No",
        &[&["vgpu_driver_capability.heterogenous_multivGPU"]],
    ),
    vgpu(
        1,
        "whether fractional vGPU profiles can be used in multi-vGPU setups",
        &[&["vgpu_device_capability.fractional_multiVgpu"]],
    ),
    vgpu(
        2,
        "whether time-sliced vGPU profiles of different types run together",
        &[&["vgpu_device_capability.heterogeneous_timeSlice_profile"]],
    ),
    vgpu(
        3,
        "whether time-sliced vGPU profiles of different sizes run together",
        &[&["vgpu_device_capability.heterogeneous_timeSlice_sizes"]],
    ),
    vgpu(
        4,
        "whether placements of same-size time-sliced vGPU profiles are reported",
        &[&["vgpu_device_capability.homogeneous_placements"]],
    ),
    vgpu(
        5,
        "whether the GPU supports time-sliced vGPU on MIG",
        &[&["vgpu_device_capability.mig_timeSlicing"]],
    ),
    vgpu(
        6,
        "whether MIG time-sliced mode is on: Enabled or Disabled",
        &[&["vgpu_device_capability.mig_timeSlicing_mode"]],
    ),
    // nvmlDeviceGetHostname_v1 (R580+, Blackwell and newer): the H100 on 590.48.01 of
    // nvidia_gpu_exporter's captures prints `[N/A]`, NVML's "not supported".
    field("gpu_hostname", Text, Aggregate::Join, |g| {
        text(g.details.newer.hostname)
    })
    .valid3(v3::GPU_HOSTNAME)
    .not_in_templates()
    .about("hostname NVIDIA's tools set on the GPU (R580+, Blackwell and newer; not the machine's)")
    .smi(&[&["hostname"]]),
    // NVML's Xid events (nvidia-smi has no --query-gpu field for them): counts since
    // gpupeekd started, kept in every GPU state. `gpupeek metrics` exports them per Xid
    // with NVIDIA's action (gpupeek_xid_errors_total), not through this table.
    field("xid_errors", Count, Aggregate::Sum, |g| {
        int(g.xid.map(|x| x.total))
    })
    .valid3(v3::XID_ERRORS)
    .identity()
    .about("Xid errors NVML reported since gpupeekd started, its MIG instances' included; no value where NVML delivers no events for the GPU"),
    field("xid_last", Count, Aggregate::Max, |g| {
        int(g.xid.map(|x| x.last.map_or(0, |l| l.code)))
    })
    .valid3(v3::XID_ERRORS)
    .identity()
    .about("number of the last Xid error since gpupeekd started, 0 when none came (dcgm-exporter's DCGM_FI_DEV_XID_ERRORS)"),
];

/// vGPU capability `i` of [`crate::details::Newer::vgpu`]: `[N/A]` on every driver but
/// a vGPU host's (every bare-metal capture); a vGPU host's answer is Yes or No (Enabled
/// or Disabled for the mode), words no capture shows yet.
const fn vgpu(i: usize, about: &'static str, smi: &'static [&'static [&'static str]]) -> Field {
    let get: Getter = match i {
        0 => |g| yes(g.details.newer.vgpu[0]),
        1 => |g| yes(g.details.newer.vgpu[1]),
        2 => |g| yes(g.details.newer.vgpu[2]),
        3 => |g| yes(g.details.newer.vgpu[3]),
        4 => |g| yes(g.details.newer.vgpu[4]),
        5 => |g| yes(g.details.newer.vgpu[5]),
        _ => |g| enabled(g.details.newer.vgpu[6]),
    };
    let name = match i {
        0 => "vgpu_heterogeneous_multi_vgpu",
        1 => "vgpu_fractional_multi_vgpu",
        2 => "vgpu_heterogeneous_timeslice_profiles",
        3 => "vgpu_heterogeneous_timeslice_sizes",
        4 => "vgpu_homogeneous_placements",
        5 => "vgpu_mig_timeslicing",
        _ => "vgpu_mig_timeslicing_mode",
    };
    let bit = match i {
        0 => v3::VGPU_HETEROGENEOUS_MULTI_VGPU,
        1 => v3::VGPU_FRACTIONAL_MULTI_VGPU,
        2 => v3::VGPU_HETEROGENEOUS_TIMESLICE_PROFILES,
        3 => v3::VGPU_HETEROGENEOUS_TIMESLICE_SIZES,
        4 => v3::VGPU_HOMOGENEOUS_PLACEMENTS,
        5 => v3::VGPU_MIG_TIMESLICING,
        _ => v3::VGPU_MIG_TIMESLICING_MODE,
    };
    field(name, Text, Aggregate::Join, get)
        .valid3(bit)
        .not_in_templates()
        .about(about)
        .smi(smi)
}

/// Platform number `i` of [`crate::details::Platform::ids`].
const fn platform(i: usize, about: &'static str, smi: &'static [&'static [&'static str]]) -> Field {
    let get: Getter = match i {
        0 => |g| int(g.details.newer.platform.map(|p| p.ids[0])),
        1 => |g| int(g.details.newer.platform.map(|p| p.ids[1])),
        2 => |g| int(g.details.newer.platform.map(|p| p.ids[2])),
        _ => |g| int(g.details.newer.platform.map(|p| p.ids[4])),
    };
    let name = match i {
        0 => "platform_slot",
        1 => "platform_tray",
        2 => "platform_host_id",
        _ => "platform_module_id",
    };
    field(name, Count, Aggregate::Join, get)
        .valid3(v3::PLATFORM)
        .not_in_templates()
        .about(about)
        .smi(smi)
}

fn health(g: &Gpu, word: fn(FabricHealth) -> Option<&'static str>) -> Option<Value<'static>> {
    word(g.details.newer.fabric_health?).map(Value::Name)
}

/// A fabric health condition: its two bits at `shift` of NVML's mask. nvidia-smi's
/// words are those of `nvidia-smi -q`'s Health block (NVIDIA's nvml-mock, checked
/// against GB200 and GB300 trays: `Full`/`Degraded`, `True`/`False`).
const fn condition(
    name: &'static str,
    shift: u32,
    about: &'static str,
    smi: &'static [&'static [&'static str]],
) -> Field {
    let get: Getter = match shift {
        0 => |g| health(g, |h| h.condition(0, "Degraded", "Full")),
        2 => |g| health(g, |h| h.condition(2, "True", "False")),
        4 => |g| health(g, |h| h.condition(4, "True", "False")),
        _ => |g| health(g, |h| h.condition(6, "True", "False")),
    };
    field(name, Text, Aggregate::Join, get)
        .valid3(v3::FABRIC_HEALTH)
        .not_in_templates()
        .about(about)
        .smi(smi)
}

/// SRAM ECC count `i` of [`crate::details::SramEcc::counts`].
/// nvidia-smi's name is `ecc.errors.uncorrected.{volatile,aggregate}.sram.*`.
const fn sram(i: usize, about: &'static str) -> Field {
    let get: Getter = match i {
        0 => |g| int(g.details.newer.sram_ecc.map(|s| s.counts[0])),
        1 => |g| int(g.details.newer.sram_ecc.map(|s| s.counts[1])),
        2 => |g| int(g.details.newer.sram_ecc.map(|s| s.counts[2])),
        3 => |g| int(g.details.newer.sram_ecc.map(|s| s.counts[3])),
        4 => |g| int(g.details.newer.sram_ecc.map(|s| s.counts[4])),
        5 => |g| int(g.details.newer.sram_ecc.map(|s| s.counts[5])),
        6 => |g| int(g.details.newer.sram_ecc.map(|s| s.counts[6])),
        7 => |g| int(g.details.newer.sram_ecc.map(|s| s.counts[7])),
        _ => |g| int(g.details.newer.sram_ecc.map(|s| s.counts[8])),
    };
    let names: &'static [&'static [&'static str]] = match i {
        0 => &[&["ecc.errors.uncorrected.volatile.sram.parity"]],
        1 => &[&["ecc.errors.uncorrected.volatile.sram.secded"]],
        2 => &[&["ecc.errors.uncorrected.aggregate.sram.parity"]],
        3 => &[&["ecc.errors.uncorrected.aggregate.sram.secded"]],
        4 => &[&["ecc.errors.uncorrected.aggregate.sram.l2"]],
        5 => &[&["ecc.errors.uncorrected.aggregate.sram.sm"]],
        6 => &[&["ecc.errors.uncorrected.aggregate.sram.mcu"]],
        7 => &[&["ecc.errors.uncorrected.aggregate.sram.pcie"]],
        _ => &[&["ecc.errors.uncorrected.aggregate.sram.other"]],
    };
    field(SRAM_NAMES[i], Count, Aggregate::Sum, get)
        .valid3(v3::SRAM_ECC)
        .not_in_templates()
        .about(about)
        .smi(names)
}

const SRAM_NAMES: [&str; 9] = [
    "sram_volatile_parity",
    "sram_volatile_secded",
    "sram_aggregate_parity",
    "sram_aggregate_secded",
    "sram_aggregate_l2",
    "sram_aggregate_sm",
    "sram_aggregate_mcu",
    "sram_aggregate_pcie",
    "sram_aggregate_other",
];

/// Module power value `i` of [`crate::details::Newer::module_power`].
const fn module(
    i: usize,
    bit: u64,
    about: &'static str,
    smi: &'static [&'static [&'static str]],
) -> Field {
    let get: Getter = match i {
        0 => |g| int(g.details.newer.module_power[0].map(|p| p.0)),
        1 => |g| int(g.details.newer.module_power[1].map(|p| p.0)),
        2 => |g| int(g.details.newer.module_power[2].map(|p| p.0)),
        3 => |g| int(g.details.newer.module_power[3].map(|p| p.0)),
        4 => |g| int(g.details.newer.module_power[4].map(|p| p.0)),
        5 => |g| int(g.details.newer.module_power[5].map(|p| p.0)),
        _ => |g| int(g.details.newer.module_power[6].map(|p| p.0)),
    };
    field(MODULE_NAMES[i], MilliWatts, Aggregate::Sum, get)
        .valid3(bit)
        .not_in_templates()
        .about(about)
        .smi(smi)
}

const MODULE_NAMES: [&str; 7] = [
    "module_power",
    "module_power_instant",
    "module_power_limit",
    "module_enforced_power_limit",
    "module_power_default_limit",
    "module_power_min_limit",
    "module_power_max_limit",
];

/// Protected memory value `i` (total, used, free).
const fn protected(i: usize, about: &'static str) -> Field {
    let get: Getter = match i {
        0 => |g| int(g.details.newer.protected_memory.map(|m| m[0].0)),
        1 => |g| int(g.details.newer.protected_memory.map(|m| m[1].0)),
        _ => |g| int(g.details.newer.protected_memory.map(|m| m[2].0)),
    };
    let names: &'static [&'static [&'static str]] = match i {
        0 => &[&["protected_memory.total"]],
        1 => &[&["protected_memory.used"]],
        _ => &[&["protected_memory.free"]],
    };
    field(PROTECTED_NAMES[i], Bytes, Aggregate::Sum, get)
        .valid3(v3::PROTECTED_MEMORY)
        .not_in_templates()
        .about(about)
        .smi(names)
}

const PROTECTED_NAMES: [&str; 3] = [
    "protected_mem_total",
    "protected_mem_used",
    "protected_mem_free",
];
