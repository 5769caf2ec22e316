//! Compile-time pins of the ABI: the size of every record and the offset of every field.
//!
//! `pin_layout!` turns each listed offset into a `const` assertion, and checks that the
//! listed fields' sizes add up to the record's size, so a field added, removed, resized or
//! moved without updating this file fails to compile. The same table, rendered by
//! [`describe`], is compared with a golden file in the tests and documents the layout;
//! walked through [`RECORDS`], with each field's [`FieldType`], it is what the C and
//! Python readers' record definitions are generated from (`examples/gen-readers`).

use crate::layout::{
    GpuRecord, HistoryHead, HistorySample, MigRecord, MigTableHead, ProcRecord, ProcTableHead,
    StaticHeader, StatusRecord, TierBucket, TierTableHead, TrackHead,
};

/// Size of the type a field accessor returns; used to size fields in `const` context.
const fn size_of_field<T, F>(_accessor: fn(&T) -> &F) -> usize {
    core::mem::size_of::<F>()
}

/// [`FieldType`] of the type a field accessor returns.
const fn type_of_field<T, F: Typed>(_accessor: fn(&T) -> &F) -> FieldType {
    F::TYPE
}

/// The type of a field, as a reader in another language must declare it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// `u8`.
    U8,
    /// `u16`.
    U16,
    /// `i16`.
    I16,
    /// `u32`.
    U32,
    /// `i32`.
    I32,
    /// `u64`.
    U64,
    /// `[u8; N]`: a NUL-padded string.
    Text(usize),
    /// `[u64; N]`: reserved words.
    Words(usize),
}

impl FieldType {
    /// Its name in gpupeek-shm(5)'s tables: `u32`, `char[96]`, `u64[5]`.
    pub fn name(self) -> String {
        match self {
            Self::U8 => "u8".into(),
            Self::U16 => "u16".into(),
            Self::I16 => "i16".into(),
            Self::U32 => "u32".into(),
            Self::I32 => "i32".into(),
            Self::U64 => "u64".into(),
            Self::Text(n) => format!("char[{n}]"),
            Self::Words(n) => format!("u64[{n}]"),
        }
    }
}

/// The field types a record may use.
trait Typed {
    const TYPE: FieldType;
}

macro_rules! typed {
    ($($ty:ty => $field_type:expr),* $(,)?) => {
        $(impl Typed for $ty { const TYPE: FieldType = $field_type; })*
    };
}

typed!(u8 => FieldType::U8, u16 => FieldType::U16, i16 => FieldType::I16,
       u32 => FieldType::U32, i32 => FieldType::I32, u64 => FieldType::U64);

impl<const N: usize> Typed for [u8; N] {
    const TYPE: FieldType = FieldType::Text(N);
}

impl<const N: usize> Typed for [u64; N] {
    const TYPE: FieldType = FieldType::Words(N);
}

macro_rules! pin_layout {
    ($ty:ident, size = $size:expr, { $($field:ident : $off:expr),* $(,)? }) => {
        const _: () = assert!(core::mem::size_of::<$ty>() == $size);
        const _: () = assert!(core::mem::size_of::<$ty>() % 8 == 0);
        $( const _: () = assert!(core::mem::offset_of!($ty, $field) == $off); )*
        const _: () = assert!(0 $(+ size_of_field(|r: &$ty| &r.$field))* == $size);
        impl $ty {
            /// Every field, in memory order.
            pub const FIELDS: &'static [Field] = &[$(Field {
                name: stringify!($field),
                offset: $off,
                size: size_of_field(|r: &$ty| &r.$field),
                ty: type_of_field(|r: &$ty| &r.$field),
            }),*];
        }
    };
}

pin_layout!(StaticHeader, size = 128, {
    magic: 0, abi_major: 8, abi_minor: 12, segment_size_bytes: 16, epoch: 24,
    writer_pid: 32, status_size_bytes: 36, status_offset: 40, gpu_table_offset: 48,
    gpu_record_size_bytes: 56, gpu_capacity: 60, proc_table_offset: 64,
    proc_record_size_bytes: 72, proc_capacity: 76, generation_offset: 80, history_offset: 88,
    history_ring_size_bytes: 96, history_slots: 100, history_sample_size_bytes: 104,
    tier_table_offset: 108, mig_table_offset: 112, mig_record_size_bytes: 120, mig_capacity: 124,
});

