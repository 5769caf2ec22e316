//! The segment's records: `#[repr(C)]`, every field a fixed-width integer or byte array,
//! no implicit padding, units in every field name.
//!
//! The segment is laid out as:
//!
//! | region      | offset (ABI 1.0) | size                        | protected by              |
//! |-------------|------------------|-----------------------------|---------------------------|
//! | [`StaticHeader`] | 0           | 128                         | written once before `magic` |
//! | generation word  | 128         | 8 (on its own 128-byte line) | single atomic word        |
//! | [`StatusRecord`] | 256         | 256                         | its own seqlock (`seq`)   |
//! | GPU table   | 512              | `gpu_capacity` × [`GpuRecord`] | one seqlock per record |
//! | process table | after GPUs     | [`ProcTableHead`] + `proc_capacity` × [`ProcRecord`] | the head's seqlock |
//! | history (1.1) | after processes | `gpu_capacity` rings: [`HistoryHead`] + `history_slots` × [`HistorySample`] | one seqlock per ring (the head's `seq`) |
//! | MIG table (1.4) | after history | [`MigTableHead`] + `mig_capacity` × [`MigRecord`] | the head's seqlock |
//! | tier table (1.7) | after the MIG table, at [`StaticHeader::tier_table_offset`] | [`TierTableHead`] + `track_count` tracks: [`TrackHead`] + raw, tier-1 and tier-2 rings of [`TierBucket`] | one seqlock per track (the head's `seq`) |
//! | text pool (1.5) | after the MIG table, at [`ProcTableHead::text_pool_offset`] | `text_pool_size_bytes`: `proc_capacity` × [`TEXT_POOL_BYTES_PER_PROC_SLOT`] | the process table head's seqlock |
//!
//! The text pool is the one region whose place is in a seqlocked head rather than the
//! static header (whose 128 bytes are all in use): its offset and size are constant for
//! a writer, and a reader checks them against the mapping in every snapshot.
//!
//! Readers never hard-code these offsets: every one of them is in the static header and is
//! checked against the mapping before use. Strings are NUL-padded UTF-8 byte arrays; an
//! optional value whose validity bit is clear is "not available", never zero.
//! Sentinels: `u32::MAX` for a MIG instance id means "none".

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

#[macro_use]
mod tables;
mod history;
mod mig;
mod procs;
mod tiers;

pub use history::*;
pub use mig::*;
pub use procs::*;
pub use tables::{Bit, BitSet, EnumTable, Variant};
pub use tiers::*;

/// `b"GPUPEEK\0"` read as a little-endian `u64`; the first word of every segment.
pub const MAGIC: u64 = u64::from_le_bytes(*b"GPUPEEK\0");
/// ABI major version: a reader refuses any other major.
pub const ABI_MAJOR: u32 = 1;
/// ABI minor version: fields added at the end of a record bump it.
pub const ABI_MINOR: u32 = 12;
/// Alignment of every region and record slot, in bytes (two cache lines).
pub const SLOT_ALIGN: usize = 128;
/// Offset of the generation word.
pub const GENERATION_OFFSET: usize = 128;
/// Offset of the status record.
pub const STATUS_OFFSET: usize = 256;
/// Offset of the GPU table.
pub const GPU_TABLE_OFFSET: usize = 512;
/// Default number of GPU slots.
pub const DEFAULT_GPU_CAPACITY: u32 = 64;
/// Default number of process slots.
pub const DEFAULT_PROC_CAPACITY: u32 = 1024;
/// History samples per GPU a writer keeps by default (ABI 1.1): five minutes at 1 s.
pub const DEFAULT_HISTORY_SLOTS: u32 = 300;
/// MIG instance slots a writer keeps per GPU slot (ABI 1.4): a GPU has at most seven
/// MIG devices (seven compute slices).
pub const MIG_SLOTS_PER_GPU: u32 = 7;
/// Bytes of text pool a writer keeps per process slot (ABI 1.5): 2 MiB for the default
/// 1024 slots. A process's text is its whole command name and up to
/// [`MAX_TEXT_PER_PROCESS`] bytes of its command line, stored once however many GPUs it
/// uses; when the pool is full, later processes have only their fields' fixed copies.
pub const TEXT_POOL_BYTES_PER_PROC_SLOT: u32 = 2048;
/// Most bytes of one process's command line a writer puts in the text pool (ABI 1.5);
/// a longer one is cut there (on a character boundary) and marked by `cmdline_len`.
pub const MAX_TEXT_PER_PROCESS: usize = 32 << 10;
/// Largest history ring a reader accepts.
pub const MAX_HISTORY_SLOTS: u32 = 65536;
/// Largest capacity a reader accepts, so a hostile header cannot ask for huge copies.
pub const MAX_CAPACITY: u32 = 65536;

/// Every bit set of the ABI as a table, for code that walks them (the readers' generator).
pub const BIT_SETS: [BitSet; 11] = [
    status_valid::SET,
    gpu_valid::SET,
    gpu_valid2::SET,
    gpu_valid3::SET,
    gpu_valid4::SET,
    proc_flags::SET,
    proc_kind::SET,
    proc_valid::SET,
    history_valid::SET,
    mig_valid::SET,
    tier_valid::SET,
];

/// Every state enum of the ABI as a table.
pub const STATE_ENUMS: [EnumTable; 4] = [
    DaemonState::TABLE,
    GpuState::TABLE,
    ProcPolicy::TABLE,
    TrackKind::TABLE,
];

state_enum! {
    /// What the daemon is doing; `StatusRecord::state`.
    pub enum DaemonState in StatusRecord.state {
        /// Segment created, nothing published yet.
        Starting = 0 => "starting",
        /// Publishing every period.
        Live = 1 => "live",
        /// NVML failed (to load or initialise); see `nvml_error_code` / `error_message`.
        NvmlError = 2 => "nvml_error",
        /// The daemon shut down cleanly.
        Stopped = 3 => "stopped",
        /// An operator asked the daemon to let go of NVML (for a GPU reset or a MIG
        /// change): it holds no NVML handle and publishes no GPU until asked to take it
        /// back (1.3).
        Released = 4 => "released",
    }
}

state_enum! {
    /// The health of one GPU; `GpuRecord::state`.
    pub enum GpuState in GpuRecord.state {
        /// Unused slot.
        Empty = 0 => "empty",
        /// Sampled normally this tick.
        Ok = 1 => "ok",
        /// NVML reports the GPU as lost (fell off the bus); values are not current.
        Lost = 2 => "lost",
        /// The GPU could not be sampled (e.g. its handle failed); see `nvml_error_code`.
        Error = 3 => "error",
        /// Runtime-suspended: not queried so it can sleep; values are not current.
        Suspended = 4 => "suspended",
        /// Idle, and the daemon has released NVML so that runtime PM can suspend it, but
        /// it has not suspended yet: not queried; values are not current.
        Idle = 5 => "idle",
        /// The driver has not answered a call for this GPU within the daemon's NVML
        /// timeout (a GPU after an Xid, a driver stuck in D state): values are not
        /// current; identity is kept. Cleared when the call returns (1.3).
        NotResponding = 6 => "not responding",
    }
}

/// Written once by the daemon when it (re)initialises the segment, `magic` last.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct StaticHeader {
    /// [`MAGIC`]; zero while the daemon is still initialising the segment.
    pub magic: u64,
    /// [`ABI_MAJOR`] of the writer.
    pub abi_major: u32,
    /// [`ABI_MINOR`] of the writer.
    pub abi_minor: u32,
    /// Total size of the segment in bytes; must equal the object's size.
    pub segment_size_bytes: u64,
    /// Random value chosen at each daemon start; changes when a daemon restarts.
    pub epoch: u64,
    /// Process id of the writing daemon (in its own pid namespace).
    pub writer_pid: u32,
    /// Size of the status record in bytes.
    pub status_size_bytes: u32,
    /// Offset of the status record.
    pub status_offset: u64,
    /// Offset of the GPU table.
    pub gpu_table_offset: u64,
    /// Size of one GPU slot in bytes (a multiple of 128).
    pub gpu_record_size_bytes: u32,
    /// Number of GPU slots.
    pub gpu_capacity: u32,
    /// Offset of the process table (its head record).
    pub proc_table_offset: u64,
    /// Size of one process slot in bytes.
    pub proc_record_size_bytes: u32,
    /// Number of process slots.
    pub proc_capacity: u32,
    /// Offset of the generation word.
    pub generation_offset: u64,
    /// Offset of the history region (ABI 1.1): one ring per GPU slot, each
    /// `history_ring_size_bytes` long. 0 means "no history" (a 1.0 writer).
    pub history_offset: u64,
    /// Size of one GPU's ring in bytes: [`HistoryHead`] and `history_slots` samples,
    /// rounded up to a multiple of 128 (ABI 1.1).
    pub history_ring_size_bytes: u32,
    /// Samples per ring (ABI 1.1).
    pub history_slots: u32,
    /// Size of one [`HistorySample`] in bytes (ABI 1.1).
    pub history_sample_size_bytes: u32,
    /// Offset of the tier table (ABI 1.7): a [`TierTableHead`] and its tracks of
    /// tiered history. 0 means "no tiered history" (an older writer). A `u32` since a
    /// reader maps at most 256 MiB.
    pub tier_table_offset: u32,
    /// Offset of the MIG table (ABI 1.4): a [`MigTableHead`] followed by `mig_capacity`
    /// slots of `mig_record_size_bytes`. 0 means "no MIG table" (an older writer).
    pub mig_table_offset: u64,
    /// Size of one [`MigRecord`] slot in bytes (ABI 1.4).
    pub mig_record_size_bytes: u32,
    /// Number of MIG instance slots (ABI 1.4).
    pub mig_capacity: u32,
}

bit_set! {
    /// Validity bits of [`StatusRecord::valid`].
    pub mod status_valid: u64, in StatusRecord.valid {
        /// `driver_version` is set.
        DRIVER_VERSION = 0 [driver_version],
        /// `nvml_version` is set.
        NVML_VERSION = 1 [nvml_version],
        /// `cuda_driver_version` is set.
        CUDA_DRIVER_VERSION = 2 [cuda_driver_version],
    }
}

