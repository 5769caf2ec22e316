//! Xid counts per GPU, kept for the daemon's life.
//!
//! The events thread ([`crate::events`]) counts each Xid NVML delivers into [`Xids`];
//! the publishing thread copies a GPU's counts into its record every tick
//! ([`Xids::apply`]), in every GPU state: an Xid is what tells why a GPU was lost or
//! stopped answering, so its count outlives the values that are only current while the
//! GPU is sampled. Counts run since the daemon started, across NVML sessions (a re-init,
//! a release for a GPU reset): Prometheus takes a counter that restarts with the daemon
//! as a counter reset. They are kept by NVML index.
//!
//! A GPU is published with counts ([`v3::XID_ERRORS`]) once NVML has accepted its
//! registration for Xid events in some session; a GPU on which events are not supported
//! has no counts at all, never a 0. The first [`SLOTS`] distinct Xid numbers are counted
//! one by one; later ones count in the total only.

use std::sync::{Arc, Mutex, MutexGuard};

use gpupeek_shm::layout::gpu_valid3 as v3;
use gpupeek_shm::GpuRecord;

/// Xid numbers counted one by one per GPU (the length of `GpuRecord::xid_codes`).
pub const SLOTS: usize = 8;

/// The most recent Xid of a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Last {
    /// The Xid number.
    pub code: u32,
    /// When it came, `CLOCK_REALTIME` ns.
    pub unix_ns: u64,
    /// The MIG GPU instance and compute instance it is attributable to, if any.
    pub instance: Option<(u32, u32)>,
}

/// One GPU's counts.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    /// NVML accepted its registration for Xid events (in some session).
    registered: bool,
    total: u64,
    last: Option<Last>,
    /// `(number, count)`; a number of 0 is a free slot.
    slots: [(u64, u64); SLOTS],
}

/// What the events threads share with the publisher.
#[derive(Debug, Default)]
struct Shared {
    gpus: Vec<Counts>,
    /// What the last session said about its registrations (said again only if it
    /// changes: runtime PM re-initialises NVML at every wake).
    said: String,
}

/// Every GPU's counts, shared by the events thread and the publisher. Clones share.
#[derive(Debug, Default, Clone)]
pub struct Xids(Arc<Mutex<Shared>>);

impl Xids {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Logs `line` (what a session's registrations came to) unless the session before
    /// said the same.
    pub fn say(&self, line: String) {
        let mut shared = self.lock();
        if shared.said != line {
            log::info!("{line}");
            shared.said = line;
        }
    }

    fn with(&self, index: u32, f: impl FnOnce(&mut Counts)) {
        let mut shared = self.lock();
        let all = &mut shared.gpus;
        let i = index as usize;
        if all.len() <= i {
            all.resize(i + 1, Counts::default());
        }
        f(&mut all[i]);
    }

    /// NVML delivers GPU `index`'s Xid events from now on.
    pub fn registered(&self, index: u32) {
        self.with(index, |c| c.registered = true);
    }

    /// Counts an Xid of GPU `index`.
    pub fn count(&self, index: u32, last: Last) {
        self.with(index, |c| {
            c.total = c.total.saturating_add(1);
            c.last = Some(last);
            let code = u64::from(last.code);
            let slot = c
                .slots
                .iter_mut()
                .find(|(n, _)| *n == code || (*n == 0 && code != 0));
            if let Some(slot) = slot {
                *slot = (code, slot.1.saturating_add(1));
            }
        });
    }

    /// Writes GPU `index`'s counts into `rec` (its record for this tick, in any state).
    pub fn apply(&self, index: u32, rec: &mut GpuRecord) {
        let shared = self.lock();
        let Some(c) = shared.gpus.get(index as usize).filter(|c| c.registered) else {
            return;
        };
        rec.valid3 |= v3::XID_ERRORS;
        rec.xid_errors_total = c.total;
        for (i, &(code, count)) in c.slots.iter().enumerate() {
            rec.xid_codes[i] = code;
            rec.xid_counts[i] = count;
        }
        if let Some(last) = c.last {
            rec.valid3 |= v3::XID_LAST;
            rec.xid_last_code = last.code;
            rec.xid_last_unix_ns = last.unix_ns;
            if let Some((gi, ci)) = last.instance {
                rec.valid3 |= v3::XID_LAST_INSTANCE;
                rec.xid_last_gpu_instance_id = gi;
                rec.xid_last_compute_instance_id = ci;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xid(code: u32) -> Last {
        Last {
            code,
            unix_ns: u64::from(code) * 10,
            instance: None,
        }
    }

    #[test]
    fn a_gpu_without_registration_publishes_nothing_even_after_an_xid() {
        let xids = Xids::default();
        xids.count(1, xid(79));
        let mut rec = GpuRecord::default();
        xids.apply(1, &mut rec);
        assert_eq!(rec.valid3, 0);
        xids.apply(5, &mut rec);
        assert_eq!(rec.valid3, 0);
    }

    #[test]
    fn counts_per_number_fill_the_slots_in_order_and_overflow_into_the_total() {
        let xids = Xids::default();
        xids.registered(0);
        let mut rec = GpuRecord::default();
        xids.apply(0, &mut rec);
        assert_eq!(rec.valid3, v3::XID_ERRORS, "registered, nothing yet: zero");
        assert_eq!(rec.xid_errors_total, 0);
        for code in [13, 31, 13].into_iter().chain(40..50) {
            xids.count(0, xid(code));
        }
        xids.count(
            0,
            Last {
                instance: Some((1, 0)),
                ..xid(94)
            },
        );
        xids.apply(0, &mut rec);
        assert_eq!(rec.xid_errors_total, 14);
        assert_eq!(rec.xid_codes, [13, 31, 40, 41, 42, 43, 44, 45]);
        assert_eq!(rec.xid_counts, [2, 1, 1, 1, 1, 1, 1, 1]);
        assert_eq!(
            rec.valid3,
            v3::XID_ERRORS | v3::XID_LAST | v3::XID_LAST_INSTANCE
        );
        assert_eq!((rec.xid_last_code, rec.xid_last_unix_ns), (94, 940));
        assert_eq!(
            (
                rec.xid_last_gpu_instance_id,
                rec.xid_last_compute_instance_id
            ),
            (1, 0)
        );
    }
}
