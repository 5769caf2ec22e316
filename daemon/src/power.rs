//! Runtime power management: never wake a sleeping GPU, and let an idle one sleep.
//!
//! On a hybrid-graphics laptop the discrete GPU powers down (runtime D3) when nothing
//! uses it. Any NVML call wakes it, and merely holding NVML initialised keeps it awake.
//! So, reading only sysfs (see [`crate::sysfs`]) before touching NVML:
//!
//! - A GPU whose `runtime_status` is `suspended` (or `suspending`) is never queried: its
//!   record keeps the identity last read (name, UUID, PCI bus id, maximum clocks) and
//!   says [`GpuState::Suspended`]; no dynamic value is published for it.
//! - When every GPU is asleep, or idle (no compute process, 0 % GPU, encoder and decoder
//!   utilisation) for `release_after` (default 10 s), NVML is released (`nvmlShutdown`)
//!   so the kernel can power the GPU down; records then say [`GpuState::Idle`] until
//!   sysfs says `suspended`. Only GPUs with `control` = `auto` count: a GPU with runtime
//!   PM off (`on`), `unsupported`, or unreadable sysfs never sleeps, so NVML is kept.
//! - While released, only sysfs is read each tick. NVML is initialised again, and values
//!   published in that same tick, as soon as a GPU that has slept is `active` (or
//!   `resuming`) again: something else woke it. A GPU has slept when sysfs said so, or
//!   when its `runtime_suspended_time` grew (a suspend too short to be seen). A GPU that has not suspended within
//!   `release_after` plus its `autosuspend_delay_ms` of the release is kept awake by
//!   something else: monitoring resumes, and the next release waits twice as long (up to
//!   [`MAX_RELEASE_AFTER`]; back to `release_after` once a release lets a GPU sleep).
//! - At start, if every GPU found in sysfs is asleep, NVML is not initialised at all.
//!
//! NVML numbers GPUs in PCI address order, so NVML index `i` is matched with the `i`-th
//! NVIDIA GPU in sysfs until its PCI bus id has been read from NVML; from then on by
//! that address. With no NVIDIA GPU in sysfs, an unreadable sysfs, or the policy off
//! (`--no-runtime-pm`), the daemon holds NVML and queries every GPU every tick.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use gpupeek_shm::layout::{gpu_valid as v, GpuState};
use gpupeek_shm::{text, GpuRecord};

use crate::sysfs::{self, PciAddr, Power, Status};

/// Longest wait before releasing NVML after releases that did not let a GPU sleep.
pub const MAX_RELEASE_AFTER: Duration = Duration::from_secs(600);

/// Validity bits of a GPU's static identity, kept while it is not queried.
const IDENTITY: u64 =
    v::NAME | v::UUID | v::PCI_BUS_ID | v::CLOCK_GRAPHICS_MAX | v::CLOCK_SM_MAX | v::CLOCK_MEM_MAX;

/// A GPU found in sysfs and what it said this tick.
struct Watched {
    gpu: sysfs::Gpu,
    /// `None` when its sysfs files could not be read.
    power: Option<Power>,
    /// Seen asleep since NVML was released.
    slept: bool,
    /// `runtime_suspended_time` when NVML was released.
    suspended_ms_at_park: Option<u64>,
}

/// One NVML index: the identity to publish while it is not queried.
struct Slot {
    identity: GpuRecord,
    /// Its PCI address, once known (from NVML, or from sysfs when parked at start).
    addr: Option<PciAddr>,
}

/// Why NVML must be initialised again while it is released.
#[derive(Debug, PartialEq, Eq)]
pub enum Wake {
    /// A GPU that slept is active again: something else woke it.
    Woken(PciAddr),
    /// A GPU did not suspend within the settle time: something else keeps it awake.
    StayedAwake(PciAddr),
    /// A GPU's runtime PM was switched off (`control` = `on`).
    PmOff(PciAddr),
    /// A GPU's sysfs state could not be read.
    Unreadable(PciAddr),
}

