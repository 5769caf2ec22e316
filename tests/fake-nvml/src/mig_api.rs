//! Exported MIG functions: MIG mode, MIG device handles and their parent, instance ids,
//! attributes, and GPU-instance profiles and handles (see [`crate::mig`] for the model).
//! `nvmlGpmMigSampleGet` is with the other GPM functions ([`crate::gpm`]).

// Function, parameter and (bindgen-made) type names are NVML's C names.
#![allow(non_snake_case)]

use std::os::raw::c_uint;

use nvml_wrapper_sys::bindings::*;

use crate::codes::{
    ARGUMENT_VERSION_MISMATCH, INVALID_ARGUMENT, NOT_FOUND, NOT_SUPPORTED, UNKNOWN,
};
use crate::ffi::{
    decode_gpu_instance, device_call, encode_gpu_instance, encode_handle, encode_mig_handle,
    hang_while_listed, put, system_call, target_call,
};
use crate::mig::{Profile, PROFILE_COUNT};

/// `nvmlGpuInstanceProfileInfo_v2` from nvml.h: `NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2)`.
const PROFILE_INFO_V2: c_uint =
    (std::mem::size_of::<nvmlGpuInstanceProfileInfo_v2_t>() as c_uint) | (2 << 24);

/// `nvmlDeviceGetMigMode(device, currentMode, pendingMode)`: `NOT_SUPPORTED` on a GPU
/// that cannot do MIG (and on a MIG device).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    currentMode: *mut c_uint,
    pendingMode: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetMigMode", device, |g, _| {
        let Some(mig) = &g.mig else {
            return NOT_SUPPORTED;
        };
        if pendingMode.is_null() {
            return INVALID_ARGUMENT;
        }
        let pending = mig.pending.unwrap_or(mig.enabled);
        // SAFETY: the caller passes two pointers to `c_uint`; `pendingMode` is non-null.
        unsafe {
            pendingMode.write_unaligned(c_uint::from(pending));
            put(currentMode, Some(c_uint::from(mig.enabled)))
        }
    })
}

/// `nvmlDeviceGetMaxMigDeviceCount(device, count)`: 0 when MIG is off or unsupported,
/// as nvml.h says.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: nvmlDevice_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetMaxMigDeviceCount", device, |g, _| {
        let max = g.mig.as_ref().map_or(0, |m| m.max_count());
        // SAFETY: the caller passes a pointer to a `c_uint` (or null).
        unsafe { put(count, Some(max)) }
    })
}

/// `nvmlDeviceGetMigDeviceHandleByIndex(device, index, migDevice)`: `NOT_FOUND` for an
/// index below the maximum with no MIG device, `INVALID_ARGUMENT` at or past it.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: nvmlDevice_t,
    index: c_uint,
    migDevice: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetMigDeviceHandleByIndex", device, |g, gpu| {
        let Some(mig) = &g.mig else {
            return NOT_SUPPORTED;
        };
        if index >= mig.max_count() {
            return INVALID_ARGUMENT;
        }
        let Some(m) = mig.device(index) else {
            return NOT_FOUND;
        };
        let handle = encode_mig_handle(gpu, m.gpu_instance_id, m.compute_instance_id);
        // SAFETY: the caller passes a pointer to an `nvmlDevice_t` (or null).
        unsafe { put(migDevice, Some(handle)) }
    })
}

/// `nvmlDeviceIsMigDeviceHandle(device, isMigDevice)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: nvmlDevice_t,
    isMigDevice: *mut c_uint,
) -> nvmlReturn_t {
    target_call("nvmlDeviceIsMigDeviceHandle", device, |_, _, mig| {
        // SAFETY: the caller passes a pointer to a `c_uint` (or null).
        unsafe { put(isMigDevice, Some(c_uint::from(mig.is_some()))) }
    })
}

