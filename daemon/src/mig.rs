//! MIG: the instances of a MIG-enabled GPU, found on a slow cadence and when the layout
//! changes, and read every tick for what they cheaply can give.
//!
//! Under MIG a GPU's unit of allocation is the MIG device (a compute instance of a GPU
//! instance), and NVML reports no utilisation for the parent; what is left to watch is
//! each instance's memory, its GPM activity (Hopper and newer) and its processes (the
//! parent's process lists carry each process's instance ids).
//!
//! - **MIG mode** (`nvmlDeviceGetMigMode`, one call) is read on the first tick and on
//!   every slow tick; a GPU that answers "not supported" is never asked again in the
//!   session. While MIG is on, the parent's utilisation and its per-process utilisation
//!   (both `NOT_SUPPORTED` under MIG) are not asked for at all.
//! - **Enumeration** (the maximum device count, a handle per device index, each
//!   device's instance ids, UUID, attributes and profile) runs when MIG mode turns on,
//!   every [`ENUMERATE_PERIOD`], and as soon as the layout is seen to change: a known
//!   instance's handle is refused (`INVALID_ARGUMENT` or `NOT_FOUND`: it was destroyed;
//!   the instance is not published again), a slow tick lists a process in an instance
//!   not known, or a slow tick finds a MIG device at the first index no known instance
//!   holds (one `nvmlDeviceGetMigDeviceHandleByIndex` per process turn: a new instance
//!   with no process yet). Any other failure of an instance's call is that value's
//!   alone. The profile comes from the GPU instance's profile, as nvidia-smi and DCGM
//!   name it (`nvmlDeviceGetGpuInstanceById`, `nvmlGpuInstanceGetInfo`, whose profile
//!   id and placement are published too, then the profile table from
//!   `nvmlDeviceGetGpuInstanceProfileInfoV`, read once per session), prefixed `Nc.` for
//!   a compute instance of `N` slices of a larger GPU instance; where those queries fail
//!   (an unprivileged caller, a driver without the versioned profile info) it is parsed
//!   from the MIG device's name (`"... MIG 1g.10gb"`), as nvitop and gpustat do.
//! - **Every tick**: one memory call per instance, and GPM's two calls per GPU instance
//!   where the parent has GPM and the instance supports it.
//!
//! A failure on an instance is the instance's: it never marks the parent in error, and
//! only `GPU_IS_LOST` stops the GPU's tick.

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlGpuInstanceInfo_t, nvmlGpuInstanceProfileInfo_v2_t, nvmlGpuInstance_t,
    NVML_GPU_INSTANCE_PROFILE_COUNT,
};

use gpupeek_shm::layout::{gpu_valid as v, mig_valid};
use gpupeek_shm::{text, MigRecord};

use crate::fallback;
use crate::gpm::Gpm;
use crate::gpuprocs::GpuProcess;
use crate::reads::Fill;

/// How often a MIG-enabled GPU's instances are enumerated again when nothing said the
/// layout changed, ns.
pub const ENUMERATE_PERIOD: u64 = 10_000_000_000;

/// How soon an enumeration that failed is tried again, ns.
const RETRY_AFTER: u64 = 1_000_000_000;

/// Ticks in a row on which a vanished instance makes the daemon enumerate again at once.
const MAX_REFUSALS: u32 = 3;

/// `nvmlGpuInstanceProfileInfo_v2` from nvml.h: `NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2)`.
const PROFILE_INFO_V2: u32 =
    (std::mem::size_of::<nvmlGpuInstanceProfileInfo_v2_t>() as u32) | (2 << 24);

/// A MIG device handle kept across ticks.
#[derive(Debug, Clone, Copy)]
struct Handle(nvmlDevice_t);

// SAFETY: like the GPU's own handle (see `sampler::Handle`): an opaque NVML token only
// passed back to NVML, in the session that made it, which the owning sampler holds.
unsafe impl Send for Handle {}

/// One known MIG device.
struct Instance {
    handle: Handle,
    /// What enumeration found; memory and GPM are filled in each tick.
    rec: MigRecord,
}

/// MIG state of one GPU within one NVML session.
#[derive(Default)]
pub struct Mig {
    /// `None`: not asked yet; `Some(None)`: the GPU has no MIG; else (current, pending).
    mode: Option<Option<(u32, u32)>>,
    instances: Vec<Instance>,
    /// GPM of each GPU instance, by GPU instance id.
    gpm: Vec<(u32, Gpm)>,
    /// `CLOCK_MONOTONIC` ns when the instances are enumerated again (0: now).
    due_ns: u64,
    /// GPU-instance profile id → name, read once per session (`None`: not yet).
    profiles: Option<Vec<(u32, String)>>,
    /// Ticks in a row on which a known instance was gone.
    refusals: u32,
}

