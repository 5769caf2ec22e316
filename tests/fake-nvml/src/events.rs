//! NVML events: event sets, registration per GPU, and waiting for Xids.
//!
//! What real drivers do, and the fake therefore does:
//! - `nvmlEventSetCreate` makes an empty set; `nvmlEventSetFree` frees it (a freed or
//!   unknown set is `INVALID_ARGUMENT`).
//! - `nvmlDeviceGetSupportedEventTypes` answers the GPU's `nvmlEventType*` mask
//!   (`supported_event_types` in the scenario); a GPU without one (a vGPU guest, some
//!   containers and older boards) answers `NOT_SUPPORTED`, and so does
//!   `nvmlDeviceRegisterEvents` for it, or for a type outside its mask ("the platform
//!   does not support this feature or some of requested event types"), GPU by GPU.
//! - `nvmlEventSetWait_v2` (R450+, with the MIG instance of the event) and the older
//!   `nvmlEventSetWait` (its data without the instance ids: the `nvmlEventData_t` of
//!   drivers before R450, 24 bytes) block until an event comes or `timeoutms` passes,
//!   then answer `NVML_ERROR_TIMEOUT`.
//!
//! A GPU's Xids are its scenario's `xids`, oldest first: the list is the GPU's Xid
//! history. A set registered for Xids on a GPU delivers, once each, the entries that
//! come after the length of the list when it registered, so a test makes an Xid happen
//! by appending one to the scenario file; a set created later (after a re-init) never
//! sees Xids that happened before it, as on a real driver. An Xid attributable to a MIG
//! instance carries its GPU and compute instance ids; any other carries `0xFFFFFFFF`.

// Function, parameter and (bindgen-made) constant names are NVML's C names.
#![allow(non_snake_case, non_upper_case_globals)]

use std::collections::BTreeMap;
use std::os::raw::{c_uint, c_ulonglong};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nvml_wrapper_sys::bindings::*;
use serde::Deserialize;

use crate::codes::{INVALID_ARGUMENT, NOT_SUPPORTED, SUCCESS};
use crate::ffi::{device_call, encode_handle, put, system_call};
use crate::scenario::Scenario;
use crate::state;

/// One Xid in a GPU's history.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Xid {
    /// The Xid number (`eventData`).
    pub code: u64,
    /// The GPU instance it is attributable to (MIG on); absent: none.
    #[serde(default)]
    pub gpu_instance_id: Option<u32>,
    /// The compute instance it is attributable to (MIG on); absent: none.
    #[serde(default)]
    pub compute_instance_id: Option<u32>,
}

/// NVML's "no instance" id in `nvmlEventData_t`.
const NO_INSTANCE: c_uint = 0xFFFF_FFFF;

/// One GPU's registration in a set.
#[derive(Debug, Clone, Copy)]
struct Registration {
    /// The event types registered.
    mask: u64,
    /// Entries of the GPU's `xids` this set has delivered or that came before it
    /// registered.
    seen: usize,
}

/// Registrations by GPU index.
type Set = BTreeMap<u32, Registration>;

/// Live sets by id, and the next id.
static SETS: Mutex<(BTreeMap<usize, Set>, usize)> = Mutex::new((BTreeMap::new(), 1));

fn sets() -> MutexGuard<'static, (BTreeMap<usize, Set>, usize)> {
    SETS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Marks an event set handle (bit 44), so that no device handle passes for one.
const SET_TAG: usize = 1 << 44;

fn encode_set(id: usize) -> nvmlEventSet_t {
    (SET_TAG | id) as nvmlEventSet_t
}

fn decode_set(set: nvmlEventSet_t) -> Option<usize> {
    let raw = set as usize;
    (raw & SET_TAG != 0).then_some(raw & !SET_TAG)
}

/// How often a waiting call looks at the scenario file for new Xids.
const POLL: Duration = Duration::from_millis(5);

/// `nvmlEventSetCreate(set)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) -> nvmlReturn_t {
    system_call("nvmlEventSetCreate", |_| {
        if set.is_null() {
            return INVALID_ARGUMENT;
        }
        let mut guard = sets();
        let id = guard.1;
        guard.1 += 1;
        guard.0.insert(id, Set::new());
        // SAFETY: the caller passes a pointer to an `nvmlEventSet_t` (checked non-null).
        unsafe { put(set, Some(encode_set(id))) }
    })
}

/// `nvmlEventSetFree(set)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetFree(set: nvmlEventSet_t) -> nvmlReturn_t {
    system_call("nvmlEventSetFree", |_| {
        match decode_set(set).and_then(|id| sets().0.remove(&id)) {
            Some(_) => SUCCESS,
            None => INVALID_ARGUMENT,
        }
    })
}

/// `nvmlDeviceGetSupportedEventTypes(device, eventTypes)`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetSupportedEventTypes(
    device: nvmlDevice_t,
    eventTypes: *mut c_ulonglong,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetSupportedEventTypes", device, |g, _| {
        // SAFETY: the caller passes a pointer to an `unsigned long long` (or null).
        unsafe { put(eventTypes, g.supported_event_types) }
    })
}

