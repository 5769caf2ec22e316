//! `gpupeek history`: the daemon's history of every GPU over a window, exported as CSV or
//! JSON ([`export`]), and the window itself ([`load`]), which `gpupeek-plot` (plot/)
//! draws.
//!
//! A window is read through `gpupeek_model::history::window`, the one interface to the
//! segment's history: raw samples, then min/mean/max buckets of the tiered history
//! further back, gaps (points without a value) wherever the GPU was asleep, lost or not
//! answering. Times are the daemon's wall clock (Unix epoch, ns); the window ends at
//! the snapshot's publish time and starts `--since` before it.
//!
//! Errors, one line each: a bad `--since` or `--metric` is a usage error (2); no daemon,
//! a stale or failing one, the segment's own errors are the client's usual statuses (3 to
//! 10); a window that holds no point of any selected GPU is status 12.

pub mod export;

use std::time::Duration;

use gpupeek_model::history::{self as model_history, Metric, Series};
use gpupeek_shm::Segment;

use crate::select::{self, Select};
use crate::{Exit, EXIT_NO_HISTORY, EXIT_USAGE};

/// `--since` when not given.
pub const DEFAULT_SINCE: &str = "10m";

/// The longest `--since`: a year, far beyond any tier the segment keeps.
const MAX_SINCE: Duration = Duration::from_secs(366 * 86_400);

/// How `gpupeek history` writes the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `--csv`.
    Csv,
    /// `--json`.
    Json,
}

/// The flags of `gpupeek history` (their table is `crate::commands::HISTORY`).
#[derive(Debug)]
pub struct Args {
    /// `--shm`.
    pub shm: Option<String>,
    /// `--since`.
    pub since: Duration,
    /// `-i/--id`.
    pub id: Option<Vec<Select>>,
    /// `--metric` (every metric when not given).
    pub metrics: Option<Vec<Metric>>,
    /// `--csv` or `--json`.
    pub format: Option<Format>,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            shm: None,
            since: parse_since(DEFAULT_SINCE).unwrap_or_default(),
            id: None,
            metrics: None,
            format: None,
        }
    }
}

/// Parses a `--since` duration: a whole number and a unit, `s`, `m`, `h` or `d`
/// (`90s`, `10m`, `6h`, `7d`).
pub fn parse_since(s: &str) -> Result<Duration, String> {
    let bad = || format!("bad duration {s:?}: use a number and a unit, e.g. 90s, 10m, 6h, 7d");
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = t.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let unit_s = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    match n.checked_mul(unit_s).map(Duration::from_secs) {
        Some(d) if d.is_zero() => Err(format!("bad duration {s:?}: it must be longer than 0")),
        Some(d) if d <= MAX_SINCE => Ok(d),
        _ => Err(format!("bad duration {s:?}: at most 366d")),
    }
}

/// Parses `--metric`: comma-separated metric names, each once.
pub fn parse_metrics(s: &str) -> Result<Vec<Metric>, String> {
    let mut out = Vec::new();
    for name in s.split(',').map(str::trim) {
        let metric = Metric::from_name(name).ok_or_else(|| {
            let names: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
            format!("unknown metric {name:?} (metrics: {})", names.join(", "))
        })?;
        if !out.contains(&metric) {
            out.push(metric);
        }
    }
    Ok(out)
}

/// A duration as `--since` takes it, in its largest whole unit (`90s`, `10m`, `7d`).
pub fn since_text(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        _ if s >= 86_400 && s % 86_400 == 0 => format!("{}d", s / 86_400),
        _ if s >= 3_600 && s % 3_600 == 0 => format!("{}h", s / 3_600),
        _ if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        _ => format!("{s}s"),
    }
}

/// The history of the selected GPUs over a window, and what to title it with.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// This machine's host name.
    pub hostname: String,
    /// Start of the window (Unix epoch, ns).
    pub from_unix_ns: u64,
    /// End of the window: the daemon's last publish (Unix epoch, ns).
    pub to_unix_ns: u64,
    /// Its length, as asked.
    pub since: Duration,
    /// The GPUs' series, in `--id`'s order (else by index).
    pub series: Vec<Series>,
}

