//! GPM (GPU Performance Monitoring, Hopper and newer): what a busy GPU is really doing.
//!
//! GPM metrics are computed between two samples taken at least [`MIN_INTERVAL_NS`] apart.
//! The daemon never sleeps inside a tick for that: each GPU keeps the sample of an earlier
//! tick, and a tick that comes at least 100 ms after it takes a new one, computes the
//! metrics over the window between the two and keeps the new sample for next time. With a
//! period under 100 ms the ticks in between take no sample (no NVML call) and republish
//! the last metrics. Support is asked once per NVML session (`nvmlGpmQueryDeviceSupport`);
//! an unsupported GPU is never asked again and its GPM fields stay invalid.
//!
//! Any other failure is published once and then backed off ([`Backoff`]): GPM is not
//! asked again for 1 s, then 2, 4… up to [`MAX_BACKOFF_NS`], and after
//! [`GIVE_UP_AFTER`] failures in a row not at all until the next NVML session, so a
//! broken GPM costs no calls on every tick.
//!
//! Percentages are published in hundredths of a percent; NVML reports PCIe and NVLink
//! traffic in MiB/s, published in bytes per second. A sample belongs to the NVML session
//! that made it: [`Gpm::release`] frees it, and must run before that session shuts down.

use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::gpm::gpm_metrics_get;
use nvml_wrapper::{Device, GpmSample, Nvml};
use nvml_wrapper_sys::bindings::nvmlGpmSample_t;

use gpupeek_shm::layout::{gpu_valid as v, mig_valid};
use gpupeek_shm::{GpuRecord, MigRecord};

/// Longest wait between two GPM attempts after failures, ns.
pub const MAX_BACKOFF_NS: u64 = 64_000_000_000;
/// Failures in a row after which GPM is given up for the NVML session.
pub const GIVE_UP_AFTER: u32 = 10;

/// When GPM may be asked again after failures that were not "not supported".
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    failures: u32,
    retry_at_ns: u64,
}

impl Backoff {
    /// Whether GPM may be asked at `now_ns`.
    pub fn allows(&self, now_ns: u64) -> bool {
        self.failures < GIVE_UP_AFTER && now_ns >= self.retry_at_ns
    }

    /// Records the outcome of an attempt at `now_ns`.
    pub fn record(&mut self, ok: bool, now_ns: u64) {
        if ok {
            *self = Backoff::default();
            return;
        }
        let wait = (1_000_000_000u64 << self.failures.min(6)).min(MAX_BACKOFF_NS);
        self.failures += 1;
        self.retry_at_ns = now_ns.saturating_add(wait);
    }
}

/// The shortest window NVML computes GPM metrics over, ns.
pub const MIN_INTERVAL_NS: u64 = 100_000_000;

const MIB: f64 = 1024.0 * 1024.0;

/// The metrics asked for, in the order of [`Metrics::values`].
const METRICS: [GpmMetricId; 8] = [
    GpmMetricId::SmUtil,
    GpmMetricId::SmOccupancy,
    GpmMetricId::AnyTensorUtil,
    GpmMetricId::DramBwUtil,
    GpmMetricId::PcieTxPerSec,
    GpmMetricId::PcieRxPerSec,
    GpmMetricId::NvlinkTotalTxPerSec,
    GpmMetricId::NvlinkTotalRxPerSec,
];

/// One window's metrics, each `None` when NVML could not compute it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Metrics {
    /// Values in the order of `METRICS`, as NVML reports them (percent, MiB/s).
    pub values: [Option<f64>; 8],
    /// Length of the window, ns.
    pub interval_ns: u64,
}

