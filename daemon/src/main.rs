//! `gpupeekd`: the only process that talks to NVML. It creates the shared-memory segment,
//! samples every GPU each period and publishes the records for any number of readers.
//!
//! Exit status: 0 after a clean stop, 1 on an internal error (or a second stop signal),
//! 2 for bad flags, 3 when another gpupeekd owns the segment, 4 when the segment cannot
//! be created, 5 when `--prompt-stopped` cannot write the prompt file. `--release` and
//! `--resume` exit 0 once done, 1 when the daemon did not do it in time, 3 when there is
//! no daemon to ask.

mod alerts;
mod cli;
mod container;
mod counters;
mod details;
mod details3;
mod details4;
mod driver;
mod events;
mod fallback;
mod fields;
mod gpm;
mod gpuprocs;
mod history;
mod hooks;
mod logging;
mod mig;
mod notify;
mod numbering;
mod podviews;
mod power;
mod privacy;
mod procfile;
mod procfs;
mod proctier;
mod prompt;
#[cfg(test)]
mod prompt_lines;
mod reads;
mod request;
mod run;
mod sampler;
mod session;
mod smoothing;
mod statefile;
mod sysfs;
mod tiers;
mod timeline;
mod waiter;
mod worker;
mod xid;

use std::io::Write;
use std::process::ExitCode;

use gpupeek_shm::{Error, Options, Publisher};

const EXIT_INTERNAL: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_ALREADY_RUNNING: u8 = 3;
const EXIT_SEGMENT: u8 = 4;
const EXIT_PROMPT_FILE: u8 = 5;
const EXIT_POD_VIEWS: u8 = 6;

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(code) => return code,
    };
    let prompt = match prompt_file(&args) {
        Ok(prompt) => prompt,
        Err(code) => return code,
    };
    if args.prompt_stopped {
        return mark_prompt_stopped(prompt);
    }
    let name = gpupeek_shm::resolve_name(args.shm.as_deref());
    let request = match (args.release, args.resume) {
        (true, true) => {
            logging::say(format_args!("--release and --resume exclude each other"));
            return ExitCode::from(EXIT_USAGE);
        }
        (true, false) => Some(waiter::Request::Release),
        (false, true) => Some(waiter::Request::Resume),
        (false, false) => None,
    };
    if let Some(request) = request {
        // The daemon waits up to its NVML timeout for a call to return before it lets go.
        let wait = args.nvml_timeout * 2 + std::time::Duration::from_secs(5);
        return request::send(&name, request, wait);
    }
    // Checked before the segment is made: a bad directory leaves nothing behind.
    let pod_views = match args.pod_views.clone() {
        Some(dir) => {
            let settings = podviews::Settings {
                dir,
                kubelet_socket: args.kubelet_socket.clone(),
                pod_log_dir: args.pod_log_dir.clone(),
            };
            match settings.open() {
                Ok(root) => Some((settings, root)),
                Err(e) => {
                    logging::say(format_args!("{e}"));
                    return ExitCode::from(EXIT_POD_VIEWS);
                }
            }
        }
        None => None,
    };
    let epoch = getrandom::u64().unwrap_or_else(|_| gpupeek_shm::mono_now_ns());
    let options = Options {
        tier_tracks: args.history_tracks,
        ..Options::new(epoch, std::process::id())
    };
    let mut publisher = match Publisher::create(&name, &options) {
        Ok(publisher) => publisher,
        Err(e) => {
            logging::say(format_args!("{e}"));
            return ExitCode::from(match e {
                Error::AlreadyRunning { .. } => EXIT_ALREADY_RUNNING,
                Error::InvalidName { .. } => EXIT_USAGE,
                _ => EXIT_SEGMENT,
            });
        }
    };
    if args.foreground {
        logging::to_stderr();
    } else {
        if let Err(e) = nix::unistd::daemon(false, false) {
            logging::say(format_args!("cannot detach: {}", e.desc()));
            return ExitCode::from(EXIT_INTERNAL);
        }
        logging::to_syslog();
        publisher.set_writer_pid(std::process::id());
    }
    // Never more often than every tick.
    let process_interval = args.process_interval.max(args.interval);
    log::info!(
        "publishing to segment '{name}' every {:?}, processes every {process_interval:?}",
        args.interval,
    );
    // After detaching: the kubelet is asked from a thread of its own.
    let pod_views = pod_views.map(|(settings, root)| {
        log::info!(
            "publishing a view per pod in {} (kubelet {}, pod uids from {})",
            settings.dir.display(),
            settings.kubelet_socket.display(),
            settings.pod_log_dir.display()
        );
        let steps = podviews::Steps {
            period: args.interval,
            unit: history_unit(),
            tiered: args.history_tracks > 0,
        };
        podviews::PodViews::new(settings, root, process_interval, epoch, steps)
    });
    let config = run::Config {
        pod_views,
        interval: args.interval,
        process_interval,
        alerts: args.alerts(),
        nvml_lib: args.nvml_lib,
        process_info: args.process_info,
        proc_root: args.proc_root,
        sysfs_root: args.sysfs_root,
        runtime_pm: !args.no_runtime_pm,
        release_after: args.release_after,
        prompt,
        nvml_timeout: args.nvml_timeout,
        history_unit: history_unit(),
        state_file: state_dir(args.state_dir).map(|dir| statefile::path(&dir, &name)),
    };
    match run::run(config, publisher) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("event loop failed: {e}");
            ExitCode::from(EXIT_INTERNAL)
        }
    }
}

