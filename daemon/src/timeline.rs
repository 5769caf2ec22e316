//! Tiered history (ABI 1.7): every GPU's and MIG instance's samples folded into the
//! segment's tracks (raw samples, 10 s buckets, 1 min buckets, running integrals), keyed
//! by UUID and stamped with wall-clock time.
//!
//! Each history step (`max(period, unit)`, the unit 1 s) a track gets one sample: the
//! raw ring a new slot, each bucket tier its open bucket updated (or, when the sample
//! falls past its end, a new bucket opened), the integrals a sum and a count per metric.
//! That is three bucket writes and a head write per track per step whatever the history
//! holds: the daemon's cost stays flat. A sample with no value (the GPU asleep, lost or
//! not responding) is counted nowhere: a bucket made only of such samples is a gap.
//!
//! Sample times never go backwards within a track (a wall clock stepped back is held at
//! the last sample's time), so buckets stay in order.
//!
//! At start the history a previous daemon left (in the segment taken over in place, else
//! in the state file, see [`crate::statefile`]) waits, by UUID, for its GPU: the first
//! sample of a GPU with waiting history installs it into a free track, so a GPU that
//! moved index keeps its history and one that is gone is dropped.

use std::collections::HashMap;
use std::time::Duration;

use gpupeek_shm::geometry::tiers::TIERS;
use gpupeek_shm::layout::{gpu_valid, mig_valid, GpuState, TrackKind};
use gpupeek_shm::tracks::{set_written, width_ns, written, Track};
use gpupeek_shm::{GpuRecord, MigRecord, Publisher, TierBucket, TrackHead};

/// Metrics of a sample, in [`gpupeek_shm::layout::tier_valid`] bit order.
pub const METRICS: usize = 6;

/// One sample's values in tier units: utilisation %, memory used MiB, power mW,
/// temperature °C, SM clock MHz, SM activity hundredths of a percent.
pub type Values = [Option<u32>; METRICS];

/// Bucket widths in units (tier 1, tier 2); the raw step is one unit (or the period).
pub const TIER_UNITS: [u32; 2] = [10, 60];

/// The values of a just-published GPU record (none unless it was sampled this tick).
fn gpu_values(gpu: &GpuRecord) -> Values {
    if GpuState::from_raw(gpu.state) != Some(GpuState::Ok) {
        return [None; METRICS];
    }
    let has = |bit| gpu.valid & bit != 0;
    let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    [
        has(gpu_valid::UTILIZATION).then(|| gpu.util_gpu_pct.min(100)),
        has(gpu_valid::MEMORY).then(|| clamp(gpu.mem_used_bytes >> 20)),
        has(gpu_valid::POWER_DRAW).then_some(gpu.power_draw_mw),
        has(gpu_valid::TEMPERATURE).then(|| gpu.temp_gpu_c.clamp(0, 255) as u32),
        has(gpu_valid::CLOCK_SM).then(|| gpu.clock_sm_mhz.min(u16::MAX.into())),
        has(gpu_valid::GPM_SM_ACTIVITY).then(|| gpu.gpm_sm_activity_centipct.min(10_000)),
    ]
}

/// The values of a MIG instance this tick: memory used and GPM SM activity.
fn mig_values(m: &MigRecord) -> Values {
    let has = |bit| m.valid & bit != 0;
    [
        None,
        has(mig_valid::MEMORY).then(|| u32::try_from(m.mem_used_bytes >> 20).unwrap_or(u32::MAX)),
        None,
        None,
        None,
        has(mig_valid::GPM_SM_ACTIVITY).then(|| m.gpm_sm_activity_centipct.min(10_000)),
    ]
}

/// Exact running aggregate of one open bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Acc {
    start_unix_ns: u64,
    samples: u32,
    min: [u32; METRICS],
    max: [u32; METRICS],
    sum: [u64; METRICS],
    count: [u32; METRICS],
}

