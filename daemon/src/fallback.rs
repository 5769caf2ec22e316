//! NVML calls with a fallback to another version of the same function.
//!
//! nvml-wrapper calls exactly one version of each NVML function. Drivers (and other NVML
//! implementations) differ in which versions they export, so for the values gpustat also
//! shows we try the version nvml-wrapper uses and, when the library lacks it, call the
//! other one directly:
//! - memory: `nvmlDeviceGetMemoryInfo_v2` (used excludes reserved), else v1;
//! - fan: `nvmlDeviceGetFanSpeed_v2` (fan 0), else v1;
//! - clock event reasons: `nvmlDeviceGetCurrentClocksEventReasons` (driver 535+), else the
//!   deprecated `nvmlDeviceGetCurrentClocksThrottleReasons`;
//! - temperature: `nvmlDeviceGetTemperatureV` (versioned struct), else the deprecated
//!   `nvmlDeviceGetTemperature`, remembered per GPU once the new one failed where the
//!   old one worked.
//!
//! This is the daemon's only FFI: each call passes a handle from the live session and a
//! pointer to a local of the C type.

use std::os::raw::c_uint;

use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{
    self, nvmlMemory_t, nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU, nvmlTemperature_t,
};

/// Memory in bytes: (total, used, free, reserved when the driver says).
pub struct Memory {
    /// Total.
    pub total: u64,
    /// Used.
    pub used: u64,
    /// Free.
    pub free: u64,
    /// Reserved by the driver (v2 only).
    pub reserved: Option<u64>,
}

/// True when the error means "this library does not have that function".
fn missing(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::FailedToLoadSymbol(_) | NvmlError::FunctionNotFound
    )
}

/// Memory of `device`, from v2 or else v1.
pub fn memory(nvml: &Nvml, device: &Device) -> Result<Memory, NvmlError> {
    match device.memory_info() {
        Ok(m) => Ok(Memory {
            total: m.total,
            used: m.used,
            free: m.free,
            reserved: Some(m.reserved),
        }),
        Err(e) if missing(&e) => {
            let get = nvml
                .lib()
                .nvmlDeviceGetMemoryInfo
                .as_ref()
                .map_err(|_| NvmlError::FunctionNotFound)?;
            let mut m = nvmlMemory_t {
                total: 0,
                free: 0,
                used: 0,
            };
            // SAFETY: `get` comes from the loaded NVML library with the C signature
            // `nvmlReturn_t (nvmlDevice_t, nvmlMemory_t *)`; the handle belongs to the live
            // session held by `nvml`, and `m` is a valid, writable nvmlMemory_t.
            nvml_try(unsafe { get(device.handle(), &mut m) })?;
            Ok(Memory {
                total: m.total,
                used: m.used,
                free: m.free,
                reserved: None,
            })
        }
        Err(e) => Err(e),
    }
}

/// Speed of fan 0 in percent, from v2 or else v1.
pub fn fan_speed(nvml: &Nvml, device: &Device) -> Result<u32, NvmlError> {
    match device.fan_speed(0) {
        Err(e) if missing(&e) => {
            let get = nvml
                .lib()
                .nvmlDeviceGetFanSpeed
                .as_ref()
                .map_err(|_| NvmlError::FunctionNotFound)?;
            let mut speed: c_uint = 0;
            // SAFETY: `get` has the C signature `nvmlReturn_t (nvmlDevice_t, unsigned int *)`
            // in the loaded library; the handle is from the live session and `speed` is a
            // valid, writable c_uint.
            nvml_try(unsafe { get(device.handle(), &mut speed) })?;
            Ok(speed)
        }
        other => other,
    }
}

/// The current clock event reason bits of `device`.
pub fn clock_event_reasons(nvml: &Nvml, device: &Device) -> Result<u64, NvmlError> {
    match nvml.lib().nvmlDeviceGetCurrentClocksEventReasons.as_ref() {
        Ok(get) => {
            let mut reasons = 0u64;
            // SAFETY: `get` has the C signature
            // `nvmlReturn_t (nvmlDevice_t, unsigned long long *)` in the loaded library; the
            // handle is from the live session and `reasons` is a valid, writable u64.
            match nvml_try(unsafe { get(device.handle(), &mut reasons) }) {
                Err(NvmlError::FunctionNotFound) => legacy_reasons(device),
                other => other.map(|()| reasons),
            }
        }
        Err(_) => legacy_reasons(device),
    }
}

fn legacy_reasons(device: &Device) -> Result<u64, NvmlError> {
    #[allow(deprecated)]
    device
        .current_throttle_reasons()
        .map(|reasons| reasons.bits())
}

/// `nvmlTemperature_v1` from nvml.h: `NVML_STRUCT_VERSION(Temperature, 1)`.
const TEMPERATURE_V1: u32 = (std::mem::size_of::<nvmlTemperature_t>() as u32) | (1 << 24);

/// The GPU temperature in °C, from `nvmlDeviceGetTemperatureV` unless `legacy` says this
/// GPU needs the old call; sets `legacy` when V is missing or refuses its struct version
/// and the old call then works. Any other failure of V is this tick's failure.
pub fn temperature(nvml: &Nvml, device: &Device, legacy: &mut bool) -> Result<i32, NvmlError> {
    let old = || {
        #[allow(deprecated)]
        device
            .temperature(TemperatureSensor::Gpu)
            .map(|t| i32::try_from(t).unwrap_or(i32::MAX))
    };
    if *legacy {
        return old();
    }
    let result = match nvml.lib().nvmlDeviceGetTemperatureV.as_ref() {
        Ok(get) => {
            let mut t = nvmlTemperature_t {
                version: TEMPERATURE_V1,
                sensorType: nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU,
                temperature: 0,
            };
            // SAFETY: `get` has the C signature `nvmlReturn_t (nvmlDevice_t,
            // nvmlTemperature_t *)` in the loaded library; the handle is from the live
            // session and `t` is a valid, writable v1 struct with its version set.
            nvml_try(unsafe { get(device.handle(), &mut t) }).map(|()| t.temperature)
        }
        Err(_) => Err(NvmlError::FunctionNotFound),
    };
    let version_mismatch = bindings::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    match result {
        Err(NvmlError::UnexpectedVariant(code)) if code == version_mismatch => {}
        Err(ref e) if missing(e) => {}
        other => return other,
    }
    let value = old();
    *legacy = value.is_ok();
    value
}
