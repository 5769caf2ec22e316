//! Plumbing shared by the exported functions: the common prologue (scenario
//! check, latency, init check, forced errors, call counting, panic guard),
//! device handle encoding, and writing results through caller pointers.

use std::os::raw::{c_char, c_uint};
use std::panic::{catch_unwind, AssertUnwindSafe};

use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlGpuInstance_t, nvmlReturn_t};

use crate::codes::{
    INSUFFICIENT_SIZE, INVALID_ARGUMENT, NOT_SUPPORTED, SUCCESS, UNINITIALIZED, UNKNOWN,
};
use crate::mig::Instance;
use crate::scenario::{Gpu, Scenario};
use crate::{calls, latency, state, sysfs};

/// Runs `body` without letting a panic cross the FFI boundary (a panic
/// yields `fallback`), then counts the call.
pub fn guarded<R>(name: &'static str, fallback: R, body: impl FnOnce() -> R) -> R {
    let result = catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback);
    let spent_us = latency::take_spent_us();
    // Counting must not unwind into C either; a failure there is ignored.
    let _ = catch_unwind(|| calls::record(name, spent_us, state::open_handles));
    result
}

/// Sleeps as long as the scenario asks for `name`.
pub fn simulate_latency(scenario: &Scenario, name: &str) {
    latency::sleep_us(latency::latency_us(scenario, name));
}