impl Mig {
    /// MIG mode is on (as last read).
    pub fn enabled(&self) -> bool {
        matches!(self.mode, Some(Some((1, _))))
    }

    /// Reads the MIG mode of `parent` on a `slow` tick or when never read (a GPU without
    /// MIG is not asked again): before the tick's other calls, which depend on it.
    pub fn read_mode_if_due(&mut self, nvml: &Nvml, parent: &Device, fill: &mut Fill, slow: bool) {
        if self.mode.is_none() || (slow && self.mode != Some(None)) {
            self.read_mode(nvml, parent, fill);
            if slow {
                self.probe_for_new(parent, fill);
            }
        }
    }

    /// Looks for a MIG device created since the last enumeration, before any process
    /// runs in it: one call per process turn, for the lowest MIG device index no known
    /// instance holds (drivers number MIG devices from 0, so a new one takes the first
    /// free index). A device there means the layout changed: enumerate on this tick.
    fn probe_for_new(&mut self, parent: &Device, fill: &mut Fill) {
        if !self.enabled() || self.due_ns == 0 {
            return;
        }
        let free = (0u32..).find(|i| !self.instances.iter().any(|k| k.rec.mig_index == *i));
        let Some(free) = free else {
            return;
        };
        match parent.mig_device_by_index(free) {
            Ok(_) => self.due_ns = 0,
            Err(NvmlError::GpuLost) => fill.lost = true,
            // NOT_FOUND, or INVALID_ARGUMENT past the maximum: nothing new.
            Err(_) => {}
        }
    }

    /// One tick of the MIG GPU `parent`, after [`Self::read_mode_if_due`]: publishes the
    /// mode, enumerates the instances when due, reads each instance's memory and GPM
    /// (`gpm_ok`: the parent has GPM) and appends their records to `out`.
    pub fn tick(
        &mut self,
        nvml: &Nvml,
        parent: &Device,
        fill: &mut Fill,
        (now, gpm_ok): (u64, bool),
        out: &mut Vec<MigRecord>,
    ) {
        if let Some(Some((current, pending))) = self.mode {
            fill.rec.mig_mode_current = current;
            fill.rec.mig_mode_pending = pending;
            fill.rec.valid |= v::MIG_MODE;
        }
        if !self.enabled() || fill.lost {
            return;
        }
        if now >= self.due_ns {
            self.enumerate(nvml, parent, fill, now);
        }
        let start = out.len();
        if self.read(nvml, parent, fill, (now, gpm_ok), out) || fill.lost {
            self.refusals = 0;
            return;
        }
        // An instance is gone: the layout changed under us, so find the new one now;
        // but a driver that keeps refusing handles it has just given gets the regular
        // cadence after a few ticks, not an enumeration every tick.
        self.refusals = self.refusals.saturating_add(1);
        if self.refusals <= MAX_REFUSALS {
            out.truncate(start);
            self.enumerate(nvml, parent, fill, now);
            self.read(nvml, parent, fill, (now, gpm_ok), out);
        }
    }

    /// Notes the processes a slow tick listed: one in an instance not known means the
    /// layout changed, so the instances are enumerated again on the next tick.
    pub fn note_processes(&mut self, procs: &[GpuProcess]) {
        if !self.enabled() {
            return;
        }
        let known = |p: &GpuProcess| {
            self.instances.iter().any(|i| {
                Some(i.rec.gpu_instance_id) == p.gpu_instance_id
                    && Some(i.rec.compute_instance_id) == p.compute_instance_id
            })
        };
        if procs
            .iter()
            .any(|p| p.gpu_instance_id.is_some() && !known(p))
        {
            self.due_ns = 0;
        }
    }

    /// Frees the GPM samples and forgets everything (the GPU was lost, or the session
    /// ends): the next tick asks again.
    pub fn release(&mut self, nvml: &Nvml) {
        for (_, gpm) in &mut self.gpm {
            gpm.release(nvml);
        }
        *self = Mig {
            profiles: self.profiles.take(),
            ..Mig::default()
        };
    }

