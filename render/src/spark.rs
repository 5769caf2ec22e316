//! Sparklines: `{FIELD:spark}` (or `{FIELD:sparkN}`, N from 1 to [`MAX_WIDTH`]) draws
//! the last N samples (default [`DEFAULT_WIDTH`]) of the daemon's per-GPU history ring,
//! oldest first, one of `▁▂▃▄▅▆▇█` per sample, always N characters wide: a sample the
//! ring does not have yet, or one taken while the GPU was asleep, lost or failing, is a
//! space (a gap, never a zero). The newest sample is always the last character.
//!
//! Each bar is the value over its full scale: 100 for percentages and for temperature
//! (°C), the GPU's total memory for `mem_used`, its power limit for `power` (the
//! window's highest draw when the limit is unknown). Outside `{each}` a sparkline
//! aggregates the selected GPUs sample by sample, newest aligned with newest, with the
//! field's natural aggregate or the scope's (`{sum.power:spark}`), values and scales
//! alike. Without history (a daemon without rings, or a reader that did not load them)
//! the placeholder is `N/A`.

use gpupeek_model::{Gpu, Sample};
use gpupeek_shm::{History, HistorySample};

use crate::Agg;

/// Samples drawn by a bare `spark`.
pub(crate) const DEFAULT_WIDTH: usize = 10;
/// The widest sparkline a template may ask for.
pub(crate) const MAX_WIDTH: usize = 240;
/// The eight bar heights, lowest first.
pub const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A sample's value and the full scale it is drawn against (`None`: the window's peak).
pub(crate) type Point = (f64, Option<f64>);

/// Reads a field out of a history sample of GPU `g` (whose model gives the scales).
pub(crate) type HistoryGetter = fn(&Sample, &Gpu) -> Option<Point>;

/// Fields that have a history, for error messages and `--help`.
pub(crate) const FIELDS: &str = "util, util_mem, mem_used, mem_pct, power, power_pct, temp";

fn total_mib(g: &Gpu) -> Option<f64> {
    let total = g.memory?.total;
    (total.0 > 0).then_some(total.mib() as f64)
}

fn limit_mw(g: &Gpu) -> Option<f64> {
    let limit = g.power_limit?;
    (limit.0 > 0).then_some(limit.0 as f64)
}

fn pct(x: Option<u32>) -> Option<Point> {
    x.map(|x| (f64::from(x), Some(100.0)))
}

/// How `field` is read from history, or `None` when the rings do not keep it.
pub(crate) fn getter(field: &str) -> Option<HistoryGetter> {
    Some(match field {
        "util" => |s, _| pct(s.util_pct),
        "util_mem" => |s, _| pct(s.util_mem_pct),
        "mem_used" => |s, g| s.mem_used_mib.map(|m| (f64::from(m), total_mib(g))),
        "mem_pct" => |s, g| {
            let total = total_mib(g)?;
            Some((100.0 * f64::from(s.mem_used_mib?) / total, Some(100.0)))
        },
        "power" => |s, g| s.power_draw.map(|p| (p.0 as f64, limit_mw(g))),
        "power_pct" => |s, g| {
            let limit = limit_mw(g)?;
            Some((100.0 * s.power_draw?.0 as f64 / limit, Some(100.0)))
        },
        "temp" => |s, _| s.temp_c.map(|t| (f64::from(t), Some(100.0))),
        _ => return None,
    })
}