impl Metrics {
    /// Writes the metrics and their validity bits into `rec`.
    pub fn put(&self, rec: &mut GpuRecord) {
        let pct = |x: Option<f64>| x.map(|p| (p.clamp(0.0, 100.0) * 100.0).round() as u32);
        let rate = |x: Option<f64>| x.map(|mib| (mib.max(0.0) * MIB).round() as u64);
        let [sm, occ, tensor, dram, ptx, prx, ntx, nrx] = self.values;
        let percents = [
            (
                pct(sm),
                &mut rec.gpm_sm_activity_centipct,
                v::GPM_SM_ACTIVITY,
            ),
            (
                pct(occ),
                &mut rec.gpm_sm_occupancy_centipct,
                v::GPM_SM_OCCUPANCY,
            ),
            (
                pct(tensor),
                &mut rec.gpm_tensor_activity_centipct,
                v::GPM_TENSOR_ACTIVITY,
            ),
            (
                pct(dram),
                &mut rec.gpm_dram_bw_util_centipct,
                v::GPM_DRAM_BW,
            ),
        ];
        let mut valid = v::GPM;
        for (value, field, bit) in percents {
            if let Some(value) = value {
                *field = value;
                valid |= bit;
            }
        }
        let pairs = [
            (rate(ptx).zip(rate(prx)), v::GPM_PCIE),
            (rate(ntx).zip(rate(nrx)), v::GPM_NVLINK),
        ];
        for (i, (value, bit)) in pairs.into_iter().enumerate() {
            if let Some((tx, rx)) = value {
                if i == 0 {
                    (rec.gpm_pcie_tx_bytes_per_s, rec.gpm_pcie_rx_bytes_per_s) = (tx, rx);
                } else {
                    (rec.gpm_nvlink_tx_bytes_per_s, rec.gpm_nvlink_rx_bytes_per_s) = (tx, rx);
                }
                valid |= bit;
            }
        }
        rec.gpm_interval_ns = self.interval_ns;
        rec.valid |= valid;
    }
}

impl Metrics {
    /// Writes the metrics a MIG record has (the four percentages) and their bits.
    pub fn put_mig(&self, rec: &mut MigRecord) {
        let mut gpu = GpuRecord::default();
        self.put(&mut gpu);
        let fields = [
            (v::GPM_SM_ACTIVITY, mig_valid::GPM_SM_ACTIVITY),
            (v::GPM_SM_OCCUPANCY, mig_valid::GPM_SM_OCCUPANCY),
            (v::GPM_TENSOR_ACTIVITY, mig_valid::GPM_TENSOR_ACTIVITY),
            (v::GPM_DRAM_BW, mig_valid::GPM_DRAM_BW),
        ];
        for (from, to) in fields {
            if gpu.valid & from != 0 {
                rec.valid |= to;
            }
        }
        rec.gpm_sm_activity_centipct = gpu.gpm_sm_activity_centipct;
        rec.gpm_sm_occupancy_centipct = gpu.gpm_sm_occupancy_centipct;
        rec.gpm_tensor_activity_centipct = gpu.gpm_tensor_activity_centipct;
        rec.gpm_dram_bw_util_centipct = gpu.gpm_dram_bw_util_centipct;
        rec.gpm_interval_ns = self.interval_ns;
        rec.valid |= mig_valid::GPM;
    }
}

/// A sample kept from an earlier tick: its raw handle (owned) and when it was taken.
#[derive(Debug)]
pub struct Kept {
    handle: nvmlGpmSample_t,
    taken_ns: u64,
}

// SAFETY: the sample handle is an opaque allocation of NVML's (which is thread-safe),
// owned by this value alone: it is used and freed by whichever single thread holds the
// value, so moving it to another thread (a GPU's sampling worker) is sound.
unsafe impl Send for Kept {}

/// GPM state of one GPU within one NVML session.
#[derive(Debug, Default)]
pub enum Gpm {
    /// Support not asked yet.
    #[default]
    Unknown,
    /// The GPU (or the driver) has no GPM.
    Unsupported,
    /// GPM works: the sample kept for the next window and the last metrics computed.
    Supported {
        /// The newest sample, taken at the start of the next window.
        kept: Option<Kept>,
        /// The sample buffer of the window before, reused for the next sample: a
        /// window costs two calls (`nvmlGpmSampleGet`, `nvmlGpmMetricsGet`) instead
        /// of an allocation and a free besides.
        spare: Option<Kept>,
        /// Republished until the next window is at least 100 ms long.
        last: Option<Metrics>,
    },
}

