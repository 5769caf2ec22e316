//! The processes on one GPU as NVML lists them, with their utilisation, read into
//! buffers kept across ticks: once the buffers have grown to fit, a slow tick allocates
//! nothing (nvml-wrapper's own functions return a fresh `Vec` on every call).
//!
//! Like [`crate::fallback`], this calls NVML directly: each call passes a handle from the
//! live session and a buffer whose capacity it states. A list is fetched into the spare
//! capacity (the first call ever only asks for the count); a list that grew between the
//! count and the fetch is asked for once more, with room to spare, then given up for
//! this tick.

use std::os::raw::c_uint;
use std::ptr;

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{
    self, nvmlProcessInfo_t, nvmlProcessUtilizationSample_t, nvmlReturn_t,
};

use gpupeek_shm::layout::{gpu_valid as v, proc_kind};

use crate::sampler::Fill;

/// NVML's "not available" for a process's GPU memory.
const MEMORY_NOT_AVAILABLE: u64 = u64::MAX;
/// NVML's "none" for a MIG instance id.
const NO_INSTANCE: u32 = u32::MAX;
const SUCCESS: nvmlReturn_t = bindings::nvmlReturn_enum_NVML_SUCCESS;
const INSUFFICIENT_SIZE: nvmlReturn_t = bindings::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
const NOT_FOUND: nvmlReturn_t = bindings::nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
/// Entries added beyond the count NVML gave, for processes that start in between.
const HEADROOM: usize = 8;

/// A process as NVML listed it, before `/proc` resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// The buffers NVML's lists are read into, kept for the whole NVML session.
#[derive(Default)]
pub struct Buffers {
    infos: Vec<nvmlProcessInfo_t>,
    samples: Vec<nvmlProcessUtilizationSample_t>,
}

/// Appends GPU `gpu_index`'s processes to `out`, merging the compute and graphics lists
/// (a pid in both is one process of both kinds), then their utilisation since `seen`.
pub fn sample(
    nvml: &Nvml,
    d: &Device,
    f: &mut Fill,
    gpu_index: u32,
    seen: &mut u64,
    bufs: &mut Buffers,
    out: &mut Vec<GpuProcess>,
) {
    let first = out.len();
    let lib = nvml.lib();
    let lists = [
        (
            &lib.nvmlDeviceGetComputeRunningProcesses_v3,
            proc_kind::COMPUTE,
        ),
        (
            &lib.nvmlDeviceGetGraphicsRunningProcesses_v3,
            proc_kind::GRAPHICS,
        ),
    ];
    let mut listed = false;
    for (get, kind) in lists {
        let fetched = f.call(|| {
            let get = get.as_ref().map_err(|_| NvmlError::FunctionNotFound)?;
            fetch(&mut bufs.infos, |buf, count| {
                // SAFETY: `d` is a device of the live session; `count` is the room at
                // `buf` (which is null when it is 0), as NVML requires.
                unsafe { get(d.handle(), count, buf) }
            })
        });
        if fetched.is_some() {
            listed = true;
            add(&bufs.infos, kind, gpu_index, out, first);
        }
    }
    if !listed {
        return;
    }
    f.rec.process_count = (out.len() - first) as u32;
    f.rec.valid |= v::PROCESSES;
    if out.len() > first {
        utilisation(nvml, d, f, seen, &mut bufs.samples, &mut out[first..]);
    }
}

/// Adds the processes of `infos` to `out[first..]`, or `kind` to those already there.
fn add(
    infos: &[nvmlProcessInfo_t],
    kind: u32,
    gpu_index: u32,
    out: &mut Vec<GpuProcess>,
    first: usize,
) {
    for p in infos {
        let mem = memory(p);
        if let Some(existing) = out[first..].iter_mut().find(|e| e.pid == p.pid) {
            existing.kind |= kind;
            existing.gpu_mem_bytes = existing.gpu_mem_bytes.max(mem);
            continue;
        }
        out.push(GpuProcess {
            gpu_index,
            pid: p.pid,
            kind,
            gpu_mem_bytes: mem,
            gpu_instance_id: Some(p.gpuInstanceId).filter(|&id| id != NO_INSTANCE),
            compute_instance_id: Some(p.computeInstanceId).filter(|&id| id != NO_INSTANCE),
            util_pct: None,
        });
    }
}

fn memory(p: &nvmlProcessInfo_t) -> Option<u64> {
    Some(p.usedGpuMemory).filter(|&bytes| bytes != MEMORY_NOT_AVAILABLE)
}

/// Per-process utilisation since the last sample seen (`seen`, advanced here), so values
/// describe the time since the last slow tick rather than the driver's whole buffer.
/// NVML lists only processes that were active: one it leaves out, or `NOT_FOUND` (no
/// samples at all), means 0%, not "unknown". Of several samples for a process the
/// newest wins.
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
        let got = fetch(samples, |buf, count| {
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
        p.util_pct = Some([0; 4]);
    }
    for s in samples.iter() {
        *seen = (*seen).max(s.timeStamp);
    }
    for p in procs.iter_mut() {
        let newest = samples
            .iter()
            .filter(|s| s.pid == p.pid)
            .max_by_key(|s| s.timeStamp);
        if let Some(s) = newest {
            p.util_pct = Some([s.smUtil, s.memUtil, s.encUtil, s.decUtil]);
        }
    }
}

/// Reads a list into `buf` through `call(buffer, count)`, which follows NVML's protocol:
/// `count` in is the room at `buffer`, out is the entries written (on success) or
/// needed (on `INSUFFICIENT_SIZE`). Grows `buf` when it is too small.
fn fetch<T>(
    buf: &mut Vec<T>,
    mut call: impl FnMut(*mut T, &mut c_uint) -> nvmlReturn_t,
) -> Result<(), NvmlError> {
    buf.clear();
    // Ask (or fetch), fetch, and once more if the list grew in between.
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
                // SAFETY: NVML wrote `count` (at most `room`) initialised entries of a
                // plain C struct at the start of `buf`'s allocation.
                unsafe { buf.set_len((count as usize).min(room)) };
                return Ok(());
            }
            SUCCESS if count == 0 => return Ok(()),
            SUCCESS | INSUFFICIENT_SIZE => {
                buf.reserve(count as usize + HEADROOM);
            }
            NOT_FOUND => return Err(NvmlError::NotFound),
            other => return Err(NvmlError::from(other)),
        }
    }
    Err(NvmlError::InsufficientSize(None))
}