pin_layout!(StatusRecord, size = 256, {
    seq: 0, state: 8, nvml_error_code: 12, heartbeat_mono_ns: 16, period_ns: 24,
    published_unix_ns: 32, gpu_count: 40, cuda_driver_version: 44, valid: 48,
    driver_version: 56, nvml_version: 88, error_message: 120, reserved: 248,
});

pin_layout!(GpuRecord, size = 2048, {
    seq: 0, valid: 8, index: 16, state: 20, nvml_error_code: 24, pstate: 28,
    uuid: 32, name: 128, pci_bus_id: 224, mem_total_bytes: 256, mem_used_bytes: 264,
    mem_free_bytes: 272, mem_reserved_bytes: 280, energy_mj: 288, clock_event_reasons: 296,
    ecc_corrected_volatile_count: 304, ecc_uncorrected_volatile_count: 312,
    sample_mono_ns: 320, util_gpu_pct: 328, util_mem_pct: 332, util_enc_pct: 336,
    util_dec_pct: 340, temp_gpu_c: 344, fan_speed_pct: 348, power_draw_mw: 352,
    power_limit_mw: 356, clock_graphics_mhz: 360, clock_sm_mhz: 364, clock_mem_mhz: 368,
    clock_graphics_max_mhz: 372, clock_sm_max_mhz: 376, clock_mem_max_mhz: 380,
    pcie_tx_kbytes_per_s: 384, pcie_rx_kbytes_per_s: 388, pcie_link_gen: 392,
    pcie_link_width: 396, process_count: 400, gpm_sm_activity_centipct: 404,
    gpm_sm_occupancy_centipct: 408, gpm_tensor_activity_centipct: 412,
    gpm_dram_bw_util_centipct: 416, reserved0: 420, gpm_pcie_tx_bytes_per_s: 424,
    gpm_pcie_rx_bytes_per_s: 432, gpm_nvlink_tx_bytes_per_s: 440,
    gpm_nvlink_rx_bytes_per_s: 448, gpm_interval_ns: 456, idle_since_mono_ns: 464,
    mig_mode_current: 472, mig_mode_pending: 476, reserved: 480, valid2: 512, deprecated2: 520, serial: 528, vbios_version: 560,
    clock_event_reasons_supported: 592, ecc_corrected_aggregate_count: 600,
    ecc_uncorrected_aggregate_count: 608, pci_domain: 616, pci_bus: 620, pci_device: 624,
    pci_device_id: 628, pci_subsystem_id: 632, compute_cap_major: 636,
    compute_cap_minor: 640, pcie_link_gen_max: 644, pcie_link_width_max: 648,
    power_default_limit_mw: 652, power_min_limit_mw: 656, power_max_limit_mw: 660,
    power_draw_instant_mw: 664, temp_memory_c: 668, clock_video_mhz: 672,
    clock_app_graphics_mhz: 676, clock_app_mem_mhz: 680,
    clock_default_app_graphics_mhz: 684, clock_default_app_mem_mhz: 688,
    persistence_mode: 692, compute_mode: 696, display_mode: 700, display_active: 704,
    ecc_mode_current: 708, ecc_mode_pending: 712, accounting_mode: 716,
    accounting_buffer_size: 720, retired_pages_sbe: 724, retired_pages_dbe: 728,
    retired_pages_pending: 732, remapped_rows_correctable: 736,
    remapped_rows_uncorrectable: 740, remapped_rows_pending: 744,
    remapped_rows_failure: 748, encoder_session_count: 752, encoder_average_fps: 756,
    encoder_average_latency_us: 760, reserved_ext: 764,
    ecc_corrected_volatile_l1_cache: 768,
    ecc_corrected_volatile_l2_cache: 776,
    ecc_corrected_volatile_device_memory: 784,
    ecc_corrected_volatile_register_file: 792,
    ecc_corrected_volatile_texture_memory: 800,
    ecc_corrected_volatile_cbu: 808,
    ecc_corrected_volatile_sram: 816,
    ecc_corrected_aggregate_l1_cache: 824,
    ecc_corrected_aggregate_l2_cache: 832,
    ecc_corrected_aggregate_device_memory: 840,
    ecc_corrected_aggregate_register_file: 848,
    ecc_corrected_aggregate_texture_memory: 856,
    ecc_corrected_aggregate_cbu: 864,
    ecc_corrected_aggregate_sram: 872,
    ecc_uncorrected_volatile_l1_cache: 880,
    ecc_uncorrected_volatile_l2_cache: 888,
    ecc_uncorrected_volatile_device_memory: 896,
    ecc_uncorrected_volatile_register_file: 904,
    ecc_uncorrected_volatile_texture_memory: 912,
    ecc_uncorrected_volatile_cbu: 920,
    ecc_uncorrected_volatile_sram: 928,
    ecc_uncorrected_aggregate_l1_cache: 936,
    ecc_uncorrected_aggregate_l2_cache: 944,
    ecc_uncorrected_aggregate_device_memory: 952,
    ecc_uncorrected_aggregate_register_file: 960,
    ecc_uncorrected_aggregate_texture_memory: 968,
    ecc_uncorrected_aggregate_cbu: 976,
    ecc_uncorrected_aggregate_sram: 984,
    inforom_img: 992,
    inforom_oem: 1008,
    inforom_ecc: 1024,
    inforom_pwr: 1040,
    gom_current: 1056,
    gom_pending: 1060,
    fabric_state: 1064,
    fabric_status: 1068,
    gpu_recovery_action: 1072,
    reserved_ext2: 1076,
    valid3: 1080,
    clocks_event_us_sw_power_cap: 1088,
    clocks_event_us_sync_boost: 1096,
    clocks_event_us_sw_thermal_slowdown: 1104,
    clocks_event_us_hw_thermal_slowdown: 1112,
    clocks_event_us_hw_power_brake_slowdown: 1120,
    pcie_link_gen_gpumax: 1128,
    util_jpeg_pct: 1132,
    util_ofa_pct: 1136,
    temp_tlimit_c: 1140,
    deprecated3: 1144,
    pci_base_class: 1152,
    pci_sub_class: 1156,
    gsp_mode_current: 1160,
    gsp_mode_default: 1164,
    addressing_mode: 1168,
    c2c_mode: 1172,
    inforom_checksum_valid: 1176,
    power_management_mode: 1180,
    remapped_rows_hist_max: 1184,
    remapped_rows_hist_high: 1188,
    remapped_rows_hist_partial: 1192,
    remapped_rows_hist_low: 1196,
    remapped_rows_hist_none: 1200,
    fabric_clique_id: 1204,
    fabric_cluster_uuid: 1208,
    fabric_health_mask: 1224,
    fabric_health_summary: 1228,
    sram_ecc_threshold_exceeded: 1232,
    module_power_draw_average_mw: 1236,
    sram_ecc_volatile_unc_parity: 1240,
    sram_ecc_volatile_unc_secded: 1248,
    sram_ecc_aggregate_unc_parity: 1256,
    sram_ecc_aggregate_unc_secded: 1264,
    sram_ecc_aggregate_unc_l2: 1272,
    sram_ecc_aggregate_unc_sm: 1280,
    sram_ecc_aggregate_unc_mcu: 1288,
    sram_ecc_aggregate_unc_pcie: 1296,
    sram_ecc_aggregate_unc_other: 1304,
    module_power_draw_instant_mw: 1312,
    module_power_limit_mw: 1316,
    module_enforced_power_limit_mw: 1320,
    module_power_default_limit_mw: 1324,
    module_power_min_limit_mw: 1328,
    module_power_max_limit_mw: 1332,
    protected_memory_total_bytes: 1336,
    protected_memory_used_bytes: 1344,
    protected_memory_free_bytes: 1352,
    dram_encryption_current: 1360,
    dram_encryption_pending: 1364,
    platform_chassis_serial: 1368,
    platform_gpu_fabric_guid: 1384,
    platform_slot_number: 1392,
    platform_tray_index: 1396,
    platform_host_id: 1400,
    platform_peer_type: 1404,
    platform_module_id: 1408,
    edpp_multiplier_pct: 1412,
    vgpu_heterogeneous_multi_vgpu: 1416,
    vgpu_fractional_multi_vgpu: 1420,
    vgpu_heterogeneous_timeslice_profiles: 1424,
    vgpu_heterogeneous_timeslice_sizes: 1428,
    vgpu_homogeneous_placements: 1432,
    vgpu_mig_timeslicing: 1436,
    vgpu_mig_timeslicing_mode: 1440,
    reserved_ext7: 1444,
    gpu_hostname: 1448,
    reserved_ext6: 1512,
    xid_errors_total: 1536,
    xid_last_unix_ns: 1544,
    xid_last_code: 1552,
    xid_last_gpu_instance_id: 1556,
    xid_last_compute_instance_id: 1560,
    reserved_ext8: 1564,
    xid_codes: 1568,
    xid_counts: 1632,
    power_smoothing_delayed_supported: 1696,
    power_smoothing_primary_floor_mw: 1700,
    power_smoothing_secondary_floor_mw: 1704,
    power_smoothing_min_primary_act_offset_mw: 1708,
    power_smoothing_min_primary_act_point_mw: 1712,
    power_smoothing_window_multiplier_ms: 1716,
    power_smoothing_profile_secondary_floor_mw: 1720,
    power_smoothing_profile_act_window_mult: 1724,
    power_smoothing_profile_tar_window_mult: 1728,
    power_smoothing_profile_act_offset_mw: 1732,
    power_smoothing_admin_secondary_floor_mw: 1736,
    power_smoothing_admin_act_window_mult: 1740,
    power_smoothing_admin_tar_window_mult: 1744,
    power_smoothing_admin_act_offset_mw: 1748,
    reserved_ext9: 1752,
    valid4: 1792,
    remapped_rows_correctable_inactive: 1800,
    remapped_rows_uncorrectable_inactive: 1804,
    gpu_base_current_mw: 1808,
    gpu_base_requested_mw: 1812,
    gpu_base_default_mw: 1816,
    gpu_base_min_mw: 1820,
    gpu_base_max_mw: 1824,
    bbx_time_run_s: 1828,
    power_smoothing_tmp_floor_mw: 1832,
    power_smoothing_tmp_ceil_mw: 1836,
    power_smoothing_hw_lifetime_pct: 1840,
    power_smoothing_enabled: 1844,
    power_smoothing_soc_enabled: 1848,
    power_smoothing_priv_level: 1852,
    power_smoothing_imm_ramp_down: 1856,
    power_smoothing_max_pct_tmp_floor: 1860,
    power_smoothing_min_pct_tmp_floor: 1864,
    power_smoothing_num_preset_profiles: 1868,
    power_smoothing_profile_pct_tmp_floor: 1872,
    power_smoothing_profile_ramp_up_mw_s: 1876,
    power_smoothing_profile_ramp_down_mw_s: 1880,
    power_smoothing_profile_ramp_down_hyst_ms: 1884,
    power_smoothing_active_profile: 1888,
    power_smoothing_admin_pct_tmp_floor: 1892,
    power_smoothing_admin_ramp_up_mw_s: 1896,
    power_smoothing_admin_ramp_down_mw_s: 1900,
    power_smoothing_admin_ramp_down_hyst_ms: 1904,
    minor_number: 1908,
    reserved_ext11: 1912,
});

