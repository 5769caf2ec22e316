//! The values nvidia-smi 590's `--query-gpu` added that ABI 1.6 publishes in `valid3`,
//! decoded: thermal margin, PCI class codes, GSP firmware, addressing and C2C modes,
//! infoROM checksum, power management, the row remapper histogram, the fabric's clique
//! and health, SRAM ECC, module power, protected memory, DRAM encryption, and (ABI 1.10)
//! delayed power smoothing. Each is `None`
//! unless the GPU was sampled normally and the driver answered it.

use gpupeek_shm::layout::gpu_valid3 as v3;
use gpupeek_shm::GpuRecord;

use crate::text::Text;
use crate::units::{Bytes, MilliWatts};

/// How a GPU addresses system memory (`nvmlDeviceAddressingModeType_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressingMode {
    /// Neither HMM nor ATS.
    None,
    /// Heterogeneous memory management: the CPU's page tables mirrored in software.
    Hmm,
    /// Address translation services: one set of page tables for CPU and GPU.
    Ats,
}

impl AddressingMode {
    /// nvidia-smi's word.
    pub fn name(self) -> &'static str {
        match self {
            AddressingMode::None => "None",
            AddressingMode::Hmm => "HMM",
            AddressingMode::Ats => "ATS",
        }
    }
}

/// Memory banks by how many spare rows they have left for remapping
/// (`nvmlRowRemapperHistogramValues_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemapHistogram {
    /// Banks with every spare row left.
    pub max: u32,
    /// Banks with high availability.
    pub high: u32,
    /// Banks with partial availability.
    pub partial: u32,
    /// Banks with low availability.
    pub low: u32,
    /// Banks with no spare row left.
    pub none: u32,
}

/// Where the GPU sits in a rack (`nvmlPlatformInfo_v2`).
#[derive(Debug, Clone, Copy)]
pub struct Platform<'a> {
    /// Serial number of the chassis.
    pub chassis_serial: Text<'a>,
    /// The GPU's fabric GUID (the first 8 bytes of NVML's, big-endian).
    pub gpu_fabric_guid: u64,
    /// Slot number, tray index, host id, peer type and module id.
    pub ids: [u32; 5],
}

impl Platform<'_> {
    /// nvidia-smi's words for the peer type: 0 is "Direct Connected" (every 590 and 595
    /// capture); for other numbers no capture exists, and the number is shown.
    pub fn peer_type_name(&self) -> Option<&'static str> {
        (self.ids[3] == 0).then_some("Direct Connected")
    }
}

/// The `valid3` bits of the vGPU capabilities: the driver's heterogeneous multi-vGPU,
/// then the GPU's
/// fractional multi-vGPU, heterogeneous time-sliced profiles and sizes, homogeneous
/// placements, MIG time-slicing and MIG time-sliced mode.
pub const VGPU_BITS: [u64; 7] = [
    v3::VGPU_HETEROGENEOUS_MULTI_VGPU,
    v3::VGPU_FRACTIONAL_MULTI_VGPU,
    v3::VGPU_HETEROGENEOUS_TIMESLICE_PROFILES,
    v3::VGPU_HETEROGENEOUS_TIMESLICE_SIZES,
    v3::VGPU_HOMOGENEOUS_PLACEMENTS,
    v3::VGPU_MIG_TIMESLICING,
    v3::VGPU_MIG_TIMESLICING_MODE,
];

/// The `valid3` bits of delayed power smoothing (ABI 1.10), in nvidia-smi 590's order:
/// supported, primary floor, secondary floor, minimum primary floor activation offset
/// and point, window multiplier, then the active profile's secondary floor, activation
/// and target window multipliers and activation offset, then the admin override's four.
pub const POWER_SMOOTHING_BITS: [u64; 14] = [
    v3::POWER_SMOOTHING_DELAYED_SUPPORTED,
    v3::POWER_SMOOTHING_PRIMARY_FLOOR,
    v3::POWER_SMOOTHING_SECONDARY_FLOOR,
    v3::POWER_SMOOTHING_MIN_PRIMARY_ACT_OFFSET,
    v3::POWER_SMOOTHING_MIN_PRIMARY_ACT_POINT,
    v3::POWER_SMOOTHING_WINDOW_MULTIPLIER,
    v3::POWER_SMOOTHING_PROFILE_SECONDARY_FLOOR,
    v3::POWER_SMOOTHING_PROFILE_ACT_WINDOW_MULT,
    v3::POWER_SMOOTHING_PROFILE_TAR_WINDOW_MULT,
    v3::POWER_SMOOTHING_PROFILE_ACT_OFFSET,
    v3::POWER_SMOOTHING_ADMIN_SECONDARY_FLOOR,
    v3::POWER_SMOOTHING_ADMIN_ACT_WINDOW_MULT,
    v3::POWER_SMOOTHING_ADMIN_TAR_WINDOW_MULT,
    v3::POWER_SMOOTHING_ADMIN_ACT_OFFSET,
];

