//! Exported per-device query functions. Each one goes through
//! [`device_call`], which validates the handle and applies forced errors.

// Function, parameter and (bindgen-made) constant names are NVML's C names.
#![allow(non_snake_case, non_upper_case_globals)]

use std::os::raw::{c_char, c_uint, c_ulonglong};

use nvml_wrapper_sys::bindings::*;

use crate::codes::{ARGUMENT_VERSION_MISMATCH, INVALID_ARGUMENT, NOT_SUPPORTED};
use crate::ffi::{device_call, put, put_str, target_call};
use crate::mig::Instance;
use crate::scenario::{Clocks, Gpu, DEFAULT_CODEC_SAMPLING_PERIOD_US};

/// `nvmlDeviceGetIndex(device, index)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetIndex(
    device: nvmlDevice_t,
    index: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetIndex", device, |_, i| {
        // SAFETY: the caller passes a pointer to a `c_uint` (or null).
        unsafe { put(index, Some(i)) }
    })
}

/// `nvmlDeviceGetName(device, name, length)`; a MIG device's is its parent's with its
/// profile (see [`crate::mig`]).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: nvmlDevice_t,
    name: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    target_call("nvmlDeviceGetName", device, |g, _, mig| {
        let value = match mig {
            None => g.name.clone(),
            Some(m) => derived(g, m).and_then(|d| d.name),
        };
        // SAFETY: the caller passes a buffer of `length` bytes (or null).
        unsafe { put_str(name, length, value.as_deref()) }
    })
}

/// `nvmlDeviceGetUUID(device, uuid, length)`, of a GPU or a MIG device.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: nvmlDevice_t,
    uuid: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    target_call("nvmlDeviceGetUUID", device, |g, _, mig| {
        let value = mig.map_or(g.uuid.as_deref(), |m| m.uuid.as_deref());
        // SAFETY: the caller passes a buffer of `length` bytes (or null).
        unsafe { put_str(uuid, length, value) }
    })
}

/// What the driver derives for MIG device `m` of `g`.
fn derived(g: &Gpu, m: &Instance) -> Option<crate::mig::Derived> {
    m.derive(g, g.mig.as_ref()?)
}

/// The memory a GPU or MIG device reports.
fn memory_of(g: &Gpu, mig: Option<&Instance>) -> Option<crate::scenario::Memory> {
    match mig {
        None => g.memory(),
        Some(m) => derived(g, m).map(|d| crate::scenario::Memory {
            total: d.memory_total,
            reserved: 0,
            free: d.memory_total - d.memory_used,
            used: d.memory_used,
        }),
    }
}

/// Copies `s` plus a NUL into `dst`, truncating if needed.
fn fill(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(s.bytes().take(n)) {
        *d = b as c_char;
    }
    if let Some(end) = dst.get_mut(n) {
        *end = 0;
    }
}

fn pci_info(g: &Gpu) -> Option<nvmlPciInfo_t> {
    let bus_id = g.pci_bus_id.as_deref()?;
    let addr = g.pci_address()?;
    let mut info = nvmlPciInfo_t {
        busIdLegacy: [0; 16],
        domain: addr.domain,
        bus: addr.bus,
        device: addr.device,
        pciDeviceId: g.pci_device_id.unwrap_or(0),
        pciSubSystemId: g.pci_subsystem_id.unwrap_or(0),
        busId: [0; 32],
    };
    let legacy = format!(
        "{:04X}:{:02X}:{:02X}.{:X}",
        addr.domain & 0xFFFF,
        addr.bus,
        addr.device,
        addr.function
    );
    fill(&mut info.busIdLegacy, &legacy);
    fill(&mut info.busId, bus_id);
    Some(info)
}

/// `nvmlDeviceGetPciInfo_v3(device, pci)`; `busId` is `pci_bus_id` verbatim.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(
    device: nvmlDevice_t,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetPciInfo_v3", device, |g, _| {
        // SAFETY: the caller passes a pointer to an `nvmlPciInfo_t` (or null).
        unsafe { put(pci, pci_info(g)) }
    })
}

/// `nvmlDeviceGetMemoryInfo(device, memory)` (v1 struct, no `reserved`).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_t,
) -> nvmlReturn_t {
    target_call("nvmlDeviceGetMemoryInfo", device, |g, _, mig| {
        let value = memory_of(g, mig).map(|m| nvmlMemory_t {
            total: m.total,
            free: m.free,
            used: m.used,
        });
        // SAFETY: the caller passes a pointer to an `nvmlMemory_t` (or null).
        unsafe { put(memory, value) }
    })
}

