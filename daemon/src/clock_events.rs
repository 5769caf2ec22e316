//! Clock event (throttle) reasons through the current NVML call, with a fallback.
//!
//! `nvmlDeviceGetCurrentClocksEventReasons` replaced the deprecated
//! `nvmlDeviceGetCurrentClocksThrottleReasons` in driver 535; nvml-wrapper only wraps the
//! old name. We call the new symbol directly when the library has it and fall back to the
//! old one otherwise, so both new and old drivers report the reasons.

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};

/// The current clock event reason bits of `device`.
pub fn current(nvml: &Nvml, device: &Device) -> Result<u64, NvmlError> {
    match nvml.lib().nvmlDeviceGetCurrentClocksEventReasons.as_ref() {
        Ok(get) => {
            let mut reasons = 0u64;
            // SAFETY: `get` was resolved from the loaded NVML library with the C signature
            // `nvmlReturn_t (nvmlDevice_t, unsigned long long *)`; the handle comes from the
            // same library session (kept alive by `nvml`, which outlives this call) and
            // `reasons` is a valid, writable u64 for the duration of the call.
            let code = unsafe { get(device.handle(), &mut reasons) };
            match nvml_try(code) {
                Err(NvmlError::FunctionNotFound) => legacy(device),
                other => other.map(|()| reasons),
            }
        }
        Err(_) => legacy(device),
    }
}

fn legacy(device: &Device) -> Result<u64, NvmlError> {
    #[allow(deprecated)]
    device
        .current_throttle_reasons()
        .map(|reasons| reasons.bits())
}