/// Blocks while the scenario in force says a call of `name` (on GPU `gpu`) hangs,
/// re-reading the scenario file every few milliseconds: a test releases the call by
/// rewriting the file.
pub fn hang_while_listed(name: &str, gpu: Option<u32>) {
    while state::refresh()
        .scenario
        .is_some_and(|scenario| scenario.hangs(name, gpu))
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Prologue for every function that needs an initialized library: scenario
/// check, latency, a hang the scenario lists, `UNINITIALIZED` check, then the
/// scenario's top-level forced error for `name`, if any.
pub fn system_call(
    name: &'static str,
    body: impl FnOnce(&Scenario) -> nvmlReturn_t,
) -> nvmlReturn_t {
    guarded(name, UNKNOWN, || {
        let snap = state::refresh();
        if let Some(scenario) = &snap.scenario {
            simulate_latency(scenario, name);
        }
        hang_while_listed(name, None);
        if !snap.initialized {
            return UNINITIALIZED;
        }
        let Some(scenario) = snap.scenario else {
            return UNKNOWN;
        };
        if let Some(code) = scenario.errors.get(name) {
            return code.0;
        }
        body(&scenario)
    })
}

/// Prologue for functions taking a device handle: [`system_call`], then
/// handle validation (and counting a call on a suspended GPU), a hang the GPU
/// lists, then the GPU's forced error for `name` or `"*"`. A MIG device handle is
/// answered `NOT_SUPPORTED` (see [`target_call`] for the functions that take one).
pub fn device_call(
    name: &'static str,
    device: nvmlDevice_t,
    body: impl FnOnce(&Gpu, u32) -> nvmlReturn_t,
) -> nvmlReturn_t {
    target_call(name, device, |gpu, index, instance| match instance {
        None => body(gpu, index),
        Some(_) => NOT_SUPPORTED,
    })
}

/// [`device_call`] for the functions that also take a MIG device handle: `body` gets
/// the GPU (the parent of a MIG device) and, for a MIG handle, its instance. The
/// parent's hangs and forced errors apply to its MIG devices too; the handle of a MIG
/// device that no longer exists (destroyed, or MIG turned off) is `INVALID_ARGUMENT`.
pub fn target_call(
    name: &'static str,
    device: nvmlDevice_t,
    body: impl FnOnce(&Gpu, u32, Option<&Instance>) -> nvmlReturn_t,
) -> nvmlReturn_t {
    system_call(name, |scenario| {
        let Some((index, gpu, mig)) = lookup(scenario, device) else {
            return INVALID_ARGUMENT;
        };
        note_if_suspended(gpu);
        hang_while_listed(name, Some(index));
        if let Some(code) = gpu.errors.get(name).or_else(|| gpu.errors.get("*")) {
            return code.0;
        }
        match mig {
            None => body(gpu, index, None),
            Some((gi, ci)) => match gpu.mig.as_ref().and_then(|m| m.find(gi, ci)) {
                Some(instance) => body(gpu, index, Some(instance)),
                None => INVALID_ARGUMENT,
            },
        }
    })
}

/// Counts the call if fake sysfs says `gpu` is runtime-suspended.
pub fn note_if_suspended(gpu: &Gpu) {
    if sysfs::suspended(gpu) {
        calls::record_suspended_gpu_call();
    }
}

/// The opaque handle for GPU `index`: `index + 1` as a pointer, never null.
/// It is never dereferenced, by us or (per the NVML contract) by callers.
pub fn encode_handle(index: u32) -> nvmlDevice_t {
    (index as usize + 1) as nvmlDevice_t
}

/// The GPU index a handle stands for, if it is one [`encode_handle`] made.
pub fn decode_handle(device: nvmlDevice_t) -> Option<u32> {
    let raw = device as usize;
    if raw & (MIG_TAG | GPU_INSTANCE_TAG) != 0 {
        return None;
    }
    raw.checked_sub(1).and_then(|i| u32::try_from(i).ok())
}

/// Tags a MIG device handle (bit 40) and a GPU-instance handle (bit 41); the low bits
/// hold the parent's index + 1, the GPU instance id + 1 from bit 16 and the compute
/// instance id + 1 from bit 28. The ids are in the handle, not the device index, so the
/// handle of a destroyed instance never stands for one created later at its index.
const MIG_TAG: usize = 1 << 40;
const GPU_INSTANCE_TAG: usize = 1 << 41;

fn pack(tag: usize, gpu: u32, gi: u32, ci: u32) -> *mut std::ffi::c_void {
    let field = |v: u32| (v as usize + 1) & 0xFFF;
    (tag | field(gpu) | (field(gi) << 16) | (field(ci) << 28)) as *mut std::ffi::c_void
}

fn unpack(raw: usize, tag: usize) -> Option<(u32, u32, u32)> {
    if raw & tag == 0 {
        return None;
    }
    let field = |shift: u32| ((raw >> shift) & 0xFFF).checked_sub(1).map(|v| v as u32);
    Some((field(0)?, field(16)?, field(28)?))
}

/// The handle of the MIG device `(gi, ci)` of GPU `gpu`.
pub fn encode_mig_handle(gpu: u32, gi: u32, ci: u32) -> nvmlDevice_t {
    pack(MIG_TAG, gpu, gi, ci).cast()
}

/// GPU index, GPU instance id and compute instance id of a MIG device handle.
pub fn decode_mig_handle(device: nvmlDevice_t) -> Option<(u32, u32, u32)> {
    unpack(device as usize, MIG_TAG)
}

/// The handle of GPU instance `gi` of GPU `gpu` (`nvmlGpuInstance_t`).
pub fn encode_gpu_instance(gpu: u32, gi: u32) -> nvmlGpuInstance_t {
    pack(GPU_INSTANCE_TAG, gpu, gi, 0).cast()
}

/// GPU index and GPU instance id of a GPU-instance handle.
pub fn decode_gpu_instance(handle: nvmlGpuInstance_t) -> Option<(u32, u32)> {
    unpack(handle as usize, GPU_INSTANCE_TAG).map(|(gpu, gi, _)| (gpu, gi))
}

/// A MIG device's GPU instance and compute instance ids.
type MigIds = (u32, u32);

/// The GPU a handle stands for (the parent of a MIG device), and the MIG device's ids.
fn lookup(scenario: &Scenario, device: nvmlDevice_t) -> Option<(u32, &Gpu, Option<MigIds>)> {
    let (index, mig) = match decode_mig_handle(device) {
        Some((gpu, gi, ci)) => (gpu, Some((gi, ci))),
        None => (decode_handle(device)?, None),
    };
    let gpu = scenario.gpus.get(usize::try_from(index).ok()?)?;
    Some((index, gpu, mig))
}

/// Writes `value` through `out`: `INVALID_ARGUMENT` if `out` is null,
/// `NOT_SUPPORTED` if there is no value, else `SUCCESS`.
///
/// # Safety
///
/// `out` must be null or valid for writing one `T`.
pub unsafe fn put<T>(out: *mut T, value: Option<T>) -> nvmlReturn_t {
    if out.is_null() {
        return INVALID_ARGUMENT;
    }
    let Some(value) = value else {
        return NOT_SUPPORTED;
    };
    // SAFETY: `out` is non-null and the caller guarantees it is valid for a
    // write of one `T`; unaligned writes tolerate sloppy callers.
    unsafe { out.write_unaligned(value) };
    SUCCESS
}

/// Copies `value` and a NUL into the C buffer `buf` of `length` bytes:
/// `INVALID_ARGUMENT` if `buf` is null, `NOT_SUPPORTED` if there is no
/// value, `INSUFFICIENT_SIZE` if it does not fit (nothing is written then).
///
/// # Safety
///
/// `buf` must be null or valid for writing `length` bytes.
pub unsafe fn put_str(buf: *mut c_char, length: c_uint, value: Option<&str>) -> nvmlReturn_t {
    if buf.is_null() {
        return INVALID_ARGUMENT;
    }
    let Some(value) = value else {
        return NOT_SUPPORTED;
    };
    let bytes = value.as_bytes();
    let fits = usize::try_from(length).is_ok_and(|len| bytes.len() < len);
    if !fits {
        return INSUFFICIENT_SIZE;
    }
    // SAFETY: `buf` is non-null and valid for `length` bytes (caller's
    // promise); we write `bytes.len() + 1 <= length` bytes, and a Rust string
    // cannot overlap a buffer the caller handed us for writing.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
        buf.add(bytes.len()).write(0);
    }
    SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_null_is_invalid() {
        for i in [0, 1, 7] {
            let h = encode_handle(i);
            assert!(!h.is_null());
            assert_eq!(decode_handle(h), Some(i));
        }
        assert_eq!(decode_handle(std::ptr::null_mut()), None);
    }

    #[test]
    fn mig_and_gpu_instance_handles_carry_their_ids_and_are_no_gpu_handle() {
        let h = encode_mig_handle(3, 13, 0);
        assert_eq!(decode_mig_handle(h), Some((3, 13, 0)));
        assert_eq!(decode_handle(h), None);
        assert_eq!(decode_mig_handle(encode_handle(3)), None);
        let gi = encode_gpu_instance(1, 2);
        assert_eq!(decode_gpu_instance(gi), Some((1, 2)));
        assert_eq!(decode_mig_handle(gi.cast()), None);
        assert_eq!(decode_handle(gi.cast()), None);
    }

    #[test]
    fn put_str_checks_size() {
        let mut buf = [0x7f as c_char; 4];
        // SAFETY: `buf` is a live 4-byte buffer.
        unsafe {
            assert_eq!(
                put_str(buf.as_mut_ptr(), 4, Some("abcd")),
                INSUFFICIENT_SIZE
            );
            assert_eq!(put_str(buf.as_mut_ptr(), 4, Some("abc")), SUCCESS);
            assert_eq!(put_str(buf.as_mut_ptr(), 4, None), NOT_SUPPORTED);
            assert_eq!(
                put_str(std::ptr::null_mut(), 4, Some("a")),
                INVALID_ARGUMENT
            );
        }
        assert_eq!(buf.map(|c| c as u8), *b"abc\0");
    }
}