/// The policy and its view of sysfs.
pub struct RuntimePm {
    enabled: bool,
    root: PathBuf,
    gpus: Vec<Watched>,
    slots: Vec<Slot>,
    base_release_after: Duration,
    release_after: Duration,
    /// Since when every GPU has been idle or asleep (while NVML is held).
    idle_since: Option<Instant>,
    /// While NVML is released: when a GPU that has not slept counts as kept awake.
    settle_until: Option<Instant>,
    warned_unreadable: bool,
    /// The outcome of discovery has been logged.
    announced: bool,
}

impl RuntimePm {
    /// Watches the NVIDIA GPUs under `root` (normally `/sys`); `enabled: false` turns
    /// the whole policy off.
    pub fn new(root: PathBuf, enabled: bool, release_after: Duration) -> Self {
        let mut pm = RuntimePm {
            enabled,
            root,
            gpus: Vec::new(),
            slots: Vec::new(),
            base_release_after: release_after,
            release_after,
            idle_since: None,
            settle_until: None,
            warned_unreadable: false,
            announced: false,
        };
        if enabled {
            pm.discover();
        } else {
            log::info!("runtime PM awareness off: NVML is held and every GPU queried");
        }
        pm
    }

    /// Finds the GPUs in sysfs again (after each NVML initialisation, so a GPU added or
    /// removed since is noticed); logs only when the set changes.
    pub fn discover(&mut self) {
        if !self.enabled {
            return;
        }
        let devices = self.root.join("bus/pci/devices");
        let found = match sysfs::discover(&self.root) {
            Ok(found) => found,
            Err(e) => {
                if !self.warned_unreadable {
                    log::warn!(
                        "runtime PM awareness off: cannot read {}: {e}; NVML is held as usual",
                        devices.display()
                    );
                    self.warned_unreadable = true;
                }
                self.announced = true;
                self.gpus.clear();
                return;
            }
        };
        let same = found.len() == self.gpus.len()
            && found
                .iter()
                .zip(&self.gpus)
                .all(|(f, w)| f.addr == w.gpu.addr);
        if same && self.announced {
            return;
        }
        self.announced = true;
        if found.is_empty() {
            log::info!(
                "runtime PM: no NVIDIA GPU on the nvidia driver in {}; NVML is held as usual",
                devices.display()
            );
        } else {
            let addrs: Vec<String> = found.iter().map(|g| g.addr.to_string()).collect();
            log::info!(
                "runtime PM: watching {} (NVML is released after {:?} idle)",
                addrs.join(", "),
                self.base_release_after
            );
        }
        self.gpus = found
            .into_iter()
            .map(|gpu| Watched {
                gpu,
                power: None,
                slept: false,
                suspended_ms_at_park: None,
            })
            .collect();
    }

    /// The driver version from sysfs, for when NVML has not been initialised.
    pub fn driver_version(&self) -> Option<String> {
        self.enabled
            .then(|| sysfs::driver_version(&self.root))
            .flatten()
    }

    /// Reads every watched GPU's runtime-PM state (two tiny files each).
    pub fn refresh(&mut self) {
        for w in &mut self.gpus {
            w.power = match w.gpu.power() {
                Ok(power) => Some(power),
                Err(e) => {
                    if !self.warned_unreadable {
                        log::warn!(
                            "cannot read the runtime PM state of GPU {} ({e}); treating it as awake",
                            w.gpu.addr
                        );
                        self.warned_unreadable = true;
                    }
                    None
                }
            };
        }
    }

    /// Sets the number of NVML GPUs (slots); keeps the identities of those that stay.
    /// A slot with no identity yet gets its PCI bus id from sysfs, so a GPU asleep since
    /// NVML was initialised is still named.
    pub fn set_gpu_count(&mut self, count: usize) {
        if self.slots.len() != count {
            self.slots.resize_with(count, || Slot {
                identity: GpuRecord::default(),
                addr: None,
            });
        }
        for index in 0..count {
            if self.slots[index].identity.valid != 0 {
                continue;
            }
            if let Some(addr) = self.watched(index).map(|w| w.gpu.addr) {
                self.slots[index] = Slot {
                    identity: sysfs_identity(index, addr),
                    addr: Some(addr),
                };
            }
        }
    }

    /// Number of slots (NVML GPUs, or sysfs GPUs when NVML never ran).
    pub fn gpu_count(&self) -> usize {
        self.slots.len()
    }