impl Acc {
    fn new(start_unix_ns: u64) -> Self {
        Acc {
            start_unix_ns,
            ..Default::default()
        }
    }

    fn add(&mut self, values: &Values) {
        if values.iter().any(Option::is_some) {
            self.samples += 1;
        }
        for (m, v) in values.iter().enumerate() {
            let Some(v) = *v else { continue };
            if self.count[m] == 0 {
                (self.min[m], self.max[m]) = (v, v);
            }
            self.min[m] = self.min[m].min(v);
            self.max[m] = self.max[m].max(v);
            self.sum[m] += u64::from(v);
            self.count[m] += 1;
        }
    }

    /// Continues a bucket read back from a previous daemon (its mean times its samples
    /// stands for the sum).
    fn resume(b: &TierBucket) -> Self {
        let mut acc = Acc::new(b.start_unix_ns);
        acc.samples = b.samples.into();
        let n = u64::from(b.samples);
        for m in 0..METRICS {
            if b.valid & (1 << m) == 0 || n == 0 {
                continue;
            }
            let (min, mean_x100, max) = stat_of(b, m);
            (acc.min[m], acc.max[m]) = (min, max);
            acc.sum[m] = (mean_x100 * n + 50) / 100;
            acc.count[m] = b.samples.into();
        }
        acc
    }

    fn bucket(&self) -> TierBucket {
        let mut b = TierBucket {
            start_unix_ns: self.start_unix_ns,
            samples: self.samples.min(255) as u8,
            ..Default::default()
        };
        for m in 0..METRICS {
            let n = u64::from(self.count[m]);
            if n == 0 {
                continue;
            }
            b.valid |= 1 << m;
            let (min, max, sum) = (self.min[m], self.max[m], self.sum[m]);
            // Rounded mean, in the bucket's unit: hundredths for utilisation and
            // temperature, the value's own unit otherwise.
            let mean = |scale: u64| ((sum * scale + n / 2) / n) as u32;
            let u16_of = |v: u32| v.min(u16::MAX.into()) as u16;
            let u8_of = |v: u32| v.min(u8::MAX.into()) as u8;
            match m {
                0 => {
                    (b.util_pct_min, b.util_pct_max) = (u8_of(min), u8_of(max));
                    b.util_centipct_mean = u16_of(mean(100));
                }
                1 => {
                    (b.mem_used_mib_min, b.mem_used_mib_max) = (min, max);
                    b.mem_used_mib_mean = mean(1);
                }
                2 => {
                    (b.power_mw_min, b.power_mw_max) = (min, max);
                    b.power_mw_mean = mean(1);
                }
                3 => {
                    (b.temp_c_min, b.temp_c_max) = (u8_of(min), u8_of(max));
                    b.temp_centi_c_mean = u16_of(mean(100));
                }
                4 => {
                    (b.sm_clock_mhz_min, b.sm_clock_mhz_max) = (u16_of(min), u16_of(max));
                    b.sm_clock_mhz_mean = u16_of(mean(1));
                }
                _ => {
                    (b.sm_active_centipct_min, b.sm_active_centipct_max) =
                        (u16_of(min), u16_of(max));
                    b.sm_active_centipct_mean = u16_of(mean(1));
                }
            }
        }
        b
    }
}

/// `(min, mean × 100, max)` of metric `m` of a bucket, in the metric's unit.
fn stat_of(b: &TierBucket, m: usize) -> (u32, u64, u32) {
    let x100 = |v: u32| u64::from(v) * 100;
    match m {
        0 => (
            b.util_pct_min.into(),
            b.util_centipct_mean.into(),
            b.util_pct_max.into(),
        ),
        1 => (
            b.mem_used_mib_min,
            x100(b.mem_used_mib_mean),
            b.mem_used_mib_max,
        ),
        2 => (b.power_mw_min, x100(b.power_mw_mean), b.power_mw_max),
        3 => (
            b.temp_c_min.into(),
            b.temp_centi_c_mean.into(),
            b.temp_c_max.into(),
        ),
        4 => (
            b.sm_clock_mhz_min.into(),
            x100(b.sm_clock_mhz_mean.into()),
            b.sm_clock_mhz_max.into(),
        ),
        _ => (
            b.sm_active_centipct_min.into(),
            x100(b.sm_active_centipct_mean.into()),
            b.sm_active_centipct_max.into(),
        ),
    }
}

