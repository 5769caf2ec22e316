//! NVML's Xid events, on a thread of their own.
//!
//! Each NVML session ([`crate::session::Session`]) starts one [`Events`] thread: it
//! creates an event set, registers each GPU for `nvmlEventTypeXidCriticalError` once the
//! publisher has given it a job (a runtime-suspended GPU is never touched: any call
//! would wake it), leaving out a GPU whose `nvmlDeviceGetSupportedEventTypes` lacks it or
//! whose registration NVML refuses as not supported (a vGPU guest, some containers), then
//! waits on the set in a loop and counts each Xid at the GPU it came from
//! ([`crate::xid::Xids`]); an Xid of a MIG instance comes with the parent GPU's handle
//! and the instance's ids. The tick never waits for it: a wait that hangs stops nothing
//! else. While no GPU is registered it makes no call and does not wake up: it sleeps
//! until a GPU not tried yet is known awake, or its session ends.
//!
//! The wait is `nvmlEventSetWait_v2` (R450+, whose data carries the MIG instance), or on
//! older drivers `nvmlEventSetWait`, resolved once per session. It returns at least every
//! [`WAIT_MS`], when the thread looks whether its session has ended ([`Events`] dropped):
//! it then frees the set and lets go of its share of the session, so `nvmlShutdown` runs
//! (a release for a GPU reset, runtime PM, a stop) a moment later. A new session (after a
//! re-init) makes a new set; Xids that came between the two are not delivered.

use std::os::raw::{c_uint, c_ulonglong};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::Nvml;
use nvml_wrapper_sys::bindings::{
    self, nvmlDevice_t, nvmlEventData_t, nvmlEventSet_t, nvmlReturn_t,
};

use crate::sampler::Sampler;
use crate::worker::Done;
use crate::xid::{Last, Uuid, Xids};

/// Longest time one wait blocks, ms: how long a session's end may wait for this thread.
pub const WAIT_MS: u32 = 500;

/// `nvmlEventTypeXidCriticalError`.
const XID: c_ulonglong = bindings::nvmlEventTypeXidCriticalError as c_ulonglong;

/// NVML's "no instance" in `nvmlEventData_t`'s instance ids.
const NO_INSTANCE: c_uint = 0xFFFF_FFFF;

/// `nvmlEventSetWait_v2` and `nvmlEventSetWait` share this signature.
type Wait = unsafe extern "C" fn(nvmlEventSet_t, *mut nvmlEventData_t, c_uint) -> nvmlReturn_t;

/// The events thread of one session; dropping it asks the thread to end.
pub struct Events {
    stop: Arc<AtomicBool>,
    awake: Arc<Awake>,
}

/// What the thread is told between its waits.
#[derive(Default)]
struct Awake {
    /// `gpus[i]`: GPU `i` has been given a job, so it is awake and may be registered.
    /// It grows with the GPUs NVML counts, which are counted again each tick.
    gpus: Mutex<Vec<bool>>,
    /// Signalled when a GPU is first known awake, and when the session ends.
    changed: Condvar,
}

impl Events {
    /// Starts counting the Xids of the GPUs of `sampler`'s session into `xids`, each
    /// once it is known awake; `done` is signalled once the thread has let go of the
    /// session.
    pub fn spawn(sampler: Sampler, xids: Xids, done: Arc<Done>) -> Option<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let awake = Arc::new(Awake::default());
        let (flag, gpus) = (Arc::clone(&stop), Arc::clone(&awake));
        let spawned = std::thread::Builder::new()
            .name("nvml-events".into())
            .spawn(move || {
                run(&sampler, &gpus, &xids, &flag);
                // The session's close waits for this share (and `nvmlShutdown`, when it
                // is the last one).
                drop(sampler);
                done.signal();
            });
        match spawned {
            Ok(_) => Some(Events { stop, awake }),
            Err(e) => {
                log::error!("cannot start a thread for NVML's Xid events: {e}");
                None
            }
        }
    }

    /// GPU `slot` is awake (the publisher gives it a job): it is registered for Xid
    /// events before the next wait. A GPU that sleeps (runtime-suspended) is never
    /// touched, as every NVML call on it would wake it.
    pub fn awake(&self, slot: usize) {
        let mut awake = self
            .awake
            .gpus
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if awake.len() <= slot {
            awake.resize(slot + 1, false);
        }
        if !awake[slot] {
            awake[slot] = true;
            self.awake.changed.notify_one();
        }
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        // Under the lock, so that a thread about to sleep sees it or is woken by it.
        let _awake = self
            .awake
            .gpus
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.stop.store(true, Ordering::Release);
        self.awake.changed.notify_one();
    }
}

