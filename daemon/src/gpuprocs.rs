//! The processes on one GPU as NVML lists them, with their utilisation, read into
//! buffers kept across ticks: once the buffers have grown to fit, a slow tick allocates
//! nothing (nvml-wrapper's own functions return a fresh `Vec` on every call).
//!
//! Real drivers differ in how they list processes (DESIGN.md, "Real drivers"), so the
//! entry point and the bytes per entry it writes are resolved once per NVML session
//! ([`Buffers::resolve`]), the newest the driver has:
//!
//! | entry point                                    | drivers              | entry bytes |
//! |------------------------------------------------|----------------------|-------------|
//! | `nvmlDeviceGetRunningProcessDetailList`         | 550 and later        | 32          |
//! | `nvmlDevice{Compute,Graphics}RunningProcesses_v3` | 510 and later, not 535.98 | 24, but 32 on 535.43–535.86 |
//! | `…_v2`                                         | 470 and later        | 24          |
//! | `nvmlDevice{Compute,Graphics}RunningProcesses`  | all (R450: only this) | 16         |
//!
//! Drivers 535.43 to 535.86 (CUDA 12.2) write 32-byte entries through `_v3`, with an
//! extra `usedGpuCcProtectedMemory`, without a version bump; 535.98 withdrew `_v3`, and
//! 535.104 brought it back with 24-byte entries. The rule keyed on the driver version
//! (`entry_points::v3_entry_bytes`) is the one nvitop arrived at (XuehaiPan/nvitop PRs #79, #89 and
//! #94, `__determine_get_running_processes_version_suffix` in `nvitop/api/libnvml.py`;
//! also NVIDIA/go-nvml issue 60 and pytorch issue 95555). Where the version cannot be
//! read `_v3` is not used when `_v2` is there.
//!
//! Buffers are sized in bytes from the count NVML reports times the entry size the
//! driver really writes; entries are decoded by that stride. A list is fetched into the
//! buffer (the first call ever only asks for the count); a list that grew between the
//! count and the fetch is asked for once more, with room to spare, then given up for
//! this tick. Each call passes a handle from the live session.

use std::os::raw::c_uint;
use std::ptr;

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{self, nvmlProcessUtilizationSample_t, nvmlReturn_t};

use gpupeek_shm::layout::{gpu_valid as v, proc_kind};

use crate::reads::Fill;

mod entry_points;

use entry_points::{choose, list_call, Api};

/// NVML's "not available" for a process's GPU memory.
const MEMORY_NOT_AVAILABLE: u64 = u64::MAX;
/// NVML's "none" for a MIG instance id.
const NO_INSTANCE: u32 = u32::MAX;
const SUCCESS: nvmlReturn_t = bindings::nvmlReturn_enum_NVML_SUCCESS;
const INSUFFICIENT_SIZE: nvmlReturn_t = bindings::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
const NOT_FOUND: nvmlReturn_t = bindings::nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
/// Entries added beyond the count NVML gave, for processes that start in between.
const HEADROOM: usize = 8;
/// More entries than this in one list is a driver's nonsense, not a buffer to allocate.
const MAX_ENTRIES: usize = 1 << 20;
/// A process as NVML listed it, before `/proc` resolution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuProcess {
    /// NVML index of its GPU.
    pub gpu_index: u32,
    /// Host pid.
    pub pid: u32,
    /// Bits from `proc_kind`.
    pub kind: u32,
    /// GPU memory in bytes, when NVML knows it.
    pub gpu_mem_bytes: Option<u64>,
    /// MIG GPU instance id.
    pub gpu_instance_id: Option<u32>,
    /// MIG compute instance id.
    pub compute_instance_id: Option<u32>,
    /// SM, memory, encoder and decoder utilisation by this process, percent.
    pub util_pct: Option<[u32; 4]>,
}

/// The entry point resolved for this session and the buffers NVML's lists are read
/// into, kept for the whole NVML session.
#[derive(Clone)]
pub struct Buffers {
    /// The entry point and its entry size in bytes; `None`: the driver has none.
    api: Option<(Api, usize)>,
    /// Raw entries (8-byte aligned); its length is the room given to NVML.
    list: Vec<u64>,
    samples: Vec<nvmlProcessUtilizationSample_t>,
}

