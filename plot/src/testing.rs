//! Synthetic windows for the unit tests: raw samples a second apart, buckets ten seconds
//! wide with min < mean < max, and gaps, so that bands and broken lines are drawn
//! whatever the segment holds today.

use std::time::Duration;

use gpupeek::plotting::Window;
use gpupeek_model::history::{Metric, Point, Series, Stat};

/// The first point's time: 2025-11-25T06:40:00Z, ns.
pub const T0: u64 = 1_764_052_800_000_000_000;

const S: u64 = 1_000_000_000;

/// A raw sample `i` seconds after [`T0`]: utilisation `v` %, `v` × 100 MiB, `v` × 2 W,
/// 40 + `v` / 10 °C.
pub fn raw(i: u64, v: f64) -> Point {
    let mut values = [None; Metric::ALL.len()];
    for (m, x) in [
        (Metric::Utilization, v),
        (Metric::MemoryUsed, v * 100.0),
        (Metric::PowerDraw, v * 2.0),
        (Metric::Temperature, 40.0 + v / 10.0),
    ] {
        values[m.at()] = Some(Stat::one(x));
    }
    Point {
        start_unix_ns: T0 + i * S,
        span_ns: S,
        samples: 1,
        values,
    }
}

/// A 10 s bucket starting `i` seconds after [`T0`], every metric of [`raw`] with this
/// utilisation's minimum, mean and maximum (the others scaled alike).
pub fn bucket(i: u64, min: f64, mean: f64, max: f64) -> Point {
    let lo = raw(i, min);
    let mid = raw(i, mean);
    let hi = raw(i, max);
    let mut values = [None; Metric::ALL.len()];
    for m in Metric::ALL {
        if let (Some(a), Some(b), Some(c)) = (lo.get(m), mid.get(m), hi.get(m)) {
            values[m.at()] = Some(Stat {
                min: a.min,
                mean: b.mean,
                max: c.max,
            });
        }
    }
    Point {
        start_unix_ns: T0 + i * S,
        span_ns: 10 * S,
        samples: 10,
        values,
    }
}

/// A gap `i` seconds after [`T0`].
pub fn gap(i: u64) -> Point {
    Point {
        start_unix_ns: T0 + i * S,
        span_ns: S,
        samples: 0,
        values: [None; Metric::ALL.len()],
    }
}

/// GPU `index`'s series.
pub fn series(index: u32, points: Vec<Point>) -> Series {
    Series {
        gpu_index: index,
        uuid: format!("GPU-{index}"),
        name: "NVIDIA H100 80GB HBM3".into(),
        mig: None,
        points,
    }
}

/// A window of `series` on host `node1`, from [`T0`] - 10 s to [`T0`] + 110 s.
pub fn window(series: Vec<Series>) -> Window {
    Window {
        hostname: "node1".into(),
        from_unix_ns: T0 - 10 * S,
        to_unix_ns: T0 + 110 * S,
        since: Duration::from_secs(120),
        series,
    }
}

/// Two GPUs over two minutes: GPU 0 raw samples climbing 0 to 100 % with a gap at 50 s,
/// GPU 1 ten-second buckets with bands.
pub fn two_gpus() -> Window {
    let climb: Vec<Point> = (0..100)
        .map(|i| if i == 50 { gap(i) } else { raw(i, i as f64) })
        .collect();
    let buckets: Vec<Point> = (0..10)
        .map(|b| {
            let mean = 30.0 + 5.0 * b as f64;
            bucket(b * 10, mean - 20.0, mean, mean + 15.0)
        })
        .collect();
    window(vec![series(0, climb), series(1, buckets)])
}
