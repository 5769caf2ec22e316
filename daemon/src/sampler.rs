//! NVML sampling: one [`GpuRecord`] per GPU per tick, plus its processes.
//!
//! How each answer lands in the record is [`crate::reads`]' job (a value sets its
//! validity bit; "not supported" leaves it clear, never a zero). A GPU that reports
//! `GPU_IS_LOST` is marked lost and not queried further this tick. A GPU none of whose
//! memory, utilisation, temperature and power could be read, for another failure, is
//! marked in error: a record of nothing but unknowns with state "ok" would tell readers
//! it is fine. Static identity (name, UUID, PCI bus id, maximum clocks) is read once per
//! NVML session and kept for GPUs that later fail, so clients can still say which GPU
//! is in trouble.
//!
//! A [`Sampler`] is one NVML session; each GPU is sampled by a [`GpuSampler`] that owns
//! its state across ticks and a share of the session, so GPUs can be sampled apart.
//!
//! Two things need history across ticks: GPM metrics (see [`crate::gpm`]) and how long
//! a GPU has been idle (`idle_since_mono_ns`: the first of the current run of samples
//! with 0 % utilisation; forgotten when utilisation is unknown or non-zero).
//!
//! Values are read in tiers by what they cost the driver (see [`crate::tiers`]): a
//! few cheap calls every tick, the rest on the ticks the caller says are slow or on
//! cadences of their own. In between, the record carries the last values read
//! ([`tiers::Carry`]), forgotten when the GPU fails or sleeps. The device handle is
//! looked up once per session and kept; a GPU that was lost looks it up again on a
//! later tick.

use nvml_wrapper::error::NvmlError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings;

use gpupeek_shm::layout::{gpu_valid as v, GpuState};
use gpupeek_shm::{GpuRecord, MigRecord};

use crate::details;
use crate::details3;
use crate::details4;
use crate::fields::{self, Fields};
use crate::gpm::{Backoff, Gpm};
use crate::gpuprocs::{self, GpuProcess};
use crate::mig::Mig;
use crate::numbering::Numbering;
use crate::reads::{
    code, put_identity, read_identity, sample_fast, sample_pcie_throughput, sample_slow,
    sample_static, Failure, Fill, Identity,
};
use crate::smoothing;
use crate::tiers::{self, Carry};

/// Driver-wide facts, each `None` when NVML could not say.
#[derive(Debug, Default)]
pub struct SystemInfo {
    /// e.g. "550.54.15".
    pub driver_version: Option<String>,
    /// e.g. "12.550.54.15".
    pub nvml_version: Option<String>,
    /// e.g. 12040.
    pub cuda_driver_version: Option<i32>,
}

/// The NVML handle of a session, shared by its samplers: dropping the last share runs
/// `nvmlShutdown`, then marks the session closed (fields drop in declaration order).
struct Held {
    nvml: Nvml,
    /// Entry points of `nvml`'s library that nvml-wrapper does not bind, looked up once.
    unbound: details3::Unbound,
    /// Where this driver numbers the field values nvml.h renumbered, and which newer
    /// ones it has.
    numbering: Numbering,
    /// The power smoothing ids this numbering asks, and where their answers go.
    smoothing: smoothing::Plans,
    closed: MarkOnDrop,
}

/// Sets its flag when dropped.
struct MarkOnDrop(Arc<AtomicBool>);

impl Drop for MarkOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Says whether a session's `nvmlShutdown` has returned (see [`Sampler::closed`]).
#[derive(Clone)]
pub struct Closed(Arc<AtomicBool>);