/// Appends the sparkline of `get` over `gpus` (aggregated with `agg` when more than one)
/// to `out`; `N/A` when none of them has a history in `history`.
pub(crate) fn render(
    get: HistoryGetter,
    agg: Agg,
    gpus: &[Gpu],
    history: &[(u32, History)],
    width: usize,
    out: &mut String,
) {
    let width = width.min(MAX_WIDTH);
    let rings = || {
        gpus.iter().filter_map(|g| {
            let (_, h) = history.iter().find(|(index, _)| *index == g.index)?;
            Some((g, h.samples.as_slice()))
        })
    };
    if rings().next().is_none() {
        out.push_str("N/A");
        return;
    }
    // The aggregated point of each column, oldest first, then the peak for scale-less ones.
    let mut points: [Option<Point>; MAX_WIDTH] = [None; MAX_WIDTH];
    for (column, point) in points[..width].iter_mut().enumerate() {
        let back = width - column; // 1 = the newest sample
        let at = |(g, samples): (&Gpu, &[HistorySample])| {
            let i = samples.len().checked_sub(back)?;
            get(&Sample::new(&samples[i]), g)
        };
        *point = combine(agg, || rings().filter_map(at));
    }
    let peak = points[..width]
        .iter()
        .flatten()
        .map(|p| p.0)
        .fold(0.0, f64::max);
    for point in &points[..width] {
        out.push(match point {
            None => ' ',
            Some((value, scale)) => bar(*value / scale.unwrap_or(peak)),
        });
    }
}

/// One bar for a fraction of the full scale (clamped to 0..=1); the lowest bar is zero.
pub fn bar(fraction: f64) -> char {
    let f = if fraction.is_finite() {
        fraction.clamp(0.0, 1.0)
    } else {
        0.0
    };
    BARS[((f * 7.0).ceil() as usize).min(7)]
}

/// Aggregates the points of one column: values and scales alike (a scale is known only
/// when every point's is).
fn combine<I: Iterator<Item = Point>>(agg: Agg, points: impl Fn() -> I) -> Option<Point> {
    let n = points().count();
    if n == 0 {
        return None;
    }
    let values = || points().map(|p| p.0);
    let scale = if points().all(|p| p.1.is_some()) {
        let scales = || points().map(|p| p.1.unwrap_or(0.0));
        Some(crate::render::fold(agg, scales, n))
    } else {
        None
    };
    Some((crate::render::fold(agg, values, n), scale))
}

#[cfg(test)]
mod tests {
    use gpupeek_model::Status;
    use gpupeek_shm::layout::{gpu_valid as v, history_valid as hv, GpuState};
    use gpupeek_shm::{GpuRecord, StatusRecord};

    use super::*;
    use crate::{Data, Plain, Template};

    fn gpu(index: u32, total_gib: u64, limit_w: u32) -> GpuRecord {
        GpuRecord {
            index,
            state: GpuState::Ok as u32,
            valid: v::MEMORY | v::POWER_LIMIT | v::UTILIZATION,
            mem_total_bytes: total_gib << 30,
            power_limit_mw: limit_w * 1000,
            ..GpuRecord::default()
        }
    }

    /// A ring with one sample per value; `None` is a sample with no valid field (a gap).
    fn ring(util: &[Option<u8>], mem_gib: u32, power_w: u32) -> History {
        let samples = util
            .iter()
            .map(|u| match u {
                Some(u) => HistorySample {
                    util_gpu_pct: *u,
                    mem_used_mib: mem_gib * 1024,
                    power_draw_mw: power_w * 1000,
                    valid: hv::UTILIZATION | hv::MEMORY | hv::POWER_DRAW,
                    ..HistorySample::default()
                },
                None => HistorySample::default(),
            })
            .collect();
        History {
            step_ns: 1_000_000_000,
            written: util.len() as u64,
            samples,
        }
    }

    fn render(template: &str, gpus: &[GpuRecord], history: &[(u32, History)]) -> String {
        let gpus: Vec<Gpu> = gpus.iter().map(Gpu::new).collect();
        let status = StatusRecord::default();
        let data = Data {
            gpus: &gpus,
            status: Status::new(&status),
            history,
            mig: &[],
        };
        Template::parse(template)
            .unwrap()
            .render(&data, &Plain)
            .text
    }

