//! Process lists and per-process utilisation, as each generation of the driver writes
//! them (see DESIGN.md, "Real drivers").
//!
//! Entry layouts, by the bytes one entry takes in the caller's array:
//!
//! | entry point                                   | entry                          | bytes |
//! |-----------------------------------------------|--------------------------------|-------|
//! | `nvmlDevice{Compute,Graphics}RunningProcesses` | pid, usedGpuMemory             | 16    |
//! | `…_v2`, and `…_v3` on most drivers            | + gpuInstanceId, computeInstanceId | 24 |
//! | `…_v3` on 535.43–535.86                       | + usedGpuCcProtectedMemory     | 32    |
//! | `nvmlDeviceGetRunningProcessDetailList`        | `nvmlProcessDetail_v1_t`       | 32    |
//!
//! Drivers 535.43 to 535.86 changed `nvmlProcessInfo_t` to the 32-byte layout without
//! a version bump, so a caller that sized its array for 24-byte entries has it overrun
//! ([`v3_entry_bytes`] is that rule, see nvitop PR #89). Which entry points a driver
//! exports at all is the library's symbol table: see [`crate::profiles`].
//!
//! Overruns are shown, not only committed: with `$FAKE_NVML_CHECK_HEAP_BUFFERS` set
//! (for callers whose arrays are `malloc` blocks, like gpupeekd's), every array write
//! is first compared with `malloc_usable_size` of the array; one that does not fit is
//! reported on stderr and counted in the calls file ([`crate::calls::record_overflow`]),
//! then written anyway, as the real driver would.
//!
//! On a MIG device handle every list holds only the processes of that MIG device; on the
//! parent it holds every process of every instance, with their instance ids. With MIG
//! on, the parent's per-process utilisation is `NOT_SUPPORTED`, as on real drivers.

// Function, parameter and (bindgen-made) type names are NVML's C names.
#![allow(non_snake_case)]

use std::os::raw::{c_uint, c_ulonglong};

use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlProcessDetailList_t, nvmlProcessDetail_v1_t, nvmlProcessInfo_t,
    nvmlProcessInfo_v1_t, nvmlProcessUtilizationSample_t, nvmlReturn_t,
};

use crate::codes::{
    ARGUMENT_VERSION_MISMATCH, INSUFFICIENT_SIZE, INVALID_ARGUMENT, NOT_FOUND, NOT_SUPPORTED,
    SUCCESS,
};
use crate::ffi::{device_call, target_call};
use crate::mig::Instance;
use crate::scenario::{Gpu, Process, ProcessType};
use crate::state;

/// Environment variable that turns on the array-size check (any value).
pub const CHECK_HEAP_BUFFERS_ENV: &str = "FAKE_NVML_CHECK_HEAP_BUFFERS";

/// `nvmlProcessDetailList_v1` from nvml.h: `NVML_STRUCT_VERSION(ProcessDetailList, 1)`.
pub const PROCESS_DETAIL_LIST_V1: c_uint =
    (std::mem::size_of::<nvmlProcessDetailList_t>() as c_uint) | (1 << 24);

/// A pid that no process can have (above Linux's `PID_MAX_LIMIT`, 2^22).
pub const NOT_A_PID: u32 = (1 << 22) + 1;

/// NVML's "no MIG instance".
const NO_INSTANCE: u32 = u32::MAX;

/// Bytes per entry that `nvmlDevice*RunningProcesses_v3` writes on driver `version`: 32
/// on 535.43 to 535.86 (the driver after them, 535.98, withdrew `_v3`; it came back with
/// 24-byte entries in 535.104), else 24.
pub fn v3_entry_bytes(version: Option<&str>) -> usize {
    let mut parts = version.unwrap_or("").split('.').map(str::parse::<u32>);
    match (parts.next(), parts.next()) {
        (Some(Ok(535)), Some(Ok(minor))) if (43..98).contains(&minor) => 32,
        _ => 24,
    }
}

/// One entry of `bytes` bytes (16, 24 or 32) in the driver's layout.
fn entry(p: &Process, bytes: usize) -> Vec<u8> {
    let mut e = vec![0u8; bytes];
    e[0..4].copy_from_slice(&p.pid.to_ne_bytes());
    let memory = p.used_gpu_memory_bytes.unwrap_or(u64::MAX);
    e[8..16].copy_from_slice(&memory.to_ne_bytes());
    if bytes >= 24 {
        let gi = p.gpu_instance_id.unwrap_or(NO_INSTANCE);
        let ci = p.compute_instance_id.unwrap_or(NO_INSTANCE);
        e[16..20].copy_from_slice(&gi.to_ne_bytes());
        e[20..24].copy_from_slice(&ci.to_ne_bytes());
    }
    e
}

