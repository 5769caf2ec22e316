//! Exported getters of the values nvidia-smi's `--query-gpu` names beyond the core set:
//! identity (serial, VBIOS, compute capability, maximum PCIe link, power limits,
//! supported clock event reasons), modes (display, ECC, accounting), retired pages,
//! remapped rows, applications clocks, encoder statistics, ECC counts by location, infoROM
//! versions, GPU operation mode and fabric registration.
//!
//! As everywhere in the fake, an absent scenario value is `NOT_SUPPORTED`; a GPU's
//! `errors` can make any of them answer something else, e.g. `"DEPRECATED"` for the
//! display mode and applications clocks as 590+ drivers do.

// Function, parameter and (bindgen-made) constant names are NVML's C names.
#![allow(non_snake_case, non_upper_case_globals)]

use std::os::raw::{c_char, c_int, c_uint, c_ulonglong};

use nvml_wrapper_sys::bindings::*;

use crate::codes::{INSUFFICIENT_SIZE, INVALID_ARGUMENT, NOT_SUPPORTED, SUCCESS};
use crate::ffi::{device_call, put, put_str};
use crate::scenario::{Clocks, Gpu};

scalar_getter!(
    /// `nvmlDeviceGetMaxPcieLinkGeneration(device, maxLinkGen)`.
    nvmlDeviceGetMaxPcieLinkGeneration, c_uint, max_pcie_link_gen
);
scalar_getter!(
    /// `nvmlDeviceGetGpuMaxPcieLinkGeneration(device, maxLinkGenDevice)` (R510+).
    nvmlDeviceGetGpuMaxPcieLinkGeneration, c_uint, gpu_max_pcie_link_gen
);
scalar_getter!(
    /// `nvmlDeviceGetMaxPcieLinkWidth(device, maxLinkWidth)`.
    nvmlDeviceGetMaxPcieLinkWidth, c_uint, max_pcie_link_width
);
scalar_getter!(
    /// `nvmlDeviceGetPowerManagementDefaultLimit(device, defaultLimit)` in mW.
    nvmlDeviceGetPowerManagementDefaultLimit, c_uint, power_default_limit_mw
);
scalar_getter!(
    /// `nvmlDeviceGetSupportedClocksThrottleReasons(device, reasons)`.
    nvmlDeviceGetSupportedClocksThrottleReasons, c_ulonglong, supported_clock_event_reasons
);
scalar_getter!(
    /// `nvmlDeviceGetDisplayMode(device, display)`: 0 or 1.
    nvmlDeviceGetDisplayMode, c_uint, display_mode
);
scalar_getter!(
    /// `nvmlDeviceGetAccountingMode(device, mode)`: 0 or 1.
    nvmlDeviceGetAccountingMode, c_uint, accounting_mode
);
scalar_getter!(
    /// `nvmlDeviceGetAccountingBufferSize(device, bufferSize)`.
    nvmlDeviceGetAccountingBufferSize, c_uint, accounting_buffer_size
);
scalar_getter!(
    /// `nvmlDeviceGetRetiredPagesPendingStatus(device, isPending)`: 0 or 1.
    nvmlDeviceGetRetiredPagesPendingStatus, c_uint, retired_pages_pending
);

/// `nvmlDeviceGetMinorNumber(device, minorNumber)`: the scenario's, or the index.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMinorNumber(
    device: nvmlDevice_t,
    minor: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetMinorNumber", device, |g, index| {
        // SAFETY: the caller passes a pointer to an unsigned int (or null).
        unsafe { put(minor, Some(g.minor_number.unwrap_or(index))) }
    })
}

/// `nvmlDeviceGetSerial(device, serial, length)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetSerial(
    device: nvmlDevice_t,
    serial: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetSerial", device, |g, _| {
        // SAFETY: the caller passes a buffer of `length` bytes (or null).
        unsafe { put_str(serial, length, g.serial.as_deref()) }
    })
}