pin_layout!(ProcTableHead, size = 128, {
    seq: 0, count: 8, overflow: 12, policy: 16, flags: 20, pid_ns_inode: 24,
    sample_mono_ns: 32, period_ns: 40, text_pool_offset: 48, text_pool_size_bytes: 56,
    text_pool_used_bytes: 60, reserved: 64,
});

pin_layout!(ProcRecord, size = 640, {
    gpu_index: 0, pid: 4, uid: 8, kind: 12, valid: 16, gpu_mem_bytes: 24,
    gpu_instance_id: 32, compute_instance_id: 36, user: 40, command: 72, text_offset: 104,
    command_len: 108, cmdline_stored_len: 112, reserved0: 116, reserved: 120,
    ns_pid: 128, sm_util_pct: 132, mem_util_pct: 136, enc_util_pct: 140,
    dec_util_pct: 144, cpu_centipct: 148, host_rss_bytes: 152, start_unix_ns: 160,
    pid_ns_inode: 168, cmdline_len: 176, reserved1: 180, container_runtime: 184,
    container_id: 200, pod_uid: 272, cmdline: 312,
});

pin_layout!(HistoryHead, size = 32, {
    seq: 0, written: 8, step_ns: 16, reserved: 24,
});

pin_layout!(HistorySample, size = 24, {
    sample_mono_ns: 0, mem_used_mib: 8, power_draw_mw: 12, util_gpu_pct: 16,
    util_mem_pct: 17, temp_gpu_c: 18, valid: 20, reserved: 22,
});

