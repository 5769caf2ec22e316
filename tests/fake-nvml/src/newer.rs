//! Exported getters newer drivers add for nvidia-smi's 590 `--query-gpu` fields: the
//! thermal margin (`temperature.gpu.tlimit`, R560+), the PCI class codes (R550+), the
//! GSP firmware mode (R510+), the addressing mode (R580+), the C2C mode (R550+), the
//! infoROM checksum, the power management mode and the row remapper histogram (R520+).
//! Which driver has which entry point is [`crate::profiles`]'; what a GPU supports is
//! its scenario's (an absent value is `NOT_SUPPORTED`, as on the GPUs real drivers
//! refuse it for), and the versioned structs are checked as real NVML checks them.

// Function, parameter and (bindgen-made) constant names are NVML's C names.
#![allow(non_snake_case, non_upper_case_globals)]

use std::mem::size_of;
use std::os::raw::c_uint;

use nvml_wrapper_sys::bindings::*;

use crate::codes::{ARGUMENT_VERSION_MISMATCH, INVALID_ARGUMENT, NOT_SUPPORTED, SUCCESS};
use crate::details::put_all;
use crate::ffi::{device_call, put};

/// nvml.h's `NVML_STRUCT_VERSION(name, ver)` for a struct of type `T`.
const fn version<T>(ver: u32) -> c_uint {
    size_of::<T>() as c_uint | (ver << 24)
}

/// `nvmlMarginTemperature_v1`.
pub const MARGIN_TEMPERATURE_V1: c_uint = version::<nvmlMarginTemperature_v1_t>(1);
/// `nvmlPciInfoExt_v1`.
pub const PCI_INFO_EXT_V1: c_uint = version::<nvmlPciInfoExt_v1_t>(1);
/// `nvmlDeviceAddressingMode_v1`.
pub const ADDRESSING_MODE_V1: c_uint = version::<nvmlDeviceAddressingMode_v1_t>(1);

/// Reads the `version` word a caller set at the start of its struct.
///
/// # Safety
///
/// `p` must be null or point to a readable struct that starts with a `c_uint`.
unsafe fn version_of<T>(p: *mut T) -> Option<c_uint> {
    // SAFETY: per the contract, a non-null `p` starts with a readable `c_uint`.
    (!p.is_null()).then(|| unsafe { p.cast::<c_uint>().read_unaligned() })
}

/// `nvmlDeviceGetMarginTemperature(device, marginTempInfo)` (R560+): the T.Limit
/// temperature; `version` must be `nvmlMarginTemperature_v1`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMarginTemperature(
    device: nvmlDevice_t,
    info: *mut nvmlMarginTemperature_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetMarginTemperature", device, |g, _| {
        // SAFETY: the caller passes an `nvmlMarginTemperature_t` it set up (or null).
        match unsafe { version_of(info) } {
            None => INVALID_ARGUMENT,
            Some(MARGIN_TEMPERATURE_V1) => {
                let value = g.margin_temperature_c.map(|t| nvmlMarginTemperature_t {
                    version: MARGIN_TEMPERATURE_V1,
                    marginTemperature: t,
                });
                // SAFETY: non-null and writable, as above.
                unsafe { put(info, value) }
            }
            Some(_) => ARGUMENT_VERSION_MISMATCH,
        }
    })
}

/// `nvmlDeviceGetPciInfoExt(device, pci)` (R550+): the PCI info with the class codes;
/// `version` must be `nvmlPciInfoExt_v1`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfoExt(
    device: nvmlDevice_t,
    pci: *mut nvmlPciInfoExt_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetPciInfoExt", device, |g, _| {
        // SAFETY: the caller passes an `nvmlPciInfoExt_t` it set up (or null).
        match unsafe { version_of(pci) } {
            None => INVALID_ARGUMENT,
            Some(PCI_INFO_EXT_V1) => {
                let value = g.pci_class.map(|[base, sub]| {
                    let a = g.pci_address();
                    let mut busId = [0; 32];
                    for (d, s) in busId
                        .iter_mut()
                        .zip(g.pci_bus_id.iter().flat_map(|s| s.bytes()))
                    {
                        *d = s as _;
                    }
                    nvmlPciInfoExt_t {
                        version: PCI_INFO_EXT_V1,
                        domain: a.map_or(0, |a| a.domain),
                        bus: a.map_or(0, |a| a.bus),
                        device: a.map_or(0, |a| a.device),
                        pciDeviceId: g.pci_device_id.unwrap_or(0),
                        pciSubSystemId: g.pci_subsystem_id.unwrap_or(0),
                        baseClass: base,
                        subClass: sub,
                        busId,
                    }
                });
                // SAFETY: non-null and writable, as above.
                unsafe { put(pci, value) }
            }
            Some(_) => ARGUMENT_VERSION_MISMATCH,
        }
    })
}

