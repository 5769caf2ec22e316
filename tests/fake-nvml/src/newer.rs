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
