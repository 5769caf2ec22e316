//! The values nvidia-smi's `--query-gpu` names beyond the core set (ABI 1.4's
//! [`gpu_valid2`] fields), by tier:
//!
//! - **Identity**, once per NVML session ([`Details::read`]): serial, VBIOS version,
//!   compute capability, PCI ids (from the PCI info the identity already reads), maximum
//!   PCIe link, default power limit and the limit range, the clock event reasons the GPU
//!   can report, the infoROM versions. Kept in every GPU state, like the name.
//! - **Near-static**, with [`crate::tiers::STATIC`] every 30 s ([`sample_static`]):
//!   persistence, compute, display and ECC modes, accounting, retired pages, remapped rows,
//!   applications and default applications clocks, aggregate ECC counts, and the ECC
//!   counts by memory location (one `nvmlDeviceGetMemoryErrorCounter` each), the GPU
//!   operation mode, the fabric registration state and the recovery action the driver
//!   recommends (one `nvmlDeviceGetFieldValues` of its own).
//!   The GPU's own maximum PCIe generation (ABI 1.5's `valid3`) comes with them.
//! - **Slow ticks** ([`sample_slow`], [`sample_slow3`]): the video clock, the encoder
//!   statistics, the five clock event reason counters (one
//!   `nvmlDeviceGetFieldValues`) and the JPEG and OFA utilisations.
//!
//! The memory temperature and the instantaneous power come in the fast tick's one
//! field-value batch (see [`crate::fields`]), at no extra call.
//!
//! A value the driver answers `NVML_ERROR_DEPRECATED` for (display mode and the
//! applications clocks on 590+ drivers) sets its bit in `deprecated2` instead, so that
//! readers print what nvidia-smi prints for it.

use std::os::raw::c_uint;

use nvml_wrapper::enum_wrappers::device::{
    Clock, ComputeMode, EccCounter, InfoRom, MemoryError, MemoryLocation, OperationMode,
};
use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::struct_wrappers::device::PciInfo;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings;

use gpupeek_shm::layout::{gpu_valid2 as v2, gpu_valid3 as v3};
use gpupeek_shm::{text, GpuRecord};

use crate::numbering::Numbering;
use crate::reads::Fill;

/// NVML's `NVML_ERROR_DEPRECATED`, which nvml-wrapper does not name.
const DEPRECATED: u32 = bindings::nvmlReturn_enum_NVML_ERROR_DEPRECATED;

impl Fill<'_> {
    /// Like [`Fill::field`] for a [`gpu_valid2`] value: on success stores it and sets
    /// `bit` in `valid2`; "deprecated" sets `bit` in `deprecated2`.
    pub fn field2<T>(
        &mut self,
        bit: u64,
        get: impl FnOnce() -> Result<T, NvmlError>,
        set: impl FnOnce(&mut GpuRecord, T),
    ) {
        self.field_in(bit, get, set, |r| (&mut r.valid2, &mut r.deprecated2));
    }

    /// Like [`Fill::field`] for a [`gpu_valid3`](gpupeek_shm::layout::gpu_valid3)
    /// value: on success stores it and sets `bit` in `valid3`; "deprecated" sets `bit`
    /// in `deprecated3` (ABI 1.6).
    pub fn field3<T>(
        &mut self,
        bit: u64,
        get: impl FnOnce() -> Result<T, NvmlError>,
        set: impl FnOnce(&mut GpuRecord, T),
    ) {
        self.field_in(bit, get, set, |r| (&mut r.valid3, &mut r.deprecated3));
    }

    /// [`Fill::field2`] and [`Fill::field3`]: `masks` picks the record's validity and
    /// "deprecated" masks that `bit` belongs to.
    fn field_in<T>(
        &mut self,
        bit: u64,
        get: impl FnOnce() -> Result<T, NvmlError>,
        set: impl FnOnce(&mut GpuRecord, T),
        masks: impl FnOnce(&mut GpuRecord) -> (&mut u64, &mut u64),
    ) {
        let mut deprecated = false;
        let value = self.call(|| {
            get().map_err(|e| match e {
                NvmlError::UnexpectedVariant(DEPRECATED) => {
                    deprecated = true;
                    NvmlError::NotSupported
                }
                e => e,
            })
        });
        if let Some(value) = value {
            set(self.rec, value);
            *masks(self.rec).0 |= bit;
        } else if deprecated {
            *masks(self.rec).1 |= bit;
        }
    }
}

/// The identity part: read once per session, kept for when the GPU fails.
#[derive(Debug, Default, Clone)]
pub struct Details {
    rec: GpuRecord,
}

/// The [`gpu_valid2`] values read once per session.
pub const IDENTITY2: u64 = v2::SERIAL
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

/// The [`gpu_valid2`] values read with [`crate::tiers::STATIC`].
pub const STATIC2: u64 = v2::PERSISTENCE_MODE
    | v2::COMPUTE_MODE
    | v2::DISPLAY_MODE
    | v2::DISPLAY_ACTIVE
    | v2::ECC_MODE
    | v2::ACCOUNTING_MODE
    | v2::ACCOUNTING_BUFFER_SIZE
    | v2::RETIRED_PAGES
    | v2::RETIRED_PAGES_PENDING
    | v2::REMAPPED_ROWS
    | v2::CLOCK_APP_GRAPHICS
    | v2::CLOCK_APP_MEM
    | v2::CLOCK_DEFAULT_APP_GRAPHICS
    | v2::CLOCK_DEFAULT_APP_MEM
    | v2::ECC_CORRECTED_AGGREGATE
    | v2::ECC_UNCORRECTED_AGGREGATE
    | ECC_LOCATIONS
    | v2::GOM
    | v2::FABRIC
    | v2::RECOVERY_ACTION;

