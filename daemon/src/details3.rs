//! The values nvidia-smi 590's `--query-gpu` added that ABI 1.6 publishes (in
//! `valid3`), each from the NVML call nvidia-smi makes for it, none on the fast tick:
//!
//! - **Near-static**, with [`crate::tiers::STATIC`] every 30 s ([`sample_static`]): the
//!   PCI class codes (`nvmlDeviceGetPciInfoExt`, R550+), the GSP firmware mode
//!   (`nvmlDeviceGetGspFirmwareMode`), the addressing mode
//!   (`nvmlDeviceGetAddressingMode`, R580+), the C2C mode (`nvmlDeviceGetC2cModeInfoV`),
//!   the infoROM checksum (`nvmlDeviceValidateInforom`), the power management mode
//!   (`nvmlDeviceGetPowerManagementMode`, which 590+ drivers call deprecated) and the
//!   row remapper histogram (`nvmlDeviceGetRowRemapperHistogram`).
//!   Also the fabric clique, cluster and health (`nvmlDeviceGetGpuFabricInfoV`, the
//!   call that gives the fabric state too: [`sample_fabric`]), the
//!   SRAM ECC status (`nvmlDeviceGetSramEccErrorStatus`), the DRAM encryption mode
//!   (`nvmlDeviceGetDramEncryptionMode`) and the module's power limits (one
//!   `nvmlDeviceGetFieldValues` with the module scope, which only Grace superchips
//!   answer), the platform info (`nvmlDeviceGetPlatformInfo`) and the EDPp multiplier
//!   (field value 274), and the vGPU capabilities (`nvmlGetVgpuDriverCapabilities`,
//!   `nvmlDeviceGetVgpuCapabilities`), which only vGPU host drivers answer, and the
//!   GPU's hostname (`nvmlDeviceGetHostname_v1`, R580+, ABI 1.8). Delayed power
//!   smoothing (field values 275 to 288, R590+, ABI 1.10) is read with the rest of
//!   power smoothing ([`crate::smoothing`], from [`crate::details4`]).
//! - **Slow ticks** ([`sample_slow`]): the thermal margin, nvidia-smi's T.Limit
//!   temperature (`nvmlDeviceGetMarginTemperature`, R560+), which moves with the
//!   temperature; the module's power draw (one field-value call with the module
//!   scope); the protected memory in use
//!   (`nvmlDeviceGetConfComputeProtectedMemoryUsage`).
//!
//! nvml-wrapper has none of these calls; each is made through the loaded library's
//! symbol, and a symbol the driver lacks leaves the value unknown.

use std::os::raw::c_uint;

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{self, field_id, nvmlDevice_t, nvmlReturn_t};

use gpupeek_shm::layout::gpu_valid3 as v3;

use crate::reads::Fill;

/// The values read with [`crate::tiers::STATIC`].
pub const STATIC3: u64 = v3::PCI_CLASS
    | v3::GSP_MODE
    | v3::ADDRESSING_MODE
    | v3::C2C_MODE
    | v3::INFOROM_CHECKSUM
    | v3::POWER_MANAGEMENT
    | v3::REMAPPED_ROWS_HISTOGRAM
    | v3::FABRIC_CLIQUE
    | v3::FABRIC_HEALTH
    | v3::SRAM_ECC
    | v3::DRAM_ENCRYPTION
    | v3::PLATFORM
    | v3::EDPP_MULTIPLIER
    | MODULE_LIMITS
    | VGPU
    | v3::GPU_HOSTNAME
    | crate::smoothing::BITS;
// `crate::smoothing::BITS` are read with the valid4 values (`crate::details4`), in the
// same calls as the rest of power smoothing (`crate::smoothing::sample4`).

