//! Exported library- and system-level functions: init/shutdown, error
//! strings, versions, device enumeration.

// Function and parameter names are NVML's C names.
#![allow(non_snake_case)]

use std::os::raw::{c_char, c_int, c_uint};

use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlReturn_t};

use crate::codes::{message, INVALID_ARGUMENT, SUCCESS, UNINITIALIZED, UNKNOWN};
use crate::ffi::{
    encode_handle, guarded, note_if_suspended, put, put_str, simulate_latency, system_call,
};
use crate::state;

/// Shared body of the two init functions: needs a valid scenario file right
/// now, honours `init_error`, and takes one reference on success.
fn init(name: &'static str) -> nvmlReturn_t {
    guarded(name, UNKNOWN, || {
        let snap = state::refresh();
        let scenario = match (snap.current_error, snap.scenario) {
            (None, Some(scenario)) => scenario,
            (error, _) => {
                let why = error.unwrap_or_else(|| "no scenario loaded".to_owned());
                eprintln!("fake-nvml: {name} failed: {why}");
                return UNKNOWN;
            }
        };
        simulate_latency(&scenario, name);
        crate::ffi::hang_while_listed(name, None);
        if let Some(code) = scenario.init_error {
            return code.0;
        }
        state::add_ref();
        SUCCESS
    })
}

/// `nvmlInit_v2()`.
#[no_mangle]
pub unsafe extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    init("nvmlInit_v2")
}

/// `nvmlInitWithFlags(flags)`; the flags are ignored.
#[no_mangle]
pub unsafe extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    init("nvmlInitWithFlags")
}

/// `nvmlShutdown()`: drops one init reference.
#[no_mangle]
pub unsafe extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    system_call("nvmlShutdown", |_| {
        if state::release() {
            SUCCESS
        } else {
            UNINITIALIZED
        }
    })
}

/// `nvmlErrorString(result)`: a static message; works without init.
#[no_mangle]
pub unsafe extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    let fallback = message(UNKNOWN).as_ptr();
    guarded("nvmlErrorString", fallback, || {
        if let Some(scenario) = state::refresh().scenario {
            simulate_latency(&scenario, "nvmlErrorString");
        }
        message(result).as_ptr()
    })
}

/// `nvmlSystemGetDriverVersion(version, length)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    system_call("nvmlSystemGetDriverVersion", |s| {
        // SAFETY: the caller passes a buffer of `length` bytes (or null).
        unsafe { put_str(version, length, s.driver_version.as_deref()) }
    })
}

/// `nvmlSystemGetNVMLVersion(version, length)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    system_call("nvmlSystemGetNVMLVersion", |s| {
        // SAFETY: the caller passes a buffer of `length` bytes (or null).
        unsafe { put_str(version, length, s.nvml_version.as_deref()) }
    })
}

/// `nvmlSystemGetCudaDriverVersion(cudaDriverVersion)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(
    cudaDriverVersion: *mut c_int,
) -> nvmlReturn_t {
    system_call("nvmlSystemGetCudaDriverVersion", |s| {
        // SAFETY: the caller passes a pointer to a `c_int` (or null).
        unsafe { put(cudaDriverVersion, s.cuda_driver_version) }
    })
}

/// `nvmlSystemGetCudaDriverVersion_v2(cudaDriverVersion)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(
    cudaDriverVersion: *mut c_int,
) -> nvmlReturn_t {
    system_call("nvmlSystemGetCudaDriverVersion_v2", |s| {
        // SAFETY: the caller passes a pointer to a `c_int` (or null).
        unsafe { put(cudaDriverVersion, s.cuda_driver_version) }
    })
}

/// `nvmlDeviceGetCount_v2(deviceCount)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(deviceCount: *mut c_uint) -> nvmlReturn_t {
    system_call("nvmlDeviceGetCount_v2", |s| {
        let count = c_uint::try_from(s.gpus.len()).unwrap_or(c_uint::MAX);
        // SAFETY: the caller passes a pointer to a `c_uint` (or null).
        unsafe { put(deviceCount, Some(count)) }
    })
}

/// `nvmlDeviceGetHandleByIndex_v2(index, device)`. A GPU's `errors` entry
/// for this exact name applies; its `"*"` entry does not.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    const NAME: &str = "nvmlDeviceGetHandleByIndex_v2";
    system_call(NAME, |s| {
        let Some(gpu) = usize::try_from(index).ok().and_then(|i| s.gpus.get(i)) else {
            return INVALID_ARGUMENT;
        };
        note_if_suspended(gpu);
        if let Some(code) = gpu.errors.get(NAME) {
            return code.0;
        }
        // SAFETY: the caller passes a pointer to an `nvmlDevice_t` (or null).
        unsafe { put(device, Some(encode_handle(index))) }
    })
}