    fn read_mode(&mut self, nvml: &Nvml, parent: &Device, fill: &mut Fill) {
        let mode = match parent.mig_mode() {
            Ok(m) => Some((m.current, m.pending)),
            Err(NvmlError::GpuLost) => {
                fill.lost = true;
                return;
            }
            Err(
                NvmlError::NotSupported
                | NvmlError::FunctionNotFound
                | NvmlError::FailedToLoadSymbol(_),
            ) => None,
            // Any other failure: unknown this time, asked again on the next slow tick.
            Err(_) => return,
        };
        let on = matches!(mode, Some((1, _)));
        if on != self.enabled() && self.mode.is_some() {
            log::info!(
                "GPU {}: MIG mode turned {}",
                fill.rec.index,
                if on { "on" } else { "off" }
            );
        }
        if on != self.enabled() {
            self.release(nvml);
        }
        self.mode = Some(mode);
    }

    /// Finds the MIG devices of `parent` and what does not change about them.
    fn enumerate(&mut self, nvml: &Nvml, parent: &Device, fill: &mut Fill, now: u64) {
        let max = match parent.mig_device_count() {
            Ok(n) => n,
            // A failure of this one call keeps the instances known, for a second.
            Err(e) => {
                fill.lost |= matches!(e, NvmlError::GpuLost);
                self.due_ns = now.saturating_add(RETRY_AFTER);
                return;
            }
        };
        self.due_ns = now.saturating_add(ENUMERATE_PERIOD);
        self.instances.clear();
        for index in 0..max {
            let device = match parent.mig_device_by_index(index) {
                Ok(d) => d,
                Err(NvmlError::GpuLost) => {
                    fill.lost = true;
                    return;
                }
                // NOT_FOUND: no MIG device at this index.
                Err(_) => continue,
            };
            if let Some(rec) = self.describe(nvml, parent, &device, fill.rec.index, index) {
                // SAFETY: the raw handle is only kept, to be passed back to NVML in this
                // session (see `Handle`).
                let handle = Handle(unsafe { device.handle() });
                self.instances.push(Instance { handle, rec });
            }
        }
        let gis: Vec<u32> = self
            .instances
            .iter()
            .map(|i| i.rec.gpu_instance_id)
            .collect();
        for (gi, gpm) in &mut self.gpm {
            if !gis.contains(gi) {
                gpm.release(nvml);
            }
        }
        self.gpm.retain(|(gi, _)| gis.contains(gi));
    }

    /// The static part of one MIG device's record; `None` when even its instance ids
    /// cannot be read (it vanished while being enumerated).
    fn describe(
        &mut self,
        nvml: &Nvml,
        parent: &Device,
        device: &Device,
        gpu_index: u32,
        mig_index: u32,
    ) -> Option<MigRecord> {
        let lib = nvml.lib();
        let gi = instance_id(device, lib.nvmlDeviceGetGpuInstanceId.as_ref().ok()?)?;
        let ci = instance_id(device, lib.nvmlDeviceGetComputeInstanceId.as_ref().ok()?)?;
        let mut rec = MigRecord {
            gpu_index,
            mig_index,
            gpu_instance_id: gi,
            compute_instance_id: ci,
            ..MigRecord::default()
        };
        if let Ok(uuid) = device.uuid() {
            text::encode(&mut rec.uuid, &uuid);
            rec.valid |= mig_valid::UUID;
        }
        if let Ok(a) = device.attributes() {
            rec.sm_count = a.multiprocessor_count;
            rec.gpu_instance_slice_count = a.gpu_instance_slice_count;
            rec.compute_instance_slice_count = a.compute_instance_slice_count;
            rec.valid |= mig_valid::SM_COUNT | mig_valid::SLICES;
        }
        let info = gpu_instance_info(nvml, parent, gi);
        if let Some(info) = &info {
            rec.gpu_instance_profile_id = info.profileId;
            rec.placement_start = info.placement.start;
            rec.placement_size = info.placement.size;
            rec.valid |= mig_valid::PLACEMENT;
        }
        let from_gi = info
            .and_then(|info| self.profile_name(nvml, parent, info.profileId))
            .map(|gi_profile| {
                let (gs, cs) = (
                    rec.gpu_instance_slice_count,
                    rec.compute_instance_slice_count,
                );
                compute_profile(&gi_profile, rec.valid & mig_valid::SLICES != 0, gs, cs)
            });
        let profile = from_gi.or_else(|| device.name().ok().and_then(|n| profile_of_name(&n)));
        if let Some(profile) = profile {
            text::encode(&mut rec.profile, &profile);
            rec.valid |= mig_valid::PROFILE;
        }
        Some(rec)
    }

    /// The name of GPU-instance profile `id` ("3g.40gb"), from the GPU's profile table.
    fn profile_name(&mut self, nvml: &Nvml, parent: &Device, id: u32) -> Option<String> {
        if self.profiles.is_none() {
            self.profiles = Some(profile_table(nvml, parent));
        }
        let profiles = self.profiles.as_ref()?;
        profiles
            .iter()
            .find(|(profile, _)| *profile == id)
            .map(|(_, name)| name.clone())
    }

