//! History, decoded: one sample of a GPU's history ring (ABI 1.1), and [`window`], the
//! one way plots, exports and the collector read history: from the tiered history
//! (ABI 1.7, see [`tiered`]) when the segment has it, else from the raw ring.

mod tiered;

pub use tiered::{integrals, Integral};

use gpupeek_shm::layout::history_valid as hv;
use gpupeek_shm::HistorySample;

use crate::units::MilliWatts;

/// What the daemon kept of one tick of one GPU; `None` where it had no value (the GPU
/// was asleep, lost or did not report it).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// `CLOCK_MONOTONIC` time of the sample, ns.
    pub at_mono_ns: u64,
    /// GPU utilisation, percent.
    pub util_pct: Option<u32>,
    /// Memory controller utilisation, percent.
    pub util_mem_pct: Option<u32>,
    /// Memory in use, MiB (rounded down by the daemon).
    pub mem_used_mib: Option<u32>,
    /// Power draw.
    pub power_draw: Option<MilliWatts>,
    /// Core temperature, degrees Celsius.
    pub temp_c: Option<i32>,
}

impl Sample {
    /// Decodes `s`.
    pub fn new(s: &HistorySample) -> Sample {
        let has = |bit: u16| s.valid & bit != 0;
        Sample {
            at_mono_ns: s.sample_mono_ns,
            util_pct: has(hv::UTILIZATION).then_some(u32::from(s.util_gpu_pct)),
            util_mem_pct: has(hv::UTIL_MEM).then_some(u32::from(s.util_mem_pct)),
            mem_used_mib: has(hv::MEMORY).then_some(s.mem_used_mib),
            power_draw: has(hv::POWER_DRAW).then_some(MilliWatts(s.power_draw_mw.into())),
            temp_c: has(hv::TEMPERATURE).then_some(i32::from(s.temp_gpu_c)),
        }
    }
}

/// A quantity the history keeps for every GPU (and, from the tiered history on, every
/// MIG instance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// GPU utilisation, percent.
    Utilization,
    /// Memory in use, MiB.
    MemoryUsed,
    /// Power draw, watts.
    PowerDraw,
    /// Core temperature, degrees Celsius.
    Temperature,
    /// SM clock, MHz.
    SmClock,
    /// GPM SM activity, percent.
    SmActivity,
}

impl Metric {
    /// Every metric, in the order of [`Point::values`].
    pub const ALL: [Metric; 6] = [
        Metric::Utilization,
        Metric::MemoryUsed,
        Metric::PowerDraw,
        Metric::Temperature,
        Metric::SmClock,
        Metric::SmActivity,
    ];

    /// The name users type (`--metric util`) and exports carry.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Utilization => "util",
            Metric::MemoryUsed => "mem_used",
            Metric::PowerDraw => "power",
            Metric::Temperature => "temp",
            Metric::SmClock => "sm_clock",
            Metric::SmActivity => "sm_active",
        }
    }

    /// The unit of its values.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Utilization | Metric::SmActivity => "%",
            Metric::MemoryUsed => "MiB",
            Metric::PowerDraw => "W",
            Metric::Temperature => "°C",
            Metric::SmClock => "MHz",
        }
    }

    /// A panel title.
    pub fn title(self) -> &'static str {
        match self {
            Metric::Utilization => "GPU utilisation",
            Metric::MemoryUsed => "Memory used",
            Metric::PowerDraw => "Power draw",
            Metric::Temperature => "Temperature",
            Metric::SmClock => "SM clock",
            Metric::SmActivity => "SM activity",
        }
    }

    /// The metric called `name`.
    pub fn from_name(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Its position in [`Point::values`].
    pub fn at(self) -> usize {
        self as usize
    }
}

/// Minimum, mean and maximum of one metric over a point's span (all three equal for a
/// raw sample).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    /// Smallest value.
    pub min: f64,
    /// Mean over the span's samples.
    pub mean: f64,
    /// Largest value.
    pub max: f64,
}

impl Stat {
    /// A single value.
    pub fn one(v: f64) -> Stat {
        Stat {
            min: v,
            mean: v,
            max: v,
        }
    }
}