/// The prompt file the flags ask for, checked before anything is created; a bad
/// template or path is a one-line usage error.
fn prompt_file(args: &cli::Args) -> Result<Option<prompt::PromptFile>, ExitCode> {
    let usage = |message: &str| {
        logging::say(format_args!("{message}"));
        ExitCode::from(EXIT_USAGE)
    };
    match (&args.prompt_file, &args.prompt_format) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(usage("--prompt-format needs --prompt-file")),
        (Some(path), format) => prompt::PromptFile::new(path, format.as_deref())
            .map(Some)
            .map_err(|e| usage(&e)),
    }
}

/// `--prompt-stopped`: the line a clean stop leaves, written by a process of its own
/// because the daemon that should have written it was killed.
fn mark_prompt_stopped(prompt: Option<prompt::PromptFile>) -> ExitCode {
    let Some(mut prompt) = prompt else {
        logging::say(format_args!("--prompt-stopped needs --prompt-file"));
        return ExitCode::from(EXIT_USAGE);
    };
    match prompt.mark_stopped() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            logging::say(format_args!("{e}"));
            ExitCode::from(EXIT_PROMPT_FILE)
        }
    }
}

/// Parses the command line; on `--help`, `--version`, `--print-completion` or an error,
/// prints and returns the exit code.
fn parse_args() -> Result<Box<cli::Args>, ExitCode> {
    let mut argv = Vec::new();
    for arg in std::env::args_os().skip(1) {
        match arg.into_string() {
            Ok(arg) => argv.push(arg),
            Err(arg) => {
                logging::say(format_args!("argument {arg:?} is not valid UTF-8"));
                return Err(ExitCode::from(EXIT_USAGE));
            }
        }
    }
    match cli::parse(argv) {
        Ok(cli::Invocation::Run(args)) => Ok(args),
        Ok(cli::Invocation::Print(text)) => {
            let _ = write!(std::io::stdout(), "{text}");
            Err(ExitCode::SUCCESS)
        }
        Err(message) => {
            logging::say(format_args!("{message}"));
            Err(ExitCode::from(EXIT_USAGE))
        }
    }
}

/// The tiered history's unit: 1 s, or what the test hook [`hooks::HISTORY_UNIT_MS`]
/// says (logged, since it changes every bucket's width).
fn history_unit() -> std::time::Duration {
    match hooks::get::<u64>(hooks::HISTORY_UNIT_MS).filter(|&ms| ms > 0) {
        Some(ms) => {
            log::info!("test hook: history unit {ms} ms instead of 1 s");
            std::time::Duration::from_millis(ms)
        }
        None => std::time::Duration::from_secs(1),
    }
}

/// `--state-dir`, else `$GPUPEEK_STATE_DIR` if set and not empty, else
/// [`statefile::DEFAULT_DIR`] for root, else none.
fn state_dir(flag: Option<std::path::PathBuf>) -> Option<std::path::PathBuf> {
    let env = std::env::var_os(statefile::DIR_ENV).filter(|d| !d.is_empty());
    let dir = flag.or(env.map(Into::into)).or_else(|| {
        nix::unistd::geteuid()
            .is_root()
            .then(|| statefile::DEFAULT_DIR.into())
    });
    if dir.is_none() {
        log::info!("no --state-dir: the tiered history lasts as long as the segment");
    }
    dir
}