/// The vGPU capabilities: each bit with the NVML
/// capability it asks (`None` for the driver's, the rest the GPU's).
const VGPU_CAPS: [(u64, Option<u32>); 7] = [
    (v3::VGPU_HETEROGENEOUS_MULTI_VGPU, None),
    (
        v3::VGPU_FRACTIONAL_MULTI_VGPU,
        Some(bindings::nvmlDeviceVgpuCapability_enum_NVML_DEVICE_VGPU_CAP_FRACTIONAL_MULTI_VGPU),
    ),
    (
        v3::VGPU_HETEROGENEOUS_TIMESLICE_PROFILES,
        Some(bindings::nvmlDeviceVgpuCapability_enum_NVML_DEVICE_VGPU_CAP_HETEROGENEOUS_TIMESLICE_PROFILES),
    ),
    (
        v3::VGPU_HETEROGENEOUS_TIMESLICE_SIZES,
        Some(bindings::nvmlDeviceVgpuCapability_enum_NVML_DEVICE_VGPU_CAP_HETEROGENEOUS_TIMESLICE_SIZES),
    ),
    (
        v3::VGPU_HOMOGENEOUS_PLACEMENTS,
        Some(bindings::nvmlDeviceVgpuCapability_enum_NVML_DEVICE_VGPU_CAP_HOMOGENEOUS_PLACEMENTS),
    ),
    (
        v3::VGPU_MIG_TIMESLICING,
        Some(bindings::nvmlDeviceVgpuCapability_enum_NVML_DEVICE_VGPU_CAP_MIG_TIMESLICING_SUPPORTED),
    ),
    (
        v3::VGPU_MIG_TIMESLICING_MODE,
        Some(bindings::nvmlDeviceVgpuCapability_enum_NVML_DEVICE_VGPU_CAP_MIG_TIMESLICING_ENABLED),
    ),
];

/// Every vGPU capability bit.
const VGPU: u64 = v3::VGPU_HETEROGENEOUS_MULTI_VGPU
    | v3::VGPU_FRACTIONAL_MULTI_VGPU
    | v3::VGPU_HETEROGENEOUS_TIMESLICE_PROFILES
    | v3::VGPU_HETEROGENEOUS_TIMESLICE_SIZES
    | v3::VGPU_HOMOGENEOUS_PLACEMENTS
    | v3::VGPU_MIG_TIMESLICING
    | v3::VGPU_MIG_TIMESLICING_MODE;

/// `NVML_FI_DEV_EDPP_MULTIPLIER` (NVML 13), which the bindings do not name yet; the
/// field nvidia-smi 590 asks for `edpp_multiplier`.
const EDPP_MULTIPLIER: u32 = 274;

/// The module's power limits, one field-value call.
const MODULE_LIMITS: u64 = v3::MODULE_POWER_LIMIT
    | v3::MODULE_ENFORCED_POWER_LIMIT
    | v3::MODULE_POWER_DEFAULT_LIMIT
    | v3::MODULE_POWER_MIN_LIMIT
    | v3::MODULE_POWER_MAX_LIMIT;

/// The values read on slow ticks.
pub const SLOW3: u64 = v3::TEMP_TLIMIT
    | v3::MODULE_POWER_DRAW_AVERAGE
    | v3::MODULE_POWER_DRAW_INSTANT
    | v3::PROTECTED_MEMORY;

/// nvml.h's `NVML_STRUCT_VERSION(name, ver)` for a struct of type `T`.
const fn version<T>(ver: u32) -> c_uint {
    std::mem::size_of::<T>() as c_uint | (ver << 24)
}

/// Calls the library's `name` symbol, `call(symbol, handle)`, or answers
/// `FunctionNotFound` when this driver does not export it.
macro_rules! raw {
    ($nvml:expr, $d:expr, $name:ident, |$f:ident, $h:ident| $call:expr) => {{
        let $f = $nvml
            .lib()
            .$name
            .as_ref()
            .map_err(|_| NvmlError::FunctionNotFound)?;
        // SAFETY: the handle belongs to the live session `$nvml` holds.
        let $h: nvmlDevice_t = unsafe { $d.handle() };
        let ret: nvmlReturn_t = $call;
        nvml_try(ret)
    }};
}

/// NVML's answer to a struct version newer than the driver knows.
const VERSION_MISMATCH: u32 = bindings::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;

/// A driver that does not know the struct version asked for has no such value: "not
/// supported", not a failure of the GPU.
fn unknown_version(e: NvmlError) -> NvmlError {
    match e {
        NvmlError::UnexpectedVariant(VERSION_MISMATCH) => NvmlError::NotSupported,
        e => e,
    }
}