/// `nvmlDeviceRegisterEvents(device, eventTypes, set)`: `NOT_SUPPORTED` for a GPU
/// without events or a type outside its mask. Registering again adds types.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceRegisterEvents(
    device: nvmlDevice_t,
    eventTypes: c_ulonglong,
    set: nvmlEventSet_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceRegisterEvents", device, |g, index| {
        let Some(supported) = g.supported_event_types else {
            return NOT_SUPPORTED;
        };
        if eventTypes & !supported != 0 {
            return NOT_SUPPORTED;
        }
        let mut guard = sets();
        let Some(reg) = decode_set(set).and_then(|id| guard.0.get_mut(&id)) else {
            return INVALID_ARGUMENT;
        };
        let entry = reg.entry(index).or_insert(Registration {
            mask: 0,
            seen: g.xids.len(),
        });
        entry.mask |= eventTypes;
        SUCCESS
    })
}

/// The next Xid set `id` has to deliver in `scenario`, taken (marked delivered).
fn take_event(scenario: &Scenario, id: usize) -> Result<Option<(u32, Xid)>, nvmlReturn_t> {
    let mut guard = sets();
    let set = guard.0.get_mut(&id).ok_or(INVALID_ARGUMENT)?;
    for (&index, reg) in set.iter_mut() {
        if reg.mask & u64::from(nvmlEventTypeXidCriticalError) == 0 {
            continue;
        }
        let Some(gpu) = scenario.gpus.get(index as usize) else {
            continue;
        };
        // A history rewritten shorter starts over from its new end.
        reg.seen = reg.seen.min(gpu.xids.len());
        if let Some(&xid) = gpu.xids.get(reg.seen) {
            reg.seen += 1;
            return Ok(Some((index, xid)));
        }
    }
    Ok(None)
}

/// Shared body of the two waits: the next Xid of `set` as `nvmlEventData_t`, waiting up
/// to `timeout_ms` for one (re-reading the scenario file every [`POLL`]), else `TIMEOUT`.
/// A scenario read once cannot gain an Xid: the wait then sleeps through its timeout at
/// once, as a driver's blocks, so a benchmark sees a driver's wake-ups, not the polls.
fn wait(set: nvmlEventSet_t, timeout_ms: c_uint) -> Result<nvmlEventData_t, nvmlReturn_t> {
    let id = decode_set(set).ok_or(INVALID_ARGUMENT)?;
    let deadline = Instant::now() + Duration::from_millis(u64::from(timeout_ms));
    loop {
        let found = match state::refresh().scenario {
            Some(scenario) => take_event(&scenario, id)?,
            None => None,
        };
        if let Some((index, xid)) = found {
            return Ok(nvmlEventData_t {
                device: encode_handle(index),
                eventType: u64::from(nvmlEventTypeXidCriticalError),
                eventData: xid.code,
                gpuInstanceId: xid.gpu_instance_id.unwrap_or(NO_INSTANCE),
                computeInstanceId: xid.compute_instance_id.unwrap_or(NO_INSTANCE),
            });
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(nvmlReturn_enum_NVML_ERROR_TIMEOUT);
        }
        let poll = match state::read_once() {
            true => deadline - now,
            false => POLL.min(deadline - now),
        };
        std::thread::sleep(poll);
    }
}

/// `nvmlEventSetWait_v2(set, data, timeoutms)` (R450+).
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeoutms: c_uint,
) -> nvmlReturn_t {
    system_call("nvmlEventSetWait_v2", |_| {
        if data.is_null() {
            return INVALID_ARGUMENT;
        }
        match wait(set, timeoutms) {
            // SAFETY: the caller passes a pointer to an `nvmlEventData_t` (non-null).
            Ok(event) => unsafe { put(data, Some(event)) },
            Err(code) => code,
        }
    })
}

/// `nvmlEventData_t` of drivers before R450: no instance ids.
#[repr(C)]
#[derive(Clone, Copy)]
struct EventDataV1 {
    device: nvmlDevice_t,
    event_type: c_ulonglong,
    event_data: c_ulonglong,
}

/// `nvmlEventSetWait(set, data, timeoutms)`: writes only the fields drivers before R450
/// had (24 bytes), so whatever follows in the caller's struct is left alone.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetWait(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeoutms: c_uint,
) -> nvmlReturn_t {
    system_call("nvmlEventSetWait", |_| {
        if data.is_null() {
            return INVALID_ARGUMENT;
        }
        match wait(set, timeoutms) {
            Ok(event) => {
                let v1 = EventDataV1 {
                    device: event.device,
                    event_type: event.eventType,
                    event_data: event.eventData,
                };
                // SAFETY: the caller passes a pointer to an `nvmlEventData_t` (non-null),
                // which begins with the 24 bytes of the old struct.
                unsafe { put(data.cast::<EventDataV1>(), Some(v1)) }
            }
            Err(code) => code,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_handles_are_never_device_handles() {
        let s = encode_set(3);
        assert_eq!(decode_set(s), Some(3));
        assert_eq!(decode_set(encode_handle(3).cast()), None);
        assert_eq!(crate::ffi::decode_handle(s.cast()), None);
    }

    #[test]
    fn xids_parse_with_and_without_an_instance() {
        let s = Scenario::parse(
            r#"{"gpus": [{"supported_event_types": 8, "xids": [{"code": 79},
                {"code": 94, "gpu_instance_id": 1, "compute_instance_id": 0}]}]}"#,
        )
        .unwrap();
        let x = &s.gpus[0].xids;
        assert_eq!((x[0].code, x[0].gpu_instance_id), (79, None));
        assert_eq!(
            (x[1].gpu_instance_id, x[1].compute_instance_id),
            (Some(1), Some(0))
        );
        assert!(Scenario::parse(r#"{"gpus": [{"xids": [{"xid": 79}]}]}"#).is_err());
    }
}