/// Adds `values` to the integrals of `head`.
fn integrate(head: &mut TrackHead, values: &Values) {
    let pairs = [
        (&mut head.sum_util_pct, &mut head.count_util),
        (&mut head.sum_mem_used_mib, &mut head.count_mem_used),
        (&mut head.sum_power_mw, &mut head.count_power),
        (&mut head.sum_temp_c, &mut head.count_temp),
        (&mut head.sum_sm_clock_mhz, &mut head.count_sm_clock),
        (&mut head.sum_sm_active_centipct, &mut head.count_sm_active),
    ];
    for ((sum, count), v) in pairs.into_iter().zip(values) {
        if let Some(v) = v {
            *sum = sum.wrapping_add(u64::from(*v));
            *count = count.saturating_add(1);
        }
    }
}

/// Which GPU or MIG instance a sample is of.
#[derive(Debug, Clone, Copy)]
struct Key<'a> {
    /// GPU or MIG instance.
    kind: TrackKind,
    /// The UUID, NUL-padded (the record's field).
    uuid: &'a [u8; 96],
    /// GPU index (the parent's for a MIG instance).
    gpu_index: u32,
    /// `(gpu instance, compute instance)` of a MIG instance.
    mig: Option<(u32, u32)>,
}

/// One track as the daemon keeps it: its head and the open bucket of each tier.
#[derive(Debug, Clone)]
struct Slot {
    head: TrackHead,
    open: [Option<Acc>; TIERS],
    /// Sampled since this daemon started.
    live: bool,
}

/// The daemon's side of the tracks.
#[derive(Debug)]
pub struct Timeline {
    widths: [u64; TIERS],
    slots: Vec<Slot>,
    ring_slots: [usize; TIERS],
    by_uuid: HashMap<[u8; 96], usize>,
    /// History left by a previous daemon, waiting for its GPU.
    waiting: HashMap<[u8; 96], Track>,
    /// Said (or, for a pod's view, never to be said) that every track is taken.
    warned_full: bool,
}

impl Timeline {
    /// The tracks of `publisher`'s segment for a daemon sampling every `period`, a
    /// history unit of `unit` (1 s but in tests): raw step `max(period, unit)`, buckets
    /// of 10 and 60 units. `previous` is the history a previous daemon left; every
    /// track of the segment starts free.
    pub fn new(
        publisher: &Publisher,
        period: Duration,
        unit: Duration,
        previous: Vec<Track>,
    ) -> Self {
        let unit_ns = unit.as_nanos() as u64;
        let widths = [
            period.max(unit).as_nanos() as u64,
            unit_ns * u64::from(TIER_UNITS[0]),
            unit_ns * u64::from(TIER_UNITS[1]),
        ];
        let count = publisher.track_count();
        let ring_slots = publisher.geometry().tiers.map_or([0; TIERS], |t| t.slots);
        let free = Slot {
            head: TrackHead::default(),
            open: [None; TIERS],
            live: false,
        };
        for index in 0..count {
            publisher.write_track(index, &free.head, []);
        }
        let waiting = previous
            .into_iter()
            .filter(|t| TrackKind::from_raw(t.head.kind).is_some_and(|k| k != TrackKind::Free))
            .map(|t| (t.head.uuid, t))
            .collect();
        Timeline {
            widths,
            slots: vec![free; count],
            ring_slots,
            by_uuid: HashMap::new(),
            waiting,
            warned_full: false,
        }
    }

    /// The same, for a segment sized to its GPUs and MIG instances (a pod's view): a GPU
    /// or instance beyond its tracks is not logged, as no flag would give it one (the
    /// view is made again, larger, at its next membership).
    pub fn sized_to_fit(mut self) -> Self {
        self.warned_full = true;
        self
    }