/// The daemon's state, heartbeat and versions, under its own seqlock.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct StatusRecord {
    /// Seqlock sequence: odd while being written.
    pub seq: u64,
    /// [`DaemonState`] as a raw value.
    pub state: u32,
    /// NVML return code of the last failure (0 when none).
    pub nvml_error_code: i32,
    /// `CLOCK_MONOTONIC` time of the last publish (or state change), in ns.
    pub heartbeat_mono_ns: u64,
    /// Sampling period, in ns.
    pub period_ns: u64,
    /// Wall-clock time (Unix epoch) of the last publish, in ns.
    pub published_unix_ns: u64,
    /// Number of GPU slots in use (`0..gpu_count`).
    pub gpu_count: u32,
    /// CUDA driver version as NVML reports it (e.g. 12040 for 12.4).
    pub cuda_driver_version: i32,
    /// Bits from [`status_valid`].
    pub valid: u64,
    /// Driver version string, e.g. "550.54.15".
    pub driver_version: [u8; 32],
    /// NVML library version string.
    pub nvml_version: [u8; 32],
    /// Human-readable message for `NvmlError` (empty otherwise).
    pub error_message: [u8; 128],
    /// Zero; room for later minor versions.
    pub reserved: [u64; 1],
}

bit_set! {
    /// Validity bits of [`GpuRecord::valid`]: one per optional field.
    pub mod gpu_valid: u64, in GpuRecord.valid {
        /// `name`.
        NAME = 0 [name],
        /// `uuid`.
        UUID = 1 [uuid],
        /// `pci_bus_id`.
        PCI_BUS_ID = 2 [pci_bus_id],
        /// `mem_total_bytes`, `mem_used_bytes`, `mem_free_bytes`.
        MEMORY = 3 [mem_total_bytes, mem_used_bytes, mem_free_bytes],
        /// `mem_reserved_bytes`.
        MEM_RESERVED = 4 [mem_reserved_bytes],
        /// `util_gpu_pct` and `util_mem_pct`.
        UTILIZATION = 5 [util_gpu_pct, util_mem_pct],
        /// `util_enc_pct`.
        UTIL_ENC = 6 [util_enc_pct],
        /// `util_dec_pct`.
        UTIL_DEC = 7 [util_dec_pct],
        /// `temp_gpu_c`.
        TEMPERATURE = 8 [temp_gpu_c],
        /// `fan_speed_pct`.
        FAN_SPEED = 9 [fan_speed_pct],
        /// `power_draw_mw`.
        POWER_DRAW = 10 [power_draw_mw],
        /// `power_limit_mw`.
        POWER_LIMIT = 11 [power_limit_mw],
        /// `energy_mj`.
        ENERGY = 12 [energy_mj],
        /// `clock_graphics_mhz`.
        CLOCK_GRAPHICS = 13 [clock_graphics_mhz],
        /// `clock_sm_mhz`.
        CLOCK_SM = 14 [clock_sm_mhz],
        /// `clock_mem_mhz`.
        CLOCK_MEM = 15 [clock_mem_mhz],
        /// `clock_graphics_max_mhz`.
        CLOCK_GRAPHICS_MAX = 16 [clock_graphics_max_mhz],
        /// `clock_sm_max_mhz`.
        CLOCK_SM_MAX = 17 [clock_sm_max_mhz],
        /// `clock_mem_max_mhz`.
        CLOCK_MEM_MAX = 18 [clock_mem_max_mhz],
        /// `pstate`.
        PSTATE = 19 [pstate],
        /// `clock_event_reasons`.
        CLOCK_EVENT_REASONS = 20 [clock_event_reasons],
        /// `pcie_tx_kbytes_per_s`.
        PCIE_TX = 21 [pcie_tx_kbytes_per_s],
        /// `pcie_rx_kbytes_per_s`.
        PCIE_RX = 22 [pcie_rx_kbytes_per_s],
        /// `pcie_link_gen`.
        PCIE_LINK_GEN = 23 [pcie_link_gen],
        /// `pcie_link_width`.
        PCIE_LINK_WIDTH = 24 [pcie_link_width],
        /// `ecc_corrected_volatile_count`.
        ECC_CORRECTED = 25 [ecc_corrected_volatile_count],
        /// `ecc_uncorrected_volatile_count`.
        ECC_UNCORRECTED = 26 [ecc_uncorrected_volatile_count],
        /// `process_count` and this GPU's process slots (the process list was readable).
        PROCESSES = 27 [process_count],
        /// `gpm_interval_ns`: GPM metrics were computed this period (ABI 1.1). Each GPM value
        /// below has its own bit as well, since a GPU may support only some of them.
        GPM = 28 [gpm_interval_ns],
        /// `gpm_sm_activity_centipct` (ABI 1.1).
        GPM_SM_ACTIVITY = 29 [gpm_sm_activity_centipct],
        /// `gpm_sm_occupancy_centipct` (ABI 1.1).
        GPM_SM_OCCUPANCY = 30 [gpm_sm_occupancy_centipct],
        /// `gpm_tensor_activity_centipct` (ABI 1.1).
        GPM_TENSOR_ACTIVITY = 31 [gpm_tensor_activity_centipct],
        /// `gpm_dram_bw_util_centipct` (ABI 1.1).
        GPM_DRAM_BW = 32 [gpm_dram_bw_util_centipct],
        /// `gpm_pcie_tx_bytes_per_s` and `gpm_pcie_rx_bytes_per_s` (ABI 1.1).
        GPM_PCIE = 33 [gpm_pcie_tx_bytes_per_s, gpm_pcie_rx_bytes_per_s],
        /// `gpm_nvlink_tx_bytes_per_s` and `gpm_nvlink_rx_bytes_per_s` (ABI 1.1).
        GPM_NVLINK = 34 [gpm_nvlink_tx_bytes_per_s, gpm_nvlink_rx_bytes_per_s],
        /// `idle_since_mono_ns`: utilisation is known and has been 0 % since then (ABI 1.1).
        /// Clear while the GPU is busy.
        IDLE_SINCE = 35 [idle_since_mono_ns],
        /// `mig_mode_current` and `mig_mode_pending`: the GPU can do MIG (ABI 1.4).
        MIG_MODE = 36 [mig_mode_current, mig_mode_pending],
    }
}