impl Buffers {
    /// Resolves which process-list entry point the driver of `nvml` has, and the
    /// entry size it writes, and logs the choice.
    pub fn resolve(nvml: &Nvml) -> Self {
        let lib = nvml.lib();
        let has = |api| match api {
            Api::DetailList => lib.nvmlDeviceGetRunningProcessDetailList.is_ok(),
            Api::V3 => {
                lib.nvmlDeviceGetComputeRunningProcesses_v3.is_ok()
                    && lib.nvmlDeviceGetGraphicsRunningProcesses_v3.is_ok()
            }
            Api::V2 => {
                lib.nvmlDeviceGetComputeRunningProcesses_v2.is_ok()
                    && lib.nvmlDeviceGetGraphicsRunningProcesses_v2.is_ok()
            }
            Api::V1 => {
                lib.nvmlDeviceGetComputeRunningProcesses.is_ok()
                    && lib.nvmlDeviceGetGraphicsRunningProcesses.is_ok()
            }
        };
        let version = nvml.sys_driver_version().ok();
        let api = choose(has, version.as_deref());
        let driver = version.as_deref().unwrap_or("of unknown version");
        match api {
            Some((api, bytes)) => log::info!(
                "process lists: {} ({bytes}-byte entries; driver {driver})",
                api.name()
            ),
            None => log::warn!("process lists: the NVML library (driver {driver}) has none"),
        }
        Buffers {
            api,
            list: Vec::new(),
            samples: Vec::new(),
        }
    }
}

/// Appends GPU `gpu_index`'s processes to `out`, merging the compute and graphics lists
/// (a pid in both is one process of both kinds), then their utilisation since `seen`;
/// with no `seen` (a GPU in MIG mode, whose driver has no per-process utilisation), none.
pub fn sample(
    nvml: &Nvml,
    d: &Device,
    f: &mut Fill,
    gpu_index: u32,
    seen: Option<&mut u64>,
    bufs: &mut Buffers,
    out: &mut Vec<GpuProcess>,
) {
    let Some((api, stride)) = bufs.api else {
        return;
    };
    let first = out.len();
    let mut listed = false;
    for kind in [proc_kind::COMPUTE, proc_kind::GRAPHICS] {
        let list = &mut bufs.list;
        let fetched = f.call(|| {
            fetch(list, stride, |buf, count| {
                list_call(nvml, d, api, kind, buf, count)
            })
        });
        if let Some(entries) = fetched {
            listed = true;
            add(&bufs.list, stride, entries, kind, gpu_index, out, first);
        }
    }
    if !listed {
        return;
    }
    f.rec.process_count = (out.len() - first) as u32;
    f.rec.valid |= v::PROCESSES;
    if let Some(seen) = seen.filter(|_| out.len() > first) {
        utilisation(nvml, d, f, seen, &mut bufs.samples, &mut out[first..]);
    }
}

/// The `i`th entry of `stride` bytes in `list`: pid, memory, and (entries of 24 bytes
/// or more) the MIG instance ids. All layouts share these offsets.
fn entry(list: &[u64], stride: usize, i: usize) -> (u32, u64, Option<(u32, u32)>) {
    let bytes = as_bytes(list);
    let e = &bytes[i * stride..(i + 1) * stride];
    let u32_at = |at: usize| u32::from_ne_bytes([e[at], e[at + 1], e[at + 2], e[at + 3]]);
    let u64_at = |at: usize| u64::from(u32_at(at)) | (u64::from(u32_at(at + 4)) << 32);
    let pid = u32_at(0);
    let memory = u64_at(8);
    let ids = (stride >= 24).then(|| (u32_at(16), u32_at(20)));
    (pid, memory, ids)
}