    /// Reads every known instance's memory and GPM into records appended to `out`;
    /// false when one is gone (its handle no longer answers).
    fn read(
        &mut self,
        nvml: &Nvml,
        parent: &Device,
        fill: &mut Fill,
        (now, gpm_ok): (u64, bool),
        out: &mut Vec<MigRecord>,
    ) -> bool {
        let mut all_there = true;
        for i in &self.instances {
            // SAFETY: the handle came from `mig_device_by_index` in this session, which
            // the caller's `nvml` holds open.
            let device = unsafe { Device::new(i.handle.0, nvml) };
            let mut rec = i.rec;
            rec.sample_mono_ns = now;
            match fallback::memory(nvml, &device) {
                Ok(m) => {
                    rec.mem_total_bytes = m.total;
                    rec.mem_used_bytes = m.used;
                    rec.mem_free_bytes = m.free;
                    rec.valid |= mig_valid::MEMORY;
                }
                Err(NvmlError::GpuLost) => {
                    fill.lost = true;
                    return true;
                }
                // The handle no longer stands for a MIG device: it was destroyed.
                Err(NvmlError::InvalidArg | NvmlError::NotFound) => {
                    all_there = false;
                    continue;
                }
                // Not supported, or a failure of this call: no memory figure this tick.
                Err(_) => {}
            }
            if gpm_ok {
                put_gpm(&mut self.gpm, nvml, parent, &mut rec, now);
            }
            out.push(rec);
        }
        all_there
    }
}

/// GPM of `rec`'s GPU instance, sampled once per tick however many compute
/// instances share it.
fn put_gpm(
    gpms: &mut Vec<(u32, Gpm)>,
    nvml: &Nvml,
    parent: &Device,
    rec: &mut MigRecord,
    now: u64,
) {
    let gi = rec.gpu_instance_id;
    let at = match gpms.iter().position(|(id, _)| *id == gi) {
        Some(at) => at,
        None => {
            gpms.push((gi, Gpm::for_instance()));
            gpms.len() - 1
        }
    };
    let gpm = &mut gpms[at].1;
    if gpm.unsupported() {
        return;
    }
    // A failure other than "not supported" is this tick's: no figures.
    if let Ok(Some(metrics)) = gpm.tick(nvml, parent, now, Some(gi)) {
        metrics.put_mig(rec);
    }
}

/// GPU instance `gi`'s profile id and placement (`nvmlDeviceGetGpuInstanceById`, then
/// `nvmlGpuInstanceGetInfo`).
fn gpu_instance_info(nvml: &Nvml, parent: &Device, gi: u32) -> Option<nvmlGpuInstanceInfo_t> {
    let lib = nvml.lib();
    let by_id = lib.nvmlDeviceGetGpuInstanceById.as_ref().ok()?;
    let get_info = lib.nvmlGpuInstanceGetInfo.as_ref().ok()?;
    let mut instance: nvmlGpuInstance_t = std::ptr::null_mut();
    // SAFETY: `by_id` has the C signature `nvmlReturn_t (nvmlDevice_t, unsigned int,
    // nvmlGpuInstance_t *)`; the parent's handle is from the live session and
    // `instance` a valid, writable handle.
    nvml_try(unsafe { by_id(parent.handle(), gi, &mut instance) }).ok()?;
    // SAFETY: all-zero is a valid `nvmlGpuInstanceInfo_t` (integers and a null handle).
    let mut info: nvmlGpuInstanceInfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `get_info` has the C signature `nvmlReturn_t (nvmlGpuInstance_t,
    // nvmlGpuInstanceInfo_t *)`; `instance` came from the call above in this session.
    nvml_try(unsafe { get_info(instance, &mut info) }).ok()?;
    Some(info)
}

/// An instance id read with `get` (`nvmlDeviceGetGpuInstanceId` or
/// `nvmlDeviceGetComputeInstanceId`).
fn instance_id(
    device: &Device,
    get: &unsafe extern "C" fn(nvmlDevice_t, *mut u32) -> u32,
) -> Option<u32> {
    let mut id = 0u32;
    // SAFETY: `get` has the C signature `nvmlReturn_t (nvmlDevice_t, unsigned int *)`;
    // the handle is from the live session and `id` a valid, writable unsigned int.
    nvml_try(unsafe { get(device.handle(), &mut id) }).ok()?;
    Some(id)
}