/// `nvmlMemory_v2` from nvml.h: `NVML_STRUCT_VERSION(Memory, 2)`.
const MEMORY_V2_VERSION: c_uint = (std::mem::size_of::<nvmlMemory_v2_t>() as c_uint) | (2 << 24);

/// `nvmlDeviceGetMemoryInfo_v2(device, memory)`; `memory->version` must be
/// `nvmlMemory_v2`, else `ARGUMENT_VERSION_MISMATCH` like real NVML.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_v2_t,
) -> nvmlReturn_t {
    target_call("nvmlDeviceGetMemoryInfo_v2", device, |g, _, mig| {
        if memory.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: `memory` is non-null and the caller passes a pointer to an
        // `nvmlMemory_v2_t` with `version` set.
        let version = unsafe { std::ptr::addr_of!((*memory).version).read_unaligned() };
        if version != MEMORY_V2_VERSION {
            return ARGUMENT_VERSION_MISMATCH;
        }
        let value = memory_of(g, mig).map(|m| nvmlMemory_v2_t {
            version,
            total: m.total,
            reserved: m.reserved,
            free: m.free,
            used: m.used,
        });
        // SAFETY: as above.
        unsafe { put(memory, value) }
    })
}

/// `nvmlDeviceGetUtilizationRates(device, utilization)`; needs both
/// `utilization_gpu_pct` and `utilization_memory_pct`. `NOT_SUPPORTED` with MIG on.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: nvmlDevice_t,
    utilization: *mut nvmlUtilization_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetUtilizationRates", device, |g, _| {
        if g.mig_on() {
            return NOT_SUPPORTED;
        }
        let value = g
            .utilization_gpu_pct
            .zip(g.utilization_memory_pct)
            .map(|(gpu, memory)| nvmlUtilization_t { gpu, memory });
        // SAFETY: the caller passes a pointer to an `nvmlUtilization_t` (or null).
        unsafe { put(utilization, value) }
    })
}

/// `nvmlDeviceGetTemperature(device, sensorType, temp)`; only the GPU sensor.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: nvmlDevice_t,
    sensorType: nvmlTemperatureSensors_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetTemperature", device, |g, _| {
        if sensorType != nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU {
            return INVALID_ARGUMENT;
        }
        // SAFETY: the caller passes a pointer to a `c_uint` (or null).
        unsafe { put(temp, g.temperature_c) }
    })
}

/// Generates an exported getter with one scalar output taken from a
/// `Gpu` field.
macro_rules! scalar_getter {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $field:ident) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "C" fn $name(device: nvmlDevice_t, out: *mut $ty) -> nvmlReturn_t {
            device_call(stringify!($name), device, |g, _| {
                // SAFETY: the caller passes a pointer to the output type (or null).
                unsafe { put(out, g.$field) }
            })
        }
    };
}

scalar_getter!(
    /// `nvmlDeviceGetPowerUsage(device, power)` in mW.
    nvmlDeviceGetPowerUsage, c_uint, power_usage_mw
);
scalar_getter!(
    /// `nvmlDeviceGetEnforcedPowerLimit(device, limit)` in mW.
    nvmlDeviceGetEnforcedPowerLimit, c_uint, power_limit_mw
);
scalar_getter!(
    /// `nvmlDeviceGetPowerManagementLimit(device, limit)` in mW (nvitop asks for it;
    /// the fake has one limit, the same as the enforced one).
    nvmlDeviceGetPowerManagementLimit, c_uint, power_limit_mw
);
scalar_getter!(
    /// `nvmlDeviceGetPersistenceMode(device, mode)`: 0 disabled, 1 enabled.
    nvmlDeviceGetPersistenceMode, c_uint, persistence_mode
);
scalar_getter!(
    /// `nvmlDeviceGetComputeMode(device, mode)`: 0 default, 2 prohibited, 3 exclusive.
    nvmlDeviceGetComputeMode, c_uint, compute_mode
);
scalar_getter!(
    /// `nvmlDeviceGetDisplayActive(device, isActive)`: 0 or 1.
    nvmlDeviceGetDisplayActive, c_uint, display_active
);

