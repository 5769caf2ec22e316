//! The values nvidia-smi 590's `--query-gpu` added that ABI 1.6 publishes in `valid3`,
//! decoded: thermal margin, PCI class codes, GSP firmware, addressing and C2C modes,
//! infoROM checksum, power management and the row remapper histogram. Each is `None`
//! unless the GPU was sampled normally and the driver answered it.

use gpupeek_shm::layout::gpu_valid3 as v3;
use gpupeek_shm::GpuRecord;

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

/// The values of ABI 1.6's `valid3` bits.
#[derive(Debug, Clone, Copy, Default)]
pub struct Newer {
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
    /// The `valid3` bits whose value the driver answered as deprecated.
    pub deprecated: u64,
}

impl Newer {
    /// Decodes `g`'s values; `current`: the GPU was sampled normally.
    pub(crate) fn new(g: &GpuRecord, current: bool) -> Newer {
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
            deprecated: g.deprecated3 & !g.valid3,
        }
    }
}