/// The GPU's processes that a list of `graphics` (or compute) processes holds: on a MIG
/// device handle, only those in that device.
fn listed<'a>(
    g: &'a Gpu,
    graphics: bool,
    mig: Option<&'a Instance>,
) -> impl Iterator<Item = &'a Process> {
    g.processes
        .iter()
        .filter(move |p| match p.kind {
            ProcessType::Compute => !graphics,
            ProcessType::Graphics => graphics,
            ProcessType::Both => true,
        })
        .filter(move |p| {
            mig.is_none_or(|m| {
                p.gpu_instance_id == Some(m.gpu_instance_id)
                    && p.compute_instance_id == Some(m.compute_instance_id)
            })
        })
}

/// Copies `bytes` to `dst` after checking (when enabled) that they fit the caller's
/// block, reporting `name`'s overrun if not.
///
/// # Safety
///
/// `dst` must be the start of a `malloc` block when the check is on, and the caller
/// promised room for `bytes` there (a promise this checks, not one it can rely on).
unsafe fn write_array(name: &'static str, dst: *mut u8, bytes: &[u8]) {
    if std::env::var_os(CHECK_HEAP_BUFFERS_ENV).is_some() {
        // SAFETY: with the check on, `dst` is a live `malloc` block (this function's
        // contract).
        let room = unsafe { libc::malloc_usable_size(dst.cast()) };
        if room < bytes.len() {
            eprintln!(
                "fake-nvml: {name} OVERFLOW: writing {} bytes into a {room}-byte buffer",
                bytes.len()
            );
            crate::calls::record_overflow();
        }
    }
    // SAFETY: the caller's promise; an overrun here is the real driver's behaviour.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
}

/// The `nvmlDevice*RunningProcesses*` protocol: too small a `*infoCount` gets the needed
/// count and `INSUFFICIENT_SIZE`; else the entries, `bytes` each, at `infos`.
///
/// # Safety
///
/// `infoCount` null or valid for a `c_uint`; `infos` null or the caller's array.
unsafe fn processes(
    name: &'static str,
    g: &Gpu,
    mig: Option<&Instance>,
    graphics: bool,
    bytes: usize,
    infoCount: *mut c_uint,
    infos: *mut u8,
) -> nvmlReturn_t {
    if infoCount.is_null() {
        return INVALID_ARGUMENT;
    }
    let list: Vec<u8> = listed(g, graphics, mig)
        .flat_map(|p| entry(p, bytes))
        .collect();
    let needed = c_uint::try_from(list.len() / bytes).unwrap_or(c_uint::MAX);
    // SAFETY: `infoCount` is non-null and valid per this function's contract.
    let room = unsafe { infoCount.read_unaligned() };
    // SAFETY: as above.
    unsafe { infoCount.write_unaligned(needed) };
    if room < needed {
        return INSUFFICIENT_SIZE;
    }
    if needed > 0 {
        if infos.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: the caller said `infos` holds `room >= needed` entries.
        unsafe { write_array(name, infos, &list) };
    }
    SUCCESS
}

/// Defines one exported process-list getter: its C name, entry type, list, and
/// entry size (a function of the scenario's driver version).
macro_rules! process_list {
    ($(#[$doc:meta])* $name:ident, $entry:ty, graphics = $graphics:expr, $bytes:expr) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            device: nvmlDevice_t,
            infoCount: *mut c_uint,
            infos: *mut $entry,
        ) -> nvmlReturn_t {
            let version = state::refresh().scenario.and_then(|s| s.driver_version.clone());
            let bytes: fn(Option<&str>) -> usize = $bytes;
            let bytes = bytes(version.as_deref());
            target_call(stringify!($name), device, |g, _, mig| {
                let (name, infos) = (stringify!($name), infos.cast());
                // SAFETY: the caller follows the NVML contract for these pointers.
                unsafe { processes(name, g, mig, $graphics, bytes, infoCount, infos) }
            })
        }
    };
}

process_list!(
    /// `nvmlDeviceGetComputeRunningProcesses(device, infoCount, infos)`: 16-byte entries.
    nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t, graphics = false, |_| 16
);
process_list!(
    /// `nvmlDeviceGetGraphicsRunningProcesses(device, infoCount, infos)`: 16-byte entries.
    nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t, graphics = true, |_| 16
);
process_list!(
    /// `nvmlDeviceGetComputeRunningProcesses_v2(device, infoCount, infos)`: 24-byte entries.
    nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_t, graphics = false, |_| 24
);
process_list!(
    /// `nvmlDeviceGetGraphicsRunningProcesses_v2(device, infoCount, infos)`: 24-byte entries.
    nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_t, graphics = true, |_| 24
);
process_list!(
    /// `nvmlDeviceGetComputeRunningProcesses_v3(device, infoCount, infos)`: entries of
    /// [`v3_entry_bytes`].
    nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_t, graphics = false,
    v3_entry_bytes
);
process_list!(
    /// `nvmlDeviceGetGraphicsRunningProcesses_v3(device, infoCount, infos)`: entries of
    /// [`v3_entry_bytes`].
    nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_t, graphics = true,
    v3_entry_bytes
);

