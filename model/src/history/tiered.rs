//! The tiered history (ABI 1.7) decoded: a track's raw samples and buckets become
//! [`Point`]s, finest first, and its integrals an [`Integral`].
//!
//! A window is covered by the coarsest tier where only it reaches back, then by finer
//! ones: a tier's points start where the coarser tier's last point ends, so points never
//! overlap. A hole between two points (the daemon was not running) becomes one gap point.

use gpupeek_shm::layout::{tier_valid, TrackKind};
use gpupeek_shm::{Segment, Snapshot, TierBucket, TrackHead};

use super::{Metric, Point, Series, Stat};

/// The tier bits, one per metric, in [`Metric::ALL`] order.
const _: () = assert!(tier_valid::SET.bits.len() == Metric::ALL.len());

/// What a track has summed up since its start: per metric, the sum of every sample's
/// value (in the metric's unit) and how many samples had one.
#[derive(Debug, Clone, PartialEq)]
pub struct Integral {
    /// GPU index (the parent's for a MIG instance).
    pub gpu_index: u32,
    /// UUID of the GPU or MIG device.
    pub uuid: String,
    /// `(gpu instance, compute instance)` for a MIG instance.
    pub mig: Option<(u32, u32)>,
    /// Wall-clock (Unix) time the sums started from, ns.
    pub start_unix_ns: u64,
    /// Wall-clock (Unix) time of the last sample summed, ns.
    pub last_unix_ns: u64,
    /// Indexed by [`Metric::at`]: `(sum, samples)`.
    pub sums: [(f64, u64); Metric::ALL.len()],
}

impl Integral {
    /// The exact mean of `metric` over the samples taken between `earlier` (a read of
    /// the same track) and this one; `None` when there were none.
    pub fn mean_since(&self, earlier: &Integral, metric: Metric) -> Option<f64> {
        let (s2, n2) = self.sums[metric.at()];
        let (s1, n1) = earlier.sums[metric.at()];
        (n2 > n1 && self.start_unix_ns == earlier.start_unix_ns)
            .then(|| (s2 - s1) / (n2 - n1) as f64)
    }

    /// The mean of `metric` over every sample since the start.
    pub fn mean(&self, metric: Metric) -> Option<f64> {
        let (s, n) = self.sums[metric.at()];
        (n > 0).then(|| s / n as f64)
    }

    fn new(head: &TrackHead, gpu_index: u32, uuid: String, mig: Option<(u32, u32)>) -> Self {
        let raw = [
            (head.sum_util_pct, head.count_util, 1.0),
            (head.sum_mem_used_mib, head.count_mem_used, 1.0),
            (head.sum_power_mw, head.count_power, 1000.0),
            (head.sum_temp_c, head.count_temp, 1.0),
            (head.sum_sm_clock_mhz, head.count_sm_clock, 1.0),
            (head.sum_sm_active_centipct, head.count_sm_active, 100.0),
        ];
        Integral {
            gpu_index,
            uuid,
            mig,
            start_unix_ns: head.integral_start_unix_ns,
            last_unix_ns: head.last_sample_unix_ns,
            sums: raw.map(|(sum, n, div)| (sum as f64 / div, n)),
        }
    }
}

/// A GPU or MIG instance of the snapshot, and where its track is.
struct Owner {
    track: usize,
    head: TrackHead,
    gpu_index: u32,
    uuid: String,
    name: String,
    mig: Option<(u32, u32)>,
}

/// Every GPU and MIG instance of `snapshot` that has a track, with its track's head.
fn owners(segment: &Segment, snapshot: &Snapshot) -> Vec<Owner> {
    let heads: Vec<(usize, TrackHead)> = (0..segment.track_count())
        .filter_map(|i| Some((i, segment.track_head(i).ok()??)))
        .filter(|(_, h)| h.kind != TrackKind::Free as u32)
        .collect();
    let find = |kind: TrackKind, uuid: &[u8; 96]| {
        heads
            .iter()
            .find(|(_, h)| h.kind == kind as u32 && h.uuid == *uuid && uuid[0] != 0)
    };
    let text = |b: &[u8]| gpupeek_shm::text::decode(b).to_string();
    let mut out = Vec::new();
    for gpu in &snapshot.gpus {
        if let Some((track, head)) = find(TrackKind::Gpu, &gpu.uuid) {
            out.push(Owner {
                track: *track,
                head: *head,
                gpu_index: gpu.index,
                uuid: text(&gpu.uuid),
                name: text(&gpu.name),
                mig: None,
            });
        }
    }
    for m in &snapshot.mig {
        if let Some((track, head)) = find(TrackKind::Mig, &m.uuid) {
            let parent = snapshot.gpus.iter().find(|g| g.index == m.gpu_index);
            out.push(Owner {
                track: *track,
                head: *head,
                gpu_index: m.gpu_index,
                uuid: text(&m.uuid),
                name: parent.map(|g| text(&g.name)).unwrap_or_default(),
                mig: Some((m.gpu_instance_id, m.compute_instance_id)),
            });
        }
    }
    out
}