/// The near-static values: see [`STATIC3`]; `unbound` is the session's [`Unbound`].
pub fn sample_static(nvml: &Nvml, unbound: &Unbound, d: &Device, f: &mut Fill) {
    f.field3(
        v3::PCI_CLASS,
        || pci_class(nvml, d),
        |r, (base, sub)| {
            r.pci_base_class = base;
            r.pci_sub_class = sub;
        },
    );
    f.field3(
        v3::GSP_MODE,
        || gsp_mode(nvml, d),
        |r, (current, default)| {
            r.gsp_mode_current = current;
            r.gsp_mode_default = default;
        },
    );
    f.field3(
        v3::ADDRESSING_MODE,
        || addressing_mode(nvml, d),
        |r, m| r.addressing_mode = m,
    );
    f.field3(v3::C2C_MODE, || c2c_mode(nvml, d), |r, m| r.c2c_mode = m);
    f.field3(
        v3::INFOROM_CHECKSUM,
        || inforom_valid(nvml, d),
        |r, valid| r.inforom_checksum_valid = valid.into(),
    );
    f.field3(
        v3::POWER_MANAGEMENT,
        || power_management(nvml, d),
        |r, m| r.power_management_mode = m,
    );
    f.field3(
        v3::REMAPPED_ROWS_HISTOGRAM,
        || remapper_histogram(nvml, d),
        |r, h| {
            r.remapped_rows_hist_max = h.max;
            r.remapped_rows_hist_high = h.high;
            r.remapped_rows_hist_partial = h.partial;
            r.remapped_rows_hist_low = h.low;
            r.remapped_rows_hist_none = h.none;
        },
    );
    f.field3(
        v3::SRAM_ECC,
        || sram_ecc(nvml, d),
        |r, s| {
            r.sram_ecc_threshold_exceeded = s.bThresholdExceeded;
            r.sram_ecc_volatile_unc_parity = s.volatileUncParity;
            r.sram_ecc_volatile_unc_secded = s.volatileUncSecDed;
            r.sram_ecc_aggregate_unc_parity = s.aggregateUncParity;
            r.sram_ecc_aggregate_unc_secded = s.aggregateUncSecDed;
            r.sram_ecc_aggregate_unc_l2 = s.aggregateUncBucketL2;
            r.sram_ecc_aggregate_unc_sm = s.aggregateUncBucketSm;
            r.sram_ecc_aggregate_unc_mcu = s.aggregateUncBucketMcu;
            r.sram_ecc_aggregate_unc_pcie = s.aggregateUncBucketPcie;
            r.sram_ecc_aggregate_unc_other = s.aggregateUncBucketOther;
        },
    );
    f.field3(
        v3::DRAM_ENCRYPTION,
        || dram_encryption(nvml, d),
        |r, (current, pending)| {
            r.dram_encryption_current = current;
            r.dram_encryption_pending = pending;
        },
    );
    module_power(nvml, d, f, &MODULE_LIMIT_IDS);
    f.field3(
        v3::GPU_HOSTNAME,
        || hostname(unbound, d),
        |r, h| r.gpu_hostname = h,
    );
    f.field3(
        v3::PLATFORM,
        || platform(nvml, d),
        |r, p| {
            r.platform_chassis_serial = p.chassisSerialNumber;
            r.platform_gpu_fabric_guid =
                u64::from_be_bytes(p.ibGuid[..8].try_into().unwrap_or_default());
            r.platform_slot_number = p.slotNumber.into();
            r.platform_tray_index = p.trayIndex.into();
            r.platform_host_id = p.hostId.into();
            r.platform_peer_type = p.peerType.into();
            r.platform_module_id = p.moduleId.into();
        },
    );
    f.field3(
        v3::EDPP_MULTIPLIER,
        || crate::fields::one(nvml, d, EDPP_MULTIPLIER),
        |r, pct| r.edpp_multiplier_pct = u32::try_from(pct).unwrap_or(u32::MAX),
    );
    for (bit, cap) in VGPU_CAPS {
        f.field3(
            bit,
            || vgpu_capability(nvml, d, cap),
            |r, on| {
                *match bit {
                    v3::VGPU_HETEROGENEOUS_MULTI_VGPU => &mut r.vgpu_heterogeneous_multi_vgpu,
                    v3::VGPU_FRACTIONAL_MULTI_VGPU => &mut r.vgpu_fractional_multi_vgpu,
                    v3::VGPU_HETEROGENEOUS_TIMESLICE_PROFILES => {
                        &mut r.vgpu_heterogeneous_timeslice_profiles
                    }
                    v3::VGPU_HETEROGENEOUS_TIMESLICE_SIZES => {
                        &mut r.vgpu_heterogeneous_timeslice_sizes
                    }
                    v3::VGPU_HOMOGENEOUS_PLACEMENTS => &mut r.vgpu_homogeneous_placements,
                    v3::VGPU_MIG_TIMESLICING => &mut r.vgpu_mig_timeslicing,
                    _ => &mut r.vgpu_mig_timeslicing_mode,
                } = on.into();
            },
        );
    }
}

