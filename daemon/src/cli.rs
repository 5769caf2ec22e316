//! Command-line flags of `gpupeekd`, and the duration syntax they accept.

use std::path::PathBuf;
use std::time::Duration;

use argh::FromArgs;

use crate::privacy::Choice;

/// Shortest sampling period accepted.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// Longest sampling period accepted.
pub const MAX_INTERVAL: Duration = Duration::from_secs(3600);

/// gpupeekd: sample NVIDIA GPUs through NVML and publish them in shared memory, so that
/// any number of readers (gpupeek, status bars, exporters) see them without driver calls.
#[derive(FromArgs, Debug)]
#[argh(note = "Runtime power management (laptops):
  Before touching a GPU, gpupeekd reads its sysfs power/runtime_status. A
  suspended GPU is never queried: its record says \"suspended\".
  When every GPU is suspended, or idle (no compute process, 0% utilisation)
  for --release-after, NVML is released so the kernel can power the GPUs
  down; records say \"idle\" until sysfs says \"suspended\". Meanwhile only
  sysfs is read. When something else wakes a GPU, NVML is initialised again
  and values are published in that same tick.
  A GPU that has not suspended within --release-after plus its
  autosuspend_delay_ms of a release is kept awake by something else:
  monitoring resumes, and the next release waits twice as long (at most 10
  minutes; back to --release-after once a release lets a GPU sleep).
  GPUs with runtime PM off (power/control = on) are always monitored.
  If every GPU is asleep at start, NVML is not initialised at all.
  --no-runtime-pm turns all of this off (servers).")]
pub struct Args {
    /// shared-memory segment name (default: $GPUPEEK_SHM, else "gpupeek", i.e. /dev/shm/gpupeek)
    #[argh(option)]
    pub shm: Option<String>,

    /// sampling period, e.g. 250ms, 1s, 1.5s, 60s (default 1s, at least 10ms)
    #[argh(
        option,
        default = "Duration::from_secs(1)",
        from_str_fn(parse_interval)
    )]
    pub interval: Duration,

    /// path of the NVML library to load (default: libnvidia-ml.so.1 from the loader path)
    #[argh(option)]
    pub nvml_lib: Option<String>,

    /// what to publish about GPU processes, which every local user can read: full (user,
    /// command line, CPU, host memory, container), basic (pid, GPU memory and
    /// utilisation only), none, or auto (default: full, but basic when /proc is mounted
    /// with hidepid, so the segment never shows more than /proc does)
    #[argh(option, default = "Choice::Auto")]
    pub process_info: Choice,

    /// where the proc filesystem to resolve processes in is mounted (default /proc; e.g.
    /// the host's /proc mounted into the daemon's container)
    #[argh(option, default = "PathBuf::from(\"/proc\")")]
    pub proc_root: PathBuf,

    /// stay in the foreground and log to stderr (default: detach and log to syslog)
    #[argh(switch)]
    pub foreground: bool,

    /// where sysfs is mounted, read for the GPUs' runtime power state (default /sys)
    #[argh(option, default = "PathBuf::from(\"/sys\")")]
    pub sysfs_root: PathBuf,

    /// release NVML once every GPU has been idle this long, so runtime PM can power it
    /// down (default 10s; 0s releases at the first idle tick)
    #[argh(
        option,
        default = "Duration::from_secs(10)",
        from_str_fn(parse_release_after)
    )]
    pub release_after: Duration,

    /// ignore runtime power management: never read sysfs, always hold NVML and query
    /// every GPU (for servers)
    #[argh(switch)]
    pub no_runtime_pm: bool,

    /// print the version and exit
    #[argh(switch)]
    pub version: bool,
}

/// Parses `250ms`, `1s`, `1.5s`, `2m` or a bare number of seconds, within the limits.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < MIN_INTERVAL || d > MAX_INTERVAL {
        return Err(format!("interval {s} is outside 10ms..1h"));
    }
    Ok(d)
}

/// Parses a `--release-after` duration: 0 to 1 hour.
pub fn parse_release_after(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d > MAX_INTERVAL {
        return Err(format!("release-after {s} is longer than 1h"));
    }
    Ok(d)
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("bad duration {s:?}: use e.g. 250ms, 1s, 1.5s or 2m");
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: f64 = number.parse().map_err(|_| bad())?;
    let scale = match unit {
        "ms" => 1e-3,
        "s" | "" => 1.0,
        "m" | "min" => 60.0,
        _ => return Err(bad()),
    };
    let secs = value * scale;
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_accepts_the_documented_forms() {
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_interval("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_interval("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_interval("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_interval("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_interval("10ms"), Ok(MIN_INTERVAL));
    }

    #[test]
    fn release_after_accepts_zero_up_to_an_hour() {
        assert_eq!(parse_release_after("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_release_after("10s"), Ok(Duration::from_secs(10)));
        assert!(parse_release_after("2h").is_err());
        assert!(parse_release_after("-1s").is_err());
    }

    #[test]
    fn interval_rejects_garbage_and_out_of_range_values() {
        for bad in [
            "", "s", "1h", "-1s", "abc", "1.2.3s", "9ms", "2h", "1e400", "NaN",
        ] {
            assert!(parse_interval(bad).is_err(), "{bad} should be rejected");
        }
    }
}