impl Closed {
    /// `nvmlShutdown` has returned: the session holds nothing of the driver.
    pub fn is_closed(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

impl std::ops::Deref for Held {
    type Target = Nvml;
    fn deref(&self) -> &Nvml {
        &self.nvml
    }
}

/// An initialised NVML session: driver-wide queries, and a [`GpuSampler`] per GPU.
/// Clones share the session.
#[derive(Clone)]
pub struct Sampler {
    nvml: Arc<Held>,
    /// The process-list entry point this driver has (empty buffers, cloned per GPU).
    proc_buffers: gpuprocs::Buffers,
}

impl Sampler {
    /// Loads NVML (from `lib`, or the system's `libnvidia-ml.so.1`) and initialises it.
    pub fn init(lib: Option<&str>) -> Result<Self, Failure> {
        let mut builder = Nvml::builder();
        if let Some(path) = lib {
            builder.lib_path(path.as_ref());
        }
        let nvml = builder.init()?;
        let proc_buffers = gpuprocs::Buffers::resolve(&nvml);
        let unbound = details3::Unbound::resolve(&nvml);
        let numbering = Numbering::of(nvml.sys_driver_version().ok().as_deref());
        Ok(Sampler {
            nvml: Arc::new(Held {
                nvml,
                unbound,
                numbering,
                smoothing: smoothing::Plans::of(numbering),
                closed: MarkOnDrop(Arc::new(AtomicBool::new(false))),
            }),
            proc_buffers,
        })
    }

    /// Driver, NVML and CUDA versions.
    pub fn system_info(&self) -> SystemInfo {
        SystemInfo {
            driver_version: self.nvml.sys_driver_version().ok(),
            nvml_version: self.nvml.sys_nvml_version().ok(),
            cuda_driver_version: self.nvml.sys_cuda_driver_version().ok(),
        }
    }

    /// Tells when the session is closed: once this sampler, its clones and its GPU
    /// samplers are all dropped, and the `nvmlShutdown` that the last drop runs has
    /// returned.
    pub fn closed(&self) -> Closed {
        Closed(Arc::clone(&self.nvml.closed.0))
    }

    /// The session's NVML handle (for the event thread's calls, [`crate::events`]).
    pub fn nvml(&self) -> &Nvml {
        &self.nvml
    }

    /// Number of GPUs NVML sees.
    pub fn device_count(&self) -> Result<u32, Failure> {
        Ok(self.nvml.device_count()?)
    }

    /// A sampler for GPU `index` in this session. It holds the session open: NVML is
    /// shut down when the last of the session and its GPU samplers is dropped.
    pub fn gpu(&self, index: u32) -> GpuSampler {
        GpuSampler {
            nvml: Arc::clone(&self.nvml),
            index,
            identity: None,
            util_seen: 0,
            gpm: Gpm::default(),
            gpm_backoff: Backoff::default(),
            idle_since: None,
            carry: Carry::for_gpu(index),
            proc_buffers: self.proc_buffers.clone(),
            handle: None,
            fields: Fields::default(),
            legacy_temperature: false,
            mig: Mig::default(),
        }
    }
}

/// One GPU of an NVML session, with what its sampling remembers across ticks. It owns
/// everything it touches, so each GPU can be sampled on a thread of its own.
pub struct GpuSampler {
    nvml: Arc<Held>,
    index: u32,
    /// Static identity, read once per session and kept for when the GPU fails.
    identity: Option<Identity>,
    /// The newest process-utilisation sample seen (NVML's µs timestamp).
    util_seen: u64,
    /// GPM support and the sample kept for the next window.
    gpm: Gpm,
    /// When GPM may be asked again after failures.
    gpm_backoff: Backoff,
    /// Since when utilisation has been 0 % (`CLOCK_MONOTONIC` ns).
    idle_since: Option<u64>,
    /// The less frequent tiers' last values, and when they are due.
    carry: Carry,
    /// What NVML's process lists are read into.
    proc_buffers: gpuprocs::Buffers,
    /// The device handle, looked up once per session (and again after a loss).
    handle: Option<Handle>,
    /// Field-value support of this GPU and its last PCIe counters.
    fields: Fields,
    /// This GPU's driver needs the deprecated `nvmlDeviceGetTemperature`.
    legacy_temperature: bool,
    /// MIG mode and instances.
    mig: Mig,
}

/// A raw NVML device handle kept across ticks.
#[derive(Debug, Clone, Copy)]
struct Handle(bindings::nvmlDevice_t);

// SAFETY: an NVML device handle is an opaque token that NVML (thread-safe by its
// documentation) accepts from any thread; it is only ever passed back to NVML, and only
// while the session it came from (held by the same `GpuSampler`) is open.
unsafe impl Send for Handle {}

impl Drop for GpuSampler {
    /// Frees the kept GPM samples while the session that made them is still open.
    fn drop(&mut self) {
        self.gpm.release(&self.nvml);
        self.mig.release(&self.nvml);
    }
}

impl GpuSampler {
    /// Fills `rec` for this GPU, and `mig` with its MIG devices (see [`crate::mig`]). On
    /// a slow tick (`procs` given) also reads the slow tier and appends the GPU's
    /// processes to `procs`; on a fast one (`None`) the record carries what the last slow
    /// tick read.
    pub fn sample(
        &mut self,
        rec: &mut GpuRecord,
        procs: Option<&mut Vec<GpuProcess>>,
        mig: &mut Vec<MigRecord>,
    ) {
        mig.clear();
        let index = self.index;
        *rec = Default::default();
        rec.index = index;
        rec.state = GpuState::Ok as u32;
        rec.sample_mono_ns = gpupeek_shm::mono_now_ns();
        let nvml = &*self.nvml;
        let device = match self.handle {
            // SAFETY: the handle came from `device_by_index` in this session, which
            // `self.nvml` holds open; it is dropped when the GPU is lost.
            Some(Handle(h)) => unsafe { Device::new(h, nvml) },
            None => match nvml.device_by_index(index) {
                Ok(device) => {
                    // SAFETY: the raw handle is only kept, to be passed back to NVML in
                    // this session (see `Handle`).
                    self.handle = Some(Handle(unsafe { device.handle() }));
                    device
                }
                Err(e) => {
                    let lost = matches!(e, NvmlError::GpuLost);
                    rec.state = if lost {
                        GpuState::Lost
                    } else {
                        GpuState::Error
                    } as u32;
                    rec.nvml_error_code = code(e);
                    self.gpm.release(nvml);
                    self.mig.release(nvml);
                    self.idle_since = None;
                    self.carry.forget(ALL_CARRIED);
                    self.carry.forget2(details::STATIC2 | details::SLOW2);
                    self.carry.forget3(details::STATIC3 | details::SLOW3);
                    self.carry.forget4();
                    self.fields.forget();
                    if let Some(id) = &self.identity {
                        put_identity(rec, id);
                    }
                    return;
                }
            },
        };
        let mut fill = Fill { rec, lost: false };
        let identity = match self.identity.take() {
            Some(id) => id,
            None => read_identity(&device, &mut fill),
        };
        put_identity(fill.rec, &identity);
        // An identity read while the GPU was lost lacks its UUID and name: read it again
        // when the GPU is back (its history is keyed by that UUID).
        if !fill.lost {
            self.identity = Some(identity);
        }
        let now = fill.rec.sample_mono_ns;
        let slow = procs.is_some();
        self.mig.read_mode_if_due(nvml, &device, &mut fill, slow);
        let legacy = &mut self.legacy_temperature;
        let mig_on = self.mig.enabled();
        sample_fast(nvml, &device, &mut fill, &mut self.fields, (legacy, mig_on));
        if self.gpm_backoff.allows(now) {
            let mut failed = false;
            let result = self.gpm.tick(nvml, &device, now, None).map_err(|e| {
                failed = !matches!(e, NvmlError::GpuLost);
                e
            });
            if let Some(Some(metrics)) = fill.call(|| result) {
                metrics.put(fill.rec);
            }
            self.gpm_backoff.record(!failed, now);
            if !self.gpm_backoff.allows(u64::MAX) {
                self.gpm.release(nvml);
                self.gpm = Gpm::Unsupported;
            }
        }
        let gpm_ok = self.gpm.supported() && self.gpm_backoff.allows(now);
        self.mig.tick(nvml, &device, &mut fill, (now, gpm_ok), mig);
        track_idle(fill.rec, &mut self.idle_since);
        if fill.rec.valid & tiers::PCIE == 0 && fill.rec.valid & v::GPM_PCIE != 0 {
            let kb = |bytes: u64| u32::try_from(bytes / 1024).unwrap_or(u32::MAX);
            fill.rec.pcie_tx_kbytes_per_s = kb(fill.rec.gpm_pcie_tx_bytes_per_s);
            fill.rec.pcie_rx_kbytes_per_s = kb(fill.rec.gpm_pcie_rx_bytes_per_s);
            fill.rec.valid |= tiers::PCIE;
        }
        let pcie_counted = fill.rec.valid & tiers::PCIE != 0
            || (self.fields.supported(fields::PCIE_TX) && self.fields.supported(fields::PCIE_RX));
        if !pcie_counted {
            let read = self.carry.pcie_due(now);
            sample_pcie_throughput(&device, &mut fill, read);
            self.carry.keep(fill.rec, read);
            self.carry.put(fill.rec, tiers::PCIE & !read);
        }
        if self.carry.static_due(now) {
            sample_static(&device, &mut fill);
            details::sample_static(nvml, &self.nvml.unbound, &device, &mut fill);
            let (unbound, numbering) = (&self.nvml.unbound, self.nvml.numbering);
            let plans = &self.nvml.smoothing;
            details4::sample_static(nvml, unbound, numbering, plans, &device, &mut fill);
            self.carry.keep(fill.rec, tiers::STATIC);
            self.carry.keep2(fill.rec, details::STATIC2);
            self.carry.keep3(fill.rec, details::STATIC3);
            self.carry.keep4(fill.rec);
        } else {
            self.carry.put(fill.rec, tiers::STATIC);
            self.carry.put2(fill.rec, details::STATIC2);
            self.carry.put3(fill.rec, details::STATIC3);
            self.carry.put4(fill.rec);
        }
        match procs {
            Some(procs) => {
                sample_slow(nvml, &device, &mut fill);
                details::sample_slow(&device, &mut fill);
                details::sample_slow3(nvml, &device, self.nvml.numbering, &mut fill);
                // NVML has no per-process utilisation under MIG: not asked for.
                let seen = (!self.mig.enabled()).then_some(&mut self.util_seen);
                let bufs = &mut self.proc_buffers;
                let listed = procs.len();
                gpuprocs::sample(nvml, &device, &mut fill, index, seen, bufs, procs);
                self.mig.note_processes(&procs[listed..]);
                self.carry.keep(fill.rec, tiers::SLOW);
                self.carry.keep2(fill.rec, details::SLOW2);
                self.carry.keep3(fill.rec, details::SLOW3);
            }
            None => {
                self.carry.put(fill.rec, tiers::SLOW);
                self.carry.put2(fill.rec, details::SLOW2);
                self.carry.put3(fill.rec, details::SLOW3);
            }
        }
        if fill.lost {
            self.carry.forget(ALL_CARRIED);
            self.carry.forget2(details::STATIC2 | details::SLOW2);
            self.carry.forget3(details::STATIC3 | details::SLOW3);
            self.carry.forget4();
            self.fields.forget();
            self.handle = None;
            self.gpm.release(nvml);
            self.mig.release(nvml);
            mig.clear();
            fill.rec.state = GpuState::Lost as u32;
            fill.rec.nvml_error_code = bindings::nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST as i32;
        } else if fill.rec.nvml_error_code != 0 && fill.rec.valid & CORE_VALUES == 0 {
            fill.rec.state = GpuState::Error as u32;
        }
    }

    /// Forgets the slow tier's values (the GPU sleeps): the next fast ticks publish no
    /// process count or ECC until a slow tick reads them again.
    pub fn forget_slow(&mut self) {
        self.carry.forget(tiers::SLOW);
        self.carry.forget2(details::SLOW2);
        self.carry.forget3(details::SLOW3);
        self.fields.forget();
    }
}

/// Every value the tiers carry between reads.
const ALL_CARRIED: u64 = tiers::SLOW | tiers::STATIC | tiers::PCIE;

/// The values every working GPU gives one of: without any of them, and with a failure,
/// the GPU is in error.
const CORE_VALUES: u64 = v::MEMORY | v::UTILIZATION | v::TEMPERATURE | v::POWER_DRAW;

/// Publishes since when the GPU has shown 0 % utilisation, remembering it in `since`.
fn track_idle(rec: &mut GpuRecord, since: &mut Option<u64>) {
    let idle = rec.valid & v::UTILIZATION != 0 && rec.util_gpu_pct == 0;
    *since = idle.then(|| since.unwrap_or(rec.sample_mono_ns));
    if let Some(t) = *since {
        rec.idle_since_mono_ns = t;
        rec.valid |= v::IDLE_SINCE;
    }
}
