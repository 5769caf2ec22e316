//! What a chart shows, whatever draws it: a panel per metric with its y range, and per
//! GPU the runs of its line. A run ends at a gap (a point without the metric's value)
//! and where consecutive points are more than two spans apart (the daemon was not
//! running: no point at all was kept for that time), so a line is never drawn across
//! time nothing was measured. Times are seconds since the Unix epoch, as `f64`.

use chrono::{DateTime, Local};
use gpupeek::plotting::Window;
use gpupeek_model::history::{Metric, Point, Series, Stat};

/// One point of a run: where it is drawn, and its minimum, mean and maximum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pt {
    /// Seconds since the Unix epoch: a raw sample's time, a bucket's middle.
    pub t: f64,
    /// The values.
    pub stat: Stat,
}

impl Pt {
    /// True when the point sums up values that differ (a band is drawn).
    pub fn is_band(&self) -> bool {
        self.stat.max > self.stat.min
    }
}

/// One GPU's line in a panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Position of the GPU in the window's series (its colour).
    pub series: usize,
    /// The unbroken stretches of the line, oldest first.
    pub runs: Vec<Vec<Pt>>,
}

/// One metric's panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// The metric.
    pub metric: Metric,
    /// The y axis, bottom to top.
    pub y: (f64, f64),
    /// A line per GPU, in the window's order (empty runs for a GPU without a value).
    pub lines: Vec<Line>,
}

impl Panel {
    /// `Title (unit)`.
    pub fn caption(&self) -> String {
        format!("{} ({})", self.metric.title(), self.metric.unit())
    }
}

/// Where point `p` is drawn, in seconds: a raw sample at its time, a bucket in its middle.
pub fn time_of(p: &Point) -> f64 {
    let ns = if p.samples > 1 {
        p.start_unix_ns + p.span_ns / 2
    } else {
        p.start_unix_ns
    };
    ns as f64 / 1e9
}

