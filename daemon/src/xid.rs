//! Xid counts per GPU, kept for the daemon's life.
//!
//! The events thread ([`crate::events`]) counts each Xid NVML delivers into [`Xids`];
//! the publishing thread copies a GPU's counts into its record every tick
//! ([`Xids::apply`]), in every GPU state: an Xid is what tells why a GPU was lost or
//! stopped answering, so its count outlives the values that are only current while the
//! GPU is sampled. Counts run since the daemon started, across NVML sessions (a re-init,
//! a release for a GPU reset): Prometheus takes a counter that restarts with the daemon
//! as a counter reset. They are kept by the GPU's UUID, not its NVML index: a GPU gone
//! after a reset (Xid 79, fallen off the bus) moves the GPUs after it down an index,
//! and its counts must not become theirs.
//!
//! A GPU is published with counts ([`v3::XID_ERRORS`]) once NVML has accepted its
//! registration for Xid events in some session; a GPU on which events are not supported
//! has no counts at all, never a 0. The first [`SLOTS`] distinct Xid numbers are counted
//! one by one; later ones count in the total only.

use std::sync::{Arc, Mutex, MutexGuard};

use gpupeek_shm::layout::{gpu_valid, gpu_valid3 as v3};
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

/// A GPU's UUID as its record holds it (`GpuRecord::uuid`, NUL-padded).
pub type Uuid = [u8; 96];

/// What the events threads share with the publisher.
#[derive(Debug, Default)]
struct Shared {
    /// Each GPU's counts, by UUID (a few GPUs: searched in order).
    gpus: Vec<(Uuid, Counts)>,
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

    fn with(&self, uuid: &Uuid, f: impl FnOnce(&mut Counts)) {
        let mut shared = self.lock();
        let all = &mut shared.gpus;
        let at = match all.iter().position(|(u, _)| u == uuid) {
            Some(at) => at,
            None => {
                all.push((*uuid, Counts::default()));
                all.len() - 1
            }
        };
        f(&mut all[at].1);
    }

    /// NVML delivers the Xid events of the GPU `uuid` from now on.
    pub fn registered(&self, uuid: &Uuid) {
        self.with(uuid, |c| c.registered = true);
    }

    /// Counts an Xid of the GPU `uuid`.
    pub fn count(&self, uuid: &Uuid, last: Last) {
        self.with(uuid, |c| {
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

    /// Writes the counts of `rec`'s GPU (by its UUID) into `rec`, its record for this
    /// tick, in any state. A record without a UUID gets none.
    pub fn apply(&self, rec: &mut GpuRecord) {
        if rec.valid & gpu_valid::UUID == 0 {
            return;
        }
        let shared = self.lock();
        let found = shared.gpus.iter().find(|(u, _)| *u == rec.uuid);
        let Some((_, c)) = found.filter(|(_, c)| c.registered) else {
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

    fn uuid(name: &str) -> Uuid {
        let mut u = [0; 96];
        gpupeek_shm::text::encode(&mut u, name);
        u
    }

    fn record(name: &str) -> GpuRecord {
        GpuRecord {
            valid: gpu_valid::UUID,
            uuid: uuid(name),
            ..GpuRecord::default()
        }
    }

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
        xids.count(&uuid("GPU-1"), xid(79));
        let mut rec = record("GPU-1");
        xids.apply(&mut rec);
        assert_eq!(rec.valid3, 0);
        let mut rec = record("GPU-5");
        xids.apply(&mut rec);
        assert_eq!(rec.valid3, 0);
    }

    #[test]
    fn counts_per_number_fill_the_slots_in_order_and_overflow_into_the_total() {
        let xids = Xids::default();
        let gpu = uuid("GPU-0");
        xids.registered(&gpu);
        let mut rec = record("GPU-0");
        xids.apply(&mut rec);
        assert_eq!(rec.valid3, v3::XID_ERRORS, "registered, nothing yet: zero");
        assert_eq!(rec.xid_errors_total, 0);
        for code in [13, 31, 13].into_iter().chain(40..50) {
            xids.count(&gpu, xid(code));
        }
        xids.count(
            &gpu,
            Last {
                instance: Some((1, 0)),
                ..xid(94)
            },
        );
        xids.apply(&mut rec);
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

    #[test]
    fn counts_are_a_uuids_and_a_record_without_one_gets_none() {
        let xids = Xids::default();
        for name in ["GPU-a", "GPU-b"] {
            xids.registered(&uuid(name));
        }
        xids.count(&uuid("GPU-a"), xid(79));
        let (mut a, mut b) = (record("GPU-a"), record("GPU-b"));
        xids.apply(&mut a);
        xids.apply(&mut b);
        assert_eq!((a.xid_errors_total, a.xid_last_code), (1, 79));
        assert_eq!((b.xid_errors_total, b.valid3 & v3::XID_LAST), (0, 0));
        let mut unknown = GpuRecord {
            valid: 0,
            ..record("GPU-a")
        };
        xids.apply(&mut unknown);
        assert_eq!(unknown.valid3, 0);
    }
}