/// The per-location ECC counts ([`ECC_LOCATION`]'s bits).
pub const ECC_LOCATIONS: u64 = v2::ECC_CORRECTED_VOLATILE_L1_CACHE
    | v2::ECC_CORRECTED_VOLATILE_L2_CACHE
    | v2::ECC_CORRECTED_VOLATILE_DEVICE_MEMORY
    | v2::ECC_CORRECTED_VOLATILE_REGISTER_FILE
    | v2::ECC_CORRECTED_VOLATILE_TEXTURE_MEMORY
    | v2::ECC_CORRECTED_VOLATILE_CBU
    | v2::ECC_CORRECTED_VOLATILE_SRAM
    | v2::ECC_CORRECTED_AGGREGATE_L1_CACHE
    | v2::ECC_CORRECTED_AGGREGATE_L2_CACHE
    | v2::ECC_CORRECTED_AGGREGATE_DEVICE_MEMORY
    | v2::ECC_CORRECTED_AGGREGATE_REGISTER_FILE
    | v2::ECC_CORRECTED_AGGREGATE_TEXTURE_MEMORY
    | v2::ECC_CORRECTED_AGGREGATE_CBU
    | v2::ECC_CORRECTED_AGGREGATE_SRAM
    | v2::ECC_UNCORRECTED_VOLATILE_L1_CACHE
    | v2::ECC_UNCORRECTED_VOLATILE_L2_CACHE
    | v2::ECC_UNCORRECTED_VOLATILE_DEVICE_MEMORY
    | v2::ECC_UNCORRECTED_VOLATILE_REGISTER_FILE
    | v2::ECC_UNCORRECTED_VOLATILE_TEXTURE_MEMORY
    | v2::ECC_UNCORRECTED_VOLATILE_CBU
    | v2::ECC_UNCORRECTED_VOLATILE_SRAM
    | v2::ECC_UNCORRECTED_AGGREGATE_L1_CACHE
    | v2::ECC_UNCORRECTED_AGGREGATE_L2_CACHE
    | v2::ECC_UNCORRECTED_AGGREGATE_DEVICE_MEMORY
    | v2::ECC_UNCORRECTED_AGGREGATE_REGISTER_FILE
    | v2::ECC_UNCORRECTED_AGGREGATE_TEXTURE_MEMORY
    | v2::ECC_UNCORRECTED_AGGREGATE_CBU
    | v2::ECC_UNCORRECTED_AGGREGATE_SRAM;

/// The [`gpu_valid2`] values read on slow ticks.
pub const SLOW2: u64 = v2::CLOCK_VIDEO | v2::ENCODER_STATS;

/// The [`gpu_valid3`](gpupeek_shm::layout::gpu_valid3) values read with
/// [`crate::tiers::STATIC`].
pub const STATIC3: u64 = v3::PCIE_LINK_GEN_GPUMAX | crate::details3::STATIC3;

/// The clock event reason counters, one field-value call for the five.
pub const CLOCKS_EVENT_COUNTERS: u64 = v3::CLOCKS_EVENT_US_SW_POWER_CAP
    | v3::CLOCKS_EVENT_US_SYNC_BOOST
    | v3::CLOCKS_EVENT_US_SW_THERMAL_SLOWDOWN
    | v3::CLOCKS_EVENT_US_HW_THERMAL_SLOWDOWN
    | v3::CLOCKS_EVENT_US_HW_POWER_BRAKE_SLOWDOWN;

/// The [`gpu_valid3`](gpupeek_shm::layout::gpu_valid3) values read on slow ticks.
pub const SLOW3: u64 =
    CLOCKS_EVENT_COUNTERS | v3::UTIL_JPEG | v3::UTIL_OFA | crate::details3::SLOW3;

impl Details {
    /// Reads the identity values; `pci` is what the identity's PCI info call gave.
    pub fn read(device: &Device, fill: &mut Fill, pci: Option<&PciInfo>) -> Details {
        let saved = (fill.rec.valid2, fill.rec.deprecated2);
        fill.rec.valid2 = 0;
        fill.rec.deprecated2 = 0;
        if let Some(p) = pci {
            let r = &mut *fill.rec;
            r.pci_domain = p.domain;
            r.pci_bus = p.bus;
            r.pci_device = p.device;
            r.pci_device_id = p.pci_device_id;
            r.pci_subsystem_id = p.pci_sub_system_id.unwrap_or(0);
            r.valid2 |= v2::PCI_INFO;
        }
        fill.field2(
            v2::SERIAL,
            || device.serial(),
            |r, s| text::encode(&mut r.serial, &s),
        );
        fill.field2(
            v2::VBIOS_VERSION,
            || device.vbios_version(),
            |r, s| text::encode(&mut r.vbios_version, &s),
        );
        fill.field2(
            v2::CLOCK_EVENT_REASONS_SUPPORTED,
            || device.supported_throttle_reasons(),
            |r, s| r.clock_event_reasons_supported = s.bits(),
        );
        fill.field2(
            v2::COMPUTE_CAP,
            || device.cuda_compute_capability(),
            |r, c| {
                r.compute_cap_major = c.major.max(0) as u32;
                r.compute_cap_minor = c.minor.max(0) as u32;
            },
        );
        fill.field2(
            v2::PCIE_LINK_GEN_MAX,
            || device.max_pcie_link_gen(),
            |r, g| r.pcie_link_gen_max = g,
        );
        fill.field2(
            v2::PCIE_LINK_WIDTH_MAX,
            || device.max_pcie_link_width(),
            |r, w| r.pcie_link_width_max = w,
        );
        fill.field2(
            v2::POWER_DEFAULT_LIMIT,
            || device.power_management_limit_default(),
            |r, p| r.power_default_limit_mw = p,
        );
        fill.field2(
            v2::POWER_LIMIT_RANGE,
            || device.power_management_limit_constraints(),
            |r, c| {
                r.power_min_limit_mw = c.min_limit;
                r.power_max_limit_mw = c.max_limit;
            },
        );
        fill.field2(
            v2::INFOROM_IMG,
            || device.info_rom_image_version(),
            |r, s| text::encode(&mut r.inforom_img, &s),
        );
        for (bit, object) in [
            (v2::INFOROM_OEM, InfoRom::OEM),
            (v2::INFOROM_ECC, InfoRom::ECC),
            (v2::INFOROM_PWR, InfoRom::Power),
        ] {
            fill.field2(
                bit,
                || device.info_rom_version(object),
                |r, s| {
                    let slot = match object {
                        InfoRom::OEM => &mut r.inforom_oem,
                        InfoRom::ECC => &mut r.inforom_ecc,
                        InfoRom::Power => &mut r.inforom_pwr,
                    };
                    text::encode(slot, &s);
                },
            );
        }
        let details = Details { rec: *fill.rec };
        fill.rec.valid2 = saved.0;
        fill.rec.deprecated2 = saved.1;
        details
    }