/// What became of a GPU's registration.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// Not tried yet (not known awake).
    Untried,
    /// Registered: its Xids are counted.
    Counted,
    /// NVML has no Xid events for it.
    Unsupported,
    /// Registering failed otherwise.
    Failed(String),
}

/// The thread: set up, register the GPUs as they are known awake, wait and count until
/// the session ends, free the set.
fn run(sampler: &Sampler, awake: &Awake, xids: &Xids, stop: &AtomicBool) {
    let nvml = sampler.nvml();
    let lib = nvml.lib();
    let wait: Wait = match (&lib.nvmlEventSetWait_v2, &lib.nvmlEventSetWait) {
        (Ok(v2), _) => *v2,
        (Err(_), Ok(v1)) => *v1,
        _ => {
            log::info!("this NVML has no event wait: Xid errors are not counted");
            return;
        }
    };
    let set = match create(nvml) {
        Ok(set) => set,
        Err(e) => {
            log::warn!("cannot create an NVML event set ({e}): Xid errors are not counted");
            return;
        }
    };
    let mut outcomes = Vec::new();
    let mut known: Vec<bool> = Vec::new();
    let mut gpus: Vec<Registered> = Vec::new();
    let mut failing = false;
    while !stop.load(Ordering::Acquire) {
        // Copied into a vector kept across loops: no allocation once it has grown.
        known.clear();
        known.extend_from_slice(&awake.gpus.lock().unwrap_or_else(PoisonError::into_inner));
        outcomes.resize(known.len(), Outcome::Untried);
        register(nvml, set, &known, &mut outcomes, &mut gpus, xids);
        if gpus.is_empty() {
            // Nothing to wait on: sleep until a GPU is newly awake or the session ends
            // (every GPU known awake has been tried, and is not tried again).
            let gpus = awake.gpus.lock().unwrap_or_else(PoisonError::into_inner);
            let sleep = awake.changed.wait_while(gpus, |gpus| {
                !stop.load(Ordering::Acquire) && gpus.as_slice() == known.as_slice()
            });
            drop(sleep.unwrap_or_else(PoisonError::into_inner));
            continue;
        }
        let mut data = nvmlEventData_t {
            device: std::ptr::null_mut(),
            eventType: 0,
            eventData: 0,
            // What `nvmlEventSetWait` (drivers before R450) leaves as it is.
            gpuInstanceId: NO_INSTANCE,
            computeInstanceId: NO_INSTANCE,
        };
        // SAFETY: `wait` is the library's `nvmlEventSetWait{,_v2}`, of signature `Wait`;
        // `set` is the live set this thread created, and `data` a writable
        // `nvmlEventData_t` (the older wait writes its first 24 bytes only).
        match nvml_try(unsafe { wait(set, &mut data, WAIT_MS) }) {
            Ok(()) => {
                failing = false;
                on_event(&gpus, &data, xids);
            }
            Err(NvmlError::Timeout) => failing = false,
            Err(e) => {
                if !failing {
                    log::warn!("waiting for NVML events failed: {e}; trying again");
                    failing = true;
                }
                std::thread::sleep(Duration::from_millis(WAIT_MS.into()));
            }
        }
    }
    free(nvml, set);
}

fn create(nvml: &Nvml) -> Result<nvmlEventSet_t, NvmlError> {
    let create = nvml
        .lib()
        .nvmlEventSetCreate
        .as_ref()
        .map_err(|_| NvmlError::FunctionNotFound)?;
    let mut set: nvmlEventSet_t = std::ptr::null_mut();
    // SAFETY: `nvmlEventSetCreate(nvmlEventSet_t *)`; `set` is writable.
    nvml_try(unsafe { create(&mut set) })?;
    Ok(set)
}

fn free(nvml: &Nvml, set: nvmlEventSet_t) {
    if let Ok(free) = nvml.lib().nvmlEventSetFree.as_ref() {
        // SAFETY: `set` is the live set `create` made; it is not used after this.
        if let Err(e) = nvml_try(unsafe { free(set) }) {
            log::debug!("nvmlEventSetFree: {e}");
        }
    }
}

/// A GPU registered for Xid events in this session.
struct Registered {
    /// Its handle, as events name it.
    handle: usize,
    /// Its NVML index in this session (for the log).
    index: u32,
    /// Its UUID, which its counts are kept by.
    uuid: Uuid,
}