bit_set! {
    /// Validity bits of [`GpuRecord::valid2`] (ABI 1.4): the values nvidia-smi's
    /// `--query-gpu` names beyond the first set. The same bits in
    /// [`GpuRecord::deprecated2`] say the driver answered `NVML_ERROR_DEPRECATED` for
    /// that value (nvidia-smi prints "[Requested functionality has been deprecated]").
    pub mod gpu_valid2: u64, in GpuRecord.valid2 {
        /// `serial`.
        SERIAL = 0 [serial],
        /// `vbios_version`.
        VBIOS_VERSION = 1 [vbios_version],
        /// `clock_event_reasons_supported`.
        CLOCK_EVENT_REASONS_SUPPORTED = 2 [clock_event_reasons_supported],
        /// `ecc_corrected_aggregate_count`.
        ECC_CORRECTED_AGGREGATE = 3 [ecc_corrected_aggregate_count],
        /// `ecc_uncorrected_aggregate_count`.
        ECC_UNCORRECTED_AGGREGATE = 4 [ecc_uncorrected_aggregate_count],
        /// `pci_domain`, `pci_bus`, `pci_device`, `pci_device_id`, `pci_subsystem_id`.
        PCI_INFO = 5 [pci_domain, pci_bus, pci_device, pci_device_id, pci_subsystem_id],
        /// `compute_cap_major` and `compute_cap_minor`.
        COMPUTE_CAP = 6 [compute_cap_major, compute_cap_minor],
        /// `pcie_link_gen_max`.
        PCIE_LINK_GEN_MAX = 7 [pcie_link_gen_max],
        /// `pcie_link_width_max`.
        PCIE_LINK_WIDTH_MAX = 8 [pcie_link_width_max],
        /// `power_default_limit_mw`.
        POWER_DEFAULT_LIMIT = 9 [power_default_limit_mw],
        /// `power_min_limit_mw` and `power_max_limit_mw`.
        POWER_LIMIT_RANGE = 10 [power_min_limit_mw, power_max_limit_mw],
        /// `power_draw_instant_mw`.
        POWER_DRAW_INSTANT = 11 [power_draw_instant_mw],
        /// `temp_memory_c`.
        TEMP_MEMORY = 12 [temp_memory_c],
        /// `clock_video_mhz`.
        CLOCK_VIDEO = 13 [clock_video_mhz],
        /// `clock_app_graphics_mhz`.
        CLOCK_APP_GRAPHICS = 14 [clock_app_graphics_mhz],
        /// `clock_app_mem_mhz`.
        CLOCK_APP_MEM = 15 [clock_app_mem_mhz],
        /// `clock_default_app_graphics_mhz`.
        CLOCK_DEFAULT_APP_GRAPHICS = 16 [clock_default_app_graphics_mhz],
        /// `clock_default_app_mem_mhz`.
        CLOCK_DEFAULT_APP_MEM = 17 [clock_default_app_mem_mhz],
        /// `persistence_mode`.
        PERSISTENCE_MODE = 18 [persistence_mode],
        /// `compute_mode`.
        COMPUTE_MODE = 19 [compute_mode],
        /// `display_mode`.
        DISPLAY_MODE = 20 [display_mode],
        /// `display_active`.
        DISPLAY_ACTIVE = 21 [display_active],
        /// `ecc_mode_current` and `ecc_mode_pending`.
        ECC_MODE = 22 [ecc_mode_current, ecc_mode_pending],
        /// `accounting_mode`.
        ACCOUNTING_MODE = 23 [accounting_mode],
        /// `accounting_buffer_size`.
        ACCOUNTING_BUFFER_SIZE = 24 [accounting_buffer_size],
        /// `retired_pages_sbe` and `retired_pages_dbe`.
        RETIRED_PAGES = 25 [retired_pages_sbe, retired_pages_dbe],
        /// `retired_pages_pending`.
        RETIRED_PAGES_PENDING = 26 [retired_pages_pending],
        /// `remapped_rows_correctable`, `remapped_rows_uncorrectable`,
        /// `remapped_rows_pending`, `remapped_rows_failure`.
        REMAPPED_ROWS = 27 [remapped_rows_correctable, remapped_rows_uncorrectable,
            remapped_rows_pending, remapped_rows_failure],
        /// `encoder_session_count`, `encoder_average_fps`, `encoder_average_latency_us`.
        ENCODER_STATS = 28 [encoder_session_count, encoder_average_fps,
            encoder_average_latency_us],
        /// `ecc_corrected_volatile_l1_cache`.
        ECC_CORRECTED_VOLATILE_L1_CACHE = 29 [ecc_corrected_volatile_l1_cache],
        /// `ecc_corrected_volatile_l2_cache`.
        ECC_CORRECTED_VOLATILE_L2_CACHE = 30 [ecc_corrected_volatile_l2_cache],
        /// `ecc_corrected_volatile_device_memory`.
        ECC_CORRECTED_VOLATILE_DEVICE_MEMORY = 31 [ecc_corrected_volatile_device_memory],
        /// `ecc_corrected_volatile_register_file`.
        ECC_CORRECTED_VOLATILE_REGISTER_FILE = 32 [ecc_corrected_volatile_register_file],
        /// `ecc_corrected_volatile_texture_memory`.
        ECC_CORRECTED_VOLATILE_TEXTURE_MEMORY = 33 [ecc_corrected_volatile_texture_memory],
        /// `ecc_corrected_volatile_cbu`.
        ECC_CORRECTED_VOLATILE_CBU = 34 [ecc_corrected_volatile_cbu],
        /// `ecc_corrected_volatile_sram`.
        ECC_CORRECTED_VOLATILE_SRAM = 35 [ecc_corrected_volatile_sram],
        /// `ecc_corrected_aggregate_l1_cache`.
        ECC_CORRECTED_AGGREGATE_L1_CACHE = 36 [ecc_corrected_aggregate_l1_cache],
        /// `ecc_corrected_aggregate_l2_cache`.
        ECC_CORRECTED_AGGREGATE_L2_CACHE = 37 [ecc_corrected_aggregate_l2_cache],
        /// `ecc_corrected_aggregate_device_memory`.
        ECC_CORRECTED_AGGREGATE_DEVICE_MEMORY = 38 [ecc_corrected_aggregate_device_memory],
        /// `ecc_corrected_aggregate_register_file`.
        ECC_CORRECTED_AGGREGATE_REGISTER_FILE = 39 [ecc_corrected_aggregate_register_file],
        /// `ecc_corrected_aggregate_texture_memory`.
        ECC_CORRECTED_AGGREGATE_TEXTURE_MEMORY = 40 [ecc_corrected_aggregate_texture_memory],
        /// `ecc_corrected_aggregate_cbu`.
        ECC_CORRECTED_AGGREGATE_CBU = 41 [ecc_corrected_aggregate_cbu],
        /// `ecc_corrected_aggregate_sram`.
        ECC_CORRECTED_AGGREGATE_SRAM = 42 [ecc_corrected_aggregate_sram],
        /// `ecc_uncorrected_volatile_l1_cache`.
        ECC_UNCORRECTED_VOLATILE_L1_CACHE = 43 [ecc_uncorrected_volatile_l1_cache],
        /// `ecc_uncorrected_volatile_l2_cache`.
        ECC_UNCORRECTED_VOLATILE_L2_CACHE = 44 [ecc_uncorrected_volatile_l2_cache],
        /// `ecc_uncorrected_volatile_device_memory`.
        ECC_UNCORRECTED_VOLATILE_DEVICE_MEMORY = 45 [ecc_uncorrected_volatile_device_memory],
        /// `ecc_uncorrected_volatile_register_file`.
        ECC_UNCORRECTED_VOLATILE_REGISTER_FILE = 46 [ecc_uncorrected_volatile_register_file],
        /// `ecc_uncorrected_volatile_texture_memory`.
        ECC_UNCORRECTED_VOLATILE_TEXTURE_MEMORY = 47 [ecc_uncorrected_volatile_texture_memory],
        /// `ecc_uncorrected_volatile_cbu`.
        ECC_UNCORRECTED_VOLATILE_CBU = 48 [ecc_uncorrected_volatile_cbu],
        /// `ecc_uncorrected_volatile_sram`.
        ECC_UNCORRECTED_VOLATILE_SRAM = 49 [ecc_uncorrected_volatile_sram],
        /// `ecc_uncorrected_aggregate_l1_cache`.
        ECC_UNCORRECTED_AGGREGATE_L1_CACHE = 50 [ecc_uncorrected_aggregate_l1_cache],
        /// `ecc_uncorrected_aggregate_l2_cache`.
        ECC_UNCORRECTED_AGGREGATE_L2_CACHE = 51 [ecc_uncorrected_aggregate_l2_cache],
        /// `ecc_uncorrected_aggregate_device_memory`.
        ECC_UNCORRECTED_AGGREGATE_DEVICE_MEMORY = 52 [ecc_uncorrected_aggregate_device_memory],
        /// `ecc_uncorrected_aggregate_register_file`.
        ECC_UNCORRECTED_AGGREGATE_REGISTER_FILE = 53 [ecc_uncorrected_aggregate_register_file],
        /// `ecc_uncorrected_aggregate_texture_memory`.
        ECC_UNCORRECTED_AGGREGATE_TEXTURE_MEMORY = 54 [ecc_uncorrected_aggregate_texture_memory],
        /// `ecc_uncorrected_aggregate_cbu`.
        ECC_UNCORRECTED_AGGREGATE_CBU = 55 [ecc_uncorrected_aggregate_cbu],
        /// `ecc_uncorrected_aggregate_sram`.
        ECC_UNCORRECTED_AGGREGATE_SRAM = 56 [ecc_uncorrected_aggregate_sram],
        /// `inforom_img` (ABI 1.5).
        INFOROM_IMG = 57 [inforom_img],
        /// `inforom_oem` (ABI 1.5).
        INFOROM_OEM = 58 [inforom_oem],
        /// `inforom_ecc` (ABI 1.5).
        INFOROM_ECC = 59 [inforom_ecc],
        /// `inforom_pwr` (ABI 1.5).
        INFOROM_PWR = 60 [inforom_pwr],
        /// `gom_current` and `gom_pending` (ABI 1.5).
        GOM = 61 [gom_current, gom_pending],
        /// `fabric_state` and `fabric_status` (ABI 1.5).
        FABRIC = 62 [fabric_state, fabric_status],
        /// `gpu_recovery_action` (ABI 1.5). The last bit of `valid2`.
        RECOVERY_ACTION = 63 [gpu_recovery_action],
    }
}

