//! The field table's entries for nvidia-smi 590's newer `--query-gpu` fields (ABI 1.6's
//! `valid3` bits), after `table.rs`'s. Each prints as nvidia-smi 590.48.01 prints it
//! for an H100 and 595.71.05 for a GeForce RTX 4080 SUPER (nvidia_gpu_exporter's
//! `internal/captures`): `46`, `0x3`, `Enabled`, `HMM`, `valid`, `2560`, `0`,
//! `00000000-0000-0000-0000-000000000000`, `No`, `0 MiB`.

use super::table::{enabled, hex, int, text, yes};
use super::Unit::{Bytes, Celsius, Count, MilliWatts, Percent, Text};
use super::{field, Aggregate, Field, Value};
use crate::details::{FabricHealth, RemapHistogram};
use crate::gpu::Gpu;
use gpupeek_shm::layout::{gpu_valid2 as v2, gpu_valid3 as v3};

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
    field("fabric_health_bandwidth", Text, Aggregate::Join, |g| {
        condition(g, 0, "Degraded", "Full")
    })
    .valid3(v3::FABRIC_HEALTH)
    .not_in_templates()
    .about("NVLink fabric bandwidth: Full or Degraded")
    .smi(&[&["fabric.health.bandwidth"]]),
    field("fabric_health_route_recovery", Text, Aggregate::Join, |g| {
        condition(g, 2, "True", "False")
    })
    .valid3(v3::FABRIC_HEALTH)
    .not_in_templates()
    .about("whether an NVLink fabric route recovery is in progress: True or False")
    .smi(&[&["fabric.health.route_recovery_in_progress"]]),
    field(
        "fabric_health_route_unhealthy",
        Text,
        Aggregate::Join,
        |g| condition(g, 4, "True", "False"),
    )
    .valid3(v3::FABRIC_HEALTH)
    .not_in_templates()
    .about("whether an NVLink fabric route is unhealthy: True or False")
    .smi(&[&["fabric.health.route_unhealthy"]]),
    field("fabric_health_access_timeout", Text, Aggregate::Join, |g| {
        condition(g, 6, "True", "False")
    })
    .valid3(v3::FABRIC_HEALTH)
    .not_in_templates()
    .about("whether the fabric recovers from an access timeout: True or False")
    .smi(&[&["fabric.health.access_timeout_recovery"]]),
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
                // Added with R590/R595 (nvidia-smi(1)'s words).
                6 => "Incompatible GPU Firmware",
                7 => "Invalid Location",
                8 => "GPU State Invalid",
                _ => return None,
            })
        })
    })
    .valid3(v3::FABRIC_HEALTH)
    .not_in_templates()
    .about("what is wrong with the NVLink fabric's configuration, or None")
    .smi(&[&["fabric.health.incorrect_configuration"]]),
    field("fabric_health_partition", Text, Aggregate::Join, |g| {
        condition(g, 12, "True", "False")
    })
    .valid3(v3::FABRIC_HEALTH)
    .not_in_templates()
    .about("whether the GPU's NVLink partition is assigned: True or False (nvidia-smi 595+)")
    .smi(&[&["fabric.health.partition_assigned"]]),
    field("sram_volatile_parity", Count, Aggregate::Sum, |g| {
        sram(g, 0)
    })
    .valid3(v3::SRAM_ECC)
    .not_in_templates()
    .about("unique volatile uncorrectable parity errors in SRAM")
    .smi(&[&["ecc.errors.uncorrected.volatile.sram.parity"]]),
    field("sram_volatile_secded", Count, Aggregate::Sum, |g| {
        sram(g, 1)
    })
    .valid3(v3::SRAM_ECC)
    .not_in_templates()
    .about("unique volatile uncorrectable SEC-DED errors in SRAM")
    .smi(&[&["ecc.errors.uncorrected.volatile.sram.secded"]]),
    field("sram_aggregate_parity", Count, Aggregate::Sum, |g| {
        sram(g, 2)
    })
    .valid3(v3::SRAM_ECC)
    .not_in_templates()
    .about("unique aggregate uncorrectable parity errors in SRAM")
    .smi(&[&["ecc.errors.uncorrected.aggregate.sram.parity"]]),
    field("sram_aggregate_secded", Count, Aggregate::Sum, |g| {
        sram(g, 3)
    })
    .valid3(v3::SRAM_ECC)
    .not_in_templates()
    .about("unique aggregate uncorrectable SEC-DED errors in SRAM")
    .smi(&[&["ecc.errors.uncorrected.aggregate.sram.secded"]]),
    field("sram_threshold_exceeded", Text, Aggregate::Join, |g| {
        yes(g.details.newer.sram_ecc.map(|s| s.threshold_exceeded))
    })
    .valid3(v3::SRAM_ECC)
    .not_in_templates()
    .about("whether SRAM's uncorrectable error threshold was exceeded: Yes or No")
    .smi(&[&["ecc.errors.uncorrected.aggregate.sram.thresholdExceeded"]]),
    field("sram_aggregate_l2", Count, Aggregate::Sum, |g| sram(g, 4))
        .valid3(v3::SRAM_ECC)
        .not_in_templates()
        .about("unique aggregate uncorrectable SRAM errors in the L2 cache")
        .smi(&[&["ecc.errors.uncorrected.aggregate.sram.l2"]]),
    field("sram_aggregate_sm", Count, Aggregate::Sum, |g| sram(g, 5))
        .valid3(v3::SRAM_ECC)
        .not_in_templates()
        .about("unique aggregate uncorrectable SRAM errors in the SMs")
        .smi(&[&["ecc.errors.uncorrected.aggregate.sram.sm"]]),
    field("sram_aggregate_mcu", Count, Aggregate::Sum, |g| sram(g, 6))
        .valid3(v3::SRAM_ECC)
        .not_in_templates()
        .about("unique aggregate uncorrectable SRAM errors in the microcontrollers")
        .smi(&[&["ecc.errors.uncorrected.aggregate.sram.mcu"]]),
    field("sram_aggregate_pcie", Count, Aggregate::Sum, |g| sram(g, 7))
        .valid3(v3::SRAM_ECC)
        .not_in_templates()
        .about("unique aggregate uncorrectable SRAM errors in the PCIe interface")
        .smi(&[&["ecc.errors.uncorrected.aggregate.sram.pcie"]]),
    field("sram_aggregate_other", Count, Aggregate::Sum, |g| {
        sram(g, 8)
    })
    .valid3(v3::SRAM_ECC)
    .not_in_templates()
    .about("unique aggregate uncorrectable SRAM errors elsewhere")
    .smi(&[&["ecc.errors.uncorrected.aggregate.sram.other"]]),
    field("module_power", MilliWatts, Aggregate::Sum, |g| module(g, 0))
        .valid3(v3::MODULE_POWER_DRAW_AVERAGE)
        .not_in_templates()
        .about("module power draw averaged over a second (Grace superchips)")
        .smi(&[&["module.power.draw.average"]]),
    field("module_power_instant", MilliWatts, Aggregate::Sum, |g| {
        module(g, 1)
    })
    .valid3(v3::MODULE_POWER_DRAW_INSTANT)
    .not_in_templates()
    .about("instantaneous module power draw")
    .smi(&[&["module.power.draw.instant"]]),
    field("module_power_limit", MilliWatts, Aggregate::Sum, |g| {
        module(g, 2)
    })
    .valid3(v3::MODULE_POWER_LIMIT)
    .not_in_templates()
    .about("module power limit requested")
    .smi(&[&["module.power.limit", "module.power.requested_limit"]]),
    field(
        "module_enforced_power_limit",
        MilliWatts,
        Aggregate::Sum,
        |g| module(g, 3),
    )
    .valid3(v3::MODULE_ENFORCED_POWER_LIMIT)
    .not_in_templates()
    .about("module power limit enforced")
    .smi(&[&["module.enforced.power.limit", "module.power.current_limit"]]),
    field(
        "module_power_default_limit",
        MilliWatts,
        Aggregate::Sum,
        |g| module(g, 4),
    )
    .valid3(v3::MODULE_POWER_DEFAULT_LIMIT)
    .not_in_templates()
    .about("default module power limit")
    .smi(&[&["module.power.default_limit"]]),
    field("module_power_min_limit", MilliWatts, Aggregate::Sum, |g| {
        module(g, 5)
    })
    .valid3(v3::MODULE_POWER_MIN_LIMIT)
    .not_in_templates()
    .about("smallest module power limit that can be set")
    .smi(&[&["module.power.min_limit"]]),
    field("module_power_max_limit", MilliWatts, Aggregate::Sum, |g| {
        module(g, 6)
    })
    .valid3(v3::MODULE_POWER_MAX_LIMIT)
    .not_in_templates()
    .about("largest module power limit that can be set")
    .smi(&[&["module.power.max_limit"]]),
    field("protected_mem_total", Bytes, Aggregate::Sum, |g| {
        protected(g, 0)
    })
    .valid3(v3::PROTECTED_MEMORY)
    .not_in_templates()
    .about("confidential-computing protected memory installed")
    .smi(&[&["protected_memory.total"]]),
    field("protected_mem_used", Bytes, Aggregate::Sum, |g| {
        protected(g, 1)
    })
    .valid3(v3::PROTECTED_MEMORY)
    .not_in_templates()
    .about("protected memory allocated by active contexts")
    .smi(&[&["protected_memory.used"]]),
    field("protected_mem_free", Bytes, Aggregate::Sum, |g| {
        protected(g, 2)
    })
    .valid3(v3::PROTECTED_MEMORY)
    .not_in_templates()
    .about("protected memory free")
    .smi(&[&["protected_memory.free"]]),
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
    .valid2(v2::DISPLAY_MODE)
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
    field("platform_slot", Count, Aggregate::Join, |g| platform(g, 0))
        .valid3(v3::PLATFORM)
        .not_in_templates()
        .about("slot number in the chassis")
        .smi(&[&["platform.slot_number"]]),
    field("platform_tray", Count, Aggregate::Join, |g| platform(g, 1))
        .valid3(v3::PLATFORM)
        .not_in_templates()
        .about("tray index in the chassis")
        .smi(&[&["platform.tray_index"]]),
    field("platform_host_id", Count, Aggregate::Join, |g| {
        platform(g, 2)
    })
    .valid3(v3::PLATFORM)
    .not_in_templates()
    .about("index of the node within the slot")
    .smi(&[&["platform.host_id"]]),
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
    field("platform_module_id", Count, Aggregate::Join, |g| {
        platform(g, 4)
    })
    .valid3(v3::PLATFORM)
    .not_in_templates()
    .about("id of the GPU within the node")
    .smi(&[&["platform.module_id"]]),
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
    // The vGPU capabilities: `[N/A]` on every driver but a vGPU host's (every bare-metal
    // capture); a vGPU host's answer is Yes or No (Enabled or Disabled for the mode),
    // words no capture shows yet.
    field(
        "vgpu_heterogeneous_multi_vgpu",
        Text,
        Aggregate::Join,
        |g| yes(g.details.newer.vgpu[0]),
    )
    .valid3(v3::VGPU_HETEROGENEOUS_MULTI_VGPU)
    .not_in_templates()
    .about("whether the driver runs vGPUs of different types together: Yes or No")
    .smi(&[&["vgpu_driver_capability.heterogenous_multivGPU"]]),
    field("vgpu_fractional_multi_vgpu", Text, Aggregate::Join, |g| {
        yes(g.details.newer.vgpu[1])
    })
    .valid3(v3::VGPU_FRACTIONAL_MULTI_VGPU)
    .not_in_templates()
    .about("whether fractional vGPU profiles can be used in multi-vGPU setups")
    .smi(&[&["vgpu_device_capability.fractional_multiVgpu"]]),
    field(
        "vgpu_heterogeneous_timeslice_profiles",
        Text,
        Aggregate::Join,
        |g| yes(g.details.newer.vgpu[2]),
    )
    .valid3(v3::VGPU_HETEROGENEOUS_TIMESLICE_PROFILES)
    .not_in_templates()
    .about("whether time-sliced vGPU profiles of different types run together")
    .smi(&[&["vgpu_device_capability.heterogeneous_timeSlice_profile"]]),
    field(
        "vgpu_heterogeneous_timeslice_sizes",
        Text,
        Aggregate::Join,
        |g| yes(g.details.newer.vgpu[3]),
    )
    .valid3(v3::VGPU_HETEROGENEOUS_TIMESLICE_SIZES)
    .not_in_templates()
    .about("whether time-sliced vGPU profiles of different sizes run together")
    .smi(&[&["vgpu_device_capability.heterogeneous_timeSlice_sizes"]]),
    field("vgpu_homogeneous_placements", Text, Aggregate::Join, |g| {
        yes(g.details.newer.vgpu[4])
    })
    .valid3(v3::VGPU_HOMOGENEOUS_PLACEMENTS)
    .not_in_templates()
    .about("whether placements of same-size time-sliced vGPU profiles are reported")
    .smi(&[&["vgpu_device_capability.homogeneous_placements"]]),
    field("vgpu_mig_timeslicing", Text, Aggregate::Join, |g| {
        yes(g.details.newer.vgpu[5])
    })
    .valid3(v3::VGPU_MIG_TIMESLICING)
    .not_in_templates()
    .about("whether the GPU supports time-sliced vGPU on MIG")
    .smi(&[&["vgpu_device_capability.mig_timeSlicing"]]),
    field("vgpu_mig_timeslicing_mode", Text, Aggregate::Join, |g| {
        enabled(g.details.newer.vgpu[6])
    })
    .valid3(v3::VGPU_MIG_TIMESLICING_MODE)
    .not_in_templates()
    .about("whether MIG time-sliced mode is on: Enabled or Disabled")
    .smi(&[&["vgpu_device_capability.mig_timeSlicing_mode"]]),
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