/// `nvmlDeviceGetGspFirmwareMode(device, isEnabled, defaultMode)` (R510+).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGspFirmwareMode(
    device: nvmlDevice_t,
    isEnabled: *mut c_uint,
    defaultMode: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetGspFirmwareMode", device, |g, _| {
        // SAFETY: the caller passes two writable `unsigned int`s (or nulls).
        unsafe { put_all([isEnabled, defaultMode], g.gsp_firmware_mode) }
    })
}

/// `nvmlDeviceGetAddressingMode(device, mode)` (R580+); `version` must be
/// `nvmlDeviceAddressingMode_v1`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetAddressingMode(
    device: nvmlDevice_t,
    mode: *mut nvmlDeviceAddressingMode_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetAddressingMode", device, |g, _| {
        // SAFETY: the caller passes an `nvmlDeviceAddressingMode_t` it set up (or null).
        match unsafe { version_of(mode) } {
            None => INVALID_ARGUMENT,
            Some(ADDRESSING_MODE_V1) => {
                let value = g.addressing_mode.map(|value| nvmlDeviceAddressingMode_t {
                    version: ADDRESSING_MODE_V1,
                    value,
                });
                // SAFETY: non-null and writable, as above.
                unsafe { put(mode, value) }
            }
            Some(_) => ARGUMENT_VERSION_MISMATCH,
        }
    })
}

/// `nvmlDeviceGetC2cModeInfoV(device, c2cModeInfo)` (R550+).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetC2cModeInfoV(
    device: nvmlDevice_t,
    info: *mut nvmlC2cModeInfo_v1_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetC2cModeInfoV", device, |g, _| {
        let value = g
            .c2c_mode
            .map(|isC2cEnabled| nvmlC2cModeInfo_v1_t { isC2cEnabled });
        // SAFETY: the caller passes a writable `nvmlC2cModeInfo_v1_t` (or null).
        unsafe { put(info, value) }
    })
}

/// `nvmlDeviceValidateInforom(device)`: `SUCCESS` for a valid checksum,
/// `CORRUPTED_INFOROM` for a bad one.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceValidateInforom(device: nvmlDevice_t) -> nvmlReturn_t {
    device_call("nvmlDeviceValidateInforom", device, |g, _| {
        match g.inforom_valid {
            Some(true) => SUCCESS,
            Some(false) => nvmlReturn_enum_NVML_ERROR_CORRUPTED_INFOROM,
            None => NOT_SUPPORTED,
        }
    })
}

scalar_getter!(
    /// `nvmlDeviceGetPowerManagementMode(device, mode)`: 0 or 1.
    nvmlDeviceGetPowerManagementMode, c_uint, power_management_mode
);

/// `nvmlDeviceGetRowRemapperHistogram(device, values)` (R520+).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRowRemapperHistogram(
    device: nvmlDevice_t,
    values: *mut nvmlRowRemapperHistogramValues_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetRowRemapperHistogram", device, |g, _| {
        let value = g
            .row_remapper_histogram
            .map(
                |[max, high, partial, low, none]| nvmlRowRemapperHistogramValues_t {
                    max,
                    high,
                    partial,
                    low,
                    none,
                },
            );
        // SAFETY: the caller passes a writable `nvmlRowRemapperHistogramValues_t` (or
        // null).
        unsafe { put(values, value) }
    })
}

/// `nvmlGpuFabricInfo_v2`.
pub const FABRIC_INFO_V2: c_uint = version::<nvmlGpuFabricInfo_v2_t>(2);
/// `nvmlGpuFabricInfo_v3`.
pub const FABRIC_INFO_V3: c_uint = version::<nvmlGpuFabricInfo_v3_t>(3);
/// `nvmlEccSramErrorStatus_v1`.
pub const SRAM_ECC_STATUS_V1: c_uint = version::<nvmlEccSramErrorStatus_v1_t>(1);
/// `nvmlDramEncryptionInfo_v1`.
pub const DRAM_ENCRYPTION_INFO_V1: c_uint = version::<nvmlDramEncryptionInfo_v1_t>(1);

/// Whether the scenario's driver is at least major version `major`.
fn driver_at_least(major: u32) -> bool {
    let version = crate::state::refresh()
        .scenario
        .and_then(|s| s.driver_version.clone());
    let have = version
        .as_deref()
        .and_then(|v| v.split('.').next()?.parse::<u32>().ok());
    have.is_some_and(|have| have >= major)
}