    /// The sysfs GPU that NVML index `index` is.
    fn watched(&self, index: usize) -> Option<&Watched> {
        match self.slots.get(index)?.addr {
            Some(addr) => self.gpus.iter().find(|w| w.gpu.addr == addr),
            None if self.slots.len() == self.gpus.len() => self.gpus.get(index),
            None => None,
        }
    }

    /// The runtime-PM state of NVML index `index`, when known.
    fn power(&self, index: usize) -> Option<Power> {
        self.watched(index).and_then(|w| w.power)
    }

    /// True when NVML index `index` is asleep and must not be queried.
    pub fn asleep(&self, index: usize) -> bool {
        self.power(index).is_some_and(|p| p.status.asleep())
    }

    /// Keeps the identity of a freshly sampled record for when the GPU sleeps.
    pub fn remember(&mut self, index: usize, rec: &GpuRecord) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        slot.identity = identity(rec);
        if rec.valid & v::PCI_BUS_ID != 0 {
            let end = rec.pci_bus_id.iter().position(|&b| b == 0).unwrap_or(32);
            slot.addr = std::str::from_utf8(&rec.pci_bus_id[..end])
                .ok()
                .and_then(PciAddr::parse);
        }
    }

    /// The record of NVML index `index` while it is not queried: its identity and
    /// `Suspended` or (released but not yet asleep) `Idle`; no dynamic value.
    pub fn sleeping_record(&self, index: usize, rec: &mut GpuRecord) {
        *rec = self
            .slots
            .get(index)
            .map_or_else(Default::default, |s| s.identity);
        rec.index = index as u32;
        rec.state = if self.asleep(index) {
            GpuState::Suspended
        } else {
            GpuState::Idle
        } as u32;
        rec.sample_mono_ns = gpupeek_shm::mono_now_ns();
    }

    /// Records whether every GPU was idle or asleep in the tick just sampled.
    pub fn observe(&mut self, now: Instant, all_idle: bool) {
        if all_idle {
            self.idle_since.get_or_insert(now);
        } else {
            self.idle_since = None;
        }
    }

    /// True when NVML should be released now: every GPU can runtime-suspend and is
    /// asleep, or every one is idle or asleep and has been for `release_after`.
    pub fn release_due(&self, now: Instant) -> bool {
        if !self.enabled || self.slots.is_empty() {
            return false;
        }
        let mut all_asleep = true;
        for index in 0..self.slots.len() {
            match self.power(index) {
                Some(p) if p.auto && p.status.asleep() => {}
                Some(p) if p.auto && p.status == Status::Active => all_asleep = false,
                _ => return false,
            }
        }
        all_asleep
            || self
                .idle_since
                .is_some_and(|t| now.duration_since(t) >= self.release_after)
    }

    /// NVML has just been released (or was never initialised): start waiting for the
    /// GPUs to sleep.
    pub fn park(&mut self, now: Instant) {
        let delay = (0..self.slots.len())
            .filter_map(|i| self.watched(i))
            .map(|w| w.gpu.autosuspend_delay_ms())
            .max()
            .unwrap_or(0);
        self.settle_until = Some(now + self.release_after + Duration::from_millis(delay));
        self.idle_since = None;
        let mapped: Vec<Option<PciAddr>> = (0..self.slots.len())
            .map(|i| self.watched(i).map(|w| w.gpu.addr))
            .collect();
        for w in &mut self.gpus {
            w.slept = false;
            w.suspended_ms_at_park = w.gpu.suspended_time_ms();
        }
        // Pin each slot to its address so the mapping survives a change in counts.
        for (slot, addr) in self.slots.iter_mut().zip(mapped) {
            slot.addr = slot.addr.or(addr);
        }
        self.note_sleepers();
    }

    /// At start (or after an NVML failure): if every GPU in sysfs is asleep, take the
    /// slots from sysfs, park, and return true, so that NVML is not initialised.
    pub fn park_if_all_asleep(&mut self, now: Instant) -> bool {
        let all_asleep = self.enabled
            && !self.gpus.is_empty()
            && self
                .gpus
                .iter()
                .all(|w| w.power.is_some_and(|p| p.auto && p.status.asleep()));
        if !all_asleep {
            return false;
        }
        if self.slots.len() != self.gpus.len() {
            self.slots = self
                .gpus
                .iter()
                .enumerate()
                .map(|(i, w)| Slot {
                    identity: sysfs_identity(i, w.gpu.addr),
                    addr: Some(w.gpu.addr),
                })
                .collect();
        }
        self.park(now);
        true
    }

    /// Marks the GPUs that are (or have been) asleep since the release. The suspended
    /// time is read only for an awake GPU not yet known to have slept.
    fn note_sleepers(&mut self) {
        for w in &mut self.gpus {
            if w.slept {
                continue;
            }
            w.slept = match w.power.map(|p| p.status) {
                Some(Status::Suspended | Status::Suspending | Status::Resuming) => true,
                Some(Status::Active) => w
                    .suspended_ms_at_park
                    .zip(w.gpu.suspended_time_ms())
                    .is_some_and(|(then, now)| now > then),
                _ => false,
            };
        }
    }

    /// While NVML is released: whether it must be initialised again now. On a wake the
    /// GPUs are watched as when NVML is held.
    pub fn wake(&mut self, now: Instant) -> Option<Wake> {
        let settle_until = self.settle_until?;
        self.note_sleepers();
        let mut wake = None;
        for index in 0..self.slots.len() {
            let Some(w) = self.watched(index) else {
                continue;
            };
            let addr = w.gpu.addr;
            wake = match w.power {
                None => Some(Wake::Unreadable(addr)),
                Some(p) if p.status.asleep() => None,
                Some(p) if !p.auto => Some(Wake::PmOff(addr)),
                Some(_) if w.slept => Some(Wake::Woken(addr)),
                Some(_) if now >= settle_until => Some(Wake::StayedAwake(addr)),
                Some(_) => None,
            };
            if wake.is_some() {
                break;
            }
        }
        match wake {
            // The release let it sleep: the next one need not wait longer.
            Some(Wake::Woken(_)) => self.release_after = self.base_release_after,
            Some(Wake::StayedAwake(_)) => {
                self.release_after = (self.release_after * 2).min(MAX_RELEASE_AFTER);
            }
            _ => {}
        }
        if wake.is_some() {
            self.settle_until = None;
        }
        wake
    }

    /// True while NVML is released by this policy.
    #[cfg(test)]
    pub fn parked(&self) -> bool {
        self.settle_until.is_some()
    }

    /// How long the next release waits for idleness.
    pub fn release_after(&self) -> Duration {
        self.release_after
    }
}

