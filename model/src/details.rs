//! The values nvidia-smi's `--query-gpu` names beyond the core set (the segment's
//! `gpu_valid2` fields, ABI 1.4), decoded: identity (kept in every GPU state, like the
//! name), near-static modes and counters, and a few live values.
//!
//! A value the driver answered "deprecated" for is `None` here and flagged in
//! [`Details::deprecated`], so an output can say so as nvidia-smi does.

use gpupeek_shm::layout::{gpu_valid2 as v2, gpu_valid3 as v3};
use gpupeek_shm::GpuRecord;

use crate::text::Text;
use crate::units::{MegaHertz, MilliWatts};

mod newer;
pub use newer::{
    AddressingMode, FabricHealth, Newer, Platform, RemapHistogram, SramEcc, POWER_SMOOTHING_BITS,
};

/// The [`v2`] values read once per NVML session: kept in every GPU state.
pub(crate) const IDENTITY2: u64 = v2::SERIAL
    | v2::VBIOS_VERSION
    | v2::CLOCK_EVENT_REASONS_SUPPORTED
    | v2::PCI_INFO
    | v2::COMPUTE_CAP
    | v2::PCIE_LINK_GEN_MAX
    | v2::PCIE_LINK_WIDTH_MAX
    | v2::POWER_DEFAULT_LIMIT
    | v2::POWER_LIMIT_RANGE
    | v2::INFOROM_IMG
    | v2::INFOROM_OEM
    | v2::INFOROM_ECC
    | v2::INFOROM_PWR;

/// NVML's compute mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComputeMode {
    /// Many contexts per device.
    Default,
    /// One context, one thread (deprecated).
    ExclusiveThread,
    /// No contexts.
    Prohibited,
    /// One context, many threads.
    ExclusiveProcess,
}

impl ComputeMode {
    /// nvidia-smi's name.
    pub fn name(self) -> &'static str {
        match self {
            ComputeMode::Default => "Default",
            ComputeMode::ExclusiveThread => "Exclusive_Thread",
            ComputeMode::Prohibited => "Prohibited",
            ComputeMode::ExclusiveProcess => "Exclusive_Process",
        }
    }
}

/// NVML's GPU operation mode (GOM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gom {
    /// Everything on, at full speed.
    AllOn,
    /// Compute only: no graphics.
    Compute,
    /// Graphics without high-bandwidth double precision.
    LowDoublePrecision,
}

impl Gom {
    fn from_raw(x: u32) -> Option<Gom> {
        Some(match x {
            0 => Gom::AllOn,
            1 => Gom::Compute,
            2 => Gom::LowDoublePrecision,
            _ => return None,
        })
    }

    /// nvidia-smi's name.
    pub fn name(self) -> &'static str {
        match self {
            Gom::AllOn => "All On",
            Gom::Compute => "Compute",
            Gom::LowDoublePrecision => "Low Double Precision",
        }
    }
}

/// The GPU operation mode now and after the next reboot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GomSetting {
    /// In force now.
    pub current: Gom,
    /// In force after the next reboot.
    pub pending: Gom,
}

/// The GPU's registration with the NVLink fabric (NVSwitch systems).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fabric {
    /// NVML's state: 0 not supported, 1 not started, 2 in progress, 3 completed.
    pub state: u32,
    /// NVML return code of the registration, meaningful once completed.
    pub status: i32,
}

impl Fabric {
    /// nvidia-smi's name of the state: `None` for "not supported" (nvidia-smi prints a
    /// bare `N/A`, as when the call is not supported) and for a number NVML does not
    /// define.
    pub fn state_name(self) -> Option<&'static str> {
        Some(match self.state {
            1 => "Not Started",
            2 => "In Progress",
            3 => "Completed",
            _ => return None,
        })
    }

    /// nvidia-smi's words for the status (NVML's `nvmlErrorString`: "Success" in every
    /// capture of a registered H100 or H200), given for a GPU the fabric knows.
    pub fn status_name(self) -> Option<&'static str> {
        self.state_name()?;
        Some(match self.status {
            0 => "Success",
            3 => "Not Supported",
            4 => "Insufficient Permissions",
            10 => "Timeout",
            _ => "Unknown Error",
        })
    }
}

