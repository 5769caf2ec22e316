//! The NVML calls nvml-latency times: every call gpupeekd makes or may make, per system
//! and per GPU, in the order of a tick. Entry points the library lacks become probes
//! that report `FUNCTION_NOT_FOUND` instead of failing.
//!
//! Process lists are timed in every version the library exports: v1 (16-byte entries),
//! `_v2` and `_v3` (24 bytes, 32 in drivers 535.43–535.86), and
//! `nvmlDeviceGetRunningProcessDetailList`; the v1 and `_v2` symbols are looked up here
//! by name because nvml-wrapper-sys declares them only under its `legacy-functions`
//! feature, which would change the daemon's build too.

use std::os::raw::{c_uint, c_ulonglong};
use std::ptr;

use nvml_wrapper_sys::bindings::{self as b, field_id as fi, nvmlDevice_t, NvmlLib};

use crate::call::{
    code_name, field_values, get, get_string, get_with, process_list, struct_version, sym, Call,
    Probe, ProcList, Room, MISSING, ROOM_ENTRIES,
};

/// Field ids asked of `nvmlDeviceGetFieldValues`: power, energy, temperature.
const FIELDS: [(u32, &str); 5] = [
    (fi::NVML_FI_DEV_POWER_INSTANT, "POWER_INSTANT"),
    (fi::NVML_FI_DEV_POWER_AVERAGE, "POWER_AVERAGE"),
    (
        fi::NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
        "TOTAL_ENERGY_CONSUMPTION",
    ),
    (fi::NVML_FI_DEV_MEMORY_TEMP, "MEMORY_TEMP"),
    (fi::NVML_FI_DEV_POWER_CURRENT_LIMIT, "POWER_CURRENT_LIMIT"),
];

/// `NVML_PROCESS_MODE_COMPUTE` and `NVML_PROCESS_MODE_GRAPHICS` (nvml.h).
const PROCESS_MODES: [(c_uint, &str); 2] = [(0, "compute"), (1, "graphics")];

/// The system-wide calls: driver version and device count.
pub fn system(lib: &NvmlLib) -> Vec<Probe<'_>> {
    let driver = sym(&lib.nvmlSystemGetDriverVersion).map(|f| -> Call<'_> {
        let mut buf = [0; 256];
        Box::new(move || {
            // SAFETY: `f` writes at most `length` bytes into the buffer, its size.
            unsafe { f(buf.as_mut_ptr(), 256) }
        })
    });
    let count = sym(&lib.nvmlDeviceGetCount_v2).map(|f| -> Call<'_> {
        let mut n: c_uint = 0;
        Box::new(move || {
            // SAFETY: `f` writes one unsigned int through the pointer.
            unsafe { f(&mut n) }
        })
    });
    vec![
        Probe::new("nvmlSystemGetDriverVersion", driver),
        Probe::new("nvmlDeviceGetCount_v2", count),
    ]
}