/// `NVML_DEVICE_HOSTNAME_BUFFER_SIZE`: `nvmlHostname_v1_t` is this many `char`s.
const HOSTNAME_BYTES: usize = 64;

/// `nvmlDeviceGetHostname_v1(device, nvmlHostname_v1_t *)` (R580+), which
/// nvml-wrapper-sys 0.10 does not bind: looked up by name in the loaded library.
type GetHostname = unsafe extern "C" fn(nvmlDevice_t, *mut [u8; HOSTNAME_BYTES]) -> nvmlReturn_t;

/// The entry points this module calls that nvml-wrapper-sys does not bind, looked up
/// by name once per NVML session ([`Unbound::resolve`]), not per call.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unbound {
    /// `nvmlDeviceGetHostname_v1`, where the driver has it.
    hostname: Option<GetHostname>,
    /// `nvmlDeviceGetBBXTimeData_v1`, where the driver has it (R610+).
    bbx_time_data: Option<crate::details4::GetBbxTimeData>,
}

impl Unbound {
    /// Looks the entry points up in `nvml`'s library. The pointers are valid while
    /// `nvml` lives: the holder keeps them next to it (see `sampler::Held`).
    pub fn resolve(nvml: &Nvml) -> Self {
        // SAFETY: the symbol, where the driver has it, has the C signature of
        // [`GetHostname`] (nvml.h of NVML 12.9+); the pointer copied out is used only
        // while the library it came from stays loaded (see above).
        let hostname = unsafe {
            nvml.lib()
                .__library
                .get::<GetHostname>(b"nvmlDeviceGetHostname_v1\0")
        }
        .ok()
        .map(|symbol| *symbol);
        // SAFETY: as above, with the C signature of `GetBbxTimeData` (nvml.h of NVML
        // 13.3+).
        let bbx_time_data = unsafe {
            nvml.lib()
                .__library
                .get::<crate::details4::GetBbxTimeData>(b"nvmlDeviceGetBBXTimeData_v1\0")
        }
        .ok()
        .map(|symbol| *symbol);
        Unbound {
            hostname,
            bbx_time_data,
        }
    }

    /// `nvmlDeviceGetBBXTimeData_v1`, where the driver has it.
    pub fn bbx_time_data(&self) -> Option<crate::details4::GetBbxTimeData> {
        self.bbx_time_data
    }
}

/// The hostname NVIDIA's tools set on the GPU (`nvidia-smi --set-hostname`), the one
/// nvidia-smi 590's `hostname` field prints. NVML documents it for Blackwell and newer;
/// older GPUs answer "not supported", which nvidia-smi prints as `[N/A]`.
fn hostname(unbound: &Unbound, d: &Device) -> Result<[u8; HOSTNAME_BYTES], NvmlError> {
    let get = unbound.hostname.ok_or(NvmlError::FunctionNotFound)?;
    let mut name = [0u8; HOSTNAME_BYTES];
    // SAFETY: `get` is this session's `nvmlDeviceGetHostname_v1` (see
    // [`Unbound::resolve`]); the handle belongs to the same live session; `name` is a
    // writable `nvmlHostname_v1_t` (one `char value[64]`).
    let ret = unsafe { get(d.handle(), &mut name) };
    nvml_try(ret)?;
    name[HOSTNAME_BYTES - 1] = 0;
    Ok(name)
}