pin_layout!(MigTableHead, size = 128, {
    seq: 0, count: 8, overflow: 12, reserved: 16,
});

pin_layout!(MigRecord, size = 256, {
    gpu_index: 0, mig_index: 4, gpu_instance_id: 8, compute_instance_id: 12, valid: 16,
    uuid: 24, profile: 120, mem_total_bytes: 152, mem_used_bytes: 160, mem_free_bytes: 168,
    sm_count: 176, gpu_instance_slice_count: 180, compute_instance_slice_count: 184,
    gpu_instance_profile_id: 188, gpm_sm_activity_centipct: 192,
    gpm_sm_occupancy_centipct: 196, gpm_tensor_activity_centipct: 200,
    gpm_dram_bw_util_centipct: 204, gpm_interval_ns: 208, sample_mono_ns: 216,
    placement_start: 224, placement_size: 228, reserved: 232,
});

pin_layout!(TierTableHead, size = 128, {
    track_count: 0, track_size_bytes: 4, tracks_offset: 8, track_head_size_bytes: 16,
    bucket_size_bytes: 20, raw_slots: 24, tier1_slots: 28, tier2_slots: 32, reserved0: 36,
    reserved: 40,
});

pin_layout!(TrackHead, size = 384, {
    seq: 0, kind: 8, gpu_index: 12, gpu_instance_id: 16, compute_instance_id: 20, uuid: 24,
    integral_start_unix_ns: 120, last_sample_unix_ns: 128, raw_written: 136,
    raw_step_ns: 144, tier1_written: 152, tier1_width_ns: 160, tier2_written: 168,
    tier2_width_ns: 176, sum_util_pct: 184, count_util: 192, sum_mem_used_mib: 200,
    count_mem_used: 208, sum_power_mw: 216, count_power: 224, sum_temp_c: 232,
    count_temp: 240, sum_sm_clock_mhz: 248, count_sm_clock: 256,
    sum_sm_active_centipct: 264, count_sm_active: 272, reserved: 280,
});

