//! Command-line flags of `gpupeekd`, and the duration syntax they accept.

use std::path::PathBuf;
use std::time::Duration;

use gpupeek_flags::complete::{Shell, Tree};
use gpupeek_flags::{help, Parser, Stop};

use crate::privacy::Choice;

mod flags;

pub use flags::GPUPEEKD;

/// Shortest sampling period accepted.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// Longest sampling period accepted.
pub const MAX_INTERVAL: Duration = Duration::from_secs(3600);

/// Appended to `gpupeekd --help`.
pub const NOTES: &str = "Runtime power management (laptops):
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
  $WATCHDOG_USEC, and STOPPING=1 when it stops, on $NOTIFY_SOCKET.";

/// gpupeekd's flags (each declared, with its help, in [`GPUPEEKD`]'s table).
#[derive(Debug)]
pub struct Args {
    /// `--shm`.
    pub shm: Option<String>,
    /// `--interval`.
    pub interval: Duration,
    /// `--process-interval`.
    pub process_interval: Duration,
    /// `--nvml-lib`.
    pub nvml_lib: Option<String>,
    /// `--process-info`.
    pub process_info: Choice,
    /// `--proc-root`.
    pub proc_root: PathBuf,
    /// `--foreground`.
    pub foreground: bool,
    /// `--sysfs-root`.
    pub sysfs_root: PathBuf,
    /// `--nvml-timeout`.
    pub nvml_timeout: Duration,
    /// `--release`.
    pub release: bool,
    /// `--resume`.
    pub resume: bool,
    /// `--release-after`.
    pub release_after: Duration,
    /// `--no-runtime-pm`.
    pub no_runtime_pm: bool,
    /// `--version`.
    pub version: bool,
    /// `--alert-temp`.
    pub alert_temp: u32,
    /// `--alert-memory`.
    pub alert_memory: u32,
    /// `--alert-power`.
    pub alert_power: u32,
    /// `--alert-throttle`, as a mask of clock event reasons.
    pub alert_throttle: u64,
    /// `--no-alerts`.
    pub no_alerts: bool,
    /// `--prompt-file`.
    pub prompt_file: Option<PathBuf>,
    /// `--prompt-format`.
    pub prompt_format: Option<String>,
    /// `--prompt-stopped`.
    pub prompt_stopped: bool,
    /// `--print-completion`.
    pub print_completion: Option<Shell>,
    /// `--state-dir`.
    pub state_dir: Option<PathBuf>,
    /// `--history-tracks`.
    pub history_tracks: u32,
    /// `--pod-views`.
    pub pod_views: Option<PathBuf>,
    /// `--kubelet-socket`.
    pub kubelet_socket: PathBuf,
    /// `--pod-log-dir`.
    pub pod_log_dir: PathBuf,
}