/// `nvmlDeviceGetDeviceHandleFromMigDeviceHandle(migDevice, device)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    migDevice: nvmlDevice_t,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    const NAME: &str = "nvmlDeviceGetDeviceHandleFromMigDeviceHandle";
    target_call(NAME, migDevice, |_, gpu, mig| match mig {
        // SAFETY: the caller passes a pointer to an `nvmlDevice_t` (or null).
        Some(_) => unsafe { put(device, Some(encode_handle(gpu))) },
        None => INVALID_ARGUMENT,
    })
}

/// `nvmlDeviceGetGpuInstanceId(device, id)`: `NOT_SUPPORTED` on a GPU handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> nvmlReturn_t {
    target_call("nvmlDeviceGetGpuInstanceId", device, |_, _, mig| {
        // SAFETY: the caller passes a pointer to a `c_uint` (or null).
        unsafe { put(id, mig.map(|m| m.gpu_instance_id)) }
    })
}

/// `nvmlDeviceGetComputeInstanceId(device, id)`: `NOT_SUPPORTED` on a GPU handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> nvmlReturn_t {
    target_call("nvmlDeviceGetComputeInstanceId", device, |_, _, mig| {
        // SAFETY: the caller passes a pointer to a `c_uint` (or null).
        unsafe { put(id, mig.map(|m| m.compute_instance_id)) }
    })
}

/// `nvmlDeviceGetAttributes_v2(device, attributes)`: MIG devices only, as nvml.h says
/// ("currently only supports MIG device handles").
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetAttributes_v2(
    device: nvmlDevice_t,
    attributes: *mut nvmlDeviceAttributes_t,
) -> nvmlReturn_t {
    target_call("nvmlDeviceGetAttributes_v2", device, |g, _, mig| {
        let Some(m) = mig else {
            return NOT_SUPPORTED;
        };
        let Some(d) = g.mig.as_ref().and_then(|all| m.derive(g, all)) else {
            return UNKNOWN;
        };
        let value = nvmlDeviceAttributes_t {
            multiprocessorCount: d.sm_count,
            sharedCopyEngineCount: d.gi_slices,
            sharedDecoderCount: d.gi_slices,
            sharedEncoderCount: 0,
            sharedJpegCount: d.gi_slices,
            sharedOfaCount: 0,
            gpuInstanceSliceCount: d.gi_slices,
            computeInstanceSliceCount: d.ci_slices,
            memorySizeMB: d.memory_total >> 20,
        };
        // SAFETY: the caller passes a pointer to an `nvmlDeviceAttributes_t` (or null).
        unsafe { put(attributes, Some(value)) }
    })
}

/// The GPU's profile at profile index `index`: `Err` with the code real drivers give.
fn profile_at(g: &crate::scenario::Gpu, index: c_uint) -> Result<Profile, nvmlReturn_t> {
    let Some(mig) = &g.mig else {
        return Err(NOT_SUPPORTED);
    };
    if index >= PROFILE_COUNT {
        return Err(INVALID_ARGUMENT);
    }
    let profiles = mig.profiles();
    profiles
        .into_iter()
        .find(|p| p.index == index)
        .ok_or(NOT_SUPPORTED)
}

/// `nvmlDeviceGetGpuInstanceProfileInfo(device, profile, info)`: the v1 struct, which
/// has no name.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfo(
    device: nvmlDevice_t,
    profile: c_uint,
    info: *mut nvmlGpuInstanceProfileInfo_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetGpuInstanceProfileInfo", device, |g, _| {
        let p = match profile_at(g, profile) {
            Ok(p) => p,
            Err(code) => return code,
        };
        let value = nvmlGpuInstanceProfileInfo_t {
            id: p.id,
            isP2pSupported: 0,
            sliceCount: p.slices,
            instanceCount: p.instance_count,
            multiprocessorCount: p.sm_count,
            copyEngineCount: p.slices,
            decoderCount: p.slices,
            encoderCount: 0,
            jpegCount: p.slices,
            ofaCount: 0,
            memorySizeMB: p.memory_mib,
        };
        // SAFETY: the caller passes a pointer to an `nvmlGpuInstanceProfileInfo_t`.
        unsafe { put(info, Some(value)) }
    })
}