/// A vGPU capability: the driver's (`cap` `None`) or the GPU's. Only vGPU host drivers
/// answer; others say "not supported".
fn vgpu_capability(nvml: &Nvml, d: &Device, cap: Option<u32>) -> Result<bool, NvmlError> {
    let mut result: c_uint = 0;
    match cap {
        None => {
            let get = nvml
                .lib()
                .nvmlGetVgpuDriverCapabilities
                .as_ref()
                .map_err(|_| NvmlError::FunctionNotFound)?;
            let cap = bindings::nvmlVgpuDriverCapability_enum_NVML_VGPU_DRIVER_CAP_HETEROGENEOUS_MULTI_VGPU;
            // SAFETY: `get` has the C signature `(nvmlVgpuDriverCapability_t, unsigned int
            // *)` and `result` is writable.
            nvml_try(unsafe { get(cap, &mut result) })?;
        }
        Some(cap) => {
            // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlDeviceVgpuCapability_t,
            // unsigned int *)` and `result` is writable.
            raw!(nvml, d, nvmlDeviceGetVgpuCapabilities, |f, h| unsafe {
                f(h, cap, &mut result)
            })?;
        }
    }
    Ok(result != 0)
}

fn platform(nvml: &Nvml, d: &Device) -> Result<bindings::nvmlPlatformInfo_v2_t, NvmlError> {
    let mut info = bindings::nvmlPlatformInfo_v2_t {
        version: version::<bindings::nvmlPlatformInfo_v2_t>(2),
        ibGuid: [0; 16],
        chassisSerialNumber: [0; 16],
        slotNumber: 0,
        trayIndex: 0,
        hostId: 0,
        peerType: 0,
        moduleId: 0,
    };
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlPlatformInfo_t *)` and
    // `info` is a writable struct of the version it names.
    raw!(nvml, d, nvmlDeviceGetPlatformInfo, |f, h| unsafe {
        f(h, &mut info)
    })
    .map_err(unknown_version)?;
    Ok(info)
}

/// The slow-tick values: see [`SLOW3`].
pub fn sample_slow(nvml: &Nvml, d: &Device, f: &mut Fill) {
    f.field3(
        v3::TEMP_TLIMIT,
        || margin_temperature(nvml, d),
        |r, t| r.temp_tlimit_c = t,
    );
    module_power(nvml, d, f, &MODULE_DRAW);
    f.field3(
        v3::PROTECTED_MEMORY,
        || protected_memory(nvml, d),
        |r, m| {
            r.protected_memory_total_bytes = m.total;
            r.protected_memory_used_bytes = m.used;
            r.protected_memory_free_bytes = m.free;
        },
    );
}

/// The module's power draw: bits and field ids.
const MODULE_DRAW: [(u64, u32); 2] = [
    (
        v3::MODULE_POWER_DRAW_AVERAGE,
        field_id::NVML_FI_DEV_POWER_AVERAGE,
    ),
    (
        v3::MODULE_POWER_DRAW_INSTANT,
        field_id::NVML_FI_DEV_POWER_INSTANT,
    ),
];

/// The module's power limits: bits and field ids.
const MODULE_LIMIT_IDS: [(u64, u32); 5] = [
    (
        v3::MODULE_POWER_LIMIT,
        field_id::NVML_FI_DEV_POWER_REQUESTED_LIMIT,
    ),
    (
        v3::MODULE_ENFORCED_POWER_LIMIT,
        field_id::NVML_FI_DEV_POWER_CURRENT_LIMIT,
    ),
    (
        v3::MODULE_POWER_DEFAULT_LIMIT,
        field_id::NVML_FI_DEV_POWER_DEFAULT_LIMIT,
    ),
    (
        v3::MODULE_POWER_MIN_LIMIT,
        field_id::NVML_FI_DEV_POWER_MIN_LIMIT,
    ),
    (
        v3::MODULE_POWER_MAX_LIMIT,
        field_id::NVML_FI_DEV_POWER_MAX_LIMIT,
    ),
];

/// Reads `fields` (bits and field ids) for the whole module in one field-value call;
/// each answered value sets its bit.
fn module_power<const K: usize>(nvml: &Nvml, d: &Device, f: &mut Fill, fields: &[(u64, u32); K]) {
    let ids = fields.map(|(_, id)| id);
    let scope = bindings::NVML_POWER_SCOPE_MODULE;
    let Some(answers) = f.call(|| crate::fields::some_scoped(nvml, d, ids, scope)) else {
        return;
    };
    for ((bit, _), answer) in fields.iter().zip(answers) {
        let Ok(mw) = answer else { continue };
        let mw = u32::try_from(mw).unwrap_or(u32::MAX);
        let r = &mut *f.rec;
        *match *bit {
            v3::MODULE_POWER_DRAW_AVERAGE => &mut r.module_power_draw_average_mw,
            v3::MODULE_POWER_DRAW_INSTANT => &mut r.module_power_draw_instant_mw,
            v3::MODULE_POWER_LIMIT => &mut r.module_power_limit_mw,
            v3::MODULE_ENFORCED_POWER_LIMIT => &mut r.module_enforced_power_limit_mw,
            v3::MODULE_POWER_DEFAULT_LIMIT => &mut r.module_power_default_limit_mw,
            v3::MODULE_POWER_MIN_LIMIT => &mut r.module_power_min_limit_mw,
            _ => &mut r.module_power_max_limit_mw,
        } = mw;
        r.valid3 |= bit;
    }
}

fn protected_memory(nvml: &Nvml, d: &Device) -> Result<bindings::nvmlMemory_t, NvmlError> {
    let mut m = bindings::nvmlMemory_t {
        total: 0,
        free: 0,
        used: 0,
    };
    raw!(
        nvml,
        d,
        nvmlDeviceGetConfComputeProtectedMemoryUsage,
        // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlMemory_t *)` and `m` is
        // writable.
        |f, h| unsafe { f(h, &mut m) }
    )?;
    Ok(m)
}