impl Window {
    /// The metrics some point has a value of, in [`Metric::ALL`]'s order.
    pub fn metrics_with_values(&self) -> Vec<Metric> {
        Metric::ALL
            .into_iter()
            .filter(|&m| {
                self.series
                    .iter()
                    .any(|s| s.points.iter().any(|p| p.get(m).is_some()))
            })
            .collect()
    }
}

/// Reads the window of the last `since` from the segment named `shm` (else the default):
/// the daemon must be live, and the window must hold a point of some selected GPU.
pub fn load(shm: Option<&str>, since: Duration, id: Option<&[Select]>) -> Result<Window, Exit> {
    let name = gpupeek_shm::resolve_name(shm);
    let segment = Segment::open(&name)?;
    let snapshot = segment.snapshot()?;
    crate::check_live(
        &name,
        snapshot.liveness(gpupeek_shm::mono_now_ns()),
        snapshot.status.period_ns,
    )?;
    let mut series = model_history::window(&segment, &snapshot, since);
    if let Some(sels) = id {
        let model = gpupeek_model::Model::new(&snapshot);
        let wanted = select::gpu_indices(&model, sels).map_err(|e| Exit::new(EXIT_USAGE, e))?;
        series.retain(|s| wanted.contains(&s.gpu_index));
        series.sort_by_key(|s| wanted.iter().position(|&i| i == s.gpu_index));
    }
    let to = snapshot.status.published_unix_ns;
    let window = Window {
        hostname: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        from_unix_ns: to.saturating_sub(since.as_nanos().try_into().unwrap_or(u64::MAX)),
        to_unix_ns: to,
        since,
        series,
    };
    if window.series.iter().all(|s| s.points.is_empty()) {
        return Err(Exit::new(
            EXIT_NO_HISTORY,
            format!(
                "no history in the last {} (the daemon keeps a sample a second, or a \
                 period, from its start)",
                since_text(since)
            ),
        ));
    }
    Ok(window)
}

/// `gpupeek history`.
pub fn run(args: Args) -> Result<(), Exit> {
    let Some(format) = args.format else {
        return Err(Exit::new(
            EXIT_USAGE,
            "history needs --csv or --json (see gpupeek history --help); for a chart, \
             gpupeek plot",
        ));
    };
    let window = load(args.shm.as_deref(), args.since, args.id.as_deref())?;
    let metrics = args.metrics.unwrap_or_else(|| Metric::ALL.to_vec());
    let text = match format {
        Format::Csv => export::csv(&window, &metrics),
        Format::Json => export::json(&window, &metrics),
    };
    crate::write_stdout(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_a_whole_number_and_a_unit() {
        assert_eq!(parse_since("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_since("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_since("6h"), Ok(Duration::from_secs(6 * 3600)));
        assert_eq!(parse_since("7d"), Ok(Duration::from_secs(7 * 86_400)));
        for bad in [
            "",
            "10",
            "m",
            "1.5h",
            "-1m",
            "10 m",
            "10min",
            "0s",
            "9999999999999999d",
        ] {
            let err = parse_since(bad).unwrap_err();
            assert!(err.starts_with("bad duration"), "{bad}: {err}");
        }
        for d in ["90s", "10m", "6h", "7d", "61s", "25h"] {
            assert_eq!(since_text(parse_since(d).unwrap()), d);
        }
    }

    #[test]
    fn metrics_are_named_once_each_and_an_unknown_one_lists_the_names() {
        assert_eq!(
            parse_metrics("util, power,util").unwrap(),
            [Metric::Utilization, Metric::PowerDraw]
        );
        assert_eq!(
            parse_metrics("util,gpu_util").unwrap_err(),
            "unknown metric \"gpu_util\" (metrics: util, mem_used, power, temp, sm_clock, \
             sm_active)"
        );
        assert!(parse_metrics("").is_err());
    }
}