/// The integrals of every GPU and MIG instance of `snapshot` that has a track: GPUs in
/// slot order, then MIG instances.
pub fn integrals(segment: &Segment, snapshot: &Snapshot) -> Vec<Integral> {
    owners(segment, snapshot)
        .into_iter()
        .map(|o| Integral::new(&o.head, o.gpu_index, o.uuid, o.mig))
        .collect()
}

/// Every track's series over `[from, now]` (Unix ns); none when the segment has no
/// tiered history.
pub fn window(segment: &Segment, snapshot: &Snapshot, from: u64, now: u64) -> Vec<Series> {
    owners(segment, snapshot)
        .into_iter()
        .map(|o| Series {
            points: points(segment, o.track, &o.head, (from, now)),
            gpu_index: o.gpu_index,
            uuid: o.uuid,
            name: o.name,
            mig: o.mig,
        })
        .collect()
}

/// Track `index`'s points over `(from, now)` (Unix ns), finest available first.
fn points(
    segment: &Segment,
    index: usize,
    head: &TrackHead,
    (from, now): (u64, u64),
) -> Vec<Point> {
    let slots = segment.geometry().tiers.map_or([0; 3], |t| t.slots);
    let widths = [head.raw_step_ns, head.tier1_width_ns, head.tier2_width_ns];
    let keep = widths.map(|w| {
        let n = now.saturating_sub(from) / w.max(1) + 2;
        usize::try_from(n).unwrap_or(usize::MAX)
    });
    let Ok(Some(track)) = segment.track(index, keep) else {
        return Vec::new();
    };
    let mut out: Vec<Point> = Vec::new();
    // Coarsest first; each tier stops where the next finer one begins. A coarse bucket
    // across that start is kept (and the finer points start after it) only when the
    // finer tier has wrapped and was read whole: else the finer tier holds all of it,
    // finer (read or not: what `keep` left out lies before the window).
    for tier in (0..3).rev() {
        let width = track.width_ns(tier).max(1);
        let finer = (0..tier).rev().find(|&t| !track.tiers[t].is_empty());
        let finer_start = finer.map_or(u64::MAX, |t| track.tiers[t][0].start_unix_ns);
        let wrapped = finer.is_some_and(|t| {
            gpupeek_shm::tracks::written(&track.head, t) > slots[t] as u64
                && track.tiers[t].len() >= slots[t]
        });
        let after = out
            .last()
            .map_or(0, |p| p.start_unix_ns.saturating_add(p.span_ns));
        for b in &track.tiers[tier] {
            let start = b.start_unix_ns;
            let end = start.saturating_add(width);
            if start == 0 || start < after || end <= from || start > now {
                continue;
            }
            if tier > 0 && (start >= finer_start || (!wrapped && end > finer_start)) {
                break;
            }
            push(&mut out, point(b, width));
        }
    }
    out
}

/// Appends `p`, with a gap point before it when a hole separates it from the last one
/// (more than half a span: raw samples jitter around their step). Times are the
/// segment's, so hostile: sums saturate.
fn push(out: &mut Vec<Point>, p: Point) {
    if let Some(last) = out.last() {
        let end = last.start_unix_ns.saturating_add(last.span_ns);
        if p.start_unix_ns > end.saturating_add(last.span_ns / 2) {
            out.push(Point {
                start_unix_ns: end,
                span_ns: p.start_unix_ns - end,
                samples: 0,
                values: [None; Metric::ALL.len()],
            });
        }
    }
    out.push(p);
}

/// A bucket (or raw sample) as a point spanning `width` ns.
fn point(b: &TierBucket, width: u64) -> Point {
    let mut values = [None; Metric::ALL.len()];
    for (m, metric) in Metric::ALL.iter().enumerate() {
        if b.valid & (1 << m) == 0 {
            continue;
        }
        let (min, mean, max) = match metric {
            Metric::Utilization => (
                f64::from(b.util_pct_min),
                f64::from(b.util_centipct_mean) / 100.0,
                f64::from(b.util_pct_max),
            ),
            Metric::MemoryUsed => (
                f64::from(b.mem_used_mib_min),
                f64::from(b.mem_used_mib_mean),
                f64::from(b.mem_used_mib_max),
            ),
            Metric::PowerDraw => (
                f64::from(b.power_mw_min) / 1000.0,
                f64::from(b.power_mw_mean) / 1000.0,
                f64::from(b.power_mw_max) / 1000.0,
            ),
            Metric::Temperature => (
                f64::from(b.temp_c_min),
                f64::from(b.temp_centi_c_mean) / 100.0,
                f64::from(b.temp_c_max),
            ),
            Metric::SmClock => (
                f64::from(b.sm_clock_mhz_min),
                f64::from(b.sm_clock_mhz_mean),
                f64::from(b.sm_clock_mhz_max),
            ),
            Metric::SmActivity => (
                f64::from(b.sm_active_centipct_min) / 100.0,
                f64::from(b.sm_active_centipct_mean) / 100.0,
                f64::from(b.sm_active_centipct_max) / 100.0,
            ),
        };
        values[m] = Some(Stat { min, mean, max });
    }
    Point {
        start_unix_ns: b.start_unix_ns,
        span_ns: width,
        samples: b.samples.into(),
        values,
    }
}
