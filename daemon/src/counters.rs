//! Counters that never go backwards over the daemon's life.
//!
//! NVML's total energy (mJ) and volatile ECC counts restart from 0 when the driver
//! reloads, which the daemon sees as a new NVML session. A reader computing energy over
//! a window would then get a negative delta. [`Monotonic`] keeps, per GPU UUID, the last
//! raw value of each counter and an offset, added to every later value, that grows by
//! the last raw value whenever a raw value goes backwards. So a published counter is
//! "since the daemon first saw this GPU's driver counter", continuous across reloads:
//! what the driver counted before the reload, plus what it counted since.
//!
//! It lives in the daemon loop ([`crate::run`]), not in a [`crate::sampler::Sampler`],
//! because it must outlive NVML sessions. It allocates only when it meets a new GPU.

use gpupeek_shm::layout::gpu_valid as v;
use gpupeek_shm::GpuRecord;

/// The counters made monotonic, by validity bit.
const COUNTERS: [u64; 3] = [v::ENERGY, v::ECC_CORRECTED, v::ECC_UNCORRECTED];

/// One counter of one GPU.
#[derive(Debug, Default, Clone, Copy)]
struct Counter {
    last_raw: Option<u64>,
    offset: u64,
}

impl Counter {
    /// The published value for the raw value `raw`.
    fn apply(&mut self, raw: u64) -> u64 {
        if let Some(last) = self.last_raw.filter(|&last| raw < last) {
            self.offset = self.offset.saturating_add(last);
        }
        self.last_raw = Some(raw);
        raw.saturating_add(self.offset)
    }
}

/// Per-GPU counter state, kept for the daemon's life.
#[derive(Debug, Default)]
pub struct Monotonic {
    gpus: Vec<([u8; 96], [Counter; 3])>,
}

impl Monotonic {
    /// Makes `rec`'s counters monotonic for its GPU (known by UUID). A record with no
    /// UUID, or a counter with no value, passes through unchanged.
    pub fn apply(&mut self, rec: &mut GpuRecord) {
        if rec.valid & v::UUID == 0 || rec.valid & (COUNTERS[0] | COUNTERS[1] | COUNTERS[2]) == 0 {
            return;
        }
        let slot = match self.gpus.iter().position(|(uuid, _)| *uuid == rec.uuid) {
            Some(i) => i,
            None => {
                self.gpus.push((rec.uuid, [Counter::default(); 3]));
                self.gpus.len() - 1
            }
        };
        let counters = &mut self.gpus[slot].1;
        let fields = [
            &mut rec.energy_mj,
            &mut rec.ecc_corrected_volatile_count,
            &mut rec.ecc_uncorrected_volatile_count,
        ];
        for ((bit, counter), field) in COUNTERS.iter().zip(counters).zip(fields) {
            if rec.valid & bit != 0 {
                *field = counter.apply(*field);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(uuid: &str, energy: Option<u64>, ecc: u64) -> GpuRecord {
        let mut rec = GpuRecord::default();
        gpupeek_shm::text::encode(&mut rec.uuid, uuid);
        rec.valid = v::UUID | v::ECC_CORRECTED;
        rec.ecc_corrected_volatile_count = ecc;
        if let Some(e) = energy {
            rec.energy_mj = e;
            rec.valid |= v::ENERGY;
        }
        rec
    }

    fn published(m: &mut Monotonic, uuid: &str, energy: Option<u64>, ecc: u64) -> (u64, u64) {
        let mut rec = record(uuid, energy, ecc);
        m.apply(&mut rec);
        (rec.energy_mj, rec.ecc_corrected_volatile_count)
    }

    #[test]
    fn counters_pass_through_while_they_grow() {
        let mut m = Monotonic::default();
        assert_eq!(published(&mut m, "GPU-a", Some(100), 1), (100, 1));
        assert_eq!(published(&mut m, "GPU-a", Some(150), 1), (150, 1));
    }

    #[test]
    fn a_restart_from_zero_continues_from_the_last_value() {
        let mut m = Monotonic::default();
        published(&mut m, "GPU-a", Some(1000), 5);
        assert_eq!(published(&mut m, "GPU-a", Some(10), 0), (1010, 5));
        assert_eq!(published(&mut m, "GPU-a", Some(30), 2), (1030, 7));
        // A second reload adds up.
        assert_eq!(published(&mut m, "GPU-a", Some(5), 1), (1035, 8));
    }

    #[test]
    fn gpus_are_told_apart_by_uuid_not_by_slot() {
        let mut m = Monotonic::default();
        published(&mut m, "GPU-a", Some(1000), 0);
        assert_eq!(published(&mut m, "GPU-b", Some(10), 0), (10, 0));
        assert_eq!(published(&mut m, "GPU-a", Some(1001), 0), (1001, 0));
    }

    #[test]
    fn a_missing_value_is_not_a_restart_and_stays_missing() {
        let mut m = Monotonic::default();
        published(&mut m, "GPU-a", Some(1000), 0);
        let mut rec = record("GPU-a", None, 0);
        m.apply(&mut rec);
        assert_eq!((rec.valid & v::ENERGY, rec.energy_mj), (0, 0));
        assert_eq!(published(&mut m, "GPU-a", Some(1200), 0), (1200, 0));
    }
}