    /// Every track in use, whole, for the state file.
    pub fn tracks(&self, publisher: &Publisher) -> Vec<Track> {
        (0..self.slots.len())
            .filter(|&i| self.slots[i].head.kind != TrackKind::Free as u32)
            .filter_map(|i| publisher.read_track(i))
            .chain(self.waiting.values().cloned())
            .collect()
    }

    /// Every GPU has been heard from and keyed: the history still waiting is of GPUs
    /// (or MIG instances) that are gone, and is dropped (from the next state file too).
    pub fn settle(&mut self) {
        if !self.waiting.is_empty() {
            log::info!(
                "history of {} GPU(s) or MIG instance(s) no longer present dropped",
                self.waiting.len()
            );
            self.waiting.clear();
        }
    }

    /// Records one sample of `key` taken at `at_unix_ns` into its track.
    fn record(&mut self, publisher: &Publisher, key: Key, at_unix_ns: u64, values: &Values) {
        // No tracks (`--history-tracks 0`), or a GPU without a UUID to key it by.
        if self.slots.is_empty() || key.uuid[0] == 0 {
            return;
        }
        let Some(index) = self.track_of(publisher, key.uuid) else {
            return;
        };
        let widths = self.widths;
        let ring_slots = self.ring_slots;
        let slot = &mut self.slots[index];
        slot.live = true;
        let head = &mut slot.head;
        head.kind = key.kind as u32;
        head.gpu_index = key.gpu_index;
        (head.gpu_instance_id, head.compute_instance_id) = key.mig.unwrap_or((u32::MAX, u32::MAX));
        if head.integral_start_unix_ns == 0 {
            head.integral_start_unix_ns = at_unix_ns;
        }
        let t = at_unix_ns.max(head.last_sample_unix_ns);
        head.last_sample_unix_ns = t;
        (head.raw_step_ns, head.tier1_width_ns, head.tier2_width_ns) =
            (widths[0], widths[1], widths[2]);
        integrate(head, values);
        let mut writes = [(0, 0, TierBucket::default()); TIERS];
        for tier in 0..TIERS {
            let start = if tier == 0 { t } else { t - t % widths[tier] };
            let acc = match &mut slot.open[tier] {
                Some(acc) if tier > 0 && acc.start_unix_ns == start => acc,
                open => {
                    let n = written(head, tier) + 1;
                    set_written(head, tier, n);
                    open.insert(Acc::new(start))
                }
            };
            acc.add(values);
            let n = written(head, tier);
            let ring = ring_slots[tier] as u64;
            writes[tier] = (tier, ((n - 1) % ring) as usize, acc.bucket());
        }
        publisher.write_track(index, head, writes);
    }

    /// Records the just-published `gpu` as a sample into its track, when this tick samples
    /// into the tracks (`at`, the tick's wall-clock time); a record not sampled this tick
    /// (asleep, idle while NVML is released, lost, not responding) is a sample without
    /// values (see [`gpu_values`]).
    pub fn record_gpu(&mut self, publisher: &Publisher, at: Option<u64>, gpu: &GpuRecord) {
        let Some(at) = at else { return };
        if gpu.valid & gpu_valid::UUID == 0 {
            return;
        }
        let key = Key {
            kind: TrackKind::Gpu,
            uuid: &gpu.uuid,
            gpu_index: gpu.index,
            mig: None,
        };
        self.record(publisher, key, at, &gpu_values(gpu));
    }

    /// Records this tick's sample of MIG instance `m` into its track.
    pub fn record_mig(&mut self, publisher: &Publisher, at: u64, m: &MigRecord) {
        let key = Key {
            kind: TrackKind::Mig,
            uuid: &m.uuid,
            gpu_index: m.gpu_index,
            mig: Some((m.gpu_instance_id, m.compute_instance_id)),
        };
        self.record(publisher, key, at, &mig_values(m));
    }