/// The GPU's GPU-instance profiles (id, name without "MIG "), from
/// `nvmlDeviceGetGpuInstanceProfileInfoV` for every profile index; empty where the
/// driver lacks it.
fn profile_table(nvml: &Nvml, parent: &Device) -> Vec<(u32, String)> {
    let Ok(get) = nvml.lib().nvmlDeviceGetGpuInstanceProfileInfoV.as_ref() else {
        return Vec::new();
    };
    let mut table = Vec::new();
    for index in 0..NVML_GPU_INSTANCE_PROFILE_COUNT {
        // SAFETY: all-zero is a valid `nvmlGpuInstanceProfileInfo_v2_t` (integers and
        // bytes).
        let mut info: nvmlGpuInstanceProfileInfo_v2_t = unsafe { std::mem::zeroed() };
        info.version = PROFILE_INFO_V2;
        // SAFETY: `get` has the C signature `nvmlReturn_t (nvmlDevice_t, unsigned int,
        // nvmlGpuInstanceProfileInfo_v2_t *)`; the handle is from the live session and
        // `info` a valid, writable struct with its version set.
        if nvml_try(unsafe { get(parent.handle(), index, &mut info) }).is_err() {
            // Not a profile of this GPU.
            continue;
        }
        let name: Vec<u8> = info
            .name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        let name = String::from_utf8_lossy(&name);
        let name = name.strip_prefix("MIG ").unwrap_or(&name).trim().to_owned();
        if !name.is_empty() {
            table.push((info.id, name));
        }
    }
    table
}

/// The profile of a MIG device whose GPU instance has profile `gi_profile`: the same
/// when its compute instance has every slice of the GPU instance, else prefixed with
/// its compute slices (`"1c.3g.40gb"`), as nvidia-smi names it.
fn compute_profile(gi_profile: &str, known: bool, gi_slices: u32, ci_slices: u32) -> String {
    if known && ci_slices > 0 && ci_slices < gi_slices {
        format!("{ci_slices}c.{gi_profile}")
    } else {
        gi_profile.to_owned()
    }
}

/// The profile in a MIG device's name: `"NVIDIA H100 80GB HBM3 MIG 3g.40gb"` →
/// `"3g.40gb"`.
fn profile_of_name(name: &str) -> Option<String> {
    let (_, profile) = name.rsplit_once("MIG ")?;
    let profile = profile.trim();
    (!profile.is_empty()).then(|| profile.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_is_read_from_a_mig_device_name() {
        let name = "NVIDIA H100 80GB HBM3 MIG 3g.40gb";
        assert_eq!(profile_of_name(name).as_deref(), Some("3g.40gb"));
        let name = "NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb";
        assert_eq!(profile_of_name(name).as_deref(), Some("1c.3g.20gb"));
        assert_eq!(profile_of_name("NVIDIA H100 80GB HBM3"), None);
        assert_eq!(profile_of_name("NVIDIA H100 MIG "), None);
    }

    #[test]
    fn a_compute_instance_smaller_than_its_gpu_instance_is_prefixed_with_its_slices() {
        assert_eq!(compute_profile("3g.40gb", true, 3, 3), "3g.40gb");
        assert_eq!(compute_profile("3g.40gb", true, 3, 1), "1c.3g.40gb");
        assert_eq!(compute_profile("3g.40gb", false, 0, 0), "3g.40gb");
    }

    #[test]
    fn a_process_in_an_unknown_instance_makes_the_enumeration_due() {
        let mut mig = Mig {
            mode: Some(Some((1, 1))),
            due_ns: u64::MAX,
            ..Mig::default()
        };
        mig.instances.push(Instance {
            handle: Handle(std::ptr::null_mut()),
            rec: MigRecord {
                gpu_instance_id: 1,
                compute_instance_id: 0,
                ..MigRecord::default()
            },
        });
        let process = |gi: Option<u32>| GpuProcess {
            gpu_instance_id: gi,
            compute_instance_id: gi.map(|_| 0),
            ..GpuProcess::default()
        };
        mig.note_processes(&[process(Some(1)), process(None)]);
        assert_eq!(mig.due_ns, u64::MAX, "known instance, or none: no change");
        mig.note_processes(&[process(Some(2))]);
        assert_eq!(
            mig.due_ns, 0,
            "a process in GPU instance 2, which is not known"
        );
    }

    #[test]
    fn the_profile_info_version_is_nvml_struct_version_2() {
        let size = std::mem::size_of::<nvmlGpuInstanceProfileInfo_v2_t>() as u32;
        assert_eq!(PROFILE_INFO_V2, size | 0x0200_0000);
    }
}