/// `nvmlDeviceGetRunningProcessDetailList(device, plist)`: `plist->version` must be
/// [`PROCESS_DETAIL_LIST_V1`]; `mode` 0 is compute, 1 graphics, 2 MPS (none here).
/// Too small a `numProcArrayEntries` gets the needed count and `INSUFFICIENT_SIZE`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRunningProcessDetailList(
    device: nvmlDevice_t,
    plist: *mut nvmlProcessDetailList_t,
) -> nvmlReturn_t {
    const NAME: &str = "nvmlDeviceGetRunningProcessDetailList";
    target_call(NAME, device, |g, _, mig| {
        if plist.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: `plist` is non-null and the caller passes an `nvmlProcessDetailList_t`.
        let mut list = unsafe { plist.read_unaligned() };
        if list.version != PROCESS_DETAIL_LIST_V1 {
            return ARGUMENT_VERSION_MISMATCH;
        }
        let entries: Vec<u8> = match list.mode {
            0 | 1 => listed(g, list.mode == 1, mig)
                .flat_map(|p| {
                    let mut e = entry(p, size_of::<nvmlProcessDetail_v1_t>());
                    e[24..32].copy_from_slice(&0u64.to_ne_bytes());
                    e
                })
                .collect(),
            2 => Vec::new(),
            _ => return INVALID_ARGUMENT,
        };
        let needed = entries.len() / size_of::<nvmlProcessDetail_v1_t>();
        let needed = c_uint::try_from(needed).unwrap_or(c_uint::MAX);
        let room = list.numProcArrayEntries;
        list.numProcArrayEntries = needed;
        let code = if room < needed {
            INSUFFICIENT_SIZE
        } else if needed > 0 && list.procArray.is_null() {
            INVALID_ARGUMENT
        } else {
            if needed > 0 {
                // SAFETY: the caller said `procArray` holds `room >= needed` entries.
                unsafe { write_array(NAME, list.procArray.cast(), &entries) };
            }
            SUCCESS
        };
        // SAFETY: as above.
        unsafe { plist.write_unaligned(list) };
        code
    })
}

/// How the fake driver samples per-process utilisation: every [`UTIL_SAMPLE_US`] while a
/// process is active (non-zero utilisation in the scenario), keeping the samples of the
/// last [`UTIL_BUFFER_US`] like the real driver's buffer.
const UTIL_SAMPLE_US: u64 = 100_000;
const UTIL_BUFFER_US: u64 = 60_000_000;

/// Buffered samples by (GPU index, pid).
static UTIL_BUFFER: std::sync::Mutex<
    std::collections::BTreeMap<(u32, u32), Vec<nvmlProcessUtilizationSample_t>>,
> = std::sync::Mutex::new(std::collections::BTreeMap::new());

fn sample(
    pid: u32,
    timeStamp: u64,
    [sm, mem, enc, dec]: [u32; 4],
) -> nvmlProcessUtilizationSample_t {
    nvmlProcessUtilizationSample_t {
        pid,
        timeStamp,
        smUtil: sm,
        memUtil: mem,
        encUtil: enc,
        decUtil: dec,
    }
}

/// Utilisation values the junk samples carry: over 100, and a mark for "too old".
pub const JUNK_OVER_100: [u32; 4] = [150, 7, 250, 0];
/// The values of junk samples that are not newer than `lastSeenTimeStamp`.
pub const JUNK_OLD: [u32; 4] = [66, 66, 66, 66];
/// The values of junk samples for [`NOT_A_PID`].
pub const JUNK_NO_PROCESS: [u32; 4] = [42, 42, 42, 42];

/// The junk a driver can hand out besides real samples (scenario `junk_process_samples`):
/// a sample for a pid that is not running, and for each listed process one with values
/// over 100 at the current timestamp and one no newer than `last_seen`.
fn junk(g: &Gpu, stamp: u64, last_seen: u64) -> Vec<nvmlProcessUtilizationSample_t> {
    let mut junk = vec![sample(NOT_A_PID, stamp, JUNK_NO_PROCESS)];
    for p in &g.processes {
        junk.push(sample(p.pid, stamp, JUNK_OVER_100));
        junk.push(sample(p.pid, last_seen, JUNK_OLD));
    }
    junk
}