/// `nvmlDeviceGetGpuFabricInfoV(device, gpuFabricInfo)` (R550+): `v2` (with the health
/// mask), or from R570 on `v3` (with the health summary too); an older driver answers
/// `ARGUMENT_VERSION_MISMATCH` to `v3`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfoV(
    device: nvmlDevice_t,
    info: *mut nvmlGpuFabricInfoV_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetGpuFabricInfoV", device, |g, _| {
        // SAFETY: the caller passes an `nvmlGpuFabricInfoV_t` it set up (or null).
        let Some(version) = (unsafe { version_of(info) }) else {
            return INVALID_ARGUMENT;
        };
        let v3 = version == FABRIC_INFO_V3 && driver_at_least(570);
        if version != FABRIC_INFO_V2 && !v3 {
            return ARGUMENT_VERSION_MISMATCH;
        }
        let Some(f) = g.fabric else {
            return NOT_SUPPORTED;
        };
        let v2 = nvmlGpuFabricInfo_v2_t {
            version,
            clusterUuid: f.cluster_uuid,
            status: f.status,
            cliqueId: f.clique_id,
            state: f.state,
            healthMask: f.health_mask,
        };
        // SAFETY: non-null, and a struct of the version the caller named: a `v2` is
        // the start of a `v3`, whose summary is written only when asked for.
        unsafe {
            info.cast::<nvmlGpuFabricInfo_v2_t>().write_unaligned(v2);
            if version == FABRIC_INFO_V3 {
                std::ptr::addr_of_mut!((*info).healthSummary).write_unaligned(f.health_summary);
            }
        }
        SUCCESS
    })
}

/// `nvmlDeviceGetSramEccErrorStatus(device, status)`; `version` must be
/// `nvmlEccSramErrorStatus_v1`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetSramEccErrorStatus(
    device: nvmlDevice_t,
    status: *mut nvmlEccSramErrorStatus_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetSramEccErrorStatus", device, |g, _| {
        // SAFETY: the caller passes an `nvmlEccSramErrorStatus_t` it set up (or null).
        match unsafe { version_of(status) } {
            None => INVALID_ARGUMENT,
            Some(SRAM_ECC_STATUS_V1) => {
                let value = g.sram_ecc_status.map(|v| nvmlEccSramErrorStatus_v1_t {
                    version: SRAM_ECC_STATUS_V1,
                    aggregateUncParity: v[0],
                    aggregateUncSecDed: v[1],
                    aggregateCor: v[2],
                    volatileUncParity: v[3],
                    volatileUncSecDed: v[4],
                    volatileCor: v[5],
                    aggregateUncBucketL2: v[6],
                    aggregateUncBucketSm: v[7],
                    aggregateUncBucketPcie: v[8],
                    aggregateUncBucketMcu: v[9],
                    aggregateUncBucketOther: v[10],
                    bThresholdExceeded: v[11] as c_uint,
                });
                // SAFETY: non-null and writable, as above.
                unsafe { put(status, value) }
            }
            Some(_) => ARGUMENT_VERSION_MISMATCH,
        }
    })
}

/// `nvmlDeviceGetConfComputeProtectedMemoryUsage(device, memory)` (R535+).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetConfComputeProtectedMemoryUsage(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_t,
) -> nvmlReturn_t {
    device_call(
        "nvmlDeviceGetConfComputeProtectedMemoryUsage",
        device,
        |g, _| {
            let value = g.protected_memory_bytes.map(|[total, used]| nvmlMemory_t {
                total,
                free: total.saturating_sub(used),
                used,
            });
            // SAFETY: the caller passes a writable `nvmlMemory_t` (or null).
            unsafe { put(memory, value) }
        },
    )
}

/// `nvmlDeviceGetDramEncryptionMode(device, current, pending)` (R570+); both
/// `version`s must be `nvmlDramEncryptionInfo_v1`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDramEncryptionMode(
    device: nvmlDevice_t,
    current: *mut nvmlDramEncryptionInfo_t,
    pending: *mut nvmlDramEncryptionInfo_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetDramEncryptionMode", device, |g, _| {
        // SAFETY: the caller passes two `nvmlDramEncryptionInfo_t` it set up (or nulls).
        let versions = unsafe { (version_of(current), version_of(pending)) };
        match versions {
            (Some(DRAM_ENCRYPTION_INFO_V1), Some(DRAM_ENCRYPTION_INFO_V1)) => {}
            (Some(_), Some(_)) => return ARGUMENT_VERSION_MISMATCH,
            _ => return INVALID_ARGUMENT,
        }
        let info = |encryptionState| nvmlDramEncryptionInfo_t {
            version: DRAM_ENCRYPTION_INFO_V1,
            encryptionState,
        };
        let value = g.dram_encryption.map(|[c, p]| [info(c), info(p)]);
        // SAFETY: both non-null and writable, as above.
        unsafe { put_all([current, pending], value) }
    })
}