impl Default for Args {
    /// The defaults the flags' help states.
    fn default() -> Self {
        Args {
            shm: None,
            interval: Duration::from_secs(1),
            process_interval: Duration::from_secs(2),
            nvml_lib: None,
            process_info: Choice::Auto,
            proc_root: PathBuf::from("/proc"),
            foreground: false,
            sysfs_root: PathBuf::from("/sys"),
            nvml_timeout: Duration::from_secs(2),
            release: false,
            resume: false,
            release_after: Duration::from_secs(10),
            no_runtime_pm: false,
            version: false,
            alert_temp: 85,
            alert_memory: 95,
            alert_power: 100,
            alert_throttle: DEFAULT_THROTTLE_ALERTS,
            no_alerts: false,
            prompt_file: None,
            prompt_format: None,
            prompt_stopped: false,
            print_completion: None,
            state_dir: None,
            history_tracks: gpupeek_shm::layout::DEFAULT_TIER_TRACKS,
            pod_views: None,
            kubelet_socket: PathBuf::from(crate::podviews::DEFAULT_KUBELET_SOCKET),
            pod_log_dir: PathBuf::from(crate::podviews::DEFAULT_POD_LOG_DIR),
        }
    }
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Invocation {
    /// Run (or --release, --resume, --prompt-stopped) with these flags.
    Run(Box<Args>),
    /// Print this (`--help`, `--version`, `--print-completion`) and exit 0.
    Print(String),
}

/// Parses the arguments after the program name; an error is one line for the user.
pub fn parse(argv: Vec<String>) -> Result<Invocation, String> {
    let mut args = Args::default();
    let mut parser = Parser::new(argv);
    let stop = parser.parse(&GPUPEEKD, &mut args).map_err(|e| e.0)?;
    // A daemon's configuration says each thing once: a flag given twice is a mistake
    // (gpupeek, like gpustat, keeps the last).
    let seen = parser.seen();
    if let Some(flag) =
        (1..seen.len()).find_map(|i| seen[..i].contains(&seen[i]).then_some(seen[i]))
    {
        return Err(format!("--{flag} is given more than once"));
    }
    match stop {
        Stop::Help => Ok(Invocation::Print(help::render(&GPUPEEKD))),
        Stop::Word(word) => Err(format!(
            "unexpected argument {word:?}: gpupeekd takes only flags"
        )),
        Stop::End if args.version => Ok(Invocation::Print(format!(
            "gpupeekd {}\n",
            env!("CARGO_PKG_VERSION")
        ))),
        Stop::End => match args.print_completion {
            Some(shell) => Ok(Invocation::Print(completion(shell))),
            None => Ok(Invocation::Run(Box::new(args))),
        },
    }
}

/// The completion script for `shell`.
pub fn completion(shell: Shell) -> String {
    let tree = Tree {
        program: "gpupeekd",
        top: GPUPEEKD.specs(),
        commands: Vec::new(),
    };
    gpupeek_flags::complete::script(shell, &tree)
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

pub(crate) fn parse_tracks(s: &str) -> Result<u32, String> {
    parse_bounded(s, "number of history tracks", 256)
}

pub(crate) fn parse_temp(s: &str) -> Result<u32, String> {
    parse_bounded(s, "temperature", 200)
}

pub(crate) fn parse_memory_pct(s: &str) -> Result<u32, String> {
    parse_bounded(s, "memory percentage", 100)
}

pub(crate) fn parse_power_pct(s: &str) -> Result<u32, String> {
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
        let run = |argv: &[&str]| match parse(argv.iter().map(|s| s.to_string()).collect()) {
            Ok(Invocation::Run(args)) => Ok(args),
            Ok(Invocation::Print(_)) => panic!("{argv:?} printed"),
            Err(e) => Err(e),
        };
        let args = run(&["--alert-power", "0"]).unwrap();
        let t = args.alerts();
        assert_eq!(t.temp_c, Some(85));
        assert_eq!(t.memory_pct, Some(95));
        assert_eq!(t.power_pct, None);
        assert_eq!(t.throttle_mask, DEFAULT_THROTTLE_ALERTS);
        let args = run(&["--no-alerts"]).unwrap();
        assert_eq!(args.alerts(), crate::alerts::Thresholds::OFF);
        assert!(run(&["--alert-memory", "101"]).is_err());
        assert!(run(&["--alert-temp", "-1"]).is_err());
    }

    #[test]
    fn interval_rejects_garbage_and_out_of_range_values() {
        for bad in [
            "", "s", "-1s", "abc", "1.2.3s", "9ms", "2h", "1e400", "NaN", "1d",
        ] {
            assert!(parse_interval(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn flags_take_argparse_forms_and_bad_ones_are_one_line() {
        let run = |argv: &[&str]| parse(argv.iter().map(|s| s.to_string()).collect());
        let Ok(Invocation::Run(args)) = run(&["--interval=250ms", "--foreground", "--shm", "x"])
        else {
            panic!("did not parse");
        };
        assert_eq!(args.interval, Duration::from_millis(250));
        assert!(args.foreground);
        assert_eq!(args.shm.as_deref(), Some("x"));
        for (argv, says) in [
            (&["--interval", "1ms"][..], "10ms"),
            (&["--bogus"], "unknown option --bogus"),
            (&["--shm"], "--shm needs a value"),
            (&["--process-info", "all"], "--process-info"),
            (&["extra"], "unexpected argument"),
            (
                &["--interval", "1s", "--interval=2s"],
                "--interval is given more than once",
            ),
        ] {
            let err = run(argv).unwrap_err();
            assert!(err.contains(says) && !err.contains('\n'), "{argv:?}: {err}");
        }
        let Ok(Invocation::Print(help)) = run(&["--help"]) else {
            panic!("no help");
        };
        assert!(help.contains("  --nvml-timeout DURATION") && help.contains("Alerts:"));
    }

    /// `path` must hold `text`; with `GPUPEEK_WRITE_GENERATED=1` it is written instead.
    fn check_generated(path: &std::path::Path, text: &str) {
        if std::env::var_os("GPUPEEK_WRITE_GENERATED").is_some() {
            std::fs::write(path, text).unwrap();
            return;
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == text,
            "{} differs from what the flag table generates: run \
             `GPUPEEK_WRITE_GENERATED=1 cargo test -p gpupeek -p gpupeekd generated` and commit it",
            path.display()
        );
    }

    fn repo() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    #[test]
    fn generated_man_page_option_list_is_the_flag_table() {
        let path = repo().join("man/gpupeekd.8");
        let page = std::fs::read_to_string(&path).unwrap();
        let options = gpupeek_flags::man::options(&GPUPEEKD.specs());
        let page = gpupeek_flags::man::splice(&page, "gpupeekd options", &options).unwrap();
        check_generated(&path, &page);
    }

    #[test]
    fn generated_completion_scripts_are_the_flag_table() {
        let dir = repo().join("contrib/completions");
        for (file, shell) in [
            ("gpupeekd.bash", Shell::Bash),
            ("_gpupeekd", Shell::Zsh),
            ("gpupeekd.fish", Shell::Fish),
        ] {
            check_generated(&dir.join(file), &completion(shell));
        }
    }
}