/// The fabric registration: its state and status ([`gpu_valid2`]'s `FABRIC`, read with
/// [`crate::details::sample_static`]) and, from the versioned call, the clique, cluster
/// and health, all from one call: `nvmlDeviceGetGpuFabricInfoV` (R550+), else, on a
/// driver without it (R525 to R545), `nvmlDeviceGetGpuFabricInfo`, which has no health
/// (nvidia-smi 590, which shows the clique, needs the versioned call).
///
/// [`gpu_valid2`]: gpupeek_shm::layout::gpu_valid2
pub fn sample_fabric(nvml: &Nvml, d: &Device, f: &mut Fill) {
    let read = || match fabric(nvml, d) {
        Err(NvmlError::FunctionNotFound) => fabric_legacy(nvml, d).map(|info| (info, false)),
        answer => answer.map(|info| (info, true)),
    };
    f.field2(
        gpupeek_shm::layout::gpu_valid2::FABRIC,
        read,
        |r, (info, versioned)| {
            r.fabric_state = info.state.into();
            r.fabric_status = info.status as i32;
            // Outside a fabric (state "not supported") NVML has no clique or health.
            if versioned && info.state != 0 {
                r.fabric_clique_id = info.cliqueId;
                r.fabric_cluster_uuid = info.clusterUuid;
                r.fabric_health_mask = info.healthMask;
                r.fabric_health_summary = info.healthSummary.into();
                r.valid3 |= v3::FABRIC_CLIQUE | v3::FABRIC_HEALTH;
            }
        },
    );
}