    /// The track of `uuid`, assigned (with its waiting history installed) if it has
    /// none; `None` when every track is taken by a GPU sampled since the start.
    fn track_of(&mut self, publisher: &Publisher, uuid: &[u8; 96]) -> Option<usize> {
        if let Some(&index) = self.by_uuid.get(uuid) {
            return Some(index);
        }
        let free = self.slots.iter().position(|s| s.head.kind == 0);
        // Else the track of the GPU gone longest (not seen since the start).
        let index = free.or_else(|| {
            (0..self.slots.len())
                .filter(|&i| !self.slots[i].live)
                .min_by_key(|&i| self.slots[i].head.last_sample_unix_ns)
        });
        let Some(index) = index else {
            if !self.warned_full {
                log::warn!(
                    "all {} history tracks are in use: a GPU or MIG instance beyond them has \
                     no tiered history (raise --history-tracks)",
                    self.slots.len()
                );
                self.warned_full = true;
            }
            return None;
        };
        let old = self.slots[index].head.uuid;
        self.by_uuid.remove(&old);
        self.by_uuid.insert(*uuid, index);
        let mut head = TrackHead {
            uuid: *uuid,
            ..Default::default()
        };
        let mut open = [None; TIERS];
        let mut buckets = Vec::new();
        if let Some(track) = self.waiting.remove(uuid) {
            head = track.head;
            head.seq = 0;
            for (tier, kept) in track.tiers.iter().enumerate() {
                // A tier whose width changed (another --interval) starts anew.
                let same = width_ns(&track.head, tier) == self.widths[tier];
                let kept = if same {
                    &kept[kept.len().saturating_sub(self.ring_slots[tier])..]
                } else {
                    &[][..]
                };
                set_written(&mut head, tier, kept.len() as u64);
                buckets.extend(kept.iter().enumerate().map(|(i, b)| (tier, i, *b)));
                if tier > 0 {
                    open[tier] = kept.last().map(Acc::resume);
                }
            }
        }
        publisher.write_track(index, &head, buckets);
        self.slots[index] = Slot {
            head,
            open,
            live: false,
        };
        Some(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_keeps_min_mean_and_max_of_the_samples_with_a_value() {
        let mut acc = Acc::new(10);
        acc.add(&[Some(10), Some(100), None, Some(40), None, Some(2500)]);
        acc.add(&[None; METRICS]);
        acc.add(&[Some(21), Some(300), None, Some(41), None, None]);
        let b = acc.bucket();
        assert_eq!(b.samples, 2);
        assert_eq!(b.valid, 0b10_1011);
        assert_eq!(
            (b.util_pct_min, b.util_centipct_mean, b.util_pct_max),
            (10, 1550, 21)
        );
        assert_eq!(
            (b.mem_used_mib_min, b.mem_used_mib_mean, b.mem_used_mib_max),
            (100, 200, 300)
        );
        assert_eq!(
            (b.temp_c_min, b.temp_centi_c_mean, b.temp_c_max),
            (40, 4050, 41)
        );
        assert_eq!(b.sm_active_centipct_mean, 2500);
    }

    #[test]
    fn a_bucket_of_samples_without_values_is_a_gap() {
        let mut acc = Acc::new(10);
        acc.add(&[None; METRICS]);
        let b = acc.bucket();
        assert_eq!((b.samples, b.valid), (0, 0));
    }

    #[test]
    fn a_resumed_bucket_goes_on_from_its_mean() {
        let mut acc = Acc::new(10);
        acc.add(&[Some(10), Some(100), None, None, None, None]);
        acc.add(&[Some(20), Some(200), None, None, None, None]);
        let mut resumed = Acc::resume(&acc.bucket());
        resumed.add(&[Some(30), Some(300), None, None, None, None]);
        acc.add(&[Some(30), Some(300), None, None, None, None]);
        assert_eq!(resumed.bucket(), acc.bucket());
    }
}