/// `nvmlPlatformInfo_v2`.
pub const PLATFORM_INFO_V2: c_uint = version::<nvmlPlatformInfo_v2_t>(2);

/// `nvmlDeviceGetPlatformInfo(device, platformInfo)` (R550+); `version` must be
/// `nvmlPlatformInfo_v2`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPlatformInfo(
    device: nvmlDevice_t,
    info: *mut nvmlPlatformInfo_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetPlatformInfo", device, |g, _| {
        // SAFETY: the caller passes an `nvmlPlatformInfo_t` it set up (or null).
        match unsafe { version_of(info) } {
            None => INVALID_ARGUMENT,
            Some(PLATFORM_INFO_V2) => {
                let value = g.platform.as_ref().map(|p| {
                    let mut chassisSerialNumber = [0; 16];
                    for (d, s) in chassisSerialNumber
                        .iter_mut()
                        .zip(p.chassis_serial.bytes().take(15))
                    {
                        *d = s;
                    }
                    nvmlPlatformInfo_v2_t {
                        version: PLATFORM_INFO_V2,
                        ibGuid: p.ib_guid,
                        chassisSerialNumber,
                        slotNumber: p.slot_number,
                        trayIndex: p.tray_index,
                        hostId: p.host_id,
                        peerType: p.peer_type,
                        moduleId: p.module_id,
                    }
                });
                // SAFETY: non-null and writable, as above.
                unsafe { put(info, value) }
            }
            Some(_) => ARGUMENT_VERSION_MISMATCH,
        }
    })
}

/// `nvmlGetVgpuDriverCapabilities(capability, capResult)` (R525+).
#[no_mangle]
pub unsafe extern "C" fn nvmlGetVgpuDriverCapabilities(
    capability: nvmlVgpuDriverCapability_t,
    capResult: *mut c_uint,
) -> nvmlReturn_t {
    crate::ffi::system_call("nvmlGetVgpuDriverCapabilities", |s| {
        let caps = s.vgpu_driver_capabilities.as_deref();
        let value = caps.and_then(|c| c.get(capability as usize).copied());
        // SAFETY: the caller passes a writable `unsigned int` (or null).
        unsafe { put(capResult, value) }
    })
}

/// `nvmlDeviceGetVgpuCapabilities(device, capability, capResult)` (R525+).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetVgpuCapabilities(
    device: nvmlDevice_t,
    capability: nvmlDeviceVgpuCapability_t,
    capResult: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetVgpuCapabilities", device, |g, _| {
        let caps = g.vgpu_capabilities.as_deref();
        let value = caps.and_then(|c| c.get(capability as usize).copied());
        // SAFETY: the caller passes a writable `unsigned int` (or null).
        unsafe { put(capResult, value) }
    })
}

/// `NVML_DEVICE_HOSTNAME_BUFFER_SIZE`: `nvmlHostname_v1_t` is one `char value[64]`.
const HOSTNAME_BYTES: usize = 64;

/// `nvmlDeviceGetHostname_v1(device, hostname)` (R580+; nvml-wrapper-sys has no
/// binding, so the struct is its one `char` array). A name longer than the buffer is
/// cut to 63 bytes and terminated, as NVML's fixed buffer holds it.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHostname_v1(
    device: nvmlDevice_t,
    hostname: *mut [u8; HOSTNAME_BYTES],
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetHostname_v1", device, |g, _| {
        let value = g.hostname.as_ref().map(|h| {
            let mut buf = [0u8; HOSTNAME_BYTES];
            for (d, s) in buf.iter_mut().zip(h.bytes().take(HOSTNAME_BYTES - 1)) {
                *d = s;
            }
            buf
        });
        // SAFETY: the caller passes a writable `nvmlHostname_v1_t` (or null).
        unsafe { put(hostname, value) }
    })
}

/// `nvmlBBXTimeData_v1_t`: one `unsigned int timeRun` (nvml.h of CUDA 13.3).
#[repr(C)]
pub struct BbxTimeData {
    time_run: std::os::raw::c_uint,
}

/// `nvmlDeviceGetBBXTimeData_v1(device, timeData)` (R610+; nvml-wrapper-sys has no
/// binding): the scenario's `bbx_time_run_s`, `NOT_SUPPORTED` without it. Driver
/// profiles before R610 do not export it (nvidia-smi 610.62's Windows library lacks it
/// too: `[Function Not Found]`).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetBBXTimeData_v1(
    device: nvmlDevice_t,
    time_data: *mut BbxTimeData,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetBBXTimeData_v1", device, |g, _| {
        let value = g.bbx_time_run_s.map(|s| BbxTimeData { time_run: s });
        // SAFETY: the caller passes a writable `nvmlBBXTimeData_v1_t` (or null).
        unsafe { put(time_data, value) }
    })
}