/// `nvmlDeviceGetDriverModel(device, current, pending)`: a Windows-only query that a
/// Linux driver answers with `NOT_SUPPORTED`, as the fake does.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDriverModel(
    device: nvmlDevice_t,
    current: *mut c_uint,
    _pending: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetDriverModel", device, |_, _| {
        // SAFETY: the caller passes a pointer to a `c_uint` (or null).
        unsafe { put::<c_uint>(current, None) }
    })
}
scalar_getter!(
    /// `nvmlDeviceGetTotalEnergyConsumption(device, energy)` in mJ.
    nvmlDeviceGetTotalEnergyConsumption, c_ulonglong, energy_mj
);
scalar_getter!(
    /// `nvmlDeviceGetFanSpeed(device, speed)` in percent (fan 0).
    nvmlDeviceGetFanSpeed, c_uint, fan_speed_pct
);
scalar_getter!(
    /// `nvmlDeviceGetPerformanceState(device, pState)`.
    nvmlDeviceGetPerformanceState, nvmlPstates_t, pstate
);
scalar_getter!(
    /// `nvmlDeviceGetCurrentClocksEventReasons(device, clocksEventReasons)`.
    nvmlDeviceGetCurrentClocksEventReasons, c_ulonglong, clock_event_reasons
);
scalar_getter!(
    /// `nvmlDeviceGetCurrentClocksThrottleReasons(device, clocksThrottleReasons)`.
    nvmlDeviceGetCurrentClocksThrottleReasons, c_ulonglong, clock_event_reasons
);
scalar_getter!(
    /// `nvmlDeviceGetCurrPcieLinkGeneration(device, currLinkGen)`.
    nvmlDeviceGetCurrPcieLinkGeneration, c_uint, pcie_link_gen
);
scalar_getter!(
    /// `nvmlDeviceGetCurrPcieLinkWidth(device, currLinkWidth)`.
    nvmlDeviceGetCurrPcieLinkWidth, c_uint, pcie_link_width
);

/// `nvmlDeviceGetFanSpeed_v2(device, fan, speed)`; only fan 0 exists.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetFanSpeed_v2(
    device: nvmlDevice_t,
    fan: c_uint,
    speed: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetFanSpeed_v2", device, |g, _| {
        if fan != 0 {
            return INVALID_ARGUMENT;
        }
        // SAFETY: the caller passes a pointer to a `c_uint` (or null).
        unsafe { put(speed, g.fan_speed_pct) }
    })
}

/// One clock domain from a `clocks_mhz`-style table; `Err` for a bad type.
fn clock(clocks: Option<&Clocks>, type_: nvmlClockType_t) -> Result<Option<u32>, nvmlReturn_t> {
    let pick = |f: fn(&Clocks) -> Option<u32>| Ok(clocks.and_then(f));
    match type_ {
        nvmlClockType_enum_NVML_CLOCK_GRAPHICS => pick(|c| c.graphics),
        nvmlClockType_enum_NVML_CLOCK_SM => pick(|c| c.sm),
        nvmlClockType_enum_NVML_CLOCK_MEM => pick(|c| c.memory),
        nvmlClockType_enum_NVML_CLOCK_VIDEO => pick(|c| c.video),
        _ => Err(INVALID_ARGUMENT),
    }
}

/// `nvmlDeviceGetClockInfo(device, type, clock)` from `clocks_mhz`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    device: nvmlDevice_t,
    type_: nvmlClockType_t,
    clock_mhz: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetClockInfo", device, |g, _| {
        match clock(g.clocks_mhz.as_ref(), type_) {
            // SAFETY: the caller passes a pointer to a `c_uint` (or null).
            Ok(value) => unsafe { put(clock_mhz, value) },
            Err(code) => code,
        }
    })
}

/// `nvmlDeviceGetMaxClockInfo(device, type, clock)` from `max_clocks_mhz`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxClockInfo(
    device: nvmlDevice_t,
    type_: nvmlClockType_t,
    clock_mhz: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetMaxClockInfo", device, |g, _| {
        match clock(g.max_clocks_mhz.as_ref(), type_) {
            // SAFETY: the caller passes a pointer to a `c_uint` (or null).
            Ok(value) => unsafe { put(clock_mhz, value) },
            Err(code) => code,
        }
    })
}