    /// Puts the identity values into `rec`.
    pub fn put(&self, rec: &mut GpuRecord) {
        copy2(&self.rec, rec, IDENTITY2);
    }
}

/// The near-static values: see [`STATIC2`] (and [`crate::details3`]'s, which need the
/// session's [`Unbound`](crate::details3::Unbound) entry points).
pub fn sample_static(nvml: &Nvml, unbound: &crate::details3::Unbound, d: &Device, f: &mut Fill) {
    f.field2(
        v2::PERSISTENCE_MODE,
        || persistence_mode(nvml, d),
        |r, m| r.persistence_mode = m,
    );
    f.field2(
        v2::COMPUTE_MODE,
        || d.compute_mode(),
        |r, m| {
            r.compute_mode = match m {
                ComputeMode::Default => 0,
                ComputeMode::ExclusiveThread => 1,
                ComputeMode::Prohibited => 2,
                ComputeMode::ExclusiveProcess => 3,
            }
        },
    );
    f.field2(
        v2::DISPLAY_MODE,
        || d.is_display_connected(),
        |r, m| r.display_mode = m.into(),
    );
    f.field2(
        v2::DISPLAY_ACTIVE,
        || d.is_display_active(),
        |r, m| r.display_active = m.into(),
    );
    f.field2(
        v2::ECC_MODE,
        || d.is_ecc_enabled(),
        |r, m| {
            r.ecc_mode_current = m.currently_enabled.into();
            r.ecc_mode_pending = m.pending_enabled.into();
        },
    );
    f.field2(
        v2::ACCOUNTING_MODE,
        || d.is_accounting_enabled(),
        |r, m| r.accounting_mode = m.into(),
    );
    f.field2(
        v2::ACCOUNTING_BUFFER_SIZE,
        || d.accounting_buffer_size(),
        |r, n| r.accounting_buffer_size = n,
    );
    f.field2(
        v2::RETIRED_PAGES,
        || Ok((retired_count(nvml, d, 0)?, retired_count(nvml, d, 1)?)),
        |r, (sbe, dbe)| {
            r.retired_pages_sbe = sbe;
            r.retired_pages_dbe = dbe;
        },
    );
    f.field2(
        v2::RETIRED_PAGES_PENDING,
        || d.are_pages_pending_retired(),
        |r, p| r.retired_pages_pending = p.into(),
    );
    f.field2(
        v2::REMAPPED_ROWS,
        || remapped_rows(nvml, d),
        |r, [corr, unc, pending, failure]| {
            r.remapped_rows_correctable = corr;
            r.remapped_rows_uncorrectable = unc;
            r.remapped_rows_pending = pending;
            r.remapped_rows_failure = failure;
        },
    );
    f.field2(
        v2::CLOCK_APP_GRAPHICS,
        || d.applications_clock(Clock::Graphics),
        |r, c| r.clock_app_graphics_mhz = c,
    );
    f.field2(
        v2::CLOCK_APP_MEM,
        || d.applications_clock(Clock::Memory),
        |r, c| r.clock_app_mem_mhz = c,
    );
    f.field2(
        v2::CLOCK_DEFAULT_APP_GRAPHICS,
        || d.default_applications_clock(Clock::Graphics),
        |r, c| r.clock_default_app_graphics_mhz = c,
    );
    f.field2(
        v2::CLOCK_DEFAULT_APP_MEM,
        || d.default_applications_clock(Clock::Memory),
        |r, c| r.clock_default_app_mem_mhz = c,
    );
    f.field2(
        v2::ECC_CORRECTED_AGGREGATE,
        || d.total_ecc_errors(MemoryError::Corrected, EccCounter::Aggregate),
        |r, n| r.ecc_corrected_aggregate_count = n,
    );
    f.field2(
        v2::ECC_UNCORRECTED_AGGREGATE,
        || d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate),
        |r, n| r.ecc_uncorrected_aggregate_count = n,
    );
    sample_ecc_locations(d, f);
    f.field2(
        v2::GOM,
        || d.gpu_operation_mode(),
        |r, m| {
            let code = |m| match m {
                OperationMode::AllOn => 0,
                OperationMode::Compute => 1,
                OperationMode::LowDP => 2,
            };
            r.gom_current = code(m.current);
            r.gom_pending = code(m.pending);
        },
    );
    crate::details3::sample_fabric(nvml, d, f);
    f.field2(
        v2::RECOVERY_ACTION,
        || {
            let id = bindings::field_id::NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;
            crate::fields::one(nvml, d, id)
        },
        |r, action| r.gpu_recovery_action = u32::try_from(action).unwrap_or(u32::MAX),
    );
    f.field3(
        v3::PCIE_LINK_GEN_GPUMAX,
        || gpu_max_pcie_link_gen(nvml, d),
        |r, g| r.pcie_link_gen_gpumax = g,
    );
    crate::details3::sample_static(nvml, unbound, d, f);
}

/// `nvmlDeviceGetGpuMaxPcieLinkGeneration` (the GPU's own maximum, whatever the slot),
/// which nvml-wrapper lacks.
fn gpu_max_pcie_link_gen(nvml: &Nvml, d: &Device) -> Result<u32, NvmlError> {
    let get = nvml
        .lib()
        .nvmlDeviceGetGpuMaxPcieLinkGeneration
        .as_ref()
        .map_err(|_| NvmlError::FunctionNotFound)?;
    let mut gen: c_uint = 0;
    // SAFETY: `get` has the C signature `nvmlReturn_t (nvmlDevice_t, unsigned int *)`;
    // the handle belongs to the live session held by `nvml` and `gen` is writable.
    nvml_try(unsafe { get(d.handle(), &mut gen) })?;
    Ok(gen)
}

/// The SW power cap and sync boost counters' field ids, the same on every driver.
const POWER_CAP_AND_SYNC_BOOST: [u32; 2] = [
    bindings::field_id::NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP,
    bindings::field_id::NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST,
];