/// `nvmlDeviceGetVbiosVersion(device, version, length)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetVbiosVersion(
    device: nvmlDevice_t,
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetVbiosVersion", device, |g, _| {
        // SAFETY: the caller passes a buffer of `length` bytes (or null).
        unsafe { put_str(version, length, g.vbios_version.as_deref()) }
    })
}

/// `nvmlDeviceGetInforomImageVersion(device, version, length)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetInforomImageVersion(
    device: nvmlDevice_t,
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetInforomImageVersion", device, |g, _| {
        // SAFETY: the caller passes a buffer of `length` bytes (or null).
        unsafe { put_str(version, length, g.inforom.img.as_deref()) }
    })
}

/// `nvmlDeviceGetInforomVersion(device, object, version, length)`: the OEM, ECC or
/// power management object's version.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetInforomVersion(
    device: nvmlDevice_t,
    object: nvmlInforomObject_t,
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetInforomVersion", device, |g, _| {
        let value = match object {
            nvmlInforomObject_enum_NVML_INFOROM_OEM => &g.inforom.oem,
            nvmlInforomObject_enum_NVML_INFOROM_ECC => &g.inforom.ecc,
            nvmlInforomObject_enum_NVML_INFOROM_POWER => &g.inforom.pwr,
            _ => return INVALID_ARGUMENT,
        };
        // SAFETY: the caller passes a buffer of `length` bytes (or null).
        unsafe { put_str(version, length, value.as_deref()) }
    })
}

/// `nvmlDeviceGetGpuOperationMode(device, current, pending)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuOperationMode(
    device: nvmlDevice_t,
    current: *mut nvmlGpuOperationMode_t,
    pending: *mut nvmlGpuOperationMode_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetGpuOperationMode", device, |g, _| {
        // SAFETY: the caller passes two writable `nvmlGpuOperationMode_t` (or null).
        unsafe { put_all([current, pending], g.gpu_operation_mode) }
    })
}

/// `nvmlDeviceGetGpuFabricInfo(device, gpuFabricInfo)` (R525+): state and status; the
/// cluster UUID and clique id are zero, as on a single-node NVSwitch system.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfo(
    device: nvmlDevice_t,
    gpuFabricInfo: *mut nvmlGpuFabricInfo_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetGpuFabricInfo", device, |g, _| {
        if gpuFabricInfo.is_null() {
            return INVALID_ARGUMENT;
        }
        let Some(fabric) = g.fabric else {
            return NOT_SUPPORTED;
        };
        let info = nvmlGpuFabricInfo_t {
            clusterUuid: [0; 16],
            status: fabric.status,
            cliqueId: 0,
            state: fabric.state,
        };
        // SAFETY: non-null, and the caller passes a writable `nvmlGpuFabricInfo_t`.
        unsafe { gpuFabricInfo.write_unaligned(info) };
        SUCCESS
    })
}

/// Writes `values` through `outs`, or `NOT_SUPPORTED` when there are none.
///
/// # Safety
///
/// Each pointer must be null or valid for writing a `T`.
pub(crate) unsafe fn put_all<T: Copy, const N: usize>(
    outs: [*mut T; N],
    values: Option<[T; N]>,
) -> nvmlReturn_t {
    if outs.iter().any(|p| p.is_null()) {
        return INVALID_ARGUMENT;
    }
    let Some(values) = values else {
        return NOT_SUPPORTED;
    };
    for (out, value) in outs.into_iter().zip(values) {
        // SAFETY: non-null and valid per this function's contract.
        unsafe { put(out, Some(value)) };
    }
    SUCCESS
}

/// `nvmlDeviceGetCudaComputeCapability(device, major, minor)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCudaComputeCapability(
    device: nvmlDevice_t,
    major: *mut c_int,
    minor: *mut c_int,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetCudaComputeCapability", device, |g, _| {
        // SAFETY: the caller passes two pointers to `c_int` (or nulls).
        unsafe { put_all([major, minor], g.compute_capability) }
    })
}