/// Every per-GPU call for GPU `index`, whose handle is `dev`.
///
/// `dev` must be a handle of the session that stays initialised while the probes are
/// called (the probes borrow `lib`, so they cannot outlive the library).
pub fn device(lib: &NvmlLib, index: c_uint, dev: nvmlDevice_t) -> Vec<Probe<'_>> {
    let handle = sym(&lib.nvmlDeviceGetHandleByIndex_v2).map(|f| -> Call<'_> {
        let mut out: nvmlDevice_t = ptr::null_mut();
        Box::new(move || {
            // SAFETY: `f` writes one handle through the pointer.
            unsafe { f(index, &mut out) }
        })
    });
    let mut probes = vec![
        Probe::new("nvmlDeviceGetHandleByIndex_v2", handle),
        get_string("nvmlDeviceGetName", &lib.nvmlDeviceGetName, dev),
        get_string("nvmlDeviceGetUUID", &lib.nvmlDeviceGetUUID, dev),
        get("nvmlDeviceGetPciInfo_v3", &lib.nvmlDeviceGetPciInfo_v3, dev),
        get("nvmlDeviceGetMemoryInfo", &lib.nvmlDeviceGetMemoryInfo, dev),
        memory_v2(lib, dev),
        get(
            "nvmlDeviceGetUtilizationRates",
            &lib.nvmlDeviceGetUtilizationRates,
            dev,
        ),
        get_with(
            "nvmlDeviceGetTemperature",
            "GPU",
            &lib.nvmlDeviceGetTemperature,
            dev,
            0,
        ),
        temperature_v(lib, dev),
        get("nvmlDeviceGetPowerUsage", &lib.nvmlDeviceGetPowerUsage, dev),
        get(
            "nvmlDeviceGetEnforcedPowerLimit",
            &lib.nvmlDeviceGetEnforcedPowerLimit,
            dev,
        ),
        get(
            "nvmlDeviceGetPowerManagementLimit",
            &lib.nvmlDeviceGetPowerManagementLimit,
            dev,
        ),
        get(
            "nvmlDeviceGetTotalEnergyConsumption",
            &lib.nvmlDeviceGetTotalEnergyConsumption,
            dev,
        ),
        get("nvmlDeviceGetFanSpeed", &lib.nvmlDeviceGetFanSpeed, dev),
        get_with(
            "nvmlDeviceGetFanSpeed_v2",
            "fan 0",
            &lib.nvmlDeviceGetFanSpeed_v2,
            dev,
            0,
        ),
    ];
    let clocks = [
        (b::nvmlClockType_enum_NVML_CLOCK_GRAPHICS, "GRAPHICS"),
        (b::nvmlClockType_enum_NVML_CLOCK_SM, "SM"),
        (b::nvmlClockType_enum_NVML_CLOCK_MEM, "MEM"),
    ];
    for (clock, label) in clocks {
        probes.push(get_with(
            "nvmlDeviceGetClockInfo",
            label,
            &lib.nvmlDeviceGetClockInfo,
            dev,
            clock,
        ));
    }
    for (clock, label) in clocks {
        probes.push(get_with(
            "nvmlDeviceGetMaxClockInfo",
            label,
            &lib.nvmlDeviceGetMaxClockInfo,
            dev,
            clock,
        ));
    }
    probes.extend([
        get(
            "nvmlDeviceGetPerformanceState",
            &lib.nvmlDeviceGetPerformanceState,
            dev,
        ),
        get(
            "nvmlDeviceGetCurrentClocksEventReasons",
            &lib.nvmlDeviceGetCurrentClocksEventReasons,
            dev,
        ),
        get(
            "nvmlDeviceGetCurrentClocksThrottleReasons",
            &lib.nvmlDeviceGetCurrentClocksThrottleReasons,
            dev,
        ),
        codec(
            "nvmlDeviceGetEncoderUtilization",
            &lib.nvmlDeviceGetEncoderUtilization,
            dev,
        ),
        codec(
            "nvmlDeviceGetDecoderUtilization",
            &lib.nvmlDeviceGetDecoderUtilization,
            dev,
        ),
        get_with(
            "nvmlDeviceGetPcieThroughput",
            "TX",
            &lib.nvmlDeviceGetPcieThroughput,
            dev,
            b::nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_TX_BYTES,
        ),
        get_with(
            "nvmlDeviceGetPcieThroughput",
            "RX",
            &lib.nvmlDeviceGetPcieThroughput,
            dev,
            b::nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_RX_BYTES,
        ),
        get(
            "nvmlDeviceGetCurrPcieLinkGeneration",
            &lib.nvmlDeviceGetCurrPcieLinkGeneration,
            dev,
        ),
        get(
            "nvmlDeviceGetCurrPcieLinkWidth",
            &lib.nvmlDeviceGetCurrPcieLinkWidth,
            dev,
        ),
        ecc(
            lib,
            dev,
            b::nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_CORRECTED,
            "corrected",
        ),
        ecc(
            lib,
            dev,
            b::nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            "uncorrected",
        ),
    ]);
    probes.extend(process_lists(lib, dev));
    probes.push(process_utilization(lib, dev));
    let batch = format!("nvmlDeviceGetFieldValues({} ids)", FIELDS.len());
    let ids = FIELDS.map(|(id, _)| id);
    probes.push(field_values(
        &batch,
        sym(&lib.nvmlDeviceGetFieldValues),
        dev,
        &ids,
    ));
    for (id, label) in FIELDS {
        let name = format!("nvmlDeviceGetFieldValues({label})");
        probes.push(field_values(
            &name,
            sym(&lib.nvmlDeviceGetFieldValues),
            dev,
            &[id],
        ));
    }
    probes.push(gpm_support(lib, dev));
    probes.push(gpm_sample(lib, dev));
    probes.extend(crate::mig::probes(lib, dev));
    probes
}