/// Registers for Xid events in `set` each GPU newly known awake, adding those NVML
/// accepts to `gpus`; logs what came of them all when that changed (and, across
/// sessions, only when it differs from the last session's).
fn register(
    nvml: &Nvml,
    set: nvmlEventSet_t,
    awake: &[bool],
    outcomes: &mut [Outcome],
    gpus: &mut Vec<Registered>,
    xids: &Xids,
) {
    let mut tried = false;
    for (index, (&awake, outcome)) in (0u32..).zip(awake.iter().zip(outcomes.iter_mut())) {
        if *outcome != Outcome::Untried || !awake {
            continue;
        }
        tried = true;
        *outcome = match register_one(nvml, set, index) {
            Ok((handle, uuid)) => {
                xids.registered(&uuid);
                gpus.push(Registered {
                    handle: handle as usize,
                    index,
                    uuid,
                });
                Outcome::Counted
            }
            Err(NvmlError::NotSupported) => Outcome::Unsupported,
            Err(e) => Outcome::Failed(e.to_string()),
        };
    }
    if tried {
        xids.say(summary(outcomes));
    }
}

/// One line of what came of the registrations so far.
fn summary(outcomes: &[Outcome]) -> String {
    let list = |want: fn(&Outcome) -> Option<String>| -> String {
        let items: Vec<String> = (0..)
            .zip(outcomes)
            .filter_map(|(i, o): (u32, &Outcome)| want(o).map(|why| format!("{i}{why}")))
            .collect();
        items.join(", ")
    };
    let counted = list(|o| (*o == Outcome::Counted).then(String::new));
    let mut line = format!("Xids counted on GPUs [{counted}]");
    let unsupported = list(|o| (*o == Outcome::Unsupported).then(String::new));
    if !unsupported.is_empty() {
        line += &format!("; NVML has no events for [{unsupported}]");
    }
    let failed = list(|o| match o {
        Outcome::Failed(e) => Some(format!(" ({e})")),
        _ => None,
    });
    if !failed.is_empty() {
        line += &format!("; registering failed for [{failed}]");
    }
    line
}

/// Registers GPU `index` for Xid events in `set`: its handle and UUID.
fn register_one(
    nvml: &Nvml,
    set: nvmlEventSet_t,
    index: u32,
) -> Result<(nvmlDevice_t, Uuid), NvmlError> {
    let lib = nvml.lib();
    let supported = lib
        .nvmlDeviceGetSupportedEventTypes
        .as_ref()
        .map_err(|_| NvmlError::FunctionNotFound)?;
    let register = lib
        .nvmlDeviceRegisterEvents
        .as_ref()
        .map_err(|_| NvmlError::FunctionNotFound)?;
    let device = nvml.device_by_index(index)?;
    // SAFETY: the handle belongs to the live session `nvml` holds.
    let handle = unsafe { device.handle() };
    let mut types: c_ulonglong = 0;
    // SAFETY: `nvmlDeviceGetSupportedEventTypes(nvmlDevice_t, unsigned long long *)`;
    // `types` is writable.
    nvml_try(unsafe { supported(handle, &mut types) })?;
    if types & XID == 0 {
        return Err(NvmlError::NotSupported);
    }
    let mut uuid: Uuid = [0; 96];
    gpupeek_shm::text::encode(&mut uuid, &device.uuid()?);
    // SAFETY: `nvmlDeviceRegisterEvents(nvmlDevice_t, unsigned long long,
    // nvmlEventSet_t)`; the handle and the set are live. A failure leaves the set as it
    // was for the other GPUs (unlike nvml-wrapper's `register_events`, which frees it).
    nvml_try(unsafe { register(handle, XID, set) })?;
    Ok((handle, uuid))
}

/// Counts `data` if it is an Xid of a registered GPU.
fn on_event(gpus: &[Registered], data: &nvmlEventData_t, xids: &Xids) {
    if data.eventType & XID == 0 {
        return;
    }
    let Some(gpu) = gpus.iter().find(|g| g.handle == data.device as usize) else {
        log::debug!("an Xid event from a device handle this session did not register");
        return;
    };
    let instance =
        (data.gpuInstanceId != NO_INSTANCE).then_some((data.gpuInstanceId, data.computeInstanceId));
    let unix_ns = crate::run::unix_now_ns();
    let code = u32::try_from(data.eventData).unwrap_or(u32::MAX);
    log::warn!(
        "GPU {} ({}): Xid {code}{}",
        gpu.index,
        gpupeek_shm::text::decode(&gpu.uuid),
        instance.map_or(String::new(), |(gi, ci)| format!(
            " (GPU instance {gi}, compute instance {ci})"
        ))
    );
    xids.count(
        &gpu.uuid,
        Last {
            code,
            unix_ns,
            instance,
        },
    );
}