bit_set! {
    /// Validity bits of [`GpuRecord::valid3`] (ABI 1.5): the `--query-gpu` values past
    /// `valid2`'s.
    pub mod gpu_valid3: u64, in GpuRecord.valid3 {
        /// `clocks_event_us_sw_power_cap` (ABI 1.5).
        CLOCKS_EVENT_US_SW_POWER_CAP = 0 [clocks_event_us_sw_power_cap],
        /// `clocks_event_us_sync_boost` (ABI 1.5).
        CLOCKS_EVENT_US_SYNC_BOOST = 1 [clocks_event_us_sync_boost],
        /// `clocks_event_us_sw_thermal_slowdown` (ABI 1.5).
        CLOCKS_EVENT_US_SW_THERMAL_SLOWDOWN = 2 [clocks_event_us_sw_thermal_slowdown],
        /// `clocks_event_us_hw_thermal_slowdown` (ABI 1.5).
        CLOCKS_EVENT_US_HW_THERMAL_SLOWDOWN = 3 [clocks_event_us_hw_thermal_slowdown],
        /// `clocks_event_us_hw_power_brake_slowdown` (ABI 1.5).
        CLOCKS_EVENT_US_HW_POWER_BRAKE_SLOWDOWN = 4 [clocks_event_us_hw_power_brake_slowdown],
        /// `pcie_link_gen_gpumax` (ABI 1.5).
        PCIE_LINK_GEN_GPUMAX = 5 [pcie_link_gen_gpumax],
        /// `util_jpeg_pct` (ABI 1.5).
        UTIL_JPEG = 6 [util_jpeg_pct],
        /// `util_ofa_pct` (ABI 1.5).
        UTIL_OFA = 7 [util_ofa_pct],
        /// `temp_tlimit_c` (ABI 1.6).
        TEMP_TLIMIT = 8 [temp_tlimit_c],
        /// `pci_base_class` and `pci_sub_class` (ABI 1.6).
        PCI_CLASS = 9 [pci_base_class, pci_sub_class],
        /// `gsp_mode_current` and `gsp_mode_default` (ABI 1.6).
        GSP_MODE = 10 [gsp_mode_current, gsp_mode_default],
        /// `addressing_mode` (ABI 1.6).
        ADDRESSING_MODE = 11 [addressing_mode],
        /// `c2c_mode` (ABI 1.6).
        C2C_MODE = 12 [c2c_mode],
        /// `inforom_checksum_valid` (ABI 1.6).
        INFOROM_CHECKSUM = 13 [inforom_checksum_valid],
        /// `power_management_mode` (ABI 1.6).
        POWER_MANAGEMENT = 14 [power_management_mode],
        /// `remapped_rows_hist_*` (ABI 1.6).
        REMAPPED_ROWS_HISTOGRAM = 15 [
            remapped_rows_hist_max, remapped_rows_hist_high, remapped_rows_hist_partial,
            remapped_rows_hist_low, remapped_rows_hist_none
        ],
        /// `fabric_clique_id` and `fabric_cluster_uuid` (ABI 1.6).
        FABRIC_CLIQUE = 16 [fabric_clique_id, fabric_cluster_uuid],
        /// `fabric_health_mask` and `fabric_health_summary` (ABI 1.6).
        FABRIC_HEALTH = 17 [fabric_health_mask, fabric_health_summary],
        /// The `sram_ecc_*` counts and `sram_ecc_threshold_exceeded` (ABI 1.6).
        SRAM_ECC = 18 [
            sram_ecc_threshold_exceeded, sram_ecc_volatile_unc_parity,
            sram_ecc_volatile_unc_secded, sram_ecc_aggregate_unc_parity,
            sram_ecc_aggregate_unc_secded, sram_ecc_aggregate_unc_l2, sram_ecc_aggregate_unc_sm,
            sram_ecc_aggregate_unc_mcu, sram_ecc_aggregate_unc_pcie, sram_ecc_aggregate_unc_other
        ],
        /// `module_power_draw_average_mw` (ABI 1.6).
        MODULE_POWER_DRAW_AVERAGE = 19 [module_power_draw_average_mw],
        /// `module_power_draw_instant_mw` (ABI 1.6).
        MODULE_POWER_DRAW_INSTANT = 20 [module_power_draw_instant_mw],
        /// `module_power_limit_mw` (ABI 1.6).
        MODULE_POWER_LIMIT = 21 [module_power_limit_mw],
        /// `module_enforced_power_limit_mw` (ABI 1.6).
        MODULE_ENFORCED_POWER_LIMIT = 22 [module_enforced_power_limit_mw],
        /// `module_power_default_limit_mw` (ABI 1.6).
        MODULE_POWER_DEFAULT_LIMIT = 23 [module_power_default_limit_mw],
        /// `module_power_min_limit_mw` (ABI 1.6).
        MODULE_POWER_MIN_LIMIT = 24 [module_power_min_limit_mw],
        /// `module_power_max_limit_mw` (ABI 1.6).
        MODULE_POWER_MAX_LIMIT = 25 [module_power_max_limit_mw],
        /// `protected_memory_{total,used,free}_bytes` (ABI 1.6).
        PROTECTED_MEMORY = 26 [
            protected_memory_total_bytes, protected_memory_used_bytes, protected_memory_free_bytes
        ],
        /// `dram_encryption_current` and `dram_encryption_pending` (ABI 1.6).
        DRAM_ENCRYPTION = 27 [dram_encryption_current, dram_encryption_pending],
        /// The `platform_*` values (ABI 1.6).
        PLATFORM = 28 [
            platform_chassis_serial, platform_gpu_fabric_guid, platform_slot_number,
            platform_tray_index, platform_host_id, platform_peer_type, platform_module_id
        ],
        /// `edpp_multiplier_pct` (ABI 1.6).
        EDPP_MULTIPLIER = 29 [edpp_multiplier_pct],
        /// `vgpu_heterogeneous_multi_vgpu`: the driver's (ABI 1.6).
        VGPU_HETEROGENEOUS_MULTI_VGPU = 30 [vgpu_heterogeneous_multi_vgpu],
        /// `vgpu_fractional_multi_vgpu` (ABI 1.6).
        VGPU_FRACTIONAL_MULTI_VGPU = 31 [vgpu_fractional_multi_vgpu],
        /// Bit 2: heterogeneous time-sliced profiles (ABI 1.6).
        VGPU_HETEROGENEOUS_TIMESLICE_PROFILES = 32 [vgpu_heterogeneous_timeslice_profiles],
        /// Bit 3: heterogeneous time-sliced sizes (ABI 1.6).
        VGPU_HETEROGENEOUS_TIMESLICE_SIZES = 33 [vgpu_heterogeneous_timeslice_sizes],
        /// Bit 4: homogeneous placements (ABI 1.6).
        VGPU_HOMOGENEOUS_PLACEMENTS = 34 [vgpu_homogeneous_placements],
        /// Bit 5: time-sliced vGPU on MIG supported (ABI 1.6).
        VGPU_MIG_TIMESLICING = 35 [vgpu_mig_timeslicing],
        /// Bit 6: MIG time-sliced mode enabled (ABI 1.6).
        VGPU_MIG_TIMESLICING_MODE = 36 [vgpu_mig_timeslicing_mode],
        /// `gpu_hostname` (ABI 1.8).
        GPU_HOSTNAME = 37 [gpu_hostname],
        /// `xid_errors_total`, `xid_codes` and `xid_counts`: gpupeekd receives this
        /// GPU's Xid events (ABI 1.9). Clear where NVML does not deliver events for it
        /// (a vGPU guest, some containers): its Xids are unknown, not none.
        XID_ERRORS = 38 [xid_errors_total, xid_codes, xid_counts],
        /// `xid_last_code` and `xid_last_unix_ns`: an Xid has come since gpupeekd
        /// started (ABI 1.9).
        XID_LAST = 39 [xid_last_code, xid_last_unix_ns],
        /// `xid_last_gpu_instance_id` and `xid_last_compute_instance_id`: the last Xid is
        /// attributable to a MIG instance (ABI 1.9).
        XID_LAST_INSTANCE = 40 [xid_last_gpu_instance_id, xid_last_compute_instance_id],
        /// `power_smoothing_delayed_supported` (ABI 1.10). The fourteen
        /// `POWER_SMOOTHING_*` bits are clear where the driver answered "not supported"
        /// (every GPU before Blackwell), where it has no such field (drivers before
        /// R590), and, for the four `ADMIN_*`, where no admin override is set.
        POWER_SMOOTHING_DELAYED_SUPPORTED = 41 [power_smoothing_delayed_supported],
        /// `power_smoothing_primary_floor_mw` (ABI 1.10).
        POWER_SMOOTHING_PRIMARY_FLOOR = 42 [power_smoothing_primary_floor_mw],
        /// `power_smoothing_secondary_floor_mw` (ABI 1.10).
        POWER_SMOOTHING_SECONDARY_FLOOR = 43 [power_smoothing_secondary_floor_mw],
        /// `power_smoothing_min_primary_act_offset_mw` (ABI 1.10).
        POWER_SMOOTHING_MIN_PRIMARY_ACT_OFFSET = 44 [power_smoothing_min_primary_act_offset_mw],
        /// `power_smoothing_min_primary_act_point_mw` (ABI 1.10).
        POWER_SMOOTHING_MIN_PRIMARY_ACT_POINT = 45 [power_smoothing_min_primary_act_point_mw],
        /// `power_smoothing_window_multiplier_ms` (ABI 1.10).
        POWER_SMOOTHING_WINDOW_MULTIPLIER = 46 [power_smoothing_window_multiplier_ms],
        /// `power_smoothing_profile_secondary_floor_mw` (ABI 1.10).
        POWER_SMOOTHING_PROFILE_SECONDARY_FLOOR = 47 [power_smoothing_profile_secondary_floor_mw],
        /// `power_smoothing_profile_act_window_mult` (ABI 1.10).
        POWER_SMOOTHING_PROFILE_ACT_WINDOW_MULT = 48 [power_smoothing_profile_act_window_mult],
        /// `power_smoothing_profile_tar_window_mult` (ABI 1.10).
        POWER_SMOOTHING_PROFILE_TAR_WINDOW_MULT = 49 [power_smoothing_profile_tar_window_mult],
        /// `power_smoothing_profile_act_offset_mw` (ABI 1.10).
        POWER_SMOOTHING_PROFILE_ACT_OFFSET = 50 [power_smoothing_profile_act_offset_mw],
        /// `power_smoothing_admin_secondary_floor_mw` (ABI 1.10).
        POWER_SMOOTHING_ADMIN_SECONDARY_FLOOR = 51 [power_smoothing_admin_secondary_floor_mw],
        /// `power_smoothing_admin_act_window_mult` (ABI 1.10).
        POWER_SMOOTHING_ADMIN_ACT_WINDOW_MULT = 52 [power_smoothing_admin_act_window_mult],
        /// `power_smoothing_admin_tar_window_mult` (ABI 1.10).
        POWER_SMOOTHING_ADMIN_TAR_WINDOW_MULT = 53 [power_smoothing_admin_tar_window_mult],
        /// `power_smoothing_admin_act_offset_mw` (ABI 1.10).
        POWER_SMOOTHING_ADMIN_ACT_OFFSET = 54 [power_smoothing_admin_act_offset_mw],
    }
}