fn health(g: &Gpu, word: fn(FabricHealth) -> Option<&'static str>) -> Option<Value<'static>> {
    word(g.details.newer.fabric_health?).map(Value::Name)
}

/// A fabric health condition: its two bits at `shift` of NVML's mask, in nvidia-smi's
/// words `yes` and `no`, those of `nvidia-smi -q`'s Health block (NVIDIA's nvml-mock,
/// checked against GB200 and GB300 trays: `Full`/`Degraded`, `True`/`False`).
fn condition(g: &Gpu, shift: u32, yes: &'static str, no: &'static str) -> Option<Value<'static>> {
    let h = g.details.newer.fabric_health?;
    h.condition(shift, yes, no).map(Value::Name)
}

/// SRAM ECC count `i` of [`crate::details::SramEcc::counts`].
fn sram(g: &Gpu, i: usize) -> Option<Value<'static>> {
    int(g.details.newer.sram_ecc.map(|s| s.counts[i]))
}

/// Module power value `i` of [`crate::details::Newer::module_power`].
fn module(g: &Gpu, i: usize) -> Option<Value<'static>> {
    int(g.details.newer.module_power[i].map(|p| p.0))
}

/// Protected memory value `i` (total, used, free).
fn protected(g: &Gpu, i: usize) -> Option<Value<'static>> {
    int(g.details.newer.protected_memory.map(|m| m[i].0))
}

/// Platform number `i` of [`crate::details::Platform::ids`].
fn platform(g: &Gpu, i: usize) -> Option<Value<'static>> {
    int(g.details.newer.platform.map(|p| p.ids[i]))
}
