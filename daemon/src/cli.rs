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
  --no-runtime-pm turns all of this off (servers).

Alerts:
  A GPU that reaches an --alert-* threshold, throttles for a listed reason
  or is lost is logged once when the episode starts and once when it ends
  (stderr in the foreground, else syslog).

Under systemd (Type=notify):
  READY=1 after the first publish, WATCHDOG=1 at least every half
  $WATCHDOG_USEC, and STOPPING=1 when it stops, on $NOTIFY_SOCKET.")]
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

    /// how often to sample each GPU's expensive values: process lists, per-process
    /// utilisation and /proc details, ECC counts (default 2s, the GPUs' turns spread over
    /// it; at least --interval); the process table keeps its contents in between
    #[argh(
        option,
        default = "Duration::from_secs(2)",
        from_str_fn(parse_interval)
    )]
    pub process_interval: Duration,

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

    /// how long an NVML call may run before its GPU is published as "not responding"
    /// (the other GPUs and the heartbeat go on meanwhile; default 2s, 10ms to 1h)
    #[argh(
        option,
        default = "Duration::from_secs(2)",
        from_str_fn(parse_interval)
    )]
    pub nvml_timeout: Duration,

    /// ask the gpupeekd running on the segment to let go of NVML, so that a GPU can be
    /// reset or its MIG mode changed (readers then say so), and wait until it has
    #[argh(switch)]
    pub release: bool,

    /// ask the gpupeekd running on the segment to take NVML back after --release, and
    /// wait until it publishes again
    #[argh(switch)]
    pub resume: bool,

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

    /// log an alert when a GPU reaches this temperature in °C (default 85; 0: never)
    #[argh(option, default = "85", from_str_fn(parse_temp))]
    pub alert_temp: u32,

    /// log an alert when a GPU's memory is this percent used (default 95; 0: never)
    #[argh(option, default = "95", from_str_fn(parse_memory_pct))]
    pub alert_memory: u32,

    /// log an alert when a GPU draws this percent of its power limit (default 100; 0: never)
    #[argh(option, default = "100", from_str_fn(parse_power_pct))]
    pub alert_power: u32,

    /// clock event reasons that log an alert, comma-separated: sw_power_cap, hw_slowdown,
    /// sw_thermal_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown; or none
    /// (default: all but sw_power_cap)
    #[argh(
        option,
        default = "DEFAULT_THROTTLE_ALERTS",
        from_str_fn(crate::alerts::parse_throttle)
    )]
    pub alert_throttle: u64,

    /// log no alerts at all (not even for a lost GPU)
    #[argh(switch)]
    pub no_alerts: bool,

    /// also write one line of text to this file each tick, replaced atomically, for shell
    /// prompts to read without forking (e.g. /run/gpupeek/prompt; see --prompt-format)
    #[argh(option)]
    pub prompt_file: Option<PathBuf>,

    /// the template of the --prompt-file line, in gpupeek --format's language (default
    /// "{util}% {mem_used:GiB:.1}G"; plain text, no colours)
    #[argh(option)]
    pub prompt_format: Option<String>,

    /// only write "gpupeekd stopped" to --prompt-file and exit, touching no segment: for
    /// a service manager to run after the daemon died without a clean stop (ExecStopPost)
    #[argh(switch)]
    pub prompt_stopped: bool,
}

/// Every reason of [`crate::alerts::THROTTLE_REASONS`] but sw_power_cap, which is
/// routine under load: the hardware and thermal slowdowns and the power brake.
pub const DEFAULT_THROTTLE_ALERTS: u64 = 0x8 | 0x20 | 0x40 | 0x80;

impl Args {
    /// The alert thresholds these flags ask for.
    pub fn alerts(&self) -> crate::alerts::Thresholds {
        if self.no_alerts {
            return crate::alerts::Thresholds::OFF;
        }
        let on = |v: u32| (v > 0).then_some(v);
        crate::alerts::Thresholds {
            temp_c: on(self.alert_temp),
            memory_pct: on(self.alert_memory),
            power_pct: on(self.alert_power),
            throttle_mask: self.alert_throttle,
            lost: true,
        }
    }
}

fn parse_bounded(s: &str, what: &str, max: u32) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(v) if v <= max => Ok(v),
        _ => Err(format!(
            "bad {what} {s:?}: use a whole number from 0 (off) to {max}"
        )),
    }
}

fn parse_temp(s: &str) -> Result<u32, String> {
    parse_bounded(s, "temperature", 200)
}

fn parse_memory_pct(s: &str) -> Result<u32, String> {
    parse_bounded(s, "memory percentage", 100)
}

fn parse_power_pct(s: &str) -> Result<u32, String> {
    parse_bounded(s, "power percentage", 1000)
}

/// Parses `250ms`, `1s`, `1.5s`, `2m`, `1h` or a bare number of seconds, within the limits.
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
    let bad = || format!("bad duration {s:?}: use e.g. 250ms, 1s, 1.5s, 2m or 1h");
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: f64 = number.parse().map_err(|_| bad())?;
    let scale = match unit {
        "ms" => 1e-3,
        "s" | "" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
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
    fn the_one_hour_maximum_can_be_written_as_1h() {
        assert_eq!(parse_interval("1h"), Ok(MAX_INTERVAL));
        assert_eq!(parse_release_after("1h"), Ok(MAX_INTERVAL));
        assert_eq!(
            parse_interval("2h"),
            Err("interval 2h is outside 10ms..1h".to_owned())
        );
    }

    #[test]
    fn release_after_accepts_zero_up_to_an_hour() {
        assert_eq!(parse_release_after("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_release_after("10s"), Ok(Duration::from_secs(10)));
        assert!(parse_release_after("2h").is_err());
        assert!(parse_release_after("-1s").is_err());
    }

    #[test]
    fn alert_flags_have_sane_defaults_and_zero_turns_one_off() {
        let args = Args::from_args(&["gpupeekd"], &["--alert-power", "0"]).unwrap();
        let t = args.alerts();
        assert_eq!(t.temp_c, Some(85));
        assert_eq!(t.memory_pct, Some(95));
        assert_eq!(t.power_pct, None);
        assert_eq!(t.throttle_mask, DEFAULT_THROTTLE_ALERTS);
        let args = Args::from_args(&["gpupeekd"], &["--no-alerts"]).unwrap();
        assert_eq!(args.alerts(), crate::alerts::Thresholds::OFF);
        assert!(Args::from_args(&["gpupeekd"], &["--alert-memory", "101"]).is_err());
        assert!(Args::from_args(&["gpupeekd"], &["--alert-temp", "-1"]).is_err());
    }

    #[test]
    fn interval_rejects_garbage_and_out_of_range_values() {
        for bad in [
            "", "s", "-1s", "abc", "1.2.3s", "9ms", "2h", "1e400", "NaN", "1d",
        ] {
            assert!(parse_interval(bad).is_err(), "{bad} should be rejected");
        }
    }
}