/// The slow-tick [`SLOW3`] values: the clock event reason counters this driver has
/// (`numbering` says where), in one field-value call, and the JPEG and OFA utilisations.
pub fn sample_slow3(nvml: &Nvml, d: &Device, numbering: Numbering, f: &mut Fill) {
    let [power, sync] = POWER_CAP_AND_SYNC_BOOST;
    match numbering.slowdown() {
        Some([a, b, c]) => {
            let answers = f.call(|| crate::fields::some(nvml, d, [power, sync, a, b, c]));
            store_counters(f, answers.as_ref().map_or(&[], |a| &a[..]));
        }
        None => {
            let answers = f.call(|| crate::fields::some(nvml, d, [power, sync]));
            store_counters(f, answers.as_ref().map_or(&[], |a| &a[..]));
        }
    }
    f.field3(
        v3::UTIL_JPEG,
        || engine_utilization(nvml, d, Engine::Jpeg),
        |r, u| r.util_jpeg_pct = u,
    );
    f.field3(
        v3::UTIL_OFA,
        || engine_utilization(nvml, d, Engine::Ofa),
        |r, u| r.util_ofa_pct = u,
    );
    crate::details3::sample_slow(nvml, d, f);
}

/// Stores the clock event reason counters `answers` gives, in the layout's order (SW
/// power cap, sync boost, then the slowdowns), each with its bit.
fn store_counters(f: &mut Fill, answers: &[Result<u64, NvmlError>]) {
    const BITS: [u64; 5] = [
        v3::CLOCKS_EVENT_US_SW_POWER_CAP,
        v3::CLOCKS_EVENT_US_SYNC_BOOST,
        v3::CLOCKS_EVENT_US_SW_THERMAL_SLOWDOWN,
        v3::CLOCKS_EVENT_US_HW_THERMAL_SLOWDOWN,
        v3::CLOCKS_EVENT_US_HW_POWER_BRAKE_SLOWDOWN,
    ];
    for (bit, answer) in BITS.into_iter().zip(answers) {
        let Ok(&value) = answer.as_ref() else {
            continue;
        };
        let r = &mut *f.rec;
        let slot = match bit {
            v3::CLOCKS_EVENT_US_SW_POWER_CAP => &mut r.clocks_event_us_sw_power_cap,
            v3::CLOCKS_EVENT_US_SYNC_BOOST => &mut r.clocks_event_us_sync_boost,
            v3::CLOCKS_EVENT_US_SW_THERMAL_SLOWDOWN => &mut r.clocks_event_us_sw_thermal_slowdown,
            v3::CLOCKS_EVENT_US_HW_THERMAL_SLOWDOWN => &mut r.clocks_event_us_hw_thermal_slowdown,
            _ => &mut r.clocks_event_us_hw_power_brake_slowdown,
        };
        *slot = value;
        r.valid3 |= bit;
    }
}

/// An engine whose utilisation nvml-wrapper has no getter for.
#[derive(Clone, Copy)]
enum Engine {
    /// `nvmlDeviceGetJpgUtilization`.
    Jpeg,
    /// `nvmlDeviceGetOfaUtilization`.
    Ofa,
}

/// `nvmlDeviceGetJpgUtilization` or `nvmlDeviceGetOfaUtilization` (R535+): percent.
fn engine_utilization(nvml: &Nvml, d: &Device, engine: Engine) -> Result<u32, NvmlError> {
    let lib = nvml.lib();
    let get = match engine {
        Engine::Jpeg => lib.nvmlDeviceGetJpgUtilization.as_ref(),
        Engine::Ofa => lib.nvmlDeviceGetOfaUtilization.as_ref(),
    }
    .map_err(|_| NvmlError::FunctionNotFound)?;
    let (mut pct, mut period): (c_uint, c_uint) = (0, 0);
    // SAFETY: both getters have the C signature `nvmlReturn_t (nvmlDevice_t, unsigned
    // int *, unsigned int *)`; the handle belongs to the live session held by `nvml`,
    // and both outputs are writable.
    nvml_try(unsafe { get(d.handle(), &mut pct, &mut period) })?;
    Ok(pct)
}