/// `nvmlDeviceGetPowerManagementLimitConstraints(device, minLimit, maxLimit)` in mW.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPowerManagementLimitConstraints(
    device: nvmlDevice_t,
    minLimit: *mut c_uint,
    maxLimit: *mut c_uint,
) -> nvmlReturn_t {
    device_call(
        "nvmlDeviceGetPowerManagementLimitConstraints",
        device,
        |g, _| {
            // SAFETY: the caller passes two pointers to `c_uint` (or nulls).
            unsafe { put_all([minLimit, maxLimit], g.power_limit_range_mw) }
        },
    )
}

/// `nvmlDeviceGetEccMode(device, current, pending)`: 0 or 1 each.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEccMode(
    device: nvmlDevice_t,
    current: *mut nvmlEnableState_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetEccMode", device, |g, _| {
        // SAFETY: the caller passes two pointers to `nvmlEnableState_t` (or nulls).
        unsafe { put_all([current, pending], g.ecc_mode) }
    })
}

/// `nvmlDeviceGetRemappedRows(device, corrRows, uncRows, isPending, failureOccurred)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: nvmlDevice_t,
    corrRows: *mut c_uint,
    uncRows: *mut c_uint,
    isPending: *mut c_uint,
    failureOccurred: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetRemappedRows", device, |g, _| {
        let outs = [corrRows, uncRows, isPending, failureOccurred];
        // SAFETY: the caller passes four pointers to `c_uint` (or nulls).
        unsafe { put_all(outs, g.remapped_rows) }
    })
}

/// `nvmlDeviceGetEncoderStats(device, sessionCount, averageFps, averageLatency)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEncoderStats(
    device: nvmlDevice_t,
    sessionCount: *mut c_uint,
    averageFps: *mut c_uint,
    averageLatency: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetEncoderStats", device, |g, _| {
        let outs = [sessionCount, averageFps, averageLatency];
        // SAFETY: the caller passes three pointers to `c_uint` (or nulls).
        unsafe { put_all(outs, g.encoder_stats) }
    })
}

/// `nvmlDeviceGetRetiredPages(device, cause, pageCount, addresses)`: the scenario gives
/// counts only, so the addresses are 0. A count too small for the pages is
/// `INSUFFICIENT_SIZE` with the count written, as the driver does.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages(
    device: nvmlDevice_t,
    cause: nvmlPageRetirementCause_t,
    pageCount: *mut c_uint,
    addresses: *mut c_ulonglong,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetRetiredPages", device, |g, _| {
        if pageCount.is_null() {
            return INVALID_ARGUMENT;
        }
        let Some([sbe, dbe]) = g.retired_pages else {
            return NOT_SUPPORTED;
        };
        let n = match cause {
            nvmlPageRetirementCause_enum_NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS => {
                sbe
            }
            nvmlPageRetirementCause_enum_NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR => dbe,
            _ => return INVALID_ARGUMENT,
        };
        // SAFETY: `pageCount` is non-null; the caller passes it valid for a `c_uint`,
        // and `addresses` (when not null) valid for `*pageCount` entries.
        unsafe {
            let room = pageCount.read_unaligned();
            pageCount.write_unaligned(n);
            if room < n {
                return INSUFFICIENT_SIZE;
            }
            if !addresses.is_null() {
                for i in 0..n as usize {
                    addresses.add(i).write_unaligned(0);
                }
            }
        }
        SUCCESS
    })
}

/// nvidia-smi's name of an NVML memory location.
fn location_name(location: nvmlMemoryLocation_t) -> Option<&'static str> {
    Some(match location {
        nvmlMemoryLocation_enum_NVML_MEMORY_LOCATION_L1_CACHE => "l1_cache",
        nvmlMemoryLocation_enum_NVML_MEMORY_LOCATION_L2_CACHE => "l2_cache",
        nvmlMemoryLocation_enum_NVML_MEMORY_LOCATION_DEVICE_MEMORY => "device_memory",
        nvmlMemoryLocation_enum_NVML_MEMORY_LOCATION_REGISTER_FILE => "register_file",
        nvmlMemoryLocation_enum_NVML_MEMORY_LOCATION_TEXTURE_MEMORY => "texture_memory",
        nvmlMemoryLocation_enum_NVML_MEMORY_LOCATION_TEXTURE_SHM => "texture_shm",
        nvmlMemoryLocation_enum_NVML_MEMORY_LOCATION_CBU => "cbu",
        nvmlMemoryLocation_enum_NVML_MEMORY_LOCATION_SRAM => "sram",
        _ => return None,
    })
}