/// `nvmlDeviceGetMemoryInfo_v2`, whose struct carries its version.
pub fn memory_v2(lib: &NvmlLib, dev: nvmlDevice_t) -> Probe<'_> {
    let call = sym(&lib.nvmlDeviceGetMemoryInfo_v2).map(|f| -> Call<'_> {
        Box::new(move || {
            let mut m = b::nvmlMemory_v2_t {
                version: struct_version::<b::nvmlMemory_v2_t>(2),
                total: 0,
                reserved: 0,
                free: 0,
                used: 0,
            };
            // SAFETY: `f` writes one nvmlMemory_v2_t, of the version set in it; `dev` is
            // a live handle.
            unsafe { f(dev, &mut m) }
        })
    });
    Probe::new("nvmlDeviceGetMemoryInfo_v2", call)
}

/// `nvmlDeviceGetTemperatureV` (newer drivers), GPU sensor.
fn temperature_v(lib: &NvmlLib, dev: nvmlDevice_t) -> Probe<'_> {
    let call = sym(&lib.nvmlDeviceGetTemperatureV).map(|f| -> Call<'_> {
        Box::new(move || {
            let mut t = b::nvmlTemperature_t {
                version: struct_version::<b::nvmlTemperature_t>(1),
                sensorType: b::nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU,
                temperature: 0,
            };
            // SAFETY: `f` writes one nvmlTemperature_t, of the version set in it; `dev`
            // is a live handle.
            unsafe { f(dev, &mut t) }
        })
    });
    Probe::new("nvmlDeviceGetTemperatureV(GPU)", call)
}

/// Encoder or decoder utilisation: `f(dev, &mut percent, &mut sampling_period_us)`.
fn codec<E>(
    name: &str,
    f: &Result<unsafe extern "C" fn(nvmlDevice_t, *mut c_uint, *mut c_uint) -> b::nvmlReturn_t, E>,
    dev: nvmlDevice_t,
) -> Probe<'static> {
    let call = sym(f).map(|f| -> Call<'static> {
        let (mut pct, mut period) = (0, 0);
        Box::new(move || {
            // SAFETY: `f` writes one unsigned int through each pointer; `dev` is a live
            // handle.
            unsafe { f(dev, &mut pct, &mut period) }
        })
    });
    Probe::new(name, call)
}

/// `nvmlDeviceGetTotalEccErrors` of one error type, volatile counter.
fn ecc(lib: &NvmlLib, dev: nvmlDevice_t, kind: c_uint, label: &str) -> Probe<'static> {
    let call = sym(&lib.nvmlDeviceGetTotalEccErrors).map(|f| -> Call<'static> {
        let mut count: c_ulonglong = 0;
        Box::new(move || {
            // SAFETY: `f` writes one unsigned long long through the pointer; `kind` and
            // the counter type are values of their enums; `dev` is a live handle.
            unsafe {
                f(
                    dev,
                    kind,
                    b::nvmlEccCounterType_enum_NVML_VOLATILE_ECC,
                    &mut count,
                )
            }
        })
    });
    Probe::new(
        format!("nvmlDeviceGetTotalEccErrors({label}, volatile)"),
        call,
    )
}

/// The compute and graphics process lists in every version the library exports.
fn process_lists(lib: &NvmlLib, dev: nvmlDevice_t) -> Vec<Probe<'_>> {
    let mut probes = Vec::new();
    for kind in ["Compute", "Graphics"] {
        for suffix in ["", "_v2"] {
            let name = format!("nvmlDeviceGet{kind}RunningProcesses{suffix}");
            probes.push(process_list(&name, legacy_process_list(lib, &name), dev));
        }
        let v3 = match kind {
            "Compute" => &lib.nvmlDeviceGetComputeRunningProcesses_v3,
            _ => &lib.nvmlDeviceGetGraphicsRunningProcesses_v3,
        };
        let name = format!("nvmlDeviceGet{kind}RunningProcesses_v3");
        probes.push(process_list(&name, sym(v3), dev));
    }
    for (mode, label) in PROCESS_MODES {
        probes.push(process_detail_list(lib, dev, mode, label));
    }
    probes
}

/// A v1 or `_v2` process list, looked up by name (see the module header).
fn legacy_process_list(lib: &NvmlLib, name: &str) -> Result<ProcList<u8>, String> {
    let symbol = format!("{name}\0");
    // SAFETY: NVML's process lists of every version have the C signature
    // `nvmlReturn_t (nvmlDevice_t, unsigned int *, nvmlProcessInfo_vN_t *)`; `u8` stands
    // for the entry type only behind a pointer, which has the same ABI. The function
    // pointer is used only while `lib` (which keeps the library loaded) is borrowed.
    let found = unsafe { lib.__library.get::<ProcList<u8>>(symbol.as_bytes()) };
    found.map(|f| *f).map_err(|_| MISSING.to_owned())
}