/// Copies the [`gpu_valid3`](gpupeek_shm::layout::gpu_valid3) values behind `bits`
/// from `from` into `to`, with their bits in `valid3`.
pub fn copy3(from: &GpuRecord, to: &mut GpuRecord, bits: u64) {
    macro_rules! fields {
        ($($bit:ident => $($f:ident),+;)*) => {$(
            if bits & v3::$bit != 0 {
                $(to.$f = from.$f;)+
            }
        )*};
    }
    fields! {
        CLOCKS_EVENT_US_SW_POWER_CAP => clocks_event_us_sw_power_cap;
        CLOCKS_EVENT_US_SYNC_BOOST => clocks_event_us_sync_boost;
        CLOCKS_EVENT_US_SW_THERMAL_SLOWDOWN => clocks_event_us_sw_thermal_slowdown;
        CLOCKS_EVENT_US_HW_THERMAL_SLOWDOWN => clocks_event_us_hw_thermal_slowdown;
        CLOCKS_EVENT_US_HW_POWER_BRAKE_SLOWDOWN => clocks_event_us_hw_power_brake_slowdown;
        PCIE_LINK_GEN_GPUMAX => pcie_link_gen_gpumax;
        UTIL_JPEG => util_jpeg_pct;
        UTIL_OFA => util_ofa_pct;
        TEMP_TLIMIT => temp_tlimit_c;
        PCI_CLASS => pci_base_class, pci_sub_class;
        GSP_MODE => gsp_mode_current, gsp_mode_default;
        ADDRESSING_MODE => addressing_mode;
        C2C_MODE => c2c_mode;
        INFOROM_CHECKSUM => inforom_checksum_valid;
        POWER_MANAGEMENT => power_management_mode;
        REMAPPED_ROWS_HISTOGRAM => remapped_rows_hist_max, remapped_rows_hist_high,
            remapped_rows_hist_partial, remapped_rows_hist_low, remapped_rows_hist_none;
        FABRIC_CLIQUE => fabric_clique_id, fabric_cluster_uuid;
        FABRIC_HEALTH => fabric_health_mask, fabric_health_summary;
        SRAM_ECC => sram_ecc_threshold_exceeded, sram_ecc_volatile_unc_parity,
            sram_ecc_volatile_unc_secded, sram_ecc_aggregate_unc_parity,
            sram_ecc_aggregate_unc_secded, sram_ecc_aggregate_unc_l2, sram_ecc_aggregate_unc_sm,
            sram_ecc_aggregate_unc_mcu, sram_ecc_aggregate_unc_pcie,
            sram_ecc_aggregate_unc_other;
        MODULE_POWER_DRAW_AVERAGE => module_power_draw_average_mw;
        MODULE_POWER_DRAW_INSTANT => module_power_draw_instant_mw;
        MODULE_POWER_LIMIT => module_power_limit_mw;
        MODULE_ENFORCED_POWER_LIMIT => module_enforced_power_limit_mw;
        MODULE_POWER_DEFAULT_LIMIT => module_power_default_limit_mw;
        MODULE_POWER_MIN_LIMIT => module_power_min_limit_mw;
        MODULE_POWER_MAX_LIMIT => module_power_max_limit_mw;
        PROTECTED_MEMORY => protected_memory_total_bytes, protected_memory_used_bytes,
            protected_memory_free_bytes;
        DRAM_ENCRYPTION => dram_encryption_current, dram_encryption_pending;
        PLATFORM => platform_chassis_serial, platform_gpu_fabric_guid, platform_slot_number,
            platform_tray_index, platform_host_id, platform_peer_type, platform_module_id;
        EDPP_MULTIPLIER => edpp_multiplier_pct;
        VGPU_HETEROGENEOUS_MULTI_VGPU => vgpu_heterogeneous_multi_vgpu;
        VGPU_FRACTIONAL_MULTI_VGPU => vgpu_fractional_multi_vgpu;
        VGPU_HETEROGENEOUS_TIMESLICE_PROFILES => vgpu_heterogeneous_timeslice_profiles;
        VGPU_HETEROGENEOUS_TIMESLICE_SIZES => vgpu_heterogeneous_timeslice_sizes;
        VGPU_HOMOGENEOUS_PLACEMENTS => vgpu_homogeneous_placements;
        VGPU_MIG_TIMESLICING => vgpu_mig_timeslicing;
        VGPU_MIG_TIMESLICING_MODE => vgpu_mig_timeslicing_mode;
        GPU_HOSTNAME => gpu_hostname;
    }
    crate::smoothing::copy(from, to, bits);

    to.valid3 = (to.valid3 & !bits) | (from.valid3 & bits);
    to.deprecated3 = (to.deprecated3 & !bits) | (from.deprecated3 & bits);
}

/// Every per-location ECC count nvidia-smi names: its bit, error type, counter and
/// location (`dram` is NVML's device memory location, which nvidia-smi also calls
/// `device_memory`).
const ECC_LOCATION: [(u64, MemoryError, EccCounter, MemoryLocation); 28] = [
    (
        v2::ECC_CORRECTED_VOLATILE_L1_CACHE,
        MemoryError::Corrected,
        EccCounter::Volatile,
        MemoryLocation::L1Cache,
    ),
    (
        v2::ECC_CORRECTED_VOLATILE_L2_CACHE,
        MemoryError::Corrected,
        EccCounter::Volatile,
        MemoryLocation::L2Cache,
    ),
    (
        v2::ECC_CORRECTED_VOLATILE_DEVICE_MEMORY,
        MemoryError::Corrected,
        EccCounter::Volatile,
        MemoryLocation::Device,
    ),
    (
        v2::ECC_CORRECTED_VOLATILE_REGISTER_FILE,
        MemoryError::Corrected,
        EccCounter::Volatile,
        MemoryLocation::RegisterFile,
    ),
    (
        v2::ECC_CORRECTED_VOLATILE_TEXTURE_MEMORY,
        MemoryError::Corrected,
        EccCounter::Volatile,
        MemoryLocation::Texture,
    ),
    (
        v2::ECC_CORRECTED_VOLATILE_CBU,
        MemoryError::Corrected,
        EccCounter::Volatile,
        MemoryLocation::Cbu,
    ),
    (
        v2::ECC_CORRECTED_VOLATILE_SRAM,
        MemoryError::Corrected,
        EccCounter::Volatile,
        MemoryLocation::SRAM,
    ),
    (
        v2::ECC_CORRECTED_AGGREGATE_L1_CACHE,
        MemoryError::Corrected,
        EccCounter::Aggregate,
        MemoryLocation::L1Cache,
    ),
    (
        v2::ECC_CORRECTED_AGGREGATE_L2_CACHE,
        MemoryError::Corrected,
        EccCounter::Aggregate,
        MemoryLocation::L2Cache,
    ),
    (
        v2::ECC_CORRECTED_AGGREGATE_DEVICE_MEMORY,
        MemoryError::Corrected,
        EccCounter::Aggregate,
        MemoryLocation::Device,
    ),
    (
        v2::ECC_CORRECTED_AGGREGATE_REGISTER_FILE,
        MemoryError::Corrected,
        EccCounter::Aggregate,
        MemoryLocation::RegisterFile,
    ),
    (
        v2::ECC_CORRECTED_AGGREGATE_TEXTURE_MEMORY,
        MemoryError::Corrected,
        EccCounter::Aggregate,
        MemoryLocation::Texture,
    ),
    (
        v2::ECC_CORRECTED_AGGREGATE_CBU,
        MemoryError::Corrected,
        EccCounter::Aggregate,
        MemoryLocation::Cbu,
    ),
    (
        v2::ECC_CORRECTED_AGGREGATE_SRAM,
        MemoryError::Corrected,
        EccCounter::Aggregate,
        MemoryLocation::SRAM,
    ),
    (
        v2::ECC_UNCORRECTED_VOLATILE_L1_CACHE,
        MemoryError::Uncorrected,
        EccCounter::Volatile,
        MemoryLocation::L1Cache,
    ),
    (
        v2::ECC_UNCORRECTED_VOLATILE_L2_CACHE,
        MemoryError::Uncorrected,
        EccCounter::Volatile,
        MemoryLocation::L2Cache,
    ),
    (
        v2::ECC_UNCORRECTED_VOLATILE_DEVICE_MEMORY,
        MemoryError::Uncorrected,
        EccCounter::Volatile,
        MemoryLocation::Device,
    ),
    (
        v2::ECC_UNCORRECTED_VOLATILE_REGISTER_FILE,
        MemoryError::Uncorrected,
        EccCounter::Volatile,
        MemoryLocation::RegisterFile,
    ),
    (
        v2::ECC_UNCORRECTED_VOLATILE_TEXTURE_MEMORY,
        MemoryError::Uncorrected,
        EccCounter::Volatile,
        MemoryLocation::Texture,
    ),
    (
        v2::ECC_UNCORRECTED_VOLATILE_CBU,
        MemoryError::Uncorrected,
        EccCounter::Volatile,
        MemoryLocation::Cbu,
    ),
    (
        v2::ECC_UNCORRECTED_VOLATILE_SRAM,
        MemoryError::Uncorrected,
        EccCounter::Volatile,
        MemoryLocation::SRAM,
    ),
    (
        v2::ECC_UNCORRECTED_AGGREGATE_L1_CACHE,
        MemoryError::Uncorrected,
        EccCounter::Aggregate,
        MemoryLocation::L1Cache,
    ),
    (
        v2::ECC_UNCORRECTED_AGGREGATE_L2_CACHE,
        MemoryError::Uncorrected,
        EccCounter::Aggregate,
        MemoryLocation::L2Cache,
    ),
    (
        v2::ECC_UNCORRECTED_AGGREGATE_DEVICE_MEMORY,
        MemoryError::Uncorrected,
        EccCounter::Aggregate,
        MemoryLocation::Device,
    ),
    (
        v2::ECC_UNCORRECTED_AGGREGATE_REGISTER_FILE,
        MemoryError::Uncorrected,
        EccCounter::Aggregate,
        MemoryLocation::RegisterFile,
    ),
    (
        v2::ECC_UNCORRECTED_AGGREGATE_TEXTURE_MEMORY,
        MemoryError::Uncorrected,
        EccCounter::Aggregate,
        MemoryLocation::Texture,
    ),
    (
        v2::ECC_UNCORRECTED_AGGREGATE_CBU,
        MemoryError::Uncorrected,
        EccCounter::Aggregate,
        MemoryLocation::Cbu,
    ),
    (
        v2::ECC_UNCORRECTED_AGGREGATE_SRAM,
        MemoryError::Uncorrected,
        EccCounter::Aggregate,
        MemoryLocation::SRAM,
    ),
];