/// Shared body of the encoder/decoder utilization getters (`NOT_SUPPORTED` with MIG on).
///
/// # Safety
///
/// Each pointer must be null or valid for writing a `c_uint`.
unsafe fn codec(
    g: &Gpu,
    pct: Option<u32>,
    utilization: *mut c_uint,
    samplingPeriodUs: *mut c_uint,
) -> nvmlReturn_t {
    if utilization.is_null() || samplingPeriodUs.is_null() {
        return INVALID_ARGUMENT;
    }
    let Some(pct) = pct.filter(|_| !g.mig_on()) else {
        return NOT_SUPPORTED;
    };
    let period = g
        .codec_sampling_period_us
        .unwrap_or(DEFAULT_CODEC_SAMPLING_PERIOD_US);
    // SAFETY: both pointers are non-null and valid per this function's contract.
    unsafe {
        put(utilization, Some(pct));
        put(samplingPeriodUs, Some(period))
    }
}

/// `nvmlDeviceGetJpgUtilization(device, utilization, samplingPeriodUs)` (R535+).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetJpgUtilization(
    device: nvmlDevice_t,
    utilization: *mut c_uint,
    samplingPeriodUs: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetJpgUtilization", device, |g, _| {
        // SAFETY: the caller passes two pointers to `c_uint` (or nulls).
        unsafe { codec(g, g.jpeg_utilization_pct, utilization, samplingPeriodUs) }
    })
}

/// `nvmlDeviceGetOfaUtilization(device, utilization, samplingPeriodUs)` (R535+).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetOfaUtilization(
    device: nvmlDevice_t,
    utilization: *mut c_uint,
    samplingPeriodUs: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetOfaUtilization", device, |g, _| {
        // SAFETY: the caller passes two pointers to `c_uint` (or nulls).
        unsafe { codec(g, g.ofa_utilization_pct, utilization, samplingPeriodUs) }
    })
}

/// `nvmlDeviceGetEncoderUtilization(device, utilization, samplingPeriodUs)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEncoderUtilization(
    device: nvmlDevice_t,
    utilization: *mut c_uint,
    samplingPeriodUs: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetEncoderUtilization", device, |g, _| {
        // SAFETY: the caller passes two pointers to `c_uint` (or nulls).
        unsafe { codec(g, g.encoder_utilization_pct, utilization, samplingPeriodUs) }
    })
}

/// `nvmlDeviceGetDecoderUtilization(device, utilization, samplingPeriodUs)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDecoderUtilization(
    device: nvmlDevice_t,
    utilization: *mut c_uint,
    samplingPeriodUs: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetDecoderUtilization", device, |g, _| {
        // SAFETY: the caller passes two pointers to `c_uint` (or nulls).
        unsafe { codec(g, g.decoder_utilization_pct, utilization, samplingPeriodUs) }
    })
}

/// `nvmlDeviceGetPcieThroughput(device, counter, value)` in KB/s.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPcieThroughput(
    device: nvmlDevice_t,
    counter: nvmlPcieUtilCounter_t,
    value: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetPcieThroughput", device, |g, _| {
        let kbps = match counter {
            nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_TX_BYTES => g.pcie_tx_kbps,
            nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_RX_BYTES => g.pcie_rx_kbps,
            _ => return INVALID_ARGUMENT,
        };
        // SAFETY: the caller passes a pointer to a `c_uint` (or null).
        unsafe { put(value, kbps) }
    })
}

/// `nvmlDeviceGetTotalEccErrors(device, errorType, counterType, eccCounts)`; the
/// aggregate counters are the volatile ones unless the scenario gives them.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: nvmlDevice_t,
    errorType: nvmlMemoryErrorType_t,
    counterType: nvmlEccCounterType_t,
    eccCounts: *mut c_ulonglong,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetTotalEccErrors", device, |g, _| {
        if counterType != nvmlEccCounterType_enum_NVML_VOLATILE_ECC
            && counterType != nvmlEccCounterType_enum_NVML_AGGREGATE_ECC
        {
            return INVALID_ARGUMENT;
        }
        let aggregate = counterType == nvmlEccCounterType_enum_NVML_AGGREGATE_ECC;
        let count = match errorType {
            nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_CORRECTED if aggregate => {
                g.ecc_corrected_aggregate.or(g.ecc_corrected_volatile)
            }
            nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_CORRECTED => g.ecc_corrected_volatile,
            nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_UNCORRECTED if aggregate => {
                g.ecc_uncorrected_aggregate.or(g.ecc_uncorrected_volatile)
            }
            nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_UNCORRECTED => {
                g.ecc_uncorrected_volatile
            }
            _ => return INVALID_ARGUMENT,
        };
        // SAFETY: the caller passes a pointer to a `c_ulonglong` (or null).
        unsafe { put(eccCounts, count) }
    })
}