/// One point of a [`Series`]: a raw sample or a bucket of samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Wall-clock (Unix epoch) start of the span, ns.
    pub start_unix_ns: u64,
    /// Length of the span, ns: the sampling step for a raw sample, the bucket width for
    /// a bucket.
    pub span_ns: u64,
    /// Samples the span holds with a value (0 for a gap).
    pub samples: u32,
    /// Indexed by [`Metric::at`]; `None` where the span has no value for it. A point whose
    /// values are all `None` is a gap (the GPU was asleep, lost or not responding, or the
    /// daemon was not running), drawn and exported as one.
    pub values: [Option<Stat>; Metric::ALL.len()],
}

impl Point {
    /// True when the point has no value at all.
    pub fn is_gap(&self) -> bool {
        self.values.iter().all(Option::is_none)
    }

    /// Its `metric`.
    pub fn get(&self, metric: Metric) -> Option<Stat> {
        self.values[metric.at()]
    }
}

/// The history of one GPU (or MIG instance) over a window, oldest point first.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// GPU index.
    pub gpu_index: u32,
    /// GPU UUID (the MIG device's UUID for a MIG instance).
    pub uuid: String,
    /// Product name.
    pub name: String,
    /// `(gpu instance, compute instance)` for a MIG instance.
    pub mig: Option<(u32, u32)>,
    /// The points, oldest first, finest resolution available for each part of the
    /// window.
    pub points: Vec<Point>,
}

/// Every GPU's (and MIG instance's) history over the last `since` before the snapshot's
/// publish time, from `segment`: the finest data the tiered history has for each part of
/// the window (raw samples, then 10 s buckets, then 1 min buckets), MIG instances as
/// series of their own after the GPUs. A GPU without a track (beyond the daemon's
/// `--history-tracks`, or from a writer older than ABI 1.7) has its raw ring's samples.
pub fn window(
    segment: &gpupeek_shm::Segment,
    snapshot: &gpupeek_shm::Snapshot,
    since: std::time::Duration,
) -> Vec<Series> {
    let status = &snapshot.status;
    let now_unix = status.published_unix_ns;
    let now_mono = status.heartbeat_mono_ns;
    let from = now_unix.saturating_sub(since.as_nanos().try_into().unwrap_or(u64::MAX));
    // GPUs from their tracks; a GPU without one (beyond the tracks, or a writer older
    // than ABI 1.7) from its raw ring; then the MIG instances' tracks.
    let mut tiered = tiered::window(segment, snapshot, from, now_unix);
    let mut out = Vec::new();
    for (slot, rec) in snapshot.gpus.iter().enumerate() {
        let gpu = crate::Gpu::new(rec);
        let uuid = gpu.uuid.map(|t| t.to_string()).unwrap_or_default();
        let own = |s: &Series| s.mig.is_none() && s.gpu_index == gpu.index && s.uuid == uuid;
        if let Some(at) = tiered.iter().position(own) {
            out.push(tiered.remove(at));
            continue;
        }
        let Ok(Some(ring)) = segment.history(slot) else {
            continue;
        };
        let points = ring
            .samples
            .iter()
            .filter_map(|s| {
                let start = now_unix.checked_sub(now_mono.checked_sub(s.sample_mono_ns)?)?;
                (start >= from).then(|| {
                    let d = Sample::new(s);
                    let mut values = [None; Metric::ALL.len()];
                    let put =
                        |v: &mut [Option<Stat>; Metric::ALL.len()], m: Metric, x: Option<f64>| {
                            v[m.at()] = x.map(Stat::one);
                        };
                    put(&mut values, Metric::Utilization, d.util_pct.map(f64::from));
                    put(
                        &mut values,
                        Metric::MemoryUsed,
                        d.mem_used_mib.map(f64::from),
                    );
                    put(
                        &mut values,
                        Metric::PowerDraw,
                        d.power_draw.map(|p| p.0 as f64 / 1000.0),
                    );
                    put(&mut values, Metric::Temperature, d.temp_c.map(f64::from));
                    Point {
                        start_unix_ns: start,
                        span_ns: ring.step_ns,
                        samples: u32::from(values.iter().any(Option::is_some)),
                        values,
                    }
                })
            })
            .collect();
        out.push(Series {
            gpu_index: gpu.index,
            uuid,
            name: gpu.name.map(|t| t.to_string()).unwrap_or_default(),
            mig: None,
            points,
        });
    }
    out.extend(tiered.into_iter().filter(|s| s.mig.is_some()));
    out
}