/// The record's slot for the per-location ECC count behind `bit`.
fn ecc_slot(r: &mut GpuRecord, bit: u64) -> &mut u64 {
    match bit {
        v2::ECC_CORRECTED_VOLATILE_L1_CACHE => &mut r.ecc_corrected_volatile_l1_cache,
        v2::ECC_CORRECTED_VOLATILE_L2_CACHE => &mut r.ecc_corrected_volatile_l2_cache,
        v2::ECC_CORRECTED_VOLATILE_DEVICE_MEMORY => &mut r.ecc_corrected_volatile_device_memory,
        v2::ECC_CORRECTED_VOLATILE_REGISTER_FILE => &mut r.ecc_corrected_volatile_register_file,
        v2::ECC_CORRECTED_VOLATILE_TEXTURE_MEMORY => &mut r.ecc_corrected_volatile_texture_memory,
        v2::ECC_CORRECTED_VOLATILE_CBU => &mut r.ecc_corrected_volatile_cbu,
        v2::ECC_CORRECTED_VOLATILE_SRAM => &mut r.ecc_corrected_volatile_sram,
        v2::ECC_CORRECTED_AGGREGATE_L1_CACHE => &mut r.ecc_corrected_aggregate_l1_cache,
        v2::ECC_CORRECTED_AGGREGATE_L2_CACHE => &mut r.ecc_corrected_aggregate_l2_cache,
        v2::ECC_CORRECTED_AGGREGATE_DEVICE_MEMORY => &mut r.ecc_corrected_aggregate_device_memory,
        v2::ECC_CORRECTED_AGGREGATE_REGISTER_FILE => &mut r.ecc_corrected_aggregate_register_file,
        v2::ECC_CORRECTED_AGGREGATE_TEXTURE_MEMORY => &mut r.ecc_corrected_aggregate_texture_memory,
        v2::ECC_CORRECTED_AGGREGATE_CBU => &mut r.ecc_corrected_aggregate_cbu,
        v2::ECC_CORRECTED_AGGREGATE_SRAM => &mut r.ecc_corrected_aggregate_sram,
        v2::ECC_UNCORRECTED_VOLATILE_L1_CACHE => &mut r.ecc_uncorrected_volatile_l1_cache,
        v2::ECC_UNCORRECTED_VOLATILE_L2_CACHE => &mut r.ecc_uncorrected_volatile_l2_cache,
        v2::ECC_UNCORRECTED_VOLATILE_DEVICE_MEMORY => &mut r.ecc_uncorrected_volatile_device_memory,
        v2::ECC_UNCORRECTED_VOLATILE_REGISTER_FILE => &mut r.ecc_uncorrected_volatile_register_file,
        v2::ECC_UNCORRECTED_VOLATILE_TEXTURE_MEMORY => {
            &mut r.ecc_uncorrected_volatile_texture_memory
        }
        v2::ECC_UNCORRECTED_VOLATILE_CBU => &mut r.ecc_uncorrected_volatile_cbu,
        v2::ECC_UNCORRECTED_VOLATILE_SRAM => &mut r.ecc_uncorrected_volatile_sram,
        v2::ECC_UNCORRECTED_AGGREGATE_L1_CACHE => &mut r.ecc_uncorrected_aggregate_l1_cache,
        v2::ECC_UNCORRECTED_AGGREGATE_L2_CACHE => &mut r.ecc_uncorrected_aggregate_l2_cache,
        v2::ECC_UNCORRECTED_AGGREGATE_DEVICE_MEMORY => {
            &mut r.ecc_uncorrected_aggregate_device_memory
        }
        v2::ECC_UNCORRECTED_AGGREGATE_REGISTER_FILE => {
            &mut r.ecc_uncorrected_aggregate_register_file
        }
        v2::ECC_UNCORRECTED_AGGREGATE_TEXTURE_MEMORY => {
            &mut r.ecc_uncorrected_aggregate_texture_memory
        }
        v2::ECC_UNCORRECTED_AGGREGATE_CBU => &mut r.ecc_uncorrected_aggregate_cbu,
        _ => &mut r.ecc_uncorrected_aggregate_sram,
    }
}