/// `nvmlDeviceGetProcessUtilization(device, utilization, processSamplesCount,
/// lastSeenTimeStamp)`: the buffered samples newer than `lastSeenTimeStamp` (µs since the
/// epoch). An active process gets a new sample every 100 ms; one that went idle keeps
/// its old samples in the buffer, so a caller that does not pass the last timestamp it
/// saw keeps seeing stale figures, as with the real driver. None newer is `NOT_FOUND`. A
/// null or too small buffer gets the count and `INSUFFICIENT_SIZE`. With the GPU's
/// `junk_process_samples`, junk follows the real samples (see [`junk`]).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    device: nvmlDevice_t,
    utilization: *mut nvmlProcessUtilizationSample_t,
    processSamplesCount: *mut c_uint,
    lastSeenTimeStamp: c_ulonglong,
) -> nvmlReturn_t {
    const NAME: &str = "nvmlDeviceGetProcessUtilization";
    device_call(NAME, device, |g, index| {
        if processSamplesCount.is_null() {
            return INVALID_ARGUMENT;
        }
        if g.mig_on() {
            return NOT_SUPPORTED;
        }
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let stamp = now_us - now_us % UTIL_SAMPLE_US;
        let mut buffer = UTIL_BUFFER.lock().unwrap_or_else(|p| p.into_inner());
        for p in &g.processes {
            let Some(util) = p.utilization_pct.filter(|u| u.iter().any(|&v| v > 0)) else {
                continue;
            };
            let samples = buffer.entry((index, p.pid)).or_default();
            if samples.last().is_none_or(|s| s.timeStamp < stamp) {
                samples.push(sample(p.pid, stamp, util));
            }
        }
        for samples in buffer.values_mut() {
            samples.retain(|s| s.timeStamp + UTIL_BUFFER_US > now_us);
        }
        let mut samples: Vec<nvmlProcessUtilizationSample_t> = buffer
            .range((index, 0)..=(index, u32::MAX))
            .flat_map(|(_, samples)| samples.iter().copied())
            .filter(|s| s.timeStamp > lastSeenTimeStamp)
            .collect();
        drop(buffer);
        if g.junk_process_samples {
            samples.extend(junk(g, stamp, lastSeenTimeStamp));
        }
        if samples.is_empty() {
            return NOT_FOUND;
        }
        let needed = c_uint::try_from(samples.len()).unwrap_or(c_uint::MAX);
        // SAFETY: `processSamplesCount` is non-null and, per the NVML contract, valid.
        let room = unsafe { processSamplesCount.read_unaligned() };
        // SAFETY: as above.
        unsafe { processSamplesCount.write_unaligned(needed) };
        if utilization.is_null() || room < needed {
            return INSUFFICIENT_SIZE;
        }
        let bytes: Vec<u8> = samples
            .iter()
            .flat_map(|s| {
                // SAFETY: a plain C struct of integers, viewed as its bytes.
                let raw = unsafe {
                    std::slice::from_raw_parts(
                        (s as *const nvmlProcessUtilizationSample_t).cast::<u8>(),
                        size_of::<nvmlProcessUtilizationSample_t>(),
                    )
                };
                raw.to_vec()
            })
            .collect();
        // SAFETY: the caller said `utilization` holds `room >= needed` samples.
        unsafe { write_array(NAME, utilization.cast(), &bytes) };
        SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_535_43_to_535_86_write_32_byte_v3_entries() {
        for (version, bytes) in [
            ("535.43.02", 32),
            ("535.54.03", 32),
            ("535.86.10", 32),
            ("535.98", 24),
            ("535.104.05", 24),
            ("530.41.03", 24),
            ("550.54.15", 24),
        ] {
            assert_eq!(v3_entry_bytes(Some(version)), bytes, "{version}");
        }
        assert_eq!(v3_entry_bytes(None), 24);
    }

    #[test]
    fn entries_have_the_c_layouts() {
        assert_eq!(size_of::<nvmlProcessInfo_v1_t>(), 16);
        assert_eq!(size_of::<nvmlProcessInfo_t>(), 24);
        assert_eq!(size_of::<nvmlProcessDetail_v1_t>(), 32);
        let p = Process {
            pid: 7,
            used_gpu_memory_bytes: Some(9),
            kind: ProcessType::Compute,
            gpu_instance_id: Some(1),
            compute_instance_id: None,
            utilization_pct: None,
        };
        let e = entry(&p, 24);
        // SAFETY: 24 bytes are one `nvmlProcessInfo_t`.
        let info = unsafe { e.as_ptr().cast::<nvmlProcessInfo_t>().read_unaligned() };
        assert_eq!((info.pid, info.usedGpuMemory), (7, 9));
        assert_eq!((info.gpuInstanceId, info.computeInstanceId), (1, u32::MAX));
    }
}