/// The unbroken runs of `series`' values of `metric`.
pub fn runs(series: &Series, metric: Metric) -> Vec<Vec<Pt>> {
    let mut out: Vec<Vec<Pt>> = Vec::new();
    let mut current: Vec<Pt> = Vec::new();
    let mut last: Option<&Point> = None;
    for p in &series.points {
        let jump = last.is_some_and(|l| {
            let apart = p.start_unix_ns.saturating_sub(l.start_unix_ns);
            apart > 2 * l.span_ns.max(p.span_ns)
        });
        if jump && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        last = Some(p);
        match p.get(metric) {
            Some(stat) => current.push(Pt {
                t: time_of(p),
                stat,
            }),
            None if !current.is_empty() => out.push(std::mem::take(&mut current)),
            None => {}
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The smallest round number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten)
/// that is at least `v` (`v > 0`).
pub fn nice_ceil(v: f64) -> f64 {
    let exp = 10f64.powf(v.log10().floor());
    [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .into_iter()
        .map(|m| m * exp)
        .find(|&n| n >= v * (1.0 - 1e-9))
        .unwrap_or(10.0 * exp)
}

/// The y axis of `metric` for `lines`: 0 to 100 for a percentage, else 0 to a round
/// number above the largest value (temperatures and clocks from a round number below the
/// smallest when that is far from 0, so their changes show).
fn y_range(metric: Metric, lines: &[Line]) -> (f64, f64) {
    let all = || lines.iter().flat_map(|l| l.runs.iter().flatten());
    let max = all().map(|p| p.stat.max).fold(f64::NEG_INFINITY, f64::max);
    let min = all().map(|p| p.stat.min).fold(f64::INFINITY, f64::min);
    if metric.unit() == "%" && max <= 100.0 {
        return (0.0, 100.0);
    }
    if !max.is_finite() || max <= 0.0 {
        return (0.0, 1.0);
    }
    let hi = nice_ceil(max * 1.05);
    let lo = match metric {
        Metric::Temperature | Metric::SmClock if min > hi / 2.0 => {
            let step = nice_ceil((max - min).max(hi / 20.0)) / 2.0;
            ((min - step) / step).floor().max(0.0) * step
        }
        _ => 0.0,
    };
    (lo, hi)
}

/// The panels of `metrics` over `window`.
pub fn panels(window: &Window, metrics: &[Metric]) -> Vec<Panel> {
    metrics
        .iter()
        .map(|&metric| {
            let lines: Vec<Line> = window
                .series
                .iter()
                .enumerate()
                .map(|(i, s)| Line {
                    series: i,
                    runs: runs(s, metric),
                })
                .collect();
            Panel {
                metric,
                y: y_range(metric, &lines),
                lines,
            }
        })
        .collect()
}

/// A GPU's legend entry: `[0] NVIDIA H100`, with `gi1.ci0` for a MIG instance.
pub fn label(s: &Series) -> String {
    let mut out = format!("[{}] {}", s.gpu_index, s.name);
    if let Some((gi, ci)) = s.mig {
        out += &format!(" gi{gi}.ci{ci}");
    }
    out
}

fn local(unix_s: f64) -> DateTime<Local> {
    let ns = (unix_s * 1e9) as i64;
    DateTime::from_timestamp(
        ns.div_euclid(1_000_000_000),
        ns.rem_euclid(1_000_000_000) as u32,
    )
    .unwrap_or_default()
    .with_timezone(&Local)
}

/// The time axis, seconds: the window, or from its first point when the history
/// begins more than a quarter of the window after the window's start (a daemon started
/// minutes ago, asked for a day), so that what there is fills the chart.
pub fn x_range(window: &Window) -> (f64, f64) {
    let (from, to) = (window.from_unix_ns, window.to_unix_ns);
    let first = window
        .series
        .iter()
        .filter_map(|s| s.points.first())
        .map(|p| p.start_unix_ns)
        .min()
        .unwrap_or(from);
    let start = if first > from && first - from > (to - from) / 4 {
        first.min(to.saturating_sub(1_000_000_000))
    } else {
        from
    };
    (start as f64 / 1e9, to as f64 / 1e9)
}

/// The chart's title: host, the local start and end of the time axis, and the window's
/// length (saying so when the history is shorter).
pub fn title(window: &Window) -> String {
    let (start, end) = x_range(window);
    let from = local(start);
    let to = local(end);
    let since = gpupeek::plotting::since_text(window.since);
    let last = if start > window.from_unix_ns as f64 / 1e9 {
        format!("less than {since} of history")
    } else {
        format!("last {since}")
    };
    let end = if from.date_naive() == to.date_naive() {
        to.format("%H:%M:%S %:z")
    } else {
        to.format("%Y-%m-%d %H:%M:%S %:z")
    };
    format!(
        "{} — {} to {} ({last})",
        window.hostname,
        from.format("%Y-%m-%d %H:%M:%S"),
        end,
    )
}

/// Steps between time ticks, seconds.
const STEPS: [f64; 19] = [
    1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
    10800.0, 21600.0, 43200.0, 86400.0, 172800.0,
];

/// Round times in `from..=to` (seconds), at most `max` of them, with their labels:
/// `HH:MM:SS` under a minute apart, `HH:MM` under a day, `MM-DD` from a day on.
pub fn time_ticks(from: f64, to: f64, max: usize) -> Vec<(f64, String)> {
    let span = (to - from).max(1.0);
    let max = max.max(2) as f64;
    let step = STEPS
        .into_iter()
        .find(|s| span / s <= max)
        .unwrap_or((span / max / 86400.0).ceil() * 86400.0);
    // Round in local time, so that ticks fall on local hours and days.
    let offset = f64::from(local(from).offset().local_minus_utc());
    let mut t = ((from + offset) / step).ceil() * step - offset;
    let fmt = match step {
        s if s < 60.0 => "%H:%M:%S",
        s if s < 86400.0 => "%H:%M",
        _ => "%m-%d",
    };
    let mut out = Vec::new();
    while t <= to + 1e-6 {
        out.push((t, local(t).format(fmt).to_string()));
        t += step;
    }
    out
}

/// A value for an axis: no decimals from 10 on, one below.
pub fn value_label(v: f64) -> String {
    if v.abs() >= 10.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{bucket, gap, raw, series};

    #[test]
    fn a_gap_or_missing_time_breaks_a_run() {
        let s = series(
            0,
            vec![
                raw(0, 10.0),
                raw(1, 20.0),
                gap(2),
                raw(3, 30.0),
                raw(4, 40.0),
                // No point for 5 to 9: the daemon was not running.
                raw(10, 50.0),
            ],
        );
        let runs = runs(&s, Metric::Utilization);
        let means: Vec<Vec<f64>> = runs
            .iter()
            .map(|r| r.iter().map(|p| p.stat.mean).collect())
            .collect();
        assert_eq!(means, [vec![10.0, 20.0], vec![30.0, 40.0], vec![50.0]]);
        assert!(super::runs(&s, Metric::SmClock).is_empty());
    }

    #[test]
    fn a_bucket_is_drawn_in_its_middle_with_a_band() {
        let s = series(0, vec![bucket(0, 10.0, 20.0, 60.0)]);
        let run = &runs(&s, Metric::Utilization)[0];
        assert_eq!(run[0].t, crate::testing::T0 as f64 / 1e9 + 5.0);
        assert!(run[0].is_band());
    }

    #[test]
    fn axes_are_round() {
        assert_eq!(nice_ceil(0.7), 0.8);
        assert_eq!(nice_ceil(187.0), 200.0);
        assert_eq!(nice_ceil(210.0), 250.0);
        assert_eq!(nice_ceil(10_500.0), 12_000.0);
        assert_eq!(nice_ceil(81920.0), 100_000.0);
        assert_eq!(nice_ceil(79000.0), 80_000.0);
        let panel = |m, v: f64| {
            let mut p = raw(0, v);
            p.values[m as usize] = Some(Stat::one(v));
            let w = crate::testing::window(vec![series(0, vec![p])]);
            panels(&w, &[m])[0].y
        };
        assert_eq!(panel(Metric::Utilization, 40.0), (0.0, 100.0));
        assert_eq!(panel(Metric::PowerDraw, 187.0), (0.0, 200.0));
        assert_eq!(panel(Metric::MemoryUsed, 0.0), (0.0, 1.0));
        let (lo, hi) = panel(Metric::SmClock, 1980.0);
        assert!(lo > 1000.0 && lo < 1980.0 && hi >= 1980.0, "{lo}..{hi}");
    }

    #[test]
    fn a_history_shorter_than_the_window_fills_the_time_axis() {
        let mut w = crate::testing::window(vec![series(0, vec![raw(0, 1.0), raw(1, 2.0)])]);
        let t0 = crate::testing::T0 as f64 / 1e9;
        assert_eq!(
            x_range(&w),
            (t0 - 10.0, t0 + 110.0),
            "a twelfth of it missing"
        );
        assert!(title(&w).ends_with("(last 2m)"), "{}", title(&w));
        w.from_unix_ns -= 3_600_000_000_000;
        assert_eq!(
            x_range(&w),
            (t0, t0 + 110.0),
            "an hour asked, two minutes kept"
        );
        assert!(
            title(&w).ends_with("(less than 2m of history)"),
            "{}",
            title(&w)
        );
    }

    #[test]
    fn time_ticks_are_round_and_within_the_window() {
        let from = 1_764_052_512.0; // 06:35:12 UTC
        let ticks = time_ticks(from, from + 600.0, 6);
        assert!(ticks.len() >= 3 && ticks.len() <= 6, "{ticks:?}");
        assert!(ticks.iter().all(|(t, _)| *t >= from && *t <= from + 600.0));
        assert!(ticks.iter().all(|(t, _)| t % 60.0 == 0.0), "{ticks:?}");
        assert!(time_ticks(from, from + 7.0 * 86400.0, 8)[0].1.contains('-'));
    }
}
