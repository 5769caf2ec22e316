//! The MIG calls nvml-latency times on a GPU: the mode, the device count and a device
//! handle (what gpupeekd asks on slow ticks and when it enumerates), and, when the GPU
//! has a MIG device at index 0, what gpupeekd asks of a MIG device: its instance id and
//! attributes when it enumerates, its memory every tick. On a GPU without MIG these
//! report `NOT_SUPPORTED` (or `INVALID_ARGUMENT` past the device count), which is a
//! figure too: what the one mode query costs a GPU that has no MIG.

use std::os::raw::c_uint;
use std::ptr;

use nvml_wrapper_sys::bindings::{nvmlDevice_t, NvmlLib};

use crate::call::{get, get_with, sym, Call, Probe};

/// The MIG probes of the GPU whose handle is `dev` (a handle of the live session).
pub fn probes(lib: &NvmlLib, dev: nvmlDevice_t) -> Vec<Probe<'_>> {
    let mode = sym(&lib.nvmlDeviceGetMigMode).map(|f| -> Call<'_> {
        let (mut current, mut pending): (c_uint, c_uint) = (0, 0);
        Box::new(move || {
            // SAFETY: `f` writes one unsigned int through each pointer; `dev` is live.
            unsafe { f(dev, &mut current, &mut pending) }
        })
    });
    let mut probes = vec![
        Probe::new("nvmlDeviceGetMigMode", mode),
        get(
            "nvmlDeviceGetMaxMigDeviceCount",
            &lib.nvmlDeviceGetMaxMigDeviceCount,
            dev,
        ),
        get_with(
            "nvmlDeviceGetMigDeviceHandleByIndex",
            "0",
            &lib.nvmlDeviceGetMigDeviceHandleByIndex,
            dev,
            0,
        ),
    ];
    let Some(mig) = first_mig_device(lib, dev) else {
        return probes;
    };
    probes.extend([
        crate::probes::memory_v2(lib, mig),
        get(
            "nvmlDeviceGetGpuInstanceId",
            &lib.nvmlDeviceGetGpuInstanceId,
            mig,
        ),
        get(
            "nvmlDeviceGetAttributes_v2",
            &lib.nvmlDeviceGetAttributes_v2,
            mig,
        ),
    ]);
    for probe in &mut probes[3..] {
        probe.name = format!("{} (MIG device 0)", probe.name);
    }
    probes
}

/// The handle of the GPU's MIG device at index 0, if it has one now.
fn first_mig_device(lib: &NvmlLib, dev: nvmlDevice_t) -> Option<nvmlDevice_t> {
    let f = sym(&lib.nvmlDeviceGetMigDeviceHandleByIndex).ok()?;
    let mut mig: nvmlDevice_t = ptr::null_mut();
    // SAFETY: `f` writes one handle through the pointer; `dev` is a live handle.
    let code = unsafe { f(dev, 0, &mut mig) };
    (code == 0 && !mig.is_null()).then_some(mig)
}