/// `nvmlDeviceGetMemoryErrorCounter(device, errorType, counterType, locationType,
/// count)` from `ecc_by_location`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryErrorCounter(
    device: nvmlDevice_t,
    errorType: nvmlMemoryErrorType_t,
    counterType: nvmlEccCounterType_t,
    locationType: nvmlMemoryLocation_t,
    count: *mut c_ulonglong,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetMemoryErrorCounter", device, |g, _| {
        let error = match errorType {
            nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_CORRECTED => "corrected",
            nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_UNCORRECTED => "uncorrected",
            _ => return INVALID_ARGUMENT,
        };
        let counter = match counterType {
            nvmlEccCounterType_enum_NVML_VOLATILE_ECC => "volatile",
            nvmlEccCounterType_enum_NVML_AGGREGATE_ECC => "aggregate",
            _ => return INVALID_ARGUMENT,
        };
        let Some(location) = location_name(locationType) else {
            return INVALID_ARGUMENT;
        };
        let key = format!("{error}.{counter}.{location}");
        // SAFETY: the caller passes a pointer to a `c_ulonglong` (or null).
        unsafe { put(count, g.ecc_by_location.get(&key).copied()) }
    })
}

/// One domain of an applications-clock table; `Err` for a bad type.
fn app_clock(clocks: Option<&Clocks>, type_: nvmlClockType_t) -> Result<Option<u32>, nvmlReturn_t> {
    match type_ {
        nvmlClockType_enum_NVML_CLOCK_GRAPHICS => Ok(clocks.and_then(|c| c.graphics)),
        nvmlClockType_enum_NVML_CLOCK_SM => Ok(clocks.and_then(|c| c.sm)),
        nvmlClockType_enum_NVML_CLOCK_MEM => Ok(clocks.and_then(|c| c.memory)),
        nvmlClockType_enum_NVML_CLOCK_VIDEO => Ok(clocks.and_then(|c| c.video)),
        _ => Err(INVALID_ARGUMENT),
    }
}

fn app_clock_call(
    name: &'static str,
    device: nvmlDevice_t,
    type_: nvmlClockType_t,
    out: *mut c_uint,
    table: fn(&Gpu) -> Option<&Clocks>,
) -> nvmlReturn_t {
    device_call(name, device, |g, _| match app_clock(table(g), type_) {
        // SAFETY: the caller passes a pointer to a `c_uint` (or null).
        Ok(value) => unsafe { put(out, value) },
        Err(code) => code,
    })
}

/// `nvmlDeviceGetApplicationsClock(device, clockType, clockMHz)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetApplicationsClock(
    device: nvmlDevice_t,
    clockType: nvmlClockType_t,
    clockMHz: *mut c_uint,
) -> nvmlReturn_t {
    let name = "nvmlDeviceGetApplicationsClock";
    app_clock_call(name, device, clockType, clockMHz, |g| {
        g.applications_clocks_mhz.as_ref()
    })
}

/// `nvmlDeviceGetDefaultApplicationsClock(device, clockType, clockMHz)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDefaultApplicationsClock(
    device: nvmlDevice_t,
    clockType: nvmlClockType_t,
    clockMHz: *mut c_uint,
) -> nvmlReturn_t {
    let name = "nvmlDeviceGetDefaultApplicationsClock";
    app_clock_call(name, device, clockType, clockMHz, |g| {
        g.default_applications_clocks_mhz.as_ref()
    })
}