/// The per-location ECC counts, one `nvmlDeviceGetMemoryErrorCounter` each; a location
/// the GPU does not have is not supported and gets no value.
fn sample_ecc_locations(d: &Device, f: &mut Fill) {
    for (bit, error, counter, location) in ECC_LOCATION {
        f.field2(
            bit,
            || d.memory_error_counter(error, counter, location),
            |r, n| *ecc_slot(r, bit) = n,
        );
    }
}

/// The slow tier's values: see [`SLOW2`].
pub fn sample_slow(d: &Device, f: &mut Fill) {
    f.field2(
        v2::CLOCK_VIDEO,
        || d.clock_info(Clock::Video),
        |r, c| r.clock_video_mhz = c,
    );
    f.field2(
        v2::ENCODER_STATS,
        || d.encoder_stats(),
        |r, s| {
            r.encoder_session_count = s.session_count;
            r.encoder_average_fps = s.average_fps;
            r.encoder_average_latency_us = s.average_latency;
        },
    );
}

/// `nvmlDeviceGetPersistenceMode`, which nvml-wrapper lacks: 0 or 1.
fn persistence_mode(nvml: &Nvml, d: &Device) -> Result<u32, NvmlError> {
    let get = nvml
        .lib()
        .nvmlDeviceGetPersistenceMode
        .as_ref()
        .map_err(|_| NvmlError::FunctionNotFound)?;
    let mut state: bindings::nvmlEnableState_t = 0;
    // SAFETY: `get` comes from the loaded NVML library with the C signature
    // `nvmlReturn_t (nvmlDevice_t, nvmlEnableState_t *)`; the handle belongs to the live
    // session held by `nvml`, and `state` is a valid, writable nvmlEnableState_t.
    nvml_try(unsafe { get(d.handle(), &mut state) })?;
    Ok(u32::from(state != 0))
}

/// How many pages were retired for `cause` (0: multiple single-bit errors, 1: a
/// double-bit error), asking only for the count.
fn retired_count(nvml: &Nvml, d: &Device, cause: u32) -> Result<u32, NvmlError> {
    let get = nvml
        .lib()
        .nvmlDeviceGetRetiredPages
        .as_ref()
        .map_err(|_| NvmlError::FunctionNotFound)?;
    let mut count: c_uint = 0;
    // SAFETY: `get` has the C signature `nvmlReturn_t (nvmlDevice_t,
    // nvmlPageRetirementCause_t, unsigned int *, unsigned long long *)`; a count of 0
    // with a null buffer asks for the count only, which the driver writes to `count`.
    let code = unsafe { get(d.handle(), cause, &mut count, std::ptr::null_mut()) };
    if code == bindings::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE {
        return Ok(count);
    }
    nvml_try(code)?;
    Ok(count)
}

/// `nvmlDeviceGetRemappedRows`: correctable, uncorrectable, pending (0/1), failure (0/1).
fn remapped_rows(nvml: &Nvml, d: &Device) -> Result<[u32; 4], NvmlError> {
    let get = nvml
        .lib()
        .nvmlDeviceGetRemappedRows
        .as_ref()
        .map_err(|_| NvmlError::FunctionNotFound)?;
    let mut rows: [c_uint; 4] = [0; 4];
    let [a, b, c, e] = &mut rows;
    // SAFETY: `get` has the C signature `nvmlReturn_t (nvmlDevice_t, unsigned int *,
    // unsigned int *, unsigned int *, unsigned int *)`; each pointer is a distinct,
    // writable local.
    nvml_try(unsafe { get(d.handle(), a, b, c, e) })?;
    Ok([
        rows[0],
        rows[1],
        u32::from(rows[2] != 0),
        u32::from(rows[3] != 0),
    ])
}