/// Adds the `n` entries in `list` to `out[first..]`, or `kind` to those already there.
fn add(
    list: &[u64],
    stride: usize,
    n: usize,
    kind: u32,
    gpu_index: u32,
    out: &mut Vec<GpuProcess>,
    first: usize,
) {
    for i in 0..n {
        let (pid, memory, ids) = entry(list, stride, i);
        let mem = Some(memory).filter(|&bytes| bytes != MEMORY_NOT_AVAILABLE);
        if let Some(existing) = out[first..].iter_mut().find(|e| e.pid == pid) {
            existing.kind |= kind;
            existing.gpu_mem_bytes = existing.gpu_mem_bytes.max(mem);
            continue;
        }
        let instance = |id: u32| Some(id).filter(|&id| id != NO_INSTANCE);
        out.push(GpuProcess {
            gpu_index,
            pid,
            kind,
            gpu_mem_bytes: mem,
            gpu_instance_id: ids.and_then(|(gi, _)| instance(gi)),
            compute_instance_id: ids.and_then(|(_, ci)| instance(ci)),
            util_pct: None,
        });
    }
}

/// Whether a utilisation sample can be believed: newer than the last seen (a driver
/// may hand back older ones) and every value a percentage.
fn believable(s: &nvmlProcessUtilizationSample_t, last_seen: u64) -> bool {
    s.timeStamp > last_seen
        && [s.smUtil, s.memUtil, s.encUtil, s.decUtil]
            .iter()
            .all(|&u| u <= 100)
}

/// Per-process utilisation since the last sample seen (`seen`, advanced here), so values
/// describe the time since the last slow tick rather than the driver's whole buffer.
/// NVML lists only processes that were active: one it leaves out, or `NOT_FOUND` (no
/// samples at all), means 0%, not "unknown". Of several samples for a process the
/// newest wins. Junk is dropped: samples for pids not in this GPU's list, values over
/// 100, timestamps not newer than `seen` ([`believable`]); only the samples kept
/// advance `seen`.
fn utilisation(
    nvml: &Nvml,
    d: &Device,
    f: &mut Fill,
    seen: &mut u64,
    samples: &mut Vec<nvmlProcessUtilizationSample_t>,
    procs: &mut [GpuProcess],
) {
    let last_seen = *seen;
    let get = &nvml.lib().nvmlDeviceGetProcessUtilization;
    let fetched = f.call(|| {
        let get = get.as_ref().map_err(|_| NvmlError::FunctionNotFound)?;
        let got = fetch_samples(samples, |buf, count| {
            // SAFETY: as for the process lists: a live device, `count` entries at `buf`.
            unsafe { get(d.handle(), buf, count, last_seen) }
        });
        match got {
            Err(NvmlError::NotFound) => {
                samples.clear();
                Ok(())
            }
            other => other,
        }
    });
    if fetched.is_none() {
        return;
    }
    for p in procs.iter_mut() {
        let newest = samples
            .iter()
            .filter(|s| s.pid == p.pid && believable(s, last_seen))
            .max_by_key(|s| s.timeStamp);
        p.util_pct = Some(newest.map_or([0; 4], |s| [s.smUtil, s.memUtil, s.encUtil, s.decUtil]));
        if let Some(s) = newest {
            *seen = (*seen).max(s.timeStamp);
        }
    }
}

/// The bytes of `words`.
fn as_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: any initialised `u64`s are valid bytes; the length is the same memory.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), std::mem::size_of_val(words)) }
}