/// `nvmlDeviceGetGpuFabricInfo` (R525+, before the versioned call), as a `v3` without
/// health.
fn fabric_legacy(nvml: &Nvml, d: &Device) -> Result<bindings::nvmlGpuFabricInfo_v3_t, NvmlError> {
    let mut info = bindings::nvmlGpuFabricInfo_t {
        clusterUuid: [0; 16],
        status: 0,
        cliqueId: 0,
        state: 0,
    };
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlGpuFabricInfo_t *)` and `info`
    // is writable.
    raw!(nvml, d, nvmlDeviceGetGpuFabricInfo, |f, h| unsafe {
        f(h, &mut info)
    })?;
    Ok(bindings::nvmlGpuFabricInfo_v3_t {
        version: 0,
        clusterUuid: info.clusterUuid,
        status: info.status,
        cliqueId: info.cliqueId,
        state: info.state,
        healthMask: 0,
        healthSummary: 0,
    })
}

/// The fabric's clique, cluster and health, with `nvmlGpuFabricInfo_v3` (the health
/// summary too), or `v2` from a driver before R570, which does not know `v3` (no
/// summary: nvidia-smi then prints no health either).
fn fabric(nvml: &Nvml, d: &Device) -> Result<bindings::nvmlGpuFabricInfo_v3_t, NvmlError> {
    match fabric_as(nvml, d, version::<bindings::nvmlGpuFabricInfo_v3_t>(3)) {
        Err(NvmlError::UnexpectedVariant(VERSION_MISMATCH)) => {
            let v2 = version::<bindings::nvmlGpuFabricInfo_v2_t>(2);
            fabric_as(nvml, d, v2).map_err(unknown_version)
        }
        answer => answer,
    }
}

/// `nvmlDeviceGetGpuFabricInfoV` with struct version `version` (`v2` is the start of
/// `v3`, so a `v3` buffer serves both).
fn fabric_as(
    nvml: &Nvml,
    d: &Device,
    version: c_uint,
) -> Result<bindings::nvmlGpuFabricInfo_v3_t, NvmlError> {
    let mut info = bindings::nvmlGpuFabricInfo_v3_t {
        version,
        clusterUuid: [0; 16],
        status: 0,
        cliqueId: 0,
        state: 0,
        healthMask: 0,
        healthSummary: 0,
    };
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlGpuFabricInfoV_t *)` and
    // `info` is a writable buffer at least as large as the version it names.
    raw!(nvml, d, nvmlDeviceGetGpuFabricInfoV, |f, h| unsafe {
        f(h, &mut info)
    })?;
    Ok(info)
}

fn sram_ecc(nvml: &Nvml, d: &Device) -> Result<bindings::nvmlEccSramErrorStatus_v1_t, NvmlError> {
    let mut s = bindings::nvmlEccSramErrorStatus_v1_t {
        version: version::<bindings::nvmlEccSramErrorStatus_v1_t>(1),
        aggregateUncParity: 0,
        aggregateUncSecDed: 0,
        aggregateCor: 0,
        volatileUncParity: 0,
        volatileUncSecDed: 0,
        volatileCor: 0,
        aggregateUncBucketL2: 0,
        aggregateUncBucketSm: 0,
        aggregateUncBucketPcie: 0,
        aggregateUncBucketMcu: 0,
        aggregateUncBucketOther: 0,
        bThresholdExceeded: 0,
    };
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlEccSramErrorStatus_t *)` and
    // `s` is a writable struct of the version it names.
    raw!(nvml, d, nvmlDeviceGetSramEccErrorStatus, |f, h| unsafe {
        f(h, &mut s)
    })
    .map_err(unknown_version)?;
    Ok(s)
}

fn dram_encryption(nvml: &Nvml, d: &Device) -> Result<(u32, u32), NvmlError> {
    let info = || bindings::nvmlDramEncryptionInfo_v1_t {
        version: version::<bindings::nvmlDramEncryptionInfo_v1_t>(1),
        encryptionState: 0,
    };
    let (mut current, mut pending) = (info(), info());
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlDramEncryptionInfo_t *,
    // nvmlDramEncryptionInfo_t *)` and both are writable structs of the version they
    // name.
    raw!(nvml, d, nvmlDeviceGetDramEncryptionMode, |f, h| unsafe {
        f(h, &mut current, &mut pending)
    })
    .map_err(unknown_version)?;
    Ok((current.encryptionState, pending.encryptionState))
}