/// What the driver recommends to bring a GPU back to health (NVML's
/// `nvmlDeviceGpuRecoveryAction_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryAction {
    /// Nothing to do.
    None,
    /// Reset the GPU.
    GpuReset,
    /// Reboot the node.
    NodeReboot,
    /// Drain peer-to-peer traffic.
    DrainP2p,
    /// Drain the GPU, then reset it.
    DrainAndReset,
}

impl RecoveryAction {
    fn from_raw(x: u32) -> Option<RecoveryAction> {
        Some(match x {
            0 => RecoveryAction::None,
            1 => RecoveryAction::GpuReset,
            2 => RecoveryAction::NodeReboot,
            3 => RecoveryAction::DrainP2p,
            4 => RecoveryAction::DrainAndReset,
            _ => return None,
        })
    }

    /// nvidia-smi's name: "None" is what every capture shows; the others follow NVML's
    /// names for the action, as nvidia_gpu_exporter's NVML backend spells them.
    pub fn name(self) -> &'static str {
        match self {
            RecoveryAction::None => "None",
            RecoveryAction::GpuReset => "GPU Reset",
            RecoveryAction::NodeReboot => "Node Reboot",
            RecoveryAction::DrainP2p => "Drain P2P",
            RecoveryAction::DrainAndReset => "Drain and Reset",
        }
    }
}

/// PCI ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciIds {
    /// Domain.
    pub domain: u32,
    /// Bus.
    pub bus: u32,
    /// Device.
    pub device: u32,
    /// Device and vendor id (`0x233010DE`).
    pub device_id: u32,
    /// Subsystem id.
    pub subsystem_id: u32,
}

/// Retired pages, by cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetiredPages {
    /// For multiple single-bit ECC errors.
    pub single_bit: u32,
    /// For a double-bit ECC error.
    pub double_bit: u32,
}

/// Remapped rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemappedRows {
    /// For correctable errors.
    pub correctable: u32,
    /// For uncorrectable errors.
    pub uncorrectable: u32,
    /// A remapping waits for a reset.
    pub pending: bool,
    /// A remapping failed.
    pub failure: bool,
}

/// Encoder statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderStats {
    /// Active sessions.
    pub sessions: u32,
    /// Average frames per second.
    pub average_fps: u32,
    /// Average latency, microseconds.
    pub average_latency_us: u32,
}

/// A current and a pending setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// In force now.
    pub current: bool,
    /// In force after the next reboot.
    pub pending: bool,
}