/// The values of ABI 1.6's `valid3` bits.
#[derive(Debug, Clone, Copy, Default)]
pub struct Newer<'a> {
    /// Degrees Celsius below the nearest slowdown threshold (nvidia-smi's T.Limit).
    pub temp_tlimit_c: Option<i32>,
    /// PCI base and sub class codes.
    pub pci_class: Option<(u32, u32)>,
    /// GSP firmware in use, and by default.
    pub gsp_mode: Option<(bool, bool)>,
    /// Addressing mode (`None` also for a number NVML does not define).
    pub addressing_mode: Option<AddressingMode>,
    /// C2C mode.
    pub c2c_mode: Option<bool>,
    /// Whether the infoROM checksum validates.
    pub inforom_valid: Option<bool>,
    /// Power management mode.
    pub power_management: Option<bool>,
    /// The row remapper histogram.
    pub remap_histogram: Option<RemapHistogram>,
    /// The NVLink fabric clique id and cluster UUID.
    pub fabric_clique: Option<(u32, [u8; 16])>,
    /// The fabric's health: NVML's mask and summary.
    pub fabric_health: Option<FabricHealth>,
    /// The SRAM ECC status.
    pub sram_ecc: Option<SramEcc>,
    /// The module's power: average and instant draw, requested, enforced, default,
    /// minimum and maximum limits (Grace superchips).
    pub module_power: [Option<MilliWatts>; 7],
    /// Protected memory: total, used, free.
    pub protected_memory: Option<[Bytes; 3]>,
    /// DRAM encryption now, and after the next reboot.
    pub dram_encryption: Option<(bool, bool)>,
    /// Where the GPU sits in a rack.
    pub platform: Option<Platform<'a>>,
    /// The EDPp multiplier, percent.
    pub edpp_multiplier_pct: Option<u32>,
    /// The vGPU capabilities, in [`VGPU_BITS`]' order (vGPU host drivers only).
    pub vgpu: [Option<bool>; 7],
    /// The hostname NVIDIA's tools set on the GPU (not the machine's).
    pub hostname: Option<Text<'a>>,
    /// Delayed power smoothing, in [`POWER_SMOOTHING_BITS`]' order, as published:
    /// 0 or 1, milliwatts, milliseconds or a count (see `GpuRecord`).
    pub power_smoothing: [Option<u32>; 14],
    /// The `valid3` bits whose value the driver answered as deprecated.
    pub deprecated: u64,
    /// ABI 1.11's `valid4` values (nvidia-smi 595's and 610's fields), by bit number,
    /// as published (see `GpuRecord`): `v4[n]` is bit `n`'s value.
    pub v4: [Option<u32>; 27],
}

/// The fabric's health as NVML gives it (`nvmlGpuFabricInfo_v3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FabricHealth {
    /// `NVML_GPU_FABRIC_HEALTH_MASK_*`.
    pub mask: u32,
    /// 0 not supported, 1 healthy, 2 unhealthy, 3 limited capacity.
    pub summary: u32,
}

impl FabricHealth {
    /// nvidia-smi's word for the summary; `None` when the driver gives none, and then
    /// nvidia-smi prints every health value as `N/A`.
    pub fn summary_name(self) -> Option<&'static str> {
        match self.summary {
            1 => Some("Healthy"),
            2 => Some("Unhealthy"),
            3 => Some("Limited Capacity"),
            _ => None,
        }
    }

    /// The value of the condition at `shift` (two bits: 0 not supported, 1 true,
    /// 2 false), in nvidia-smi's words `yes` and `no`; `None` when not supported or
    /// without a summary.
    pub fn condition(
        self,
        shift: u32,
        yes: &'static str,
        no: &'static str,
    ) -> Option<&'static str> {
        self.summary_name()?;
        match (self.mask >> shift) & 0x3 {
            1 => Some(yes),
            2 => Some(no),
            _ => None,
        }
    }
}