fn margin_temperature(nvml: &Nvml, d: &Device) -> Result<i32, NvmlError> {
    let mut info = bindings::nvmlMarginTemperature_v1_t {
        version: version::<bindings::nvmlMarginTemperature_v1_t>(1),
        marginTemperature: 0,
    };
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlMarginTemperature_t *)` and
    // `info` is a writable struct of the version it names.
    raw!(nvml, d, nvmlDeviceGetMarginTemperature, |f, h| unsafe {
        f(h, &mut info)
    })
    .map_err(unknown_version)?;
    Ok(info.marginTemperature)
}

fn pci_class(nvml: &Nvml, d: &Device) -> Result<(u32, u32), NvmlError> {
    let mut info = bindings::nvmlPciInfoExt_v1_t {
        version: version::<bindings::nvmlPciInfoExt_v1_t>(1),
        domain: 0,
        bus: 0,
        device: 0,
        pciDeviceId: 0,
        pciSubSystemId: 0,
        baseClass: 0,
        subClass: 0,
        busId: [0; 32],
    };
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlPciInfoExt_t *)` and `info`
    // is a writable struct of the version it names.
    raw!(nvml, d, nvmlDeviceGetPciInfoExt, |f, h| unsafe {
        f(h, &mut info)
    })
    .map_err(unknown_version)?;
    Ok((info.baseClass, info.subClass))
}

fn gsp_mode(nvml: &Nvml, d: &Device) -> Result<(u32, u32), NvmlError> {
    let (mut current, mut default): (c_uint, c_uint) = (0, 0);
    // SAFETY: `f` has the C signature `(nvmlDevice_t, unsigned int *, unsigned int *)`
    // and both outputs are writable.
    raw!(nvml, d, nvmlDeviceGetGspFirmwareMode, |f, h| unsafe {
        f(h, &mut current, &mut default)
    })?;
    Ok((current, default))
}

fn addressing_mode(nvml: &Nvml, d: &Device) -> Result<u32, NvmlError> {
    let mut mode = bindings::nvmlDeviceAddressingMode_v1_t {
        version: version::<bindings::nvmlDeviceAddressingMode_v1_t>(1),
        value: 0,
    };
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlDeviceAddressingMode_t *)`
    // and `mode` is a writable struct of the version it names.
    raw!(nvml, d, nvmlDeviceGetAddressingMode, |f, h| unsafe {
        f(h, &mut mode)
    })
    .map_err(unknown_version)?;
    Ok(mode.value)
}

fn c2c_mode(nvml: &Nvml, d: &Device) -> Result<u32, NvmlError> {
    let mut info = bindings::nvmlC2cModeInfo_v1_t { isC2cEnabled: 0 };
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlC2cModeInfo_v1_t *)` and
    // `info` is writable.
    raw!(nvml, d, nvmlDeviceGetC2cModeInfoV, |f, h| unsafe {
        f(h, &mut info)
    })?;
    Ok(info.isC2cEnabled)
}

/// Whether the infoROM checksum validates: `NVML_ERROR_CORRUPTED_INFOROM` is an
/// answer ("invalid"), not a failure.
fn inforom_valid(nvml: &Nvml, d: &Device) -> Result<bool, NvmlError> {
    // SAFETY: `f` has the C signature `(nvmlDevice_t)`.
    match raw!(nvml, d, nvmlDeviceValidateInforom, |f, h| unsafe { f(h) }) {
        Ok(()) => Ok(true),
        Err(NvmlError::CorruptedInfoROM) => Ok(false),
        Err(e) => Err(e),
    }
}

fn power_management(nvml: &Nvml, d: &Device) -> Result<u32, NvmlError> {
    let mut mode: bindings::nvmlEnableState_t = 0;
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlEnableState_t *)` and `mode`
    // is writable.
    raw!(nvml, d, nvmlDeviceGetPowerManagementMode, |f, h| unsafe {
        f(h, &mut mode)
    })?;
    Ok(mode)
}

fn remapper_histogram(
    nvml: &Nvml,
    d: &Device,
) -> Result<bindings::nvmlRowRemapperHistogramValues_t, NvmlError> {
    let mut values = bindings::nvmlRowRemapperHistogramValues_t {
        max: 0,
        high: 0,
        partial: 0,
        low: 0,
        none: 0,
    };
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlRowRemapperHistogramValues_t
    // *)` and `values` is writable.
    raw!(nvml, d, nvmlDeviceGetRowRemapperHistogram, |f, h| unsafe {
        f(h, &mut values)
    })?;
    Ok(values)
}