pin_layout!(TierBucket, size = 56, {
    start_unix_ns: 0, mem_used_mib_min: 8, mem_used_mib_mean: 12, mem_used_mib_max: 16,
    power_mw_min: 20, power_mw_mean: 24, power_mw_max: 28, util_centipct_mean: 32,
    sm_active_centipct_min: 34, sm_active_centipct_mean: 36, sm_active_centipct_max: 38,
    sm_clock_mhz_min: 40, sm_clock_mhz_mean: 42, sm_clock_mhz_max: 44,
    temp_centi_c_mean: 46, temp_c_min: 48, temp_c_max: 49, util_pct_min: 50,
    util_pct_max: 51, samples: 52, valid: 53, reserved: 54,
});

/// Size of a 1.0 process record: the smallest a reader accepts.
pub const PROC_RECORD_V1_0_SIZE: usize = 128;

/// One field of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Its name, the same in every reader.
    pub name: &'static str,
    /// Offset from the start of the record, bytes.
    pub offset: usize,
    /// Size, bytes.
    pub size: usize,
    /// Its type.
    pub ty: FieldType,
}

/// One record of the ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// The Rust type's name, e.g. `"GpuRecord"`.
    pub name: &'static str,
    /// Size in bytes.
    pub size: usize,
    /// Every field, in memory order.
    pub fields: &'static [Field],
}

macro_rules! records {
    ($($ty:ident),* $(,)?) => {
        [$(Record { name: stringify!($ty), size: size_of::<$ty>(), fields: $ty::FIELDS }),*]
    };
}

/// Every record of the ABI, in the order of [`describe`].
pub const RECORDS: [Record; 12] = records!(
    StaticHeader,
    StatusRecord,
    GpuRecord,
    ProcTableHead,
    ProcRecord,
    HistoryHead,
    HistorySample,
    MigTableHead,
    MigRecord,
    TierTableHead,
    TrackHead,
    TierBucket,
);

/// The whole ABI as text: one block per record, one `offset size name` line per field.
/// The golden test compares this with `tests/layout-v1.golden`; the man page shows it.
pub fn describe() -> String {
    let mut out = String::new();
    for record in RECORDS {
        out.push_str(&format!("{} size={}\n", record.name, record.size));
        for field in record.fields {
            out.push_str(&format!(
                "  {:4} {:3} {}\n",
                field.offset, field.size, field.name
            ));
        }
    }
    out
}
