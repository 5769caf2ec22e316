//! Exported GPM (GPU Performance Monitoring) functions, with NVML's struct layouts.
//!
//! A GPU supports GPM when its scenario has a `gpm` object, a MIG GPU instance when its
//! instance has one (`nvmlGpmMigSampleGet`). Samples are opaque handles
//! (an id as a pointer, never dereferenced) into a process-wide table, so a double free
//! or a stale handle is an `INVALID_ARGUMENT`, not a crash. `nvmlGpmSampleGet` records
//! the GPU, the time and the scenario's `gpm` values; `nvmlGpmMetricsGet` checks that
//! both samples are filled, come from the same GPU, in order, at least 100 ms apart
//! (else `INVALID_ARGUMENT`), and reports each asked metric from the values in force at
//! the second sample (a value absent from the scenario is that metric's
//! `NOT_SUPPORTED`). Rates are in MiB/s like NVML's.

// Function, parameter and (bindgen-made) constant names are NVML's C names.
#![allow(non_snake_case, non_upper_case_globals)]

use std::collections::BTreeMap;
use std::os::raw::c_uint;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nvml_wrapper_sys::bindings::*;

use crate::codes::{ARGUMENT_VERSION_MISMATCH, INVALID_ARGUMENT, NOT_SUPPORTED, SUCCESS};
use crate::ffi::{device_call, put, system_call};
use crate::scenario::Gpm;

/// The shortest window real NVML computes metrics over.
const MIN_WINDOW: Duration = Duration::from_millis(100);

/// What a sample holds once `nvmlGpmSampleGet` filled it.
#[derive(Debug, Clone)]
struct Taken {
    gpu: u32,
    /// The GPU instance of a `nvmlGpmMigSampleGet` sample.
    gpu_instance: Option<u32>,
    at: Instant,
    values: Gpm,
}

/// Live samples by id; `None` until filled.
static SAMPLES: Mutex<(usize, BTreeMap<usize, Option<Taken>>)> = Mutex::new((0, BTreeMap::new()));

fn samples() -> std::sync::MutexGuard<'static, (usize, BTreeMap<usize, Option<Taken>>)> {
    SAMPLES.lock().unwrap_or_else(|p| p.into_inner())
}

fn id(sample: nvmlGpmSample_t) -> usize {
    sample as usize
}

/// `nvmlGpmQueryDeviceSupport(device, gpmSupport)`; `version` must be 1.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmQueryDeviceSupport(
    device: nvmlDevice_t,
    gpmSupport: *mut nvmlGpmSupport_t,
) -> nvmlReturn_t {
    device_call("nvmlGpmQueryDeviceSupport", device, |g, _| {
        if gpmSupport.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: non-null, and the caller passes a pointer to an `nvmlGpmSupport_t`.
        let version = unsafe { std::ptr::addr_of!((*gpmSupport).version).read_unaligned() };
        if version != NVML_GPM_SUPPORT_VERSION {
            return ARGUMENT_VERSION_MISMATCH;
        }
        let value = nvmlGpmSupport_t {
            version,
            isSupportedDevice: u32::from(g.gpm.is_some()),
        };
        // SAFETY: as above.
        unsafe { put(gpmSupport, Some(value)) }
    })
}

/// `nvmlGpmSampleAlloc(gpmSample)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSampleAlloc(gpmSample: *mut nvmlGpmSample_t) -> nvmlReturn_t {
    system_call("nvmlGpmSampleAlloc", |_| {
        if gpmSample.is_null() {
            return INVALID_ARGUMENT;
        }
        let mut table = samples();
        table.0 += 1;
        let new = table.0;
        table.1.insert(new, None);
        // SAFETY: non-null, and the caller passes a pointer to an `nvmlGpmSample_t`.
        unsafe { put(gpmSample, Some(new as nvmlGpmSample_t)) }
    })
}

/// `nvmlGpmSampleFree(gpmSample)`; a handle not allocated (or already freed) is invalid.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSampleFree(gpmSample: nvmlGpmSample_t) -> nvmlReturn_t {
    system_call("nvmlGpmSampleFree", |_| {
        match samples().1.remove(&id(gpmSample)) {
            Some(_) => SUCCESS,
            None => INVALID_ARGUMENT,
        }
    })
}