bit_set! {
    /// Validity bits of [`GpuRecord::valid4`] (ABI 1.11): nvidia-smi 595's and 610's
    /// `--query-gpu` values. Every one is read on the near-static tier; a bit is clear
    /// where the driver answered "not supported", where it has no such field or entry
    /// point (a driver older than the one that added it), and, for the four
    /// `POWER_SMOOTHING_ADMIN_*` of this set, where no admin override is set.
    pub mod gpu_valid4: u64, in GpuRecord.valid4 {
        /// `remapped_rows_correctable_inactive` (field value 301, R595+) (ABI 1.11).
        REMAPPED_ROWS_CORRECTABLE_INACTIVE = 0 [remapped_rows_correctable_inactive],
        /// `remapped_rows_uncorrectable_inactive` (field value 302, R595+) (ABI 1.11).
        REMAPPED_ROWS_UNCORRECTABLE_INACTIVE = 1 [remapped_rows_uncorrectable_inactive],
        /// `gpu_base_current_mw` (ABI 1.11).
        GPU_BASE_CURRENT = 2 [gpu_base_current_mw],
        /// `gpu_base_requested_mw` (ABI 1.11).
        GPU_BASE_REQUESTED = 3 [gpu_base_requested_mw],
        /// `gpu_base_default_mw` (ABI 1.11).
        GPU_BASE_DEFAULT = 4 [gpu_base_default_mw],
        /// `gpu_base_min_mw` (ABI 1.11).
        GPU_BASE_MIN = 5 [gpu_base_min_mw],
        /// `gpu_base_max_mw` (ABI 1.11).
        GPU_BASE_MAX = 6 [gpu_base_max_mw],
        /// `bbx_time_run_s` (`nvmlDeviceGetBBXTimeData_v1`, R610+) (ABI 1.11).
        BBX_TIME_RUN = 7 [bbx_time_run_s],
        /// `power_smoothing_tmp_floor_mw` (ABI 1.11).
        POWER_SMOOTHING_TMP_FLOOR = 8 [power_smoothing_tmp_floor_mw],
        /// `power_smoothing_tmp_ceil_mw` (ABI 1.11).
        POWER_SMOOTHING_TMP_CEIL = 9 [power_smoothing_tmp_ceil_mw],
        /// `power_smoothing_hw_lifetime_pct` (ABI 1.11).
        POWER_SMOOTHING_HW_LIFETIME = 10 [power_smoothing_hw_lifetime_pct],
        /// `power_smoothing_enabled` (ABI 1.11).
        POWER_SMOOTHING_ENABLED = 11 [power_smoothing_enabled],
        /// `power_smoothing_soc_enabled` (field value 300, R610+) (ABI 1.11).
        POWER_SMOOTHING_SOC_ENABLED = 12 [power_smoothing_soc_enabled],
        /// `power_smoothing_priv_level` (ABI 1.11).
        POWER_SMOOTHING_PRIV_LEVEL = 13 [power_smoothing_priv_level],
        /// `power_smoothing_imm_ramp_down` (ABI 1.11).
        POWER_SMOOTHING_IMM_RAMP_DOWN = 14 [power_smoothing_imm_ramp_down],
        /// `power_smoothing_max_pct_tmp_floor` (ABI 1.11).
        POWER_SMOOTHING_MAX_PCT_TMP_FLOOR = 15 [power_smoothing_max_pct_tmp_floor],
        /// `power_smoothing_min_pct_tmp_floor` (ABI 1.11).
        POWER_SMOOTHING_MIN_PCT_TMP_FLOOR = 16 [power_smoothing_min_pct_tmp_floor],
        /// `power_smoothing_num_preset_profiles` (ABI 1.11).
        POWER_SMOOTHING_NUM_PRESET_PROFILES = 17 [power_smoothing_num_preset_profiles],
        /// `power_smoothing_profile_pct_tmp_floor` (ABI 1.11).
        POWER_SMOOTHING_PROFILE_PCT_TMP_FLOOR = 18 [power_smoothing_profile_pct_tmp_floor],
        /// `power_smoothing_profile_ramp_up_mw_s` (ABI 1.11).
        POWER_SMOOTHING_PROFILE_RAMP_UP = 19 [power_smoothing_profile_ramp_up_mw_s],
        /// `power_smoothing_profile_ramp_down_mw_s` (ABI 1.11).
        POWER_SMOOTHING_PROFILE_RAMP_DOWN = 20 [power_smoothing_profile_ramp_down_mw_s],
        /// `power_smoothing_profile_ramp_down_hyst_ms` (ABI 1.11).
        POWER_SMOOTHING_PROFILE_RAMP_DOWN_HYST = 21 [power_smoothing_profile_ramp_down_hyst_ms],
        /// `power_smoothing_active_profile` (ABI 1.11).
        POWER_SMOOTHING_ACTIVE_PROFILE = 22 [power_smoothing_active_profile],
        /// `power_smoothing_admin_pct_tmp_floor` (ABI 1.11).
        POWER_SMOOTHING_ADMIN_PCT_TMP_FLOOR = 23 [power_smoothing_admin_pct_tmp_floor],
        /// `power_smoothing_admin_ramp_up_mw_s` (ABI 1.11).
        POWER_SMOOTHING_ADMIN_RAMP_UP = 24 [power_smoothing_admin_ramp_up_mw_s],
        /// `power_smoothing_admin_ramp_down_mw_s` (ABI 1.11).
        POWER_SMOOTHING_ADMIN_RAMP_DOWN = 25 [power_smoothing_admin_ramp_down_mw_s],
        /// `power_smoothing_admin_ramp_down_hyst_ms` (ABI 1.11).
        POWER_SMOOTHING_ADMIN_RAMP_DOWN_HYST = 26 [power_smoothing_admin_ramp_down_hyst_ms],
        /// `minor_number` (`nvmlDeviceGetMinorNumber`), read with the identity, once per
        /// NVML session, not on the near-static tier (ABI 1.12).
        MINOR_NUMBER = 27 [minor_number],
    }
}

/// Bits of [`GpuRecord::clock_event_reasons`] (NVML's `nvmlClocksEventReason*`), and
/// nvidia-smi's names for them (`clocks_event_reasons.NAME`), which every client and the
/// daemon's alerts use.
pub mod clock_event_reason {
    /// Nothing runs on the GPU.
    pub const GPU_IDLE: u64 = 0x1;
    /// Application clocks setting.
    pub const APPLICATIONS_CLOCKS_SETTING: u64 = 0x2;
    /// Software power cap.
    pub const SW_POWER_CAP: u64 = 0x4;
    /// Hardware slowdown.
    pub const HW_SLOWDOWN: u64 = 0x8;
    /// Sync boost.
    pub const SYNC_BOOST: u64 = 0x10;
    /// Software thermal slowdown.
    pub const SW_THERMAL_SLOWDOWN: u64 = 0x20;
    /// Hardware thermal slowdown.
    pub const HW_THERMAL_SLOWDOWN: u64 = 0x40;
    /// Hardware power brake slowdown.
    pub const HW_POWER_BRAKE_SLOWDOWN: u64 = 0x80;
    /// Display clock setting.
    pub const DISPLAY_CLOCK_SETTING: u64 = 0x100;

    /// Every bit with nvidia-smi's name for it, in bit order.
    pub const NAMES: [(u64, &str); 9] = [
        (GPU_IDLE, "gpu_idle"),
        (APPLICATIONS_CLOCKS_SETTING, "applications_clocks_setting"),
        (SW_POWER_CAP, "sw_power_cap"),
        (HW_SLOWDOWN, "hw_slowdown"),
        (SYNC_BOOST, "sync_boost"),
        (SW_THERMAL_SLOWDOWN, "sw_thermal_slowdown"),
        (HW_THERMAL_SLOWDOWN, "hw_thermal_slowdown"),
        (HW_POWER_BRAKE_SLOWDOWN, "hw_power_brake_slowdown"),
        (DISPLAY_CLOCK_SETTING, "display_clock_setting"),
    ];

    /// nvidia-smi's name for `bit`, if it is one of [`NAMES`].
    pub fn name(bit: u64) -> Option<&'static str> {
        NAMES.iter().find(|(b, _)| *b == bit).map(|(_, n)| *n)
    }
}