/// The SRAM ECC status (`nvmlEccSramErrorStatus_v1`), as nvidia-smi prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SramEcc {
    /// Whether the uncorrectable error threshold was exceeded.
    pub threshold_exceeded: bool,
    /// Volatile uncorrectable parity, volatile uncorrectable SEC-DED, aggregate
    /// uncorrectable parity, aggregate uncorrectable SEC-DED, and aggregate
    /// uncorrectable by place: L2, SM, MCU, PCIe, other.
    pub counts: [u64; 9],
}

impl<'a> Newer<'a> {
    /// Decodes `g`'s values; `current`: the GPU was sampled normally.
    pub(crate) fn new(g: &'a GpuRecord, current: bool) -> Newer<'a> {
        if !current {
            return Newer::default();
        }
        let has = |bit: u64| g.valid3 & bit != 0;
        let flag = |bit: u64, x: u32| has(bit).then_some(x != 0);
        Newer {
            temp_tlimit_c: has(v3::TEMP_TLIMIT).then_some(g.temp_tlimit_c),
            pci_class: has(v3::PCI_CLASS).then_some((g.pci_base_class, g.pci_sub_class)),
            gsp_mode: has(v3::GSP_MODE)
                .then_some((g.gsp_mode_current != 0, g.gsp_mode_default != 0)),
            addressing_mode: has(v3::ADDRESSING_MODE)
                .then_some(g.addressing_mode)
                .and_then(|m| match m {
                    0 => Some(AddressingMode::None),
                    1 => Some(AddressingMode::Hmm),
                    2 => Some(AddressingMode::Ats),
                    _ => None,
                }),
            c2c_mode: flag(v3::C2C_MODE, g.c2c_mode),
            inforom_valid: flag(v3::INFOROM_CHECKSUM, g.inforom_checksum_valid),
            power_management: flag(v3::POWER_MANAGEMENT, g.power_management_mode),
            remap_histogram: has(v3::REMAPPED_ROWS_HISTOGRAM).then_some(RemapHistogram {
                max: g.remapped_rows_hist_max,
                high: g.remapped_rows_hist_high,
                partial: g.remapped_rows_hist_partial,
                low: g.remapped_rows_hist_low,
                none: g.remapped_rows_hist_none,
            }),
            fabric_clique: has(v3::FABRIC_CLIQUE)
                .then_some((g.fabric_clique_id, g.fabric_cluster_uuid)),
            fabric_health: has(v3::FABRIC_HEALTH).then_some(FabricHealth {
                mask: g.fabric_health_mask,
                summary: g.fabric_health_summary,
            }),
            sram_ecc: has(v3::SRAM_ECC).then_some(SramEcc {
                threshold_exceeded: g.sram_ecc_threshold_exceeded != 0,
                counts: [
                    g.sram_ecc_volatile_unc_parity,
                    g.sram_ecc_volatile_unc_secded,
                    g.sram_ecc_aggregate_unc_parity,
                    g.sram_ecc_aggregate_unc_secded,
                    g.sram_ecc_aggregate_unc_l2,
                    g.sram_ecc_aggregate_unc_sm,
                    g.sram_ecc_aggregate_unc_mcu,
                    g.sram_ecc_aggregate_unc_pcie,
                    g.sram_ecc_aggregate_unc_other,
                ],
            }),
            module_power: [
                (
                    v3::MODULE_POWER_DRAW_AVERAGE,
                    g.module_power_draw_average_mw,
                ),
                (
                    v3::MODULE_POWER_DRAW_INSTANT,
                    g.module_power_draw_instant_mw,
                ),
                (v3::MODULE_POWER_LIMIT, g.module_power_limit_mw),
                (
                    v3::MODULE_ENFORCED_POWER_LIMIT,
                    g.module_enforced_power_limit_mw,
                ),
                (
                    v3::MODULE_POWER_DEFAULT_LIMIT,
                    g.module_power_default_limit_mw,
                ),
                (v3::MODULE_POWER_MIN_LIMIT, g.module_power_min_limit_mw),
                (v3::MODULE_POWER_MAX_LIMIT, g.module_power_max_limit_mw),
            ]
            .map(|(bit, mw)| has(bit).then_some(MilliWatts(mw.into()))),
            protected_memory: has(v3::PROTECTED_MEMORY).then_some([
                Bytes(g.protected_memory_total_bytes),
                Bytes(g.protected_memory_used_bytes),
                Bytes(g.protected_memory_free_bytes),
            ]),
            dram_encryption: has(v3::DRAM_ENCRYPTION).then_some((
                g.dram_encryption_current != 0,
                g.dram_encryption_pending != 0,
            )),
            platform: has(v3::PLATFORM).then(|| Platform {
                chassis_serial: Text::new(&g.platform_chassis_serial),
                gpu_fabric_guid: g.platform_gpu_fabric_guid,
                ids: [
                    g.platform_slot_number,
                    g.platform_tray_index,
                    g.platform_host_id,
                    g.platform_peer_type,
                    g.platform_module_id,
                ],
            }),
            edpp_multiplier_pct: has(v3::EDPP_MULTIPLIER).then_some(g.edpp_multiplier_pct),
            vgpu: {
                let raw = [
                    g.vgpu_heterogeneous_multi_vgpu,
                    g.vgpu_fractional_multi_vgpu,
                    g.vgpu_heterogeneous_timeslice_profiles,
                    g.vgpu_heterogeneous_timeslice_sizes,
                    g.vgpu_homogeneous_placements,
                    g.vgpu_mig_timeslicing,
                    g.vgpu_mig_timeslicing_mode,
                ];
                let mut caps = [None; 7];
                for ((cap, x), bit) in caps.iter_mut().zip(raw).zip(VGPU_BITS) {
                    *cap = has(bit).then_some(x != 0);
                }
                caps
            },
            hostname: has(v3::GPU_HOSTNAME).then(|| Text::new(&g.gpu_hostname)),
            power_smoothing: {
                let raw = [
                    g.power_smoothing_delayed_supported,
                    g.power_smoothing_primary_floor_mw,
                    g.power_smoothing_secondary_floor_mw,
                    g.power_smoothing_min_primary_act_offset_mw,
                    g.power_smoothing_min_primary_act_point_mw,
                    g.power_smoothing_window_multiplier_ms,
                    g.power_smoothing_profile_secondary_floor_mw,
                    g.power_smoothing_profile_act_window_mult,
                    g.power_smoothing_profile_tar_window_mult,
                    g.power_smoothing_profile_act_offset_mw,
                    g.power_smoothing_admin_secondary_floor_mw,
                    g.power_smoothing_admin_act_window_mult,
                    g.power_smoothing_admin_tar_window_mult,
                    g.power_smoothing_admin_act_offset_mw,
                ];
                let mut values = [None; 14];
                for ((value, x), bit) in values.iter_mut().zip(raw).zip(POWER_SMOOTHING_BITS) {
                    *value = has(bit).then_some(x);
                }
                values
            },
            deprecated: g.deprecated3 & !g.valid3,
            v4: {
                let raw = [
                    g.remapped_rows_correctable_inactive,
                    g.remapped_rows_uncorrectable_inactive,
                    g.gpu_base_current_mw,
                    g.gpu_base_requested_mw,
                    g.gpu_base_default_mw,
                    g.gpu_base_min_mw,
                    g.gpu_base_max_mw,
                    g.bbx_time_run_s,
                    g.power_smoothing_tmp_floor_mw,
                    g.power_smoothing_tmp_ceil_mw,
                    g.power_smoothing_hw_lifetime_pct,
                    g.power_smoothing_enabled,
                    g.power_smoothing_soc_enabled,
                    g.power_smoothing_priv_level,
                    g.power_smoothing_imm_ramp_down,
                    g.power_smoothing_max_pct_tmp_floor,
                    g.power_smoothing_min_pct_tmp_floor,
                    g.power_smoothing_num_preset_profiles,
                    g.power_smoothing_profile_pct_tmp_floor,
                    g.power_smoothing_profile_ramp_up_mw_s,
                    g.power_smoothing_profile_ramp_down_mw_s,
                    g.power_smoothing_profile_ramp_down_hyst_ms,
                    g.power_smoothing_active_profile,
                    g.power_smoothing_admin_pct_tmp_floor,
                    g.power_smoothing_admin_ramp_up_mw_s,
                    g.power_smoothing_admin_ramp_down_mw_s,
                    g.power_smoothing_admin_ramp_down_hyst_ms,
                ];
                let mut values = [None; 27];
                for (bit, (value, x)) in values.iter_mut().zip(raw).enumerate() {
                    *value = (g.valid4 & (1 << bit) != 0).then_some(x);
                }
                values
            },
        }
    }
}