/// The per-location ECC counts, in the order of [`Details::ecc_by_location`]: the
/// bit, and nvidia-smi's names of the count (`dram` is NVML's device memory location).
pub const ECC_LOCATIONS: [(u64, &[&str]); 28] = [
    (
        v2::ECC_CORRECTED_VOLATILE_L1_CACHE,
        &["ecc.errors.corrected.volatile.l1_cache"],
    ),
    (
        v2::ECC_CORRECTED_VOLATILE_L2_CACHE,
        &["ecc.errors.corrected.volatile.l2_cache"],
    ),
    (
        v2::ECC_CORRECTED_VOLATILE_DEVICE_MEMORY,
        &[
            "ecc.errors.corrected.volatile.device_memory",
            "ecc.errors.corrected.volatile.dram",
        ],
    ),
    (
        v2::ECC_CORRECTED_VOLATILE_REGISTER_FILE,
        &["ecc.errors.corrected.volatile.register_file"],
    ),
    (
        v2::ECC_CORRECTED_VOLATILE_TEXTURE_MEMORY,
        &["ecc.errors.corrected.volatile.texture_memory"],
    ),
    (
        v2::ECC_CORRECTED_VOLATILE_CBU,
        &["ecc.errors.corrected.volatile.cbu"],
    ),
    (
        v2::ECC_CORRECTED_VOLATILE_SRAM,
        &["ecc.errors.corrected.volatile.sram"],
    ),
    (
        v2::ECC_CORRECTED_AGGREGATE_L1_CACHE,
        &["ecc.errors.corrected.aggregate.l1_cache"],
    ),
    (
        v2::ECC_CORRECTED_AGGREGATE_L2_CACHE,
        &["ecc.errors.corrected.aggregate.l2_cache"],
    ),
    (
        v2::ECC_CORRECTED_AGGREGATE_DEVICE_MEMORY,
        &[
            "ecc.errors.corrected.aggregate.device_memory",
            "ecc.errors.corrected.aggregate.dram",
        ],
    ),
    (
        v2::ECC_CORRECTED_AGGREGATE_REGISTER_FILE,
        &["ecc.errors.corrected.aggregate.register_file"],
    ),
    (
        v2::ECC_CORRECTED_AGGREGATE_TEXTURE_MEMORY,
        &["ecc.errors.corrected.aggregate.texture_memory"],
    ),
    (
        v2::ECC_CORRECTED_AGGREGATE_CBU,
        &["ecc.errors.corrected.aggregate.cbu"],
    ),
    (
        v2::ECC_CORRECTED_AGGREGATE_SRAM,
        &["ecc.errors.corrected.aggregate.sram"],
    ),
    (
        v2::ECC_UNCORRECTED_VOLATILE_L1_CACHE,
        &["ecc.errors.uncorrected.volatile.l1_cache"],
    ),
    (
        v2::ECC_UNCORRECTED_VOLATILE_L2_CACHE,
        &["ecc.errors.uncorrected.volatile.l2_cache"],
    ),
    (
        v2::ECC_UNCORRECTED_VOLATILE_DEVICE_MEMORY,
        &[
            "ecc.errors.uncorrected.volatile.device_memory",
            "ecc.errors.uncorrected.volatile.dram",
        ],
    ),
    (
        v2::ECC_UNCORRECTED_VOLATILE_REGISTER_FILE,
        &["ecc.errors.uncorrected.volatile.register_file"],
    ),
    (
        v2::ECC_UNCORRECTED_VOLATILE_TEXTURE_MEMORY,
        &["ecc.errors.uncorrected.volatile.texture_memory"],
    ),
    (
        v2::ECC_UNCORRECTED_VOLATILE_CBU,
        &["ecc.errors.uncorrected.volatile.cbu"],
    ),
    (
        v2::ECC_UNCORRECTED_VOLATILE_SRAM,
        &["ecc.errors.uncorrected.volatile.sram"],
    ),
    (
        v2::ECC_UNCORRECTED_AGGREGATE_L1_CACHE,
        &["ecc.errors.uncorrected.aggregate.l1_cache"],
    ),
    (
        v2::ECC_UNCORRECTED_AGGREGATE_L2_CACHE,
        &["ecc.errors.uncorrected.aggregate.l2_cache"],
    ),
    (
        v2::ECC_UNCORRECTED_AGGREGATE_DEVICE_MEMORY,
        &[
            "ecc.errors.uncorrected.aggregate.device_memory",
            "ecc.errors.uncorrected.aggregate.dram",
        ],
    ),
    (
        v2::ECC_UNCORRECTED_AGGREGATE_REGISTER_FILE,
        &["ecc.errors.uncorrected.aggregate.register_file"],
    ),
    (
        v2::ECC_UNCORRECTED_AGGREGATE_TEXTURE_MEMORY,
        &["ecc.errors.uncorrected.aggregate.texture_memory"],
    ),
    (
        v2::ECC_UNCORRECTED_AGGREGATE_CBU,
        &["ecc.errors.uncorrected.aggregate.cbu"],
    ),
    (
        v2::ECC_UNCORRECTED_AGGREGATE_SRAM,
        &["ecc.errors.uncorrected.aggregate.sram"],
    ),
];