    #[test]
    fn a_sparkline_is_right_aligned_to_its_width_with_gaps_as_spaces() {
        let h = [(0, ring(&[Some(0), Some(100), None, Some(50)], 0, 0))];
        let gpus = [gpu(0, 80, 700)];
        assert_eq!(render("[{util:spark6}]", &gpus, &h), "[  ▁█ ▅]");
        assert_eq!(render("[{util:spark2}]", &gpus, &h), "[ ▅]");
        assert_eq!(
            render("{util:spark}", &gpus, &h).chars().count(),
            DEFAULT_WIDTH
        );
    }

    #[test]
    fn memory_and_power_are_drawn_against_the_gpus_total_and_limit() {
        let h = [(0, ring(&[Some(0); 3], 40, 350))];
        let gpus = [gpu(0, 80, 700)];
        // 40 of 80 GiB and 350 of 700 W: half, which is bar ceil(3.5) = '▅'.
        assert_eq!(render("{mem_used:spark3}", &gpus, &h), "▅▅▅");
        assert_eq!(render("{power_pct:spark3}", &gpus, &h), "▅▅▅");
        let no_limit = [GpuRecord {
            valid: v::MEMORY,
            ..gpu(0, 80, 0)
        }];
        // Without a limit the window's peak is the full scale.
        assert_eq!(render("{power:spark3}", &no_limit, &h), "███");
        assert_eq!(render("{power_pct:spark3}", &no_limit, &h), "   ");
    }

    #[test]
    fn outside_each_the_gpus_are_aggregated_newest_with_newest() {
        let h = [
            (0, ring(&[Some(100), Some(100)], 80, 700)),
            (1, ring(&[Some(0)], 0, 0)),
        ];
        let gpus = [gpu(0, 80, 700), gpu(1, 80, 700)];
        // Mean utilisation: the newest column has both GPUs (50%), the older only GPU 0.
        assert_eq!(render("{util:spark2}", &gpus, &h), "█▅");
        assert_eq!(render("{max.util:spark2}", &gpus, &h), "██");
        // Memory sums values and totals: 80 of 160 GiB in the newest column.
        assert_eq!(render("{mem_used:spark2}", &gpus, &h), "█▅");
        assert_eq!(render("{each ' '}{util:spark2}{end}", &gpus, &h), "██  ▁");
        assert_eq!(render("{1.util:spark2}", &gpus, &h), " ▁");
    }

    #[test]
    fn without_history_a_sparkline_is_not_available() {
        let gpus = [gpu(0, 80, 700)];
        assert_eq!(render("{util:spark}", &gpus, &[]), "N/A");
        let other = [(5, ring(&[Some(10)], 0, 0))];
        assert_eq!(render("{util:spark}", &gpus, &other), "N/A");
        assert_eq!(render("{7.util:spark}", &gpus, &other), "N/A");
    }

    #[test]
    fn the_template_reports_how_much_history_it_needs() {
        let t = |s: &str| Template::parse(s).unwrap().sparkline_width();
        assert_eq!(t("{util} {mem_used:GiB}"), 0);
        assert_eq!(t("{util:spark}"), DEFAULT_WIDTH);
        assert_eq!(t("{each}{temp:spark30}{end} {power:spark5}"), 30);
    }

    #[test]
    fn bad_sparklines_are_errors_at_their_column() {
        let e = |s: &str| Template::parse(s).unwrap_err();
        let bad = e("{name:spark}");
        assert!(bad.message.contains("no history"), "{}", bad.message);
        assert_eq!(bad.column, 7);
        assert!(e("{util:spark0}").message.contains("spark1 to spark240"));
        assert!(e("{util:spark241}").message.contains("spark1 to spark240"));
        assert!(e("{util:sparkle}").message.contains("spark1 to spark240"));
        assert!(e("{util:spark:.1}").message.contains("no unit, precision"));
        assert!(e("{util:spark!50}").message.contains("no unit, precision"));
    }
}