/// `nvmlDeviceGetGpuInstanceProfileInfoV(device, profile, info)`: `info->version` must
/// be `nvmlGpuInstanceProfileInfo_v2`; the name is nvidia-smi's, `"MIG 1g.10gb"`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfoV(
    device: nvmlDevice_t,
    profile: c_uint,
    info: *mut nvmlGpuInstanceProfileInfo_v2_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetGpuInstanceProfileInfoV", device, |g, _| {
        if info.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: non-null, and the caller passes an `nvmlGpuInstanceProfileInfo_v2_t`.
        let version = unsafe { std::ptr::addr_of!((*info).version).read_unaligned() };
        if version != PROFILE_INFO_V2 {
            return ARGUMENT_VERSION_MISMATCH;
        }
        let p = match profile_at(g, profile) {
            Ok(p) => p,
            Err(code) => return code,
        };
        let mut value = nvmlGpuInstanceProfileInfo_v2_t {
            version,
            id: p.id,
            isP2pSupported: 0,
            sliceCount: p.slices,
            instanceCount: p.instance_count,
            multiprocessorCount: p.sm_count,
            copyEngineCount: p.slices,
            decoderCount: p.slices,
            encoderCount: 0,
            jpegCount: p.slices,
            ofaCount: 0,
            memorySizeMB: p.memory_mib,
            name: [0; 96],
        };
        for (d, b) in value.name.iter_mut().zip(p.name.bytes().take(95)) {
            *d = b as std::os::raw::c_char;
        }
        // SAFETY: as above.
        unsafe { put(info, Some(value)) }
    })
}

/// `nvmlDeviceGetGpuInstanceById(device, id, gpuInstance)`: `NOT_FOUND` for an id no
/// GPU instance has (or while MIG is off).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceById(
    device: nvmlDevice_t,
    id: c_uint,
    gpuInstance: *mut nvmlGpuInstance_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetGpuInstanceById", device, |g, gpu| {
        let Some(mig) = &g.mig else {
            return NOT_SUPPORTED;
        };
        let exists = mig.enabled && mig.instances.iter().any(|m| m.gpu_instance_id == id);
        if !exists {
            return NOT_FOUND;
        }
        // SAFETY: the caller passes a pointer to an `nvmlGpuInstance_t` (or null).
        unsafe { put(gpuInstance, Some(encode_gpu_instance(gpu, id))) }
    })
}

/// `nvmlGpuInstanceGetInfo(gpuInstance, info)`: the parent's handle, the id, the
/// profile id and the placement. The parent's hangs and forced errors apply; a GPU
/// instance that no longer exists is `INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceGetInfo(
    gpuInstance: nvmlGpuInstance_t,
    info: *mut nvmlGpuInstanceInfo_t,
) -> nvmlReturn_t {
    const NAME: &str = "nvmlGpuInstanceGetInfo";
    system_call(NAME, |scenario| {
        let Some((gpu, gi)) = decode_gpu_instance(gpuInstance) else {
            return INVALID_ARGUMENT;
        };
        let Some(g) = scenario.gpus.get(gpu as usize) else {
            return INVALID_ARGUMENT;
        };
        hang_while_listed(NAME, Some(gpu));
        if let Some(code) = g.errors.get(NAME).or_else(|| g.errors.get("*")) {
            return code.0;
        }
        let mig = g.mig.as_ref().filter(|m| m.enabled);
        let Some(m) = mig.and_then(|m| m.instances.iter().find(|i| i.gpu_instance_id == gi)) else {
            return INVALID_ARGUMENT;
        };
        let Some(p) = mig.and_then(|all| m.gi_profile(all)) else {
            return UNKNOWN;
        };
        let value = nvmlGpuInstanceInfo_t {
            device: encode_handle(gpu),
            id: gi,
            profileId: p.id,
            placement: nvmlGpuInstancePlacement_t {
                start: m.placement_start,
                size: p.memory_slices.unwrap_or(p.slices),
            },
        };
        // SAFETY: the caller passes a pointer to an `nvmlGpuInstanceInfo_t` (or null).
        unsafe { put(info, Some(value)) }
    })
}