/// The values of [`v2`] a GPU shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Details<'a> {
    /// Board serial number.
    pub serial: Option<Text<'a>>,
    /// VBIOS version.
    pub vbios_version: Option<Text<'a>>,
    /// Clock event reasons the GPU can report (NVML bits).
    pub clock_event_reasons_supported: Option<u64>,
    /// PCI ids.
    pub pci: Option<PciIds>,
    /// CUDA compute capability (major, minor).
    pub compute_cap: Option<(u32, u32)>,
    /// Maximum PCIe link generation.
    pub pcie_link_gen_max: Option<u32>,
    /// Maximum PCIe link width.
    pub pcie_link_width_max: Option<u32>,
    /// Default power limit.
    pub power_default_limit: Option<MilliWatts>,
    /// Smallest power limit that can be set.
    pub power_min_limit: Option<MilliWatts>,
    /// Largest power limit that can be set.
    pub power_max_limit: Option<MilliWatts>,
    /// Instantaneous power draw.
    pub power_draw_instant: Option<MilliWatts>,
    /// Memory temperature, degrees Celsius.
    pub temp_memory_c: Option<i32>,
    /// Video clock.
    pub clock_video: Option<MegaHertz>,
    /// Applications clocks (graphics, memory).
    pub clock_app: (Option<MegaHertz>, Option<MegaHertz>),
    /// Default applications clocks (graphics, memory).
    pub clock_default_app: (Option<MegaHertz>, Option<MegaHertz>),
    /// Persistence mode.
    pub persistence_mode: Option<bool>,
    /// Compute mode (`None` also for a number NVML does not define).
    pub compute_mode: Option<ComputeMode>,
    /// Display mode (a display may be attached).
    pub display_mode: Option<bool>,
    /// Display active (a display is initialised).
    pub display_active: Option<bool>,
    /// ECC mode.
    pub ecc_mode: Option<Setting>,
    /// Accounting mode.
    pub accounting_mode: Option<bool>,
    /// Accounting buffer size, processes.
    pub accounting_buffer_size: Option<u32>,
    /// Retired pages.
    pub retired_pages: Option<RetiredPages>,
    /// Pages wait to be retired.
    pub retired_pages_pending: Option<bool>,
    /// Remapped rows.
    pub remapped_rows: Option<RemappedRows>,
    /// Encoder statistics.
    pub encoder_stats: Option<EncoderStats>,
    /// Corrected ECC errors over the GPU's life.
    pub ecc_corrected_aggregate: Option<u64>,
    /// Uncorrected ECC errors over the GPU's life.
    pub ecc_uncorrected_aggregate: Option<u64>,
    /// ECC error counts by location, in [`ECC_LOCATIONS`]'s order.
    pub ecc_by_location: [Option<u64>; ECC_LOCATIONS.len()],
    /// infoROM image version.
    pub inforom_img: Option<Text<'a>>,
    /// Version of the infoROM's OEM object.
    pub inforom_oem: Option<Text<'a>>,
    /// Version of the infoROM's ECC object.
    pub inforom_ecc: Option<Text<'a>>,
    /// Version of the infoROM's power management object.
    pub inforom_pwr: Option<Text<'a>>,
    /// GPU operation mode (`None` also for a number NVML does not define).
    pub gom: Option<GomSetting>,
    /// Fabric registration.
    pub fabric: Option<Fabric>,
    /// The recovery action the driver recommends (`None` also for a number NVML does
    /// not define).
    pub recovery_action: Option<RecoveryAction>,
    /// The clock event reason counters (ABI 1.5's `valid3`), in nvidia-smi's order:
    /// software power cap, sync boost, software thermal, hardware thermal, hardware
    /// power brake; each the number nvidia-smi prints as microseconds.
    pub clocks_event_counters_us: [Option<u64>; 5],
    /// The GPU's own maximum PCIe link generation, whatever the slot (ABI 1.5).
    pub pcie_link_gen_gpumax: Option<u32>,
    /// JPEG decoder utilisation, percent (ABI 1.5).
    pub util_jpeg_pct: Option<u32>,
    /// Optical flow accelerator utilisation, percent (ABI 1.5).
    pub util_ofa_pct: Option<u32>,
    /// The `gpu_valid2` bits whose value the driver answered as deprecated (only of a
    /// GPU whose values are current, or for identity values).
    pub deprecated: u64,
    /// nvidia-smi 590's values (ABI 1.6).
    pub newer: Newer<'a>,
}