/// True when a freshly sampled GPU does nothing: no compute process, and 0 % GPU,
/// encoder and decoder utilisation where reported. A GPU whose process list could not
/// be read is not idle (it cannot be told).
pub fn idle(rec: &GpuRecord, compute_processes: usize) -> bool {
    let zero = |bit: u64, pct: u32| rec.valid & bit == 0 || pct == 0;
    rec.state == GpuState::Ok as u32
        && rec.valid & v::PROCESSES != 0
        && compute_processes == 0
        && zero(v::UTILIZATION, rec.util_gpu_pct)
        && zero(v::UTIL_ENC, rec.util_enc_pct)
        && zero(v::UTIL_DEC, rec.util_dec_pct)
}

/// The static identity of `rec`, every dynamic value cleared.
fn identity(rec: &GpuRecord) -> GpuRecord {
    GpuRecord {
        index: rec.index,
        valid: rec.valid & IDENTITY,
        name: rec.name,
        uuid: rec.uuid,
        pci_bus_id: rec.pci_bus_id,
        clock_graphics_max_mhz: rec.clock_graphics_max_mhz,
        clock_sm_max_mhz: rec.clock_sm_max_mhz,
        clock_mem_max_mhz: rec.clock_mem_max_mhz,
        valid4: rec.valid4 & crate::details4::IDENTITY4,
        minor_number: rec.minor_number,
        ..Default::default()
    }
}

/// What sysfs alone tells about a GPU: its index and PCI bus id.
fn sysfs_identity(index: usize, addr: PciAddr) -> GpuRecord {
    let mut rec = GpuRecord {
        index: index as u32,
        valid: v::PCI_BUS_ID,
        ..Default::default()
    };
    text::encode(&mut rec.pci_bus_id, &addr.to_string());
    rec
}

#[cfg(test)]
mod tests;