/// `nvmlDeviceGetRunningProcessDetailList` in one mode.
fn process_detail_list(
    lib: &NvmlLib,
    dev: nvmlDevice_t,
    mode: c_uint,
    label: &str,
) -> Probe<'static> {
    let call = sym(&lib.nvmlDeviceGetRunningProcessDetailList).map(|f| -> Call<'static> {
        let mut room = Room::new();
        Box::new(move || {
            let mut list = b::nvmlProcessDetailList_t {
                version: struct_version::<b::nvmlProcessDetailList_t>(1),
                mode,
                numProcArrayEntries: ROOM_ENTRIES,
                procArray: room.ptr(),
            };
            // SAFETY: `f` writes at most `numProcArrayEntries` entries into `procArray`,
            // which has room for that many of 64 bytes (a v1 entry is 32); `dev` is a
            // live handle.
            unsafe { f(dev, &mut list) }
        })
    });
    Probe::new(
        format!("nvmlDeviceGetRunningProcessDetailList({label})"),
        call,
    )
}

/// `nvmlDeviceGetProcessUtilization` since time 0: every sample NVML holds, the most
/// work the call can do (gpupeekd passes its last seen timestamp).
fn process_utilization(lib: &NvmlLib, dev: nvmlDevice_t) -> Probe<'static> {
    let call = sym(&lib.nvmlDeviceGetProcessUtilization).map(|f| -> Call<'static> {
        let mut room = Room::new();
        Box::new(move || {
            let mut count = ROOM_ENTRIES;
            // SAFETY: `f` writes at most `count` samples into the buffer, which has room
            // for that many of 64 bytes (a sample is 32); `dev` is a live handle.
            unsafe { f(dev, room.ptr(), &mut count, 0) }
        })
    });
    Probe::new("nvmlDeviceGetProcessUtilization(since 0)", call)
}

/// `nvmlGpmQueryDeviceSupport`.
fn gpm_support(lib: &NvmlLib, dev: nvmlDevice_t) -> Probe<'static> {
    let call = sym(&lib.nvmlGpmQueryDeviceSupport).map(|f| -> Call<'static> {
        Box::new(move || {
            let mut support = b::nvmlGpmSupport_t {
                version: b::NVML_GPM_SUPPORT_VERSION,
                isSupportedDevice: 0,
            };
            // SAFETY: `f` writes one nvmlGpmSupport_t of the version set in it; `dev` is
            // a live handle.
            unsafe { f(dev, &mut support) }
        })
    });
    Probe::new("nvmlGpmQueryDeviceSupport", call)
}

/// A GPM sample NVML allocated, freed on drop.
struct GpmSample {
    handle: b::nvmlGpmSample_t,
    free: unsafe extern "C" fn(b::nvmlGpmSample_t) -> b::nvmlReturn_t,
}

impl GpmSample {
    /// The handle. (A method, so that a closure using it captures, and keeps, the whole
    /// sample: capturing the field alone would free the sample when the probe is built.)
    fn handle(&self) -> b::nvmlGpmSample_t {
        self.handle
    }
}

impl Drop for GpmSample {
    fn drop(&mut self) {
        // SAFETY: `handle` came from `nvmlGpmSampleAlloc` of the live session and is
        // freed only here, once.
        unsafe { (self.free)(self.handle) };
    }
}

/// `nvmlGpmSampleGet` into one sample allocated up front (the allocation is not timed).
fn gpm_sample(lib: &NvmlLib, dev: nvmlDevice_t) -> Probe<'static> {
    let name = "nvmlGpmSampleGet";
    let (get, alloc, free) = match (
        sym(&lib.nvmlGpmSampleGet),
        sym(&lib.nvmlGpmSampleAlloc),
        sym(&lib.nvmlGpmSampleFree),
    ) {
        (Ok(get), Ok(alloc), Ok(free)) => (get, alloc, free),
        _ => return Probe::new(name, Err(MISSING.to_owned())),
    };
    let mut handle: b::nvmlGpmSample_t = ptr::null_mut();
    // SAFETY: `alloc` writes one sample handle through the pointer.
    let code = unsafe { alloc(&mut handle) };
    if code != b::nvmlReturn_enum_NVML_SUCCESS {
        let reason = format!("{} (nvmlGpmSampleAlloc)", code_name(code));
        return Probe::new(name, Err(reason));
    }
    let sample = GpmSample { handle, free };
    let call: Call<'static> = Box::new(move || {
        // SAFETY: `sample.handle` is a live sample of this session (freed only when the
        // probe is dropped); `dev` is a live handle.
        unsafe { get(dev, sample.handle()) }
    });
    Probe::new(name, Ok(call))
}