impl<'a> Details<'a> {
    /// Decodes `g`'s values; `current`: the GPU was sampled normally, so more than its
    /// identity counts.
    pub(crate) fn new(g: &'a GpuRecord, current: bool) -> Details<'a> {
        let keep = if current { u64::MAX } else { IDENTITY2 };
        let valid = g.valid2 & keep;
        let has = |bit: u64| valid & bit != 0;
        let opt = |bit: u64, x: u32| has(bit).then_some(x);
        let flag = |bit: u64, x: u32| has(bit).then_some(x != 0);
        let mw = |bit: u64, x: u32| has(bit).then_some(MilliWatts(x.into()));
        let mhz = |bit: u64, x: u32| has(bit).then_some(MegaHertz(x.into()));
        let text = |bit: u64, field: &'a [u8]| has(bit).then(|| Text::new(field));
        Details {
            serial: text(v2::SERIAL, &g.serial),
            vbios_version: text(v2::VBIOS_VERSION, &g.vbios_version),
            clock_event_reasons_supported: has(v2::CLOCK_EVENT_REASONS_SUPPORTED)
                .then_some(g.clock_event_reasons_supported),
            pci: has(v2::PCI_INFO).then_some(PciIds {
                domain: g.pci_domain,
                bus: g.pci_bus,
                device: g.pci_device,
                device_id: g.pci_device_id,
                subsystem_id: g.pci_subsystem_id,
            }),
            compute_cap: has(v2::COMPUTE_CAP).then_some((g.compute_cap_major, g.compute_cap_minor)),
            pcie_link_gen_max: opt(v2::PCIE_LINK_GEN_MAX, g.pcie_link_gen_max),
            pcie_link_width_max: opt(v2::PCIE_LINK_WIDTH_MAX, g.pcie_link_width_max),
            power_default_limit: mw(v2::POWER_DEFAULT_LIMIT, g.power_default_limit_mw),
            power_min_limit: mw(v2::POWER_LIMIT_RANGE, g.power_min_limit_mw),
            power_max_limit: mw(v2::POWER_LIMIT_RANGE, g.power_max_limit_mw),
            power_draw_instant: mw(v2::POWER_DRAW_INSTANT, g.power_draw_instant_mw),
            temp_memory_c: has(v2::TEMP_MEMORY).then_some(g.temp_memory_c),
            clock_video: mhz(v2::CLOCK_VIDEO, g.clock_video_mhz),
            clock_app: (
                mhz(v2::CLOCK_APP_GRAPHICS, g.clock_app_graphics_mhz),
                mhz(v2::CLOCK_APP_MEM, g.clock_app_mem_mhz),
            ),
            clock_default_app: (
                mhz(
                    v2::CLOCK_DEFAULT_APP_GRAPHICS,
                    g.clock_default_app_graphics_mhz,
                ),
                mhz(v2::CLOCK_DEFAULT_APP_MEM, g.clock_default_app_mem_mhz),
            ),
            persistence_mode: flag(v2::PERSISTENCE_MODE, g.persistence_mode),
            compute_mode: opt(v2::COMPUTE_MODE, g.compute_mode).and_then(|m| match m {
                0 => Some(ComputeMode::Default),
                1 => Some(ComputeMode::ExclusiveThread),
                2 => Some(ComputeMode::Prohibited),
                3 => Some(ComputeMode::ExclusiveProcess),
                _ => None,
            }),
            display_mode: flag(v2::DISPLAY_MODE, g.display_mode),
            display_active: flag(v2::DISPLAY_ACTIVE, g.display_active),
            ecc_mode: has(v2::ECC_MODE).then_some(Setting {
                current: g.ecc_mode_current != 0,
                pending: g.ecc_mode_pending != 0,
            }),
            accounting_mode: flag(v2::ACCOUNTING_MODE, g.accounting_mode),
            accounting_buffer_size: opt(v2::ACCOUNTING_BUFFER_SIZE, g.accounting_buffer_size),
            retired_pages: has(v2::RETIRED_PAGES).then_some(RetiredPages {
                single_bit: g.retired_pages_sbe,
                double_bit: g.retired_pages_dbe,
            }),
            retired_pages_pending: flag(v2::RETIRED_PAGES_PENDING, g.retired_pages_pending),
            remapped_rows: has(v2::REMAPPED_ROWS).then_some(RemappedRows {
                correctable: g.remapped_rows_correctable,
                uncorrectable: g.remapped_rows_uncorrectable,
                pending: g.remapped_rows_pending != 0,
                failure: g.remapped_rows_failure != 0,
            }),
            encoder_stats: has(v2::ENCODER_STATS).then_some(EncoderStats {
                sessions: g.encoder_session_count,
                average_fps: g.encoder_average_fps,
                average_latency_us: g.encoder_average_latency_us,
            }),
            ecc_corrected_aggregate: has(v2::ECC_CORRECTED_AGGREGATE)
                .then_some(g.ecc_corrected_aggregate_count),
            ecc_uncorrected_aggregate: has(v2::ECC_UNCORRECTED_AGGREGATE)
                .then_some(g.ecc_uncorrected_aggregate_count),
            ecc_by_location: [
                has(v2::ECC_CORRECTED_VOLATILE_L1_CACHE)
                    .then_some(g.ecc_corrected_volatile_l1_cache),
                has(v2::ECC_CORRECTED_VOLATILE_L2_CACHE)
                    .then_some(g.ecc_corrected_volatile_l2_cache),
                has(v2::ECC_CORRECTED_VOLATILE_DEVICE_MEMORY)
                    .then_some(g.ecc_corrected_volatile_device_memory),
                has(v2::ECC_CORRECTED_VOLATILE_REGISTER_FILE)
                    .then_some(g.ecc_corrected_volatile_register_file),
                has(v2::ECC_CORRECTED_VOLATILE_TEXTURE_MEMORY)
                    .then_some(g.ecc_corrected_volatile_texture_memory),
                has(v2::ECC_CORRECTED_VOLATILE_CBU).then_some(g.ecc_corrected_volatile_cbu),
                has(v2::ECC_CORRECTED_VOLATILE_SRAM).then_some(g.ecc_corrected_volatile_sram),
                has(v2::ECC_CORRECTED_AGGREGATE_L1_CACHE)
                    .then_some(g.ecc_corrected_aggregate_l1_cache),
                has(v2::ECC_CORRECTED_AGGREGATE_L2_CACHE)
                    .then_some(g.ecc_corrected_aggregate_l2_cache),
                has(v2::ECC_CORRECTED_AGGREGATE_DEVICE_MEMORY)
                    .then_some(g.ecc_corrected_aggregate_device_memory),
                has(v2::ECC_CORRECTED_AGGREGATE_REGISTER_FILE)
                    .then_some(g.ecc_corrected_aggregate_register_file),
                has(v2::ECC_CORRECTED_AGGREGATE_TEXTURE_MEMORY)
                    .then_some(g.ecc_corrected_aggregate_texture_memory),
                has(v2::ECC_CORRECTED_AGGREGATE_CBU).then_some(g.ecc_corrected_aggregate_cbu),
                has(v2::ECC_CORRECTED_AGGREGATE_SRAM).then_some(g.ecc_corrected_aggregate_sram),
                has(v2::ECC_UNCORRECTED_VOLATILE_L1_CACHE)
                    .then_some(g.ecc_uncorrected_volatile_l1_cache),
                has(v2::ECC_UNCORRECTED_VOLATILE_L2_CACHE)
                    .then_some(g.ecc_uncorrected_volatile_l2_cache),
                has(v2::ECC_UNCORRECTED_VOLATILE_DEVICE_MEMORY)
                    .then_some(g.ecc_uncorrected_volatile_device_memory),
                has(v2::ECC_UNCORRECTED_VOLATILE_REGISTER_FILE)
                    .then_some(g.ecc_uncorrected_volatile_register_file),
                has(v2::ECC_UNCORRECTED_VOLATILE_TEXTURE_MEMORY)
                    .then_some(g.ecc_uncorrected_volatile_texture_memory),
                has(v2::ECC_UNCORRECTED_VOLATILE_CBU).then_some(g.ecc_uncorrected_volatile_cbu),
                has(v2::ECC_UNCORRECTED_VOLATILE_SRAM).then_some(g.ecc_uncorrected_volatile_sram),
                has(v2::ECC_UNCORRECTED_AGGREGATE_L1_CACHE)
                    .then_some(g.ecc_uncorrected_aggregate_l1_cache),
                has(v2::ECC_UNCORRECTED_AGGREGATE_L2_CACHE)
                    .then_some(g.ecc_uncorrected_aggregate_l2_cache),
                has(v2::ECC_UNCORRECTED_AGGREGATE_DEVICE_MEMORY)
                    .then_some(g.ecc_uncorrected_aggregate_device_memory),
                has(v2::ECC_UNCORRECTED_AGGREGATE_REGISTER_FILE)
                    .then_some(g.ecc_uncorrected_aggregate_register_file),
                has(v2::ECC_UNCORRECTED_AGGREGATE_TEXTURE_MEMORY)
                    .then_some(g.ecc_uncorrected_aggregate_texture_memory),
                has(v2::ECC_UNCORRECTED_AGGREGATE_CBU).then_some(g.ecc_uncorrected_aggregate_cbu),
                has(v2::ECC_UNCORRECTED_AGGREGATE_SRAM).then_some(g.ecc_uncorrected_aggregate_sram),
            ],
            inforom_img: text(v2::INFOROM_IMG, &g.inforom_img),
            inforom_oem: text(v2::INFOROM_OEM, &g.inforom_oem),
            inforom_ecc: text(v2::INFOROM_ECC, &g.inforom_ecc),
            inforom_pwr: text(v2::INFOROM_PWR, &g.inforom_pwr),
            gom: has(v2::GOM)
                .then(|| {
                    Some(GomSetting {
                        current: Gom::from_raw(g.gom_current)?,
                        pending: Gom::from_raw(g.gom_pending)?,
                    })
                })
                .flatten(),
            fabric: has(v2::FABRIC).then_some(Fabric {
                state: g.fabric_state,
                status: g.fabric_status,
            }),
            recovery_action: has(v2::RECOVERY_ACTION)
                .then(|| RecoveryAction::from_raw(g.gpu_recovery_action))
                .flatten(),
            clocks_event_counters_us: {
                let valid3 = if current { g.valid3 } else { 0 };
                let us = |bit: u64, x: u64| (valid3 & bit != 0).then_some(x);
                [
                    us(
                        v3::CLOCKS_EVENT_US_SW_POWER_CAP,
                        g.clocks_event_us_sw_power_cap,
                    ),
                    us(v3::CLOCKS_EVENT_US_SYNC_BOOST, g.clocks_event_us_sync_boost),
                    us(
                        v3::CLOCKS_EVENT_US_SW_THERMAL_SLOWDOWN,
                        g.clocks_event_us_sw_thermal_slowdown,
                    ),
                    us(
                        v3::CLOCKS_EVENT_US_HW_THERMAL_SLOWDOWN,
                        g.clocks_event_us_hw_thermal_slowdown,
                    ),
                    us(
                        v3::CLOCKS_EVENT_US_HW_POWER_BRAKE_SLOWDOWN,
                        g.clocks_event_us_hw_power_brake_slowdown,
                    ),
                ]
            },
            pcie_link_gen_gpumax: (current && g.valid3 & v3::PCIE_LINK_GEN_GPUMAX != 0)
                .then_some(g.pcie_link_gen_gpumax),
            util_jpeg_pct: (current && g.valid3 & v3::UTIL_JPEG != 0).then_some(g.util_jpeg_pct),
            util_ofa_pct: (current && g.valid3 & v3::UTIL_OFA != 0).then_some(g.util_ofa_pct),
            deprecated: g.deprecated2 & keep & !valid,
            newer: Newer::new(g, current),
        }
    }
}