/// `nvmlGpmSampleGet(device, gpmSample)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSampleGet(
    device: nvmlDevice_t,
    gpmSample: nvmlGpmSample_t,
) -> nvmlReturn_t {
    device_call("nvmlGpmSampleGet", device, |g, index| {
        let mut table = samples();
        let Some(slot) = table.1.get_mut(&id(gpmSample)) else {
            return INVALID_ARGUMENT;
        };
        let Some(values) = g.gpm.clone() else {
            return NOT_SUPPORTED;
        };
        *slot = Some(Taken {
            gpu: index,
            gpu_instance: None,
            at: Instant::now(),
            values,
        });
        SUCCESS
    })
}

/// `nvmlGpmMigSampleGet(device, gpuInstanceId, gpmSample)`: a sample of one GPU instance
/// of the parent `device`, from that instance's `gpm` values (absent: `NOT_SUPPORTED`);
/// an id no GPU instance has (or MIG off) is `INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmMigSampleGet(
    device: nvmlDevice_t,
    gpuInstanceId: c_uint,
    gpmSample: nvmlGpmSample_t,
) -> nvmlReturn_t {
    device_call("nvmlGpmMigSampleGet", device, |g, index| {
        let mut table = samples();
        let Some(slot) = table.1.get_mut(&id(gpmSample)) else {
            return INVALID_ARGUMENT;
        };
        let instance = g.mig.as_ref().filter(|m| m.enabled).and_then(|m| {
            m.instances
                .iter()
                .find(|i| i.gpu_instance_id == gpuInstanceId)
        });
        let Some(instance) = instance else {
            return INVALID_ARGUMENT;
        };
        let Some(values) = instance.gpm.clone() else {
            return NOT_SUPPORTED;
        };
        *slot = Some(Taken {
            gpu: index,
            gpu_instance: Some(gpuInstanceId),
            at: Instant::now(),
            values,
        });
        SUCCESS
    })
}

/// The scenario value for NVML metric `metric_id`, if the scenario has one.
fn metric(values: &Gpm, metric_id: u32) -> Option<f64> {
    match metric_id {
        nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_UTIL => values.sm_activity_pct,
        nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_OCCUPANCY => values.sm_occupancy_pct,
        nvmlGpmMetricId_t_NVML_GPM_METRIC_ANY_TENSOR_UTIL => values.tensor_activity_pct,
        nvmlGpmMetricId_t_NVML_GPM_METRIC_DRAM_BW_UTIL => values.dram_bw_util_pct,
        nvmlGpmMetricId_t_NVML_GPM_METRIC_PCIE_TX_PER_SEC => values.pcie_tx_mib_per_s,
        nvmlGpmMetricId_t_NVML_GPM_METRIC_PCIE_RX_PER_SEC => values.pcie_rx_mib_per_s,
        nvmlGpmMetricId_t_NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC => values.nvlink_tx_mib_per_s,
        nvmlGpmMetricId_t_NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC => values.nvlink_rx_mib_per_s,
        _ => None,
    }
}

/// `nvmlGpmMetricsGet(metricsGet)`: see the module header for what is checked.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmMetricsGet(metricsGet: *mut nvmlGpmMetricsGet_t) -> nvmlReturn_t {
    system_call("nvmlGpmMetricsGet", |_| {
        if metricsGet.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: non-null, and the caller passes a pointer to a valid, writable
        // `nvmlGpmMetricsGet_t` that nothing else touches during the call.
        let request = unsafe { &mut *metricsGet };
        if request.version != NVML_GPM_METRICS_GET_VERSION {
            return ARGUMENT_VERSION_MISMATCH;
        }
        let count = request.numMetrics as usize;
        if count > request.metrics.len() {
            return INVALID_ARGUMENT;
        }
        let table = samples();
        let taken = |s| table.1.get(&id(s)).cloned().flatten();
        let (Some(first), Some(second)) = (taken(request.sample1), taken(request.sample2)) else {
            return INVALID_ARGUMENT;
        };
        let apart = second.at.checked_duration_since(first.at);
        let same = first.gpu == second.gpu && first.gpu_instance == second.gpu_instance;
        if !same || apart.is_none_or(|d| d < MIN_WINDOW) {
            return INVALID_ARGUMENT;
        }
        for m in &mut request.metrics[..count] {
            let (code, value) = match metric(&second.values, m.metricId) {
                Some(value) => (SUCCESS, value),
                None => (NOT_SUPPORTED, 0.0),
            };
            m.nvmlReturn = code;
            m.value = value;
            m.metricInfo.shortName = std::ptr::null_mut();
            m.metricInfo.longName = std::ptr::null_mut();
            m.metricInfo.unit = std::ptr::null_mut();
        }
        SUCCESS
    })
}