/// True when the error means this GPU or driver has no GPM.
fn unsupported(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::NotSupported | NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)
    )
}

impl Gpm {
    /// The state of a MIG GPU instance whose parent has GPM: supported until
    /// `nvmlGpmMigSampleGet` says otherwise (the support query is the parent's).
    pub fn for_instance() -> Self {
        Gpm::Supported {
            kept: None,
            spare: None,
            last: None,
        }
    }

    /// This GPU (or instance) has no GPM.
    pub fn unsupported(&self) -> bool {
        matches!(self, Gpm::Unsupported)
    }

    /// This GPU (or instance) has GPM.
    pub fn supported(&self) -> bool {
        matches!(self, Gpm::Supported { .. })
    }

    /// One tick for an awake GPU that answered this tick: the metrics to publish, if any.
    /// `Err` only for failures that are neither "not supported" nor about one metric.
    /// With `gpu_instance`, the samples are of that MIG GPU instance of `device`
    /// (`nvmlGpmMigSampleGet`).
    pub fn tick(
        &mut self,
        nvml: &Nvml,
        device: &Device,
        now_ns: u64,
        gpu_instance: Option<u32>,
    ) -> Result<Option<Metrics>, NvmlError> {
        if matches!(self, Gpm::Unknown) {
            *self = match device.gpm_support() {
                Ok(true) => Gpm::Supported {
                    kept: None,
                    spare: None,
                    last: None,
                },
                Ok(false) => Gpm::Unsupported,
                Err(e) if unsupported(&e) => Gpm::Unsupported,
                Err(e) => return Err(e),
            };
        }
        let Gpm::Supported { kept, spare, last } = self else {
            return Ok(None);
        };
        if kept
            .as_ref()
            .is_some_and(|k| now_ns.saturating_sub(k.taken_ns) < MIN_INTERVAL_NS)
        {
            return Ok(*last);
        }
        let new = match take_sample(nvml, device, spare, gpu_instance) {
            Ok(handle) => handle,
            Err(e) if unsupported(&e) => {
                free(nvml, kept);
                free(nvml, spare);
                *self = Gpm::Unsupported;
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let taken_ns = gpupeek_shm::mono_now_ns();
        let Some(old) = kept.replace(Kept {
            handle: new,
            taken_ns,
        }) else {
            return Ok(None);
        };
        // SAFETY: `old.handle` was allocated by `nvmlGpmSampleAlloc` of this session's
        // library (`take_sample`, with `nvml`, the Nvml this `Gpm` is always called
        // with), and it is owned here only: it was just taken out of `kept`; wrapping
        // it is undone by `into_handle` below (it becomes the spare), so it is never
        // freed twice.
        let old_sample = unsafe { GpmSample::from_handle(nvml, old.handle) };
        let new_handle = kept.as_ref().map(|k| k.handle).expect("just stored");
        // SAFETY: `new_handle` is the sample now owned by `kept`; wrapping it again is
        // undone by `into_handle` below before anything can drop it, so it is freed once.
        let new_sample = unsafe { GpmSample::from_handle(nvml, new_handle) };
        let result = gpm_metrics_get(nvml, &old_sample, &new_sample, &METRICS);
        let _still_kept = new_sample.into_handle();
        *spare = Some(Kept {
            handle: old_sample.into_handle(),
            taken_ns: 0,
        });
        let mut metrics = Metrics {
            interval_ns: taken_ns.saturating_sub(old.taken_ns),
            ..Metrics::default()
        };
        for (slot, value) in metrics.values.iter_mut().zip(result?) {
            *slot = value.ok().map(|r| r.value).filter(|x| x.is_finite());
        }
        *last = Some(metrics);
        Ok(Some(metrics))
    }

    /// Frees the kept samples (GPU lost, or the session ends) and forgets the metrics.
    pub fn release(&mut self, nvml: &Nvml) {
        if let Gpm::Supported { kept, spare, last } = self {
            free(nvml, kept);
            free(nvml, spare);
            *last = None;
        }
    }
}

/// Takes a GPM sample of `device` (of its MIG GPU instance `gpu_instance`, if given)
/// into the `spare` buffer (allocated the first time); returns its handle, now the
/// caller's. On failure the buffer stays the spare.
fn take_sample(
    nvml: &Nvml,
    device: &Device,
    spare: &mut Option<Kept>,
    gpu_instance: Option<u32>,
) -> Result<nvmlGpmSample_t, NvmlError> {
    let lib = nvml.lib();
    let handle = match spare.take() {
        Some(k) => k.handle,
        None => {
            let alloc = lib
                .nvmlGpmSampleAlloc
                .as_ref()
                .map_err(|_| NvmlError::FunctionNotFound)?;
            let mut handle: nvmlGpmSample_t = std::ptr::null_mut();
            // SAFETY: `alloc` has the C signature `nvmlReturn_t (nvmlGpmSample_t *)` in
            // the loaded library, and `handle` is a valid, writable nvmlGpmSample_t.
            nvml_try(unsafe { alloc(&mut handle) })?;
            handle
        }
    };
    let result = match (
        gpu_instance,
        &lib.nvmlGpmSampleGet,
        &lib.nvmlGpmMigSampleGet,
    ) {
        // SAFETY: `get` has the C signature `nvmlReturn_t (nvmlDevice_t,
        // nvmlGpmSample_t)`; the device handle is from the live session and `handle` a
        // sample buffer that session allocated and that only this call touches now.
        (None, Ok(get), _) => nvml_try(unsafe { get(device.handle(), handle) }),
        // SAFETY: as above, with the signature `nvmlReturn_t (nvmlDevice_t, unsigned int,
        // nvmlGpmSample_t)` and `device` the MIG instance's parent.
        (Some(gi), _, Ok(get)) => nvml_try(unsafe { get(device.handle(), gi, handle) }),
        _ => Err(NvmlError::FunctionNotFound),
    };
    match result {
        Ok(()) => Ok(handle),
        Err(e) => {
            *spare = Some(Kept {
                handle,
                taken_ns: 0,
            });
            Err(e)
        }
    }
}

/// Frees the sample in `kept`, if any.
fn free(nvml: &Nvml, kept: &mut Option<Kept>) {
    if let Some(k) = kept.take() {
        // SAFETY: the handle was allocated by this session's `nvmlGpmSampleAlloc` (see
        // `Gpm::tick`) and is owned only by `kept`, from which it was just taken: it is
        // freed exactly once, here, when the wrapper drops.
        drop(unsafe { GpmSample::from_handle(nvml, k.handle) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_mig_record_gets_the_four_percentages_with_their_bits() {
        let metrics = Metrics {
            values: [
                Some(40.0),
                None,
                Some(12.345),
                Some(150.0),
                Some(1.0),
                None,
                None,
                None,
            ],
            interval_ns: 123,
        };
        let mut rec = MigRecord::default();
        metrics.put_mig(&mut rec);
        assert_eq!(rec.gpm_sm_activity_centipct, 4000);
        assert_eq!(rec.gpm_tensor_activity_centipct, 1235);
        assert_eq!(rec.gpm_dram_bw_util_centipct, 10000, "clamped to 100 %");
        assert_eq!(rec.gpm_interval_ns, 123);
        let bits = mig_valid::GPM
            | mig_valid::GPM_SM_ACTIVITY
            | mig_valid::GPM_TENSOR_ACTIVITY
            | mig_valid::GPM_DRAM_BW;
        assert_eq!(rec.valid, bits, "no occupancy: its bit stays clear");
    }

    #[test]
    fn failures_back_off_doubling_then_give_up_and_success_resets() {
        let mut b = Backoff::default();
        assert!(b.allows(0));
        b.record(false, 0);
        assert!(!b.allows(S - 1));
        assert!(b.allows(S));
        b.record(false, S);
        assert!(!b.allows(3 * S - 1));
        assert!(b.allows(3 * S));
        b.record(true, 3 * S);
        assert_eq!(b, Backoff::default());
        for _ in 0..GIVE_UP_AFTER {
            b.record(false, 0);
        }
        assert!(!b.allows(u64::MAX), "given up for the session");
    }
}