/// Reads a list of `stride`-byte entries into `buf` through `call(buffer, count)`, which
/// follows NVML's protocol: `count` in is the room at `buffer`, out is the entries
/// written (on success) or needed (on `INSUFFICIENT_SIZE`). Grows `buf`, in bytes, to
/// the count NVML needs times `stride` when it is too small. Returns the entries read.
fn fetch(
    buf: &mut Vec<u64>,
    stride: usize,
    mut call: impl FnMut(*mut u8, &mut c_uint) -> nvmlReturn_t,
) -> Result<usize, NvmlError> {
    // Ask (or fetch), fetch, and once more if the list grew in between.
    for _ in 0..3 {
        let room = (buf.len() * 8 / stride).min(c_uint::MAX as usize);
        let mut count = room as c_uint;
        let at = if room == 0 {
            ptr::null_mut()
        } else {
            buf.as_mut_ptr().cast()
        };
        match call(at, &mut count) {
            SUCCESS if room > 0 || count == 0 => return Ok((count as usize).min(room)),
            SUCCESS | INSUFFICIENT_SIZE => {
                let entries = count as usize + HEADROOM;
                if entries > MAX_ENTRIES {
                    return Err(NvmlError::InsufficientSize(Some(count as usize)));
                }
                // Zeroed once, when growing: NVML then writes into initialised memory.
                buf.resize((entries * stride).div_ceil(8), 0);
            }
            NOT_FOUND => return Err(NvmlError::NotFound),
            other => return Err(NvmlError::from(other)),
        }
    }
    Err(NvmlError::InsufficientSize(None))
}

/// [`fetch`] for utilisation samples, whose layout never changed.
fn fetch_samples(
    buf: &mut Vec<nvmlProcessUtilizationSample_t>,
    mut call: impl FnMut(*mut nvmlProcessUtilizationSample_t, &mut c_uint) -> nvmlReturn_t,
) -> Result<(), NvmlError> {
    buf.clear();
    for _ in 0..3 {
        let room = buf.capacity().min(c_uint::MAX as usize);
        let mut count = room as c_uint;
        let at = if room == 0 {
            ptr::null_mut()
        } else {
            buf.as_mut_ptr()
        };
        match call(at, &mut count) {
            SUCCESS if room > 0 => {
                // SAFETY: NVML wrote `count` (at most `room`) initialised samples of a
                // plain C struct at the start of `buf`'s allocation.
                unsafe { buf.set_len((count as usize).min(room)) };
                return Ok(());
            }
            SUCCESS if count == 0 => return Ok(()),
            SUCCESS | INSUFFICIENT_SIZE => {
                if count as usize > MAX_ENTRIES {
                    return Err(NvmlError::InsufficientSize(Some(count as usize)));
                }
                buf.reserve(count as usize + HEADROOM);
            }
            NOT_FOUND => return Err(NvmlError::NotFound),
            other => return Err(NvmlError::from(other)),
        }
    }
    Err(NvmlError::InsufficientSize(None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_decoded_by_stride() {
        // Two 32-byte entries: pid, pad, memory, gi, ci, cc-protected memory.
        let mut list = vec![0u64; 8];
        list[0] = 7;
        list[1] = 1000;
        list[2] = u64::from(u32::MAX) << 32 | 1;
        list[4] = 9;
        list[5] = 2000;
        list[6] = u64::MAX;
        assert_eq!(entry(&list, 32, 0), (7, 1000, Some((1, u32::MAX))));
        assert_eq!(entry(&list, 32, 1), (9, 2000, Some((u32::MAX, u32::MAX))));
        // Read as 16-byte entries the same bytes are other entries: the stride decides.
        assert_eq!(entry(&list, 16, 1), (1, 0, None));
    }

    #[test]
    fn the_buffer_is_sized_in_bytes_and_never_overrun() {
        let mut buf = Vec::new();
        let mut calls = 0;
        let got = fetch(&mut buf, 32, |at, count| {
            calls += 1;
            if (*count as usize) < 40 {
                *count = 40;
                return INSUFFICIENT_SIZE;
            }
            assert!(!at.is_null());
            *count = 40;
            SUCCESS
        });
        assert_eq!(got.unwrap(), 40);
        assert_eq!(calls, 2);
        assert!(buf.len() * 8 >= 40 * 32);
    }

    #[test]
    fn junk_samples_are_not_believed() {
        let s = |stamp, sm| nvmlProcessUtilizationSample_t {
            pid: 1,
            timeStamp: stamp,
            smUtil: sm,
            memUtil: 0,
            encUtil: 0,
            decUtil: 0,
        };
        assert!(believable(&s(11, 100), 10));
        assert!(!believable(&s(10, 50), 10));
        assert!(!believable(&s(11, 101), 10));
    }
}