/// Copies the [`gpu_valid2`] values behind `bits` from `from` into `to`, with their
/// bits in `valid2` and `deprecated2`.
pub fn copy2(from: &GpuRecord, to: &mut GpuRecord, bits: u64) {
    macro_rules! fields {
        ($($bit:ident => $($f:ident),+;)*) => {$(
            if bits & v2::$bit != 0 {
                $(to.$f = from.$f;)+
            }
        )*};
    }
    fields! {
        SERIAL => serial;
        VBIOS_VERSION => vbios_version;
        CLOCK_EVENT_REASONS_SUPPORTED => clock_event_reasons_supported;
        ECC_CORRECTED_AGGREGATE => ecc_corrected_aggregate_count;
        ECC_UNCORRECTED_AGGREGATE => ecc_uncorrected_aggregate_count;
        PCI_INFO => pci_domain, pci_bus, pci_device, pci_device_id, pci_subsystem_id;
        COMPUTE_CAP => compute_cap_major, compute_cap_minor;
        PCIE_LINK_GEN_MAX => pcie_link_gen_max;
        PCIE_LINK_WIDTH_MAX => pcie_link_width_max;
        POWER_DEFAULT_LIMIT => power_default_limit_mw;
        POWER_LIMIT_RANGE => power_min_limit_mw, power_max_limit_mw;
        POWER_DRAW_INSTANT => power_draw_instant_mw;
        TEMP_MEMORY => temp_memory_c;
        CLOCK_VIDEO => clock_video_mhz;
        CLOCK_APP_GRAPHICS => clock_app_graphics_mhz;
        CLOCK_APP_MEM => clock_app_mem_mhz;
        CLOCK_DEFAULT_APP_GRAPHICS => clock_default_app_graphics_mhz;
        CLOCK_DEFAULT_APP_MEM => clock_default_app_mem_mhz;
        PERSISTENCE_MODE => persistence_mode;
        COMPUTE_MODE => compute_mode;
        DISPLAY_MODE => display_mode;
        DISPLAY_ACTIVE => display_active;
        ECC_MODE => ecc_mode_current, ecc_mode_pending;
        ACCOUNTING_MODE => accounting_mode;
        ACCOUNTING_BUFFER_SIZE => accounting_buffer_size;
        RETIRED_PAGES => retired_pages_sbe, retired_pages_dbe;
        RETIRED_PAGES_PENDING => retired_pages_pending;
        REMAPPED_ROWS => remapped_rows_correctable, remapped_rows_uncorrectable,
            remapped_rows_pending, remapped_rows_failure;
        ENCODER_STATS => encoder_session_count, encoder_average_fps,
            encoder_average_latency_us;
        ECC_CORRECTED_VOLATILE_L1_CACHE => ecc_corrected_volatile_l1_cache;
        ECC_CORRECTED_VOLATILE_L2_CACHE => ecc_corrected_volatile_l2_cache;
        ECC_CORRECTED_VOLATILE_DEVICE_MEMORY => ecc_corrected_volatile_device_memory;
        ECC_CORRECTED_VOLATILE_REGISTER_FILE => ecc_corrected_volatile_register_file;
        ECC_CORRECTED_VOLATILE_TEXTURE_MEMORY => ecc_corrected_volatile_texture_memory;
        ECC_CORRECTED_VOLATILE_CBU => ecc_corrected_volatile_cbu;
        ECC_CORRECTED_VOLATILE_SRAM => ecc_corrected_volatile_sram;
        ECC_CORRECTED_AGGREGATE_L1_CACHE => ecc_corrected_aggregate_l1_cache;
        ECC_CORRECTED_AGGREGATE_L2_CACHE => ecc_corrected_aggregate_l2_cache;
        ECC_CORRECTED_AGGREGATE_DEVICE_MEMORY => ecc_corrected_aggregate_device_memory;
        ECC_CORRECTED_AGGREGATE_REGISTER_FILE => ecc_corrected_aggregate_register_file;
        ECC_CORRECTED_AGGREGATE_TEXTURE_MEMORY => ecc_corrected_aggregate_texture_memory;
        ECC_CORRECTED_AGGREGATE_CBU => ecc_corrected_aggregate_cbu;
        ECC_CORRECTED_AGGREGATE_SRAM => ecc_corrected_aggregate_sram;
        ECC_UNCORRECTED_VOLATILE_L1_CACHE => ecc_uncorrected_volatile_l1_cache;
        ECC_UNCORRECTED_VOLATILE_L2_CACHE => ecc_uncorrected_volatile_l2_cache;
        ECC_UNCORRECTED_VOLATILE_DEVICE_MEMORY => ecc_uncorrected_volatile_device_memory;
        ECC_UNCORRECTED_VOLATILE_REGISTER_FILE => ecc_uncorrected_volatile_register_file;
        ECC_UNCORRECTED_VOLATILE_TEXTURE_MEMORY => ecc_uncorrected_volatile_texture_memory;
        ECC_UNCORRECTED_VOLATILE_CBU => ecc_uncorrected_volatile_cbu;
        ECC_UNCORRECTED_VOLATILE_SRAM => ecc_uncorrected_volatile_sram;
        ECC_UNCORRECTED_AGGREGATE_L1_CACHE => ecc_uncorrected_aggregate_l1_cache;
        ECC_UNCORRECTED_AGGREGATE_L2_CACHE => ecc_uncorrected_aggregate_l2_cache;
        ECC_UNCORRECTED_AGGREGATE_DEVICE_MEMORY => ecc_uncorrected_aggregate_device_memory;
        ECC_UNCORRECTED_AGGREGATE_REGISTER_FILE => ecc_uncorrected_aggregate_register_file;
        ECC_UNCORRECTED_AGGREGATE_TEXTURE_MEMORY => ecc_uncorrected_aggregate_texture_memory;
        ECC_UNCORRECTED_AGGREGATE_CBU => ecc_uncorrected_aggregate_cbu;
        ECC_UNCORRECTED_AGGREGATE_SRAM => ecc_uncorrected_aggregate_sram;
        INFOROM_IMG => inforom_img;
        INFOROM_OEM => inforom_oem;
        INFOROM_ECC => inforom_ecc;
        INFOROM_PWR => inforom_pwr;
        GOM => gom_current, gom_pending;
        FABRIC => fabric_state, fabric_status;
        RECOVERY_ACTION => gpu_recovery_action;
    }
    to.valid2 = (to.valid2 & !bits) | (from.valid2 & bits);
    to.deprecated2 = (to.deprecated2 & !bits) | (from.deprecated2 & bits);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_valid2_bit_is_on_exactly_one_tier_or_in_the_batch() {
        let batch = v2::POWER_DRAW_INSTANT | v2::TEMP_MEMORY;
        let tiers = [IDENTITY2, STATIC2, SLOW2, batch];
        let all: u64 = v2::SET.bits.iter().map(|b| 1u64 << b.bit).sum();
        assert_eq!(tiers.iter().fold(0, |a, t| a | t), all);
        assert_eq!(
            tiers.iter().map(|t| t.count_ones()).sum::<u32>(),
            all.count_ones()
        );
        let all3: u64 = v3::SET.bits.iter().map(|b| 1u64 << b.bit).sum();
        // The Xid counts come from the events thread (crate::events), on no tier.
        let events3 = v3::XID_ERRORS | v3::XID_LAST | v3::XID_LAST_INSTANCE;
        assert_eq!(STATIC3 | SLOW3 | events3, all3);
        assert_eq!((STATIC3 | SLOW3) & events3, 0);
        assert_eq!(STATIC3 & SLOW3, 0);
    }

    #[test]
    fn copied_values_come_with_their_valid_and_deprecated_bits() {
        let from = GpuRecord {
            valid2: v2::PERSISTENCE_MODE,
            deprecated2: v2::DISPLAY_MODE,
            persistence_mode: 1,
            ..Default::default()
        };
        let mut to = GpuRecord {
            valid2: v2::COMPUTE_MODE | v2::DISPLAY_MODE,
            ..Default::default()
        };
        copy2(&from, &mut to, STATIC2);
        assert_eq!(to.persistence_mode, 1);
        assert_eq!(to.valid2, v2::PERSISTENCE_MODE);
        assert_eq!(to.deprecated2, v2::DISPLAY_MODE);
    }
}