/// One GPU, under its own seqlock. Static identity and dynamic values together.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct GpuRecord {
    /// Seqlock sequence: odd while being written.
    pub seq: u64,
    /// Bits from [`gpu_valid`].
    pub valid: u64,
    /// NVML device index.
    pub index: u32,
    /// [`GpuState`] as a raw value.
    pub state: u32,
    /// NVML return code of the last failure on this GPU (0 when none).
    pub nvml_error_code: i32,
    /// Performance state, 0 (P0, fastest) to 15.
    pub pstate: u32,
    /// UUID string, e.g. "GPU-8f6c...".
    pub uuid: [u8; 96],
    /// Product name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: [u8; 96],
    /// PCI bus id, e.g. "00000000:18:00.0".
    pub pci_bus_id: [u8; 32],
    /// Total memory visible to the driver, bytes.
    pub mem_total_bytes: u64,
    /// Memory in use, bytes.
    pub mem_used_bytes: u64,
    /// Free memory, bytes.
    pub mem_free_bytes: u64,
    /// Memory reserved by the driver, bytes.
    pub mem_reserved_bytes: u64,
    /// Energy, millijoules: the driver's counter, kept monotonic across driver reloads.
    pub energy_mj: u64,
    /// NVML clock event (throttle) reason bits.
    pub clock_event_reasons: u64,
    /// Corrected volatile ECC errors, kept monotonic across driver reloads.
    pub ecc_corrected_volatile_count: u64,
    /// Uncorrected volatile ECC errors, kept monotonic across driver reloads.
    pub ecc_uncorrected_volatile_count: u64,
    /// `CLOCK_MONOTONIC` time this record was sampled, ns.
    pub sample_mono_ns: u64,
    /// GPU (SM) utilisation over NVML's sample window, percent.
    pub util_gpu_pct: u32,
    /// Memory controller utilisation, percent.
    pub util_mem_pct: u32,
    /// Encoder utilisation, percent.
    pub util_enc_pct: u32,
    /// Decoder utilisation, percent.
    pub util_dec_pct: u32,
    /// GPU core temperature, degrees Celsius.
    pub temp_gpu_c: i32,
    /// Fan 0 speed, percent of maximum.
    pub fan_speed_pct: u32,
    /// Power draw, milliwatts.
    pub power_draw_mw: u32,
    /// Enforced power limit, milliwatts.
    pub power_limit_mw: u32,
    /// Graphics clock, MHz.
    pub clock_graphics_mhz: u32,
    /// SM clock, MHz.
    pub clock_sm_mhz: u32,
    /// Memory clock, MHz.
    pub clock_mem_mhz: u32,
    /// Maximum graphics clock, MHz.
    pub clock_graphics_max_mhz: u32,
    /// Maximum SM clock, MHz.
    pub clock_sm_max_mhz: u32,
    /// Maximum memory clock, MHz.
    pub clock_mem_max_mhz: u32,
    /// PCIe transmit throughput, KB/s.
    pub pcie_tx_kbytes_per_s: u32,
    /// PCIe receive throughput, KB/s.
    pub pcie_rx_kbytes_per_s: u32,
    /// Current PCIe link generation.
    pub pcie_link_gen: u32,
    /// Current PCIe link width (lanes).
    pub pcie_link_width: u32,
    /// Processes NVML listed on this GPU, including any that did not fit the table.
    pub process_count: u32,
    /// GPM (Hopper and newer): time at least one warp was active on an SM, averaged over
    /// all SMs, over the last `gpm_interval_ns`; hundredths of a percent (ABI 1.1).
    pub gpm_sm_activity_centipct: u32,
    /// GPM: resident warps relative to the SMs' maximum, hundredths of a percent (ABI 1.1).
    pub gpm_sm_occupancy_centipct: u32,
    /// GPM: time the SMs were doing any tensor-core work, hundredths of a percent
    /// (ABI 1.1).
    pub gpm_tensor_activity_centipct: u32,
    /// GPM: DRAM bandwidth used relative to the peak, hundredths of a percent (ABI 1.1).
    pub gpm_dram_bw_util_centipct: u32,
    /// Zero.
    pub reserved0: u32,
    /// GPM: PCIe bytes transmitted per second (ABI 1.1).
    pub gpm_pcie_tx_bytes_per_s: u64,
    /// GPM: PCIe bytes received per second (ABI 1.1).
    pub gpm_pcie_rx_bytes_per_s: u64,
    /// GPM: NVLink bytes transmitted per second, all links (ABI 1.1).
    pub gpm_nvlink_tx_bytes_per_s: u64,
    /// GPM: NVLink bytes received per second, all links (ABI 1.1).
    pub gpm_nvlink_rx_bytes_per_s: u64,
    /// Length of the window the GPM values describe (the time between the two GPM
    /// samples), ns (ABI 1.1).
    pub gpm_interval_ns: u64,
    /// `CLOCK_MONOTONIC` time of the first sample of the current run of samples with 0 %
    /// utilisation, ns; valid only while the GPU is idle (ABI 1.1).
    pub idle_since_mono_ns: u64,
    /// MIG mode in force: 1 enabled (the GPU's instances are in the MIG table, and its
    /// own utilisation is not available), 0 disabled (ABI 1.4).
    pub mig_mode_current: u32,
    /// MIG mode after the next GPU reset: 0 or 1 (ABI 1.4).
    pub mig_mode_pending: u32,
    /// Zero; room for later minor versions.
    pub reserved: [u64; 4],
    /// Bits from [`gpu_valid2`] (ABI 1.4).
    pub valid2: u64,
    /// Bits from [`gpu_valid2`] whose value the driver answered as deprecated (ABI 1.4).
    pub deprecated2: u64,
    /// Board serial number (ABI 1.4).
    pub serial: [u8; 32],
    /// VBIOS version, e.g. "96.00.A5.00.01" (ABI 1.4).
    pub vbios_version: [u8; 32],
    /// Clock event reasons this GPU can report (ABI 1.4).
    pub clock_event_reasons_supported: u64,
    /// Corrected ECC errors over the GPU's life (ABI 1.4).
    pub ecc_corrected_aggregate_count: u64,
    /// Uncorrected ECC errors over the GPU's life (ABI 1.4).
    pub ecc_uncorrected_aggregate_count: u64,
    /// PCI domain (ABI 1.4).
    pub pci_domain: u32,
    /// PCI bus (ABI 1.4).
    pub pci_bus: u32,
    /// PCI device (ABI 1.4).
    pub pci_device: u32,
    /// PCI device and vendor id, e.g. 0x233010DE (ABI 1.4).
    pub pci_device_id: u32,
    /// PCI subsystem id (ABI 1.4).
    pub pci_subsystem_id: u32,
    /// CUDA compute capability, major (ABI 1.4).
    pub compute_cap_major: u32,
    /// CUDA compute capability, minor (ABI 1.4).
    pub compute_cap_minor: u32,
    /// Maximum PCIe link generation of the GPU and system (ABI 1.4).
    pub pcie_link_gen_max: u32,
    /// Maximum PCIe link width, lanes (ABI 1.4).
    pub pcie_link_width_max: u32,
    /// Default power limit, milliwatts (ABI 1.4).
    pub power_default_limit_mw: u32,
    /// Smallest power limit that can be set, milliwatts (ABI 1.4).
    pub power_min_limit_mw: u32,
    /// Largest power limit that can be set, milliwatts (ABI 1.4).
    pub power_max_limit_mw: u32,
    /// Instantaneous power draw, milliwatts (ABI 1.4).
    pub power_draw_instant_mw: u32,
    /// Memory (HBM) temperature, degrees Celsius (ABI 1.4).
    pub temp_memory_c: i32,
    /// Video clock, MHz (ABI 1.4).
    pub clock_video_mhz: u32,
    /// Applications graphics clock, MHz (ABI 1.4).
    pub clock_app_graphics_mhz: u32,
    /// Applications memory clock, MHz (ABI 1.4).
    pub clock_app_mem_mhz: u32,
    /// Default applications graphics clock, MHz (ABI 1.4).
    pub clock_default_app_graphics_mhz: u32,
    /// Default applications memory clock, MHz (ABI 1.4).
    pub clock_default_app_mem_mhz: u32,
    /// Persistence mode: 0 disabled, 1 enabled (ABI 1.4).
    pub persistence_mode: u32,
    /// NVML compute mode: 0 default, 1 exclusive thread, 2 prohibited, 3 exclusive
    /// process (ABI 1.4).
    pub compute_mode: u32,
    /// Display mode (a display may be attached): 0 disabled, 1 enabled (ABI 1.4).
    pub display_mode: u32,
    /// Display active (a display is initialised): 0 disabled, 1 enabled (ABI 1.4).
    pub display_active: u32,
    /// ECC mode now: 0 disabled, 1 enabled (ABI 1.4).
    pub ecc_mode_current: u32,
    /// ECC mode after the next reboot: 0 disabled, 1 enabled (ABI 1.4).
    pub ecc_mode_pending: u32,
    /// Accounting mode: 0 disabled, 1 enabled (ABI 1.4).
    pub accounting_mode: u32,
    /// Processes the accounting buffer holds (ABI 1.4).
    pub accounting_buffer_size: u32,
    /// Pages retired for multiple single-bit ECC errors (ABI 1.4).
    pub retired_pages_sbe: u32,
    /// Pages retired for a double-bit ECC error (ABI 1.4).
    pub retired_pages_dbe: u32,
    /// 1 when pages wait to be retired at the next reboot (ABI 1.4).
    pub retired_pages_pending: u32,
    /// Rows remapped for correctable errors (ABI 1.4).
    pub remapped_rows_correctable: u32,
    /// Rows remapped for uncorrectable errors (ABI 1.4).
    pub remapped_rows_uncorrectable: u32,
    /// 1 when a remapping waits for a GPU reset (ABI 1.4).
    pub remapped_rows_pending: u32,
    /// 1 when a remapping failed (ABI 1.4).
    pub remapped_rows_failure: u32,
    /// Active encoder sessions (ABI 1.4).
    pub encoder_session_count: u32,
    /// Average encoder frames per second over the sessions (ABI 1.4).
    pub encoder_average_fps: u32,
    /// Average encoder latency, microseconds (ABI 1.4).
    pub encoder_average_latency_us: u32,
    /// Zero.
    pub reserved_ext: u32,
    /// Corrected volatile ECC errors in the L1 cache (ABI 1.5).
    pub ecc_corrected_volatile_l1_cache: u64,
    /// Corrected volatile ECC errors in the L2 cache (ABI 1.5).
    pub ecc_corrected_volatile_l2_cache: u64,
    /// Corrected volatile ECC errors in the device memory (DRAM) (ABI 1.5).
    pub ecc_corrected_volatile_device_memory: u64,
    /// Corrected volatile ECC errors in the register file (ABI 1.5).
    pub ecc_corrected_volatile_register_file: u64,
    /// Corrected volatile ECC errors in the texture memory (ABI 1.5).
    pub ecc_corrected_volatile_texture_memory: u64,
    /// Corrected volatile ECC errors in the CBU (ABI 1.5).
    pub ecc_corrected_volatile_cbu: u64,
    /// Corrected volatile ECC errors in the SRAM (ABI 1.5).
    pub ecc_corrected_volatile_sram: u64,
    /// Corrected aggregate ECC errors in the L1 cache (ABI 1.5).
    pub ecc_corrected_aggregate_l1_cache: u64,
    /// Corrected aggregate ECC errors in the L2 cache (ABI 1.5).
    pub ecc_corrected_aggregate_l2_cache: u64,
    /// Corrected aggregate ECC errors in the device memory (DRAM) (ABI 1.5).
    pub ecc_corrected_aggregate_device_memory: u64,
    /// Corrected aggregate ECC errors in the register file (ABI 1.5).
    pub ecc_corrected_aggregate_register_file: u64,
    /// Corrected aggregate ECC errors in the texture memory (ABI 1.5).
    pub ecc_corrected_aggregate_texture_memory: u64,
    /// Corrected aggregate ECC errors in the CBU (ABI 1.5).
    pub ecc_corrected_aggregate_cbu: u64,
    /// Corrected aggregate ECC errors in the SRAM (ABI 1.5).
    pub ecc_corrected_aggregate_sram: u64,
    /// Uncorrected volatile ECC errors in the L1 cache (ABI 1.5).
    pub ecc_uncorrected_volatile_l1_cache: u64,
    /// Uncorrected volatile ECC errors in the L2 cache (ABI 1.5).
    pub ecc_uncorrected_volatile_l2_cache: u64,
    /// Uncorrected volatile ECC errors in the device memory (DRAM) (ABI 1.5).
    pub ecc_uncorrected_volatile_device_memory: u64,
    /// Uncorrected volatile ECC errors in the register file (ABI 1.5).
    pub ecc_uncorrected_volatile_register_file: u64,
    /// Uncorrected volatile ECC errors in the texture memory (ABI 1.5).
    pub ecc_uncorrected_volatile_texture_memory: u64,
    /// Uncorrected volatile ECC errors in the CBU (ABI 1.5).
    pub ecc_uncorrected_volatile_cbu: u64,
    /// Uncorrected volatile ECC errors in the SRAM (ABI 1.5).
    pub ecc_uncorrected_volatile_sram: u64,
    /// Uncorrected aggregate ECC errors in the L1 cache (ABI 1.5).
    pub ecc_uncorrected_aggregate_l1_cache: u64,
    /// Uncorrected aggregate ECC errors in the L2 cache (ABI 1.5).
    pub ecc_uncorrected_aggregate_l2_cache: u64,
    /// Uncorrected aggregate ECC errors in the device memory (DRAM) (ABI 1.5).
    pub ecc_uncorrected_aggregate_device_memory: u64,
    /// Uncorrected aggregate ECC errors in the register file (ABI 1.5).
    pub ecc_uncorrected_aggregate_register_file: u64,
    /// Uncorrected aggregate ECC errors in the texture memory (ABI 1.5).
    pub ecc_uncorrected_aggregate_texture_memory: u64,
    /// Uncorrected aggregate ECC errors in the CBU (ABI 1.5).
    pub ecc_uncorrected_aggregate_cbu: u64,
    /// Uncorrected aggregate ECC errors in the SRAM (ABI 1.5).
    pub ecc_uncorrected_aggregate_sram: u64,
    /// infoROM image version, e.g. "G520.0200.00.05" (ABI 1.5).
    pub inforom_img: [u8; 16],
    /// Version of the infoROM's OEM object, e.g. "2.1" (ABI 1.5).
    pub inforom_oem: [u8; 16],
    /// Version of the infoROM's ECC object (ABI 1.5).
    pub inforom_ecc: [u8; 16],
    /// Version of the infoROM's power management object (ABI 1.5).
    pub inforom_pwr: [u8; 16],
    /// GPU operation mode now: 0 all on, 1 compute, 2 low double precision (ABI 1.5).
    pub gom_current: u32,
    /// GPU operation mode after the next reboot, as `gom_current` (ABI 1.5).
    pub gom_pending: u32,
    /// Fabric (NVLink switch) registration state: 0 not supported, 1 not started,
    /// 2 in progress, 3 completed (ABI 1.5).
    pub fabric_state: u32,
    /// NVML return code of the fabric registration; meaningful once `fabric_state` is
    /// 3 (ABI 1.5).
    pub fabric_status: i32,
    /// What the driver recommends to bring the GPU back to health
    /// (`NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`): 0 none, 1 GPU reset, 2 node reboot,
    /// 3 drain P2P, 4 drain and reset (ABI 1.5).
    pub gpu_recovery_action: u32,
    /// Zero.
    pub reserved_ext2: u32,
    /// Bits from [`gpu_valid3`] (ABI 1.5).
    pub valid3: u64,
    /// Time the software power cap held the clocks down since the driver loaded, as
    /// NVML's field value `NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP` gives it, which
    /// nvidia-smi prints as microseconds (ABI 1.5).
    pub clocks_event_us_sw_power_cap: u64,
    /// The same for sync boost (`..._SYNC_BOOST`) (ABI 1.5).
    pub clocks_event_us_sync_boost: u64,
    /// The same for software thermal slowdown (`..._SW_THERM_SLOWDOWN`) (ABI 1.5).
    pub clocks_event_us_sw_thermal_slowdown: u64,
    /// The same for hardware thermal slowdown (`..._HW_THERM_SLOWDOWN`) (ABI 1.5).
    pub clocks_event_us_hw_thermal_slowdown: u64,
    /// The same for the hardware power brake (`..._HW_POWER_BRAKE_SLOWDOWN`) (ABI 1.5).
    pub clocks_event_us_hw_power_brake_slowdown: u64,
    /// Maximum PCIe link generation of the GPU alone, whatever the slot (ABI 1.5).
    pub pcie_link_gen_gpumax: u32,
    /// JPEG decoder (NVJPG) utilisation over NVML's sample window, percent (ABI 1.5).
    pub util_jpeg_pct: u32,
    /// Optical flow accelerator (OFA) utilisation, percent (ABI 1.5).
    pub util_ofa_pct: u32,
    /// The GPU's thermal margin, nvidia-smi's "T.Limit" temperature: degrees Celsius
    /// below the nearest slowdown threshold (`nvmlDeviceGetMarginTemperature`) (ABI 1.6).
    pub temp_tlimit_c: i32,
    /// Bits from [`gpu_valid3`] whose value the driver answered as deprecated (ABI 1.6).
    pub deprecated3: u64,
    /// PCI base class code, e.g. 0x3 for a display controller (ABI 1.6).
    pub pci_base_class: u32,
    /// PCI sub class code, e.g. 0x2 for a 3D controller (ABI 1.6).
    pub pci_sub_class: u32,
    /// GSP firmware in use: 0 disabled, 1 enabled (ABI 1.6).
    pub gsp_mode_current: u32,
    /// GSP firmware by default: 0 disabled, 1 enabled (ABI 1.6).
    pub gsp_mode_default: u32,
    /// How the GPU addresses system memory: 0 none, 1 HMM, 2 ATS (ABI 1.6).
    pub addressing_mode: u32,
    /// C2C (chip-to-chip) mode: 0 disabled, 1 enabled (ABI 1.6).
    pub c2c_mode: u32,
    /// 1 when the infoROM checksum validates, 0 when it does not (ABI 1.6).
    pub inforom_checksum_valid: u32,
    /// Power management: 0 disabled, 1 enabled (ABI 1.6).
    pub power_management_mode: u32,
    /// Memory banks with every spare row left for remapping (ABI 1.6).
    pub remapped_rows_hist_max: u32,
    /// Banks with high remap availability (ABI 1.6).
    pub remapped_rows_hist_high: u32,
    /// Banks with partial remap availability (ABI 1.6).
    pub remapped_rows_hist_partial: u32,
    /// Banks with low remap availability (ABI 1.6).
    pub remapped_rows_hist_low: u32,
    /// Banks with no spare row left (ABI 1.6).
    pub remapped_rows_hist_none: u32,
    /// Id of the NVLink fabric clique the GPU belongs to (ABI 1.6).
    pub fabric_clique_id: u32,
    /// UUID of the fabric cluster the GPU belongs to, 16 bytes (ABI 1.6).
    pub fabric_cluster_uuid: [u8; 16],
    /// NVML's fabric health mask (`NVML_GPU_FABRIC_HEALTH_MASK_*`: two or more bits per
    /// condition, 0 for "not supported") (ABI 1.6).
    pub fabric_health_mask: u32,
    /// Fabric health summary: 0 not supported, 1 healthy, 2 unhealthy, 3 limited
    /// capacity (ABI 1.6).
    pub fabric_health_summary: u32,
    /// 1 when the SRAM uncorrectable error threshold was exceeded (ABI 1.6).
    pub sram_ecc_threshold_exceeded: u32,
    /// Module (GPU, CPU and memory of a Grace superchip) power draw averaged over a
    /// second, milliwatts (ABI 1.6).
    pub module_power_draw_average_mw: u32,
    /// Unique volatile uncorrectable parity errors in SRAM (ABI 1.6).
    pub sram_ecc_volatile_unc_parity: u64,
    /// Unique volatile uncorrectable SEC-DED errors in SRAM (ABI 1.6).
    pub sram_ecc_volatile_unc_secded: u64,
    /// Unique aggregate uncorrectable parity errors in SRAM (ABI 1.6).
    pub sram_ecc_aggregate_unc_parity: u64,
    /// Unique aggregate uncorrectable SEC-DED errors in SRAM (ABI 1.6).
    pub sram_ecc_aggregate_unc_secded: u64,
    /// Unique aggregate uncorrectable SRAM errors in the L2 cache (ABI 1.6).
    pub sram_ecc_aggregate_unc_l2: u64,
    /// Unique aggregate uncorrectable SRAM errors in the SMs (ABI 1.6).
    pub sram_ecc_aggregate_unc_sm: u64,
    /// Unique aggregate uncorrectable SRAM errors in the microcontrollers (ABI 1.6).
    pub sram_ecc_aggregate_unc_mcu: u64,
    /// Unique aggregate uncorrectable SRAM errors in the PCIe interface (ABI 1.6).
    pub sram_ecc_aggregate_unc_pcie: u64,
    /// Unique aggregate uncorrectable SRAM errors elsewhere (ABI 1.6).
    pub sram_ecc_aggregate_unc_other: u64,
    /// Module instantaneous power draw, milliwatts (ABI 1.6).
    pub module_power_draw_instant_mw: u32,
    /// Module power limit requested, milliwatts (ABI 1.6).
    pub module_power_limit_mw: u32,
    /// Module power limit enforced, milliwatts (ABI 1.6).
    pub module_enforced_power_limit_mw: u32,
    /// Module default power limit, milliwatts (ABI 1.6).
    pub module_power_default_limit_mw: u32,
    /// Smallest module power limit that can be set, milliwatts (ABI 1.6).
    pub module_power_min_limit_mw: u32,
    /// Largest module power limit that can be set, milliwatts (ABI 1.6).
    pub module_power_max_limit_mw: u32,
    /// Confidential-computing protected memory installed, bytes (ABI 1.6).
    pub protected_memory_total_bytes: u64,
    /// Protected memory allocated by active contexts, bytes (ABI 1.6).
    pub protected_memory_used_bytes: u64,
    /// Protected memory free, bytes (ABI 1.6).
    pub protected_memory_free_bytes: u64,
    /// DRAM encryption now: 0 disabled, 1 enabled (ABI 1.6).
    pub dram_encryption_current: u32,
    /// DRAM encryption after the next reboot: 0 disabled, 1 enabled (ABI 1.6).
    pub dram_encryption_pending: u32,
    /// Serial number of the chassis holding the GPU (`nvmlPlatformInfo_v2`) (ABI 1.6).
    pub platform_chassis_serial: [u8; 16],
    /// The GPU's fabric (InfiniBand) GUID: the first 8 bytes of NVML's, big-endian
    /// (ABI 1.6).
    pub platform_gpu_fabric_guid: u64,
    /// Slot number in the chassis (ABI 1.6).
    pub platform_slot_number: u32,
    /// Tray index in the chassis (ABI 1.6).
    pub platform_tray_index: u32,
    /// Index of the node within the slot (ABI 1.6).
    pub platform_host_id: u32,
    /// NVLink peer type NVML gives (0: directly connected) (ABI 1.6).
    pub platform_peer_type: u32,
    /// Id of the GPU within the node (ABI 1.6).
    pub platform_module_id: u32,
    /// The EDPp multiplier, percent (field value `NVML_FI_DEV_EDPP_MULTIPLIER`, 274)
    /// (ABI 1.6).
    pub edpp_multiplier_pct: u32,
    /// The driver's heterogeneous multi-vGPU capability
    /// (`nvmlGetVgpuDriverCapabilities`, vGPU host drivers only): 0 or 1 (ABI 1.6).
    pub vgpu_heterogeneous_multi_vgpu: u32,
    /// The GPU's vGPU capabilities (`nvmlDeviceGetVgpuCapabilities`), 0 or 1:
    /// fractional multi-vGPU profiles (ABI 1.6).
    pub vgpu_fractional_multi_vgpu: u32,
    /// Heterogeneous time-sliced vGPU profiles (ABI 1.6).
    pub vgpu_heterogeneous_timeslice_profiles: u32,
    /// Heterogeneous time-sliced vGPU sizes (ABI 1.6).
    pub vgpu_heterogeneous_timeslice_sizes: u32,
    /// Placements of homogeneous time-sliced vGPU profiles reported (ABI 1.6).
    pub vgpu_homogeneous_placements: u32,
    /// Time-sliced vGPU on MIG supported (ABI 1.6).
    pub vgpu_mig_timeslicing: u32,
    /// MIG time-sliced mode enabled (ABI 1.6).
    pub vgpu_mig_timeslicing_mode: u32,
    /// Zero.
    pub reserved_ext7: u32,
    /// The hostname NVIDIA's tools set on the GPU (`nvmlDeviceGetHostname_v1`, R580+,
    /// Blackwell and newer), NUL-terminated: not the machine's host name (ABI 1.8).
    pub gpu_hostname: [u8; 64],
    /// Zero.
    pub reserved_ext6: [u64; 3],
    /// Xid errors NVML's events delivered for this GPU (its MIG instances' included)
    /// since gpupeekd started (ABI 1.9).
    pub xid_errors_total: u64,
    /// When the last Xid came, `CLOCK_REALTIME` ns (ABI 1.9).
    pub xid_last_unix_ns: u64,
    /// The last Xid's number (ABI 1.9).
    pub xid_last_code: u32,
    /// The GPU instance the last Xid is attributable to (ABI 1.9).
    pub xid_last_gpu_instance_id: u32,
    /// The compute instance the last Xid is attributable to (ABI 1.9).
    pub xid_last_compute_instance_id: u32,
    /// Zero.
    pub reserved_ext8: u32,
    /// The Xid numbers counted one by one in `xid_counts`, in the order they first came;
    /// 0 ends the list (no Xid is 0). Past the eighth number, Xids count in
    /// `xid_errors_total` only (ABI 1.9).
    pub xid_codes: [u64; 8],
    /// `xid_counts[i]`: Xids numbered `xid_codes[i]` since gpupeekd started (ABI 1.9).
    pub xid_counts: [u64; 8],
    /// Delayed power smoothing (Blackwell; NVML field values 275 to 288, R590+), in
    /// nvidia-smi 590's order: 1 when the GPU supports it, 0 when not
    /// (`NVML_FI_PWR_SMOOTHING_DELAYED_PWR_SMOOTHING_SUPPORTED`) (ABI 1.10).
    pub power_smoothing_delayed_supported: u32,
    /// The primary power floor now, milliwatts (NVML gives watts) (ABI 1.10).
    pub power_smoothing_primary_floor_mw: u32,
    /// The secondary power floor now, applied during active workload periods,
    /// milliwatts (ABI 1.10).
    pub power_smoothing_secondary_floor_mw: u32,
    /// The smallest primary floor activation offset the driver accepts, milliwatts
    /// (ABI 1.10).
    pub power_smoothing_min_primary_act_offset_mw: u32,
    /// The lowest point at which the driver switches between the primary and secondary
    /// floors, milliwatts (ABI 1.10).
    pub power_smoothing_min_primary_act_point_mw: u32,
    /// The unit of the window multipliers below, milliseconds (ABI 1.10).
    pub power_smoothing_window_multiplier_ms: u32,
    /// The active preset profile's secondary power floor, milliwatts (ABI 1.10).
    pub power_smoothing_profile_secondary_floor_mw: u32,
    /// The active profile's primary floor activation window multiplier, in units of
    /// `power_smoothing_window_multiplier_ms` (ABI 1.10).
    pub power_smoothing_profile_act_window_mult: u32,
    /// The active profile's primary floor target window multiplier (ABI 1.10).
    pub power_smoothing_profile_tar_window_mult: u32,
    /// The active profile's primary floor activation offset, milliwatts (ABI 1.10).
    pub power_smoothing_profile_act_offset_mw: u32,
    /// The admin override of the secondary power floor, milliwatts (ABI 1.10).
    pub power_smoothing_admin_secondary_floor_mw: u32,
    /// The admin override of the activation window multiplier (ABI 1.10).
    pub power_smoothing_admin_act_window_mult: u32,
    /// The admin override of the target window multiplier (ABI 1.10).
    pub power_smoothing_admin_tar_window_mult: u32,
    /// The admin override of the primary floor activation offset, milliwatts
    /// (ABI 1.10).
    pub power_smoothing_admin_act_offset_mw: u32,
    /// Zero.
    pub reserved_ext9: [u64; 5],
    /// Bits from [`gpu_valid4`] (ABI 1.11).
    pub valid4: u64,
    /// Rows remapped for correctable (single bit) ECC errors that are inactive
    /// (`NVML_FI_DEV_REMAPPED_ROWS_COR_INACTIVE`, R595+) (ABI 1.11).
    pub remapped_rows_correctable_inactive: u32,
    /// The same for uncorrectable errors (`..._UNC_INACTIVE`) (ABI 1.11).
    pub remapped_rows_uncorrectable_inactive: u32,
    /// The base GPU power limit now enforced, milliwatts (field value 190,
    /// `NVML_FI_DEV_POWER_CURRENT_LIMIT`, with the GPU base scope, R610+) (ABI 1.11).
    pub gpu_base_current_mw: u32,
    /// The base GPU power limit software requested, milliwatts (field value 192) (ABI 1.11).
    pub gpu_base_requested_mw: u32,
    /// The default base GPU power limit, milliwatts (field value 189) (ABI 1.11).
    pub gpu_base_default_mw: u32,
    /// The lowest base GPU power limit, milliwatts (field value 187) (ABI 1.11).
    pub gpu_base_min_mw: u32,
    /// The highest base GPU power limit, milliwatts (field value 188) (ABI 1.11).
    pub gpu_base_max_mw: u32,
    /// Seconds the GPU has had the driver loaded, over its life
    /// (`nvmlDeviceGetBBXTimeData_v1`, R610+) (ABI 1.11).
    pub bbx_time_run_s: u32,
    /// Power smoothing's applied TMP floor, milliwatts (NVML gives watts) (ABI 1.11).
    pub power_smoothing_tmp_floor_mw: u32,
    /// Power smoothing's applied TMP ceiling, milliwatts (ABI 1.11).
    pub power_smoothing_tmp_ceil_mw: u32,
    /// The power smoothing circuitry's remaining lifetime, percent (ABI 1.11).
    pub power_smoothing_hw_lifetime_pct: u32,
    /// Power smoothing enabled: 1, or 0 (ABI 1.11).
    pub power_smoothing_enabled: u32,
    /// State-of-charge power smoothing enabled: 1, or 0 (ABI 1.11).
    pub power_smoothing_soc_enabled: u32,
    /// Power smoothing's current privilege level (ABI 1.11).
    pub power_smoothing_priv_level: u32,
    /// Immediate ramp down enabled: 1, or 0 (ABI 1.11).
    pub power_smoothing_imm_ramp_down: u32,
    /// The highest percent TMP floor allowed (ABI 1.11).
    pub power_smoothing_max_pct_tmp_floor: u32,
    /// The lowest percent TMP floor allowed (ABI 1.11).
    pub power_smoothing_min_pct_tmp_floor: u32,
    /// The number of preset profiles (ABI 1.11).
    pub power_smoothing_num_preset_profiles: u32,
    /// The active preset profile's percent TMP floor (ABI 1.11).
    pub power_smoothing_profile_pct_tmp_floor: u32,
    /// The active profile's ramp up rate, mW/s (ABI 1.11).
    pub power_smoothing_profile_ramp_up_mw_s: u32,
    /// The active profile's ramp down rate, mW/s (ABI 1.11).
    pub power_smoothing_profile_ramp_down_mw_s: u32,
    /// The active profile's ramp down hysteresis, ms (ABI 1.11).
    pub power_smoothing_profile_ramp_down_hyst_ms: u32,
    /// The active preset profile's number (ABI 1.11).
    pub power_smoothing_active_profile: u32,
    /// The admin override of the percent TMP floor (ABI 1.11).
    pub power_smoothing_admin_pct_tmp_floor: u32,
    /// The admin override of the ramp up rate, mW/s (ABI 1.11).
    pub power_smoothing_admin_ramp_up_mw_s: u32,
    /// The admin override of the ramp down rate, mW/s (ABI 1.11).
    pub power_smoothing_admin_ramp_down_mw_s: u32,
    /// The admin override of the ramp down hysteresis, ms (ABI 1.11).
    pub power_smoothing_admin_ramp_down_hyst_ms: u32,
    /// The GPU's minor number: N of its `/dev/nvidiaN` (`nvmlDeviceGetMinorNumber`), which
    /// GKE's device plugin and NVIDIA's DRA driver name GPUs by (ABI 1.12).
    pub minor_number: u32,
    /// Zero; room for later minor versions.
    pub reserved_ext11: [u64; 17],
}

macro_rules! zeroed_default {
    ($($ty:ident),*) => {$(
        impl Default for $ty {
            /// All zero: no validity bits set, every slot empty.
            fn default() -> Self {
                zerocopy::FromZeros::new_zeroed()
            }
        }
    )*};
}

zeroed_default!(
    StaticHeader,
    StatusRecord,
    GpuRecord,
    ProcTableHead,
    ProcRecord,
    HistoryHead,
    MigTableHead,
    MigRecord
);
