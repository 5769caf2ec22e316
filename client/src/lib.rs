//! `gpupeek`: a one-shot, gpustat-compatible view of the GPUs, read from gpupeekd's
//! shared-memory segment. It makes no driver call and does not talk to the daemon: it
//! maps the segment read-only, copies a consistent snapshot and renders it.
//!
//! Exit status (see gpupeek(1)): 0 ok, 1 internal error, 2 bad usage, 3 no daemon (no
//! segment, daemon starting or stopped), 4 stale daemon (no heartbeat, or a record left
//! half-written), 5 NVML error reported by the
//! daemon, 6 segment layout (ABI) mismatch, 7 untrusted segment, 8 corrupt segment,
//! 9 operating-system error (e.g. permission denied), 10 daemon released the driver on
//! an operator's request (GPU reset, MIG change; `gpupeekd --resume` takes it back),
//! 11 `gpupeek serve`, `top`, `plot` or `fleet` found no gpupeek-serve, gpupeek-top,
//! gpupeek-plot or gpupeek-fleet to run, 12 `gpupeek history` or `gpupeek plot` found no
//! sample in the window, 13 `gpupeek fleet` showed a host that did not answer or whose
//! daemon is not live.
//! A closed stdout is a quiet 0. `-i/--watch` does not exit 3 to 10: it shows the reason
//! and waits for the daemon.
//!
//! [`cli`] parses the command line, gpustat's flags and the subcommands (`query`,
//! `metrics`, `serve`, `top`, `history`, `plot`, see [`commands`]); a usage error is one
//! line and exit status 2.
//!
//! This library is the whole of the `gpupeek` program (its binary, `src/bin/gpupeek.rs`,
//! only calls [`main`]) and, in [`exporter`], what the exporter, the `gpupeek-serve`
//! binary of `serve/`, shares with it: the Prometheus rendering ([`metrics`]), `serve`'s
//! flags ([`serve`]) and the exit statuses. The exporter's TLS, YAML, bcrypt and gzip
//! live in that binary alone, so that the one-shot `gpupeek` does not load them
//! (docs/PERFORMANCE.md); so does the interactive monitor's TUI, in `gpupeek-top` (top/),
//! which takes its flags from [`monitor`], and the charts' plotting library and font, in
//! `gpupeek-plot` (plot/), which takes its flags and the history window from
//! [`plotting`].

mod bycontainer;
mod byuser;
mod cli;
mod commands;
mod companion;
mod fit;
mod fleet;
mod follow;
mod history;
mod json;
mod live;
mod local;
mod metrics;
mod outputs;
mod plot;
mod query;
mod select;
mod serve;
mod smi;
mod snapshot;
mod stream;
mod style;
mod table;
#[cfg(test)]
mod testing;
mod top;
mod view;
mod watch;

/// The verdict lives in the model crate, shared with gpupeek-top.
use gpupeek_model::verdict;
/// The `--format` template language lives in its own crate, shared with gpupeekd.
use gpupeek_render as template;

use std::io::{IsTerminal, Write};

use chrono::{DateTime, Local, Timelike};
use gpupeek_shm::{Error, Liveness, Segment};

const EXIT_INTERNAL: u8 = 1;
/// Exit statuses (gpupeek(1), EXIT STATUS): bad usage.
pub const EXIT_USAGE: u8 = 2;
const EXIT_NO_DAEMON: u8 = 3;
const EXIT_STALE: u8 = 4;
const EXIT_NVML: u8 = 5;
const EXIT_ABI: u8 = 6;
const EXIT_UNTRUSTED: u8 = 7;
const EXIT_CORRUPT: u8 = 8;
/// An operating-system error.
pub const EXIT_OS: u8 = 9;
const EXIT_RELEASED: u8 = 10;
/// `gpupeek serve`, `top`, `plot` or `fleet` found no gpupeek-serve, gpupeek-top,
/// gpupeek-plot or gpupeek-fleet to run.
const EXIT_NO_COMPANION: u8 = 11;
/// `gpupeek history` or `gpupeek plot`: no sample of the selected GPUs in the window.
pub const EXIT_NO_HISTORY: u8 = 12;
/// `gpupeek fleet`: some hosts did not answer, or answered without a live daemon.
pub const EXIT_PARTIAL: u8 = 13;
/// `gpupeek fleet --kubernetes`: the Kubernetes API server did not list the Service's
/// endpoints (unreachable, refused the credentials, answered something else).
pub const EXIT_KUBERNETES: u8 = 14;

/// A reason to stop: the exit status and the line to print (none when empty), and the
/// daemon's state when that is the reason.
#[derive(Debug)]
pub struct Exit {
    code: u8,
    message: String,
    daemon: Option<Liveness>,
}

impl Exit {
    /// Exit status `code`, saying `message`.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Exit {
            code,
            message: message.into(),
            daemon: None,
        }
    }
}

/// The exit status of `result`, after printing its line as `gpupeek: LINE` on stderr.
pub fn exit_status(result: Result<(), Exit>) -> u8 {
    match result {
        Ok(()) => 0,
        Err(exit) => {
            if !exit.message.is_empty() {
                // Not eprintln!, which panics when stderr is a closed pipe.
                let _ = writeln!(std::io::stderr().lock(), "gpupeek: {}", exit.message);
            }
            exit.code
        }
    }
}

impl From<Error> for Exit {
    fn from(e: Error) -> Self {
        let code = match e {
            Error::NotFound { .. } | Error::NotReady { .. } => EXIT_NO_DAEMON,
            Error::InvalidName { .. } => EXIT_USAGE,
            Error::Untrusted { .. } => EXIT_UNTRUSTED,
            Error::AbiMismatch { .. } => EXIT_ABI,
            Error::Corrupt { .. } => EXIT_CORRUPT,
            Error::Stale { .. } => EXIT_STALE,
            Error::AlreadyRunning { .. } | Error::Lock { .. } => EXIT_INTERNAL,
            Error::Os { .. } => EXIT_OS,
        };
        Exit::new(code, e.to_string())
    }
}

/// The `gpupeek` program, called by the C runtime's `main` (see `src/bin/gpupeek.rs`);
/// returns the exit status.
///
/// Start-up is part of the cost of every call (see docs/PERFORMANCE.md), so the C runtime
/// enters the binary directly (`no_main`): std's own start-up would first install a
/// stack-overflow handler (reading `/proc/self/maps`, an alternate signal stack) and check
/// the standard descriptors, about a sixth of a one-shot call. What of it matters is
/// done here: SIGPIPE no longer kills the process, so a closed stdout is a quiet exit.
/// Arguments still come from `std::env::args` (glibc hands them to std at load time).
pub fn main() -> u8 {
    // A caught SIGPIPE (the flag is never read) makes a write to a closed pipe fail with
    // EPIPE instead of killing the process, as std's start-up would have arranged.
    static SIGPIPE_SEEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if let Err(e) = signal_hook::flag::register(signal_hook::consts::SIGPIPE, &SIGPIPE_SEEN) {
        return exit_status(Err(Exit::new(
            EXIT_INTERNAL,
            format!("cannot handle SIGPIPE: {e}"),
        )));
    }
    exit_status(run())
}

fn run() -> Result<(), Exit> {
    let argv = utf8_args()?;
    verdict::check_env().map_err(|message| Exit::new(EXIT_USAGE, message))?;
    let mut args = match cli::parse(argv).map_err(|e| Exit::new(EXIT_USAGE, e))? {
        cli::Invocation::Main(args) => args,
        cli::Invocation::Query(args) => return query::run(args),
        cli::Invocation::Metrics(args) => return metrics::run(args),
        cli::Invocation::Serve(argv) => return companion::exec(serve::PROGRAM, &argv),
        cli::Invocation::Top(argv) => return companion::exec(top::PROGRAM, &argv),
        cli::Invocation::History(args) => return history::run(args),
        cli::Invocation::Plot(argv) => return companion::exec(plot::PROGRAM, &argv),
        cli::Invocation::Fleet(argv) => return companion::exec(fleet::PROGRAM, &argv),
        cli::Invocation::Print(text) => return write_stdout(&text),
    };
    args.expand_show_all();
    if args.by_user && args.by_container {
        return Err(Exit::new(
            EXIT_USAGE,
            "--by-user and --by-container do not go together: choose one",
        ));
    }
    if args.format.is_some() || args.output.is_some() || args.follow {
        return outputs::run(&args);
    }
    let name = gpupeek_shm::resolve_name(args.shm.as_deref());
    if let Some(secs) = args.watch {
        // It waits for a daemon that is not up, as --follow and gpupeek-top do.
        return watch::run(&args, &name, secs);
    }
    let segment = Segment::open(&name)?;
    let snapshot = segment.snapshot()?;
    check_live(
        &name,
        snapshot.liveness(gpupeek_shm::mono_now_ns()),
        snapshot.status.period_ns,
    )?;
    write_stdout(&render(&args, &snapshot)?)
}

/// The table (or JSON) of one snapshot, as the flags ask.
fn render(args: &cli::Args, snapshot: &gpupeek_shm::Snapshot) -> Result<String, Exit> {
    let ctx = view_context(snapshot);
    let ids = match &args.id {
        Some(sels) => Some(
            select::gpu_indices(&gpupeek_model::Model::new(snapshot), sels)
                .map_err(|e| Exit::new(EXIT_USAGE, e))?,
        ),
        None => None,
    };
    let view = view::View::new(snapshot, ids.as_deref(), &ctx).map_err(|id| {
        let have = snapshot
            .gpus
            .iter()
            .map(|g| g.index.to_string())
            .collect::<Vec<_>>();
        Exit::new(
            EXIT_USAGE,
            format!("no GPU with index {id} (GPUs: {})", have.join(",")),
        )
    })?;
    let hostname = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let published = published_time(view.published_unix_ns);
    let painter = style::Painter::new(args.color, args.no_color, std::io::stdout().is_terminal());
    let time = published.format("%a %b %e %H:%M:%S %Y").to_string();
    let grouped = args.by_user || args.by_container;
    let out = match (grouped, args.json) {
        (false, true) => json::render(&view, &hostname, &iso_time(&published)),
        (false, false) => table::render(&view, args, painter, &hostname, &time),
        (true, true) if args.by_container => json::to_text(&ByContainerDocument {
            hostname: &hostname,
            driver_version: view.driver_version.as_deref(),
            query_time: &iso_time(&published),
            containers: bycontainer::rows(&view),
            processes_not_shown: byuser::not_shown(&view),
            gpus_not_counted: byuser::not_counted(&view),
        }),
        (true, true) => json::to_text(&ByUserDocument {
            hostname: &hostname,
            driver_version: view.driver_version.as_deref(),
            query_time: &iso_time(&published),
            users: byuser::rows(&view),
            processes_not_shown: byuser::not_shown(&view),
            gpus_not_counted: byuser::not_counted(&view),
        }),
        (true, false) => {
            let mut out = String::new();
            if !args.no_header {
                // The same header as the table's, so the two views line up.
                let width = table::name_width(&view, args);
                out = table::header(&view, width, painter, &hostname, &time);
            }
            let not_shown = byuser::not_shown(&view);
            let not_counted = byuser::not_counted(&view);
            if args.by_container {
                let rows = bycontainer::rows(&view);
                out + &bycontainer::render(&rows, not_shown, &not_counted, painter)
            } else {
                let rows = byuser::rows(&view);
                out + &byuser::render(&rows, not_shown, &not_counted, painter)
            }
        }
    };
    Ok(out)
}

/// `--by-user --json`.
#[derive(serde::Serialize)]
struct ByUserDocument<'a> {
    hostname: &'a str,
    driver_version: Option<&'a str>,
    query_time: &'a str,
    users: Vec<byuser::UserRow>,
    /// GPU processes no user row counts (withheld, or beyond the table).
    processes_not_shown: u32,
    /// GPUs whose processes could not be read (lost, failing, driver not responding).
    gpus_not_counted: Vec<u32>,
}

/// `--by-container --json`.
#[derive(serde::Serialize)]
struct ByContainerDocument<'a> {
    hostname: &'a str,
    driver_version: Option<&'a str>,
    query_time: &'a str,
    containers: Vec<bycontainer::ContainerRow>,
    /// GPU processes no row counts (withheld, or beyond the table).
    processes_not_shown: u32,
    /// GPUs whose processes could not be read (lost, failing, driver not responding).
    gpus_not_counted: Vec<u32>,
}

/// The reader's pid namespace, and its own `/proc` for details the daemon withheld.
fn view_context(snap: &gpupeek_shm::Snapshot) -> view::Context {
    if snap.processes.is_empty() {
        return view::Context::default();
    }
    let pid_ns_inode =
        gpupeek_shm::procfs::pid_ns_inode(std::path::Path::new("/proc/self/ns/pid")).unwrap_or(0);
    let withheld = snap.proc_policy() == Some(gpupeek_shm::ProcPolicy::Basic);
    let resolves = snap.proc_policy() == Some(gpupeek_shm::ProcPolicy::Full)
        && snap.proc_head.flags & gpupeek_shm::layout::proc_flags::HIDEPID == 0
        && pid_ns_inode != 0
        && snap.proc_head.pid_ns_inode == pid_ns_inode
        && snap
            .processes
            .iter()
            .any(|p| p.valid & gpupeek_shm::layout::proc_valid::CMDLINE != 0);
    view::Context {
        pid_ns_inode,
        local: withheld.then_some(local::read as fn(u32) -> Option<local::LocalProc>),
        gone: resolves.then_some(local::gone as fn(u32) -> bool),
    }
}

/// Turns a daemon that is not live into the matching exit (the words are
/// [`Liveness::describe`]'s, shared with gpupeek-top).
fn check_live(name: &str, liveness: Liveness, period_ns: u64) -> Result<(), Exit> {
    let Some(message) = liveness.describe(name, period_ns) else {
        return Ok(());
    };
    let code = match &liveness {
        Liveness::Live => return Ok(()),
        Liveness::Starting | Liveness::Stopped => EXIT_NO_DAEMON,
        Liveness::Released => EXIT_RELEASED,
        Liveness::Stale { .. } => EXIT_STALE,
        Liveness::NvmlError { .. } => EXIT_NVML,
    };
    Err(Exit {
        code,
        message,
        daemon: Some(liveness),
    })
}

fn published_time(unix_ns: u64) -> DateTime<Local> {
    let secs = (unix_ns / 1_000_000_000) as i64;
    let nanos = (unix_ns % 1_000_000_000) as u32;
    DateTime::from_timestamp(secs, nanos)
        .unwrap_or_default()
        .with_timezone(&Local)
}

/// Python's `datetime.isoformat()`: microseconds only when non-zero.
fn iso_time(t: &DateTime<Local>) -> String {
    if t.nanosecond() / 1000 == 0 {
        t.format("%Y-%m-%dT%H:%M:%S").to_string()
    } else {
        t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
    }
}

/// The arguments after the program name; one that is not UTF-8 is a usage error
/// (`std::env::args` would panic on it).
fn utf8_args() -> Result<Vec<String>, Exit> {
    std::env::args_os()
        .skip(1)
        .map(|arg| {
            arg.into_string().map_err(|arg| {
                Exit::new(EXIT_USAGE, format!("argument {arg:?} is not valid UTF-8"))
            })
        })
        .collect()
}

/// Writes everything to stdout; a closed pipe (`gpupeek | head -1`) is a quiet success.
pub fn write_stdout(text: &str) -> Result<(), Exit> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Exit::new(0, "")),
        Err(e) => Err(Exit::new(EXIT_OS, format!("cannot write output: {e}"))),
    }
}

/// What gpupeek-serve (serve/) shares with `gpupeek`: `serve`'s flags and their parser,
/// the metrics rendering and the exit statuses.
pub mod exporter {
    pub use crate::metrics::{escape, scrape, scrape_with, Options};
    pub use crate::serve::{command_line, Args};
    pub use crate::snapshot::document as snapshot;
    pub use crate::stream::{event, hostname, readiness, with_segment, Event};
    pub use crate::{exit_status, Exit, EXIT_OS, EXIT_USAGE};
}

/// What gpupeek-fleet (fleet/) shares with `gpupeek`: `fleet`'s flags and their parser
/// and the exit statuses.
pub mod fleetview {
    pub use crate::fleet::{command_line, Args, GroupBy};
    pub use crate::fleet::{DEFAULT_NAMESPACE, DEFAULT_SERVICE};
    pub use crate::watch::{interval as watch_interval, redraw, Partial};
    pub use crate::{
        exit_status, write_stdout, Exit, EXIT_KUBERNETES, EXIT_OS, EXIT_PARTIAL, EXIT_USAGE,
    };
}

/// What gpupeek-top (top/) shares with `gpupeek`: `top`'s flags and their parser, the
/// reader's own view of a process the daemon withholds, and the exit statuses.
pub mod monitor {
    pub use crate::local::{read as read_own_process, LocalProc};
    pub use crate::top::{command_line, Args};
    pub use crate::{exit_status, Exit, EXIT_OS, EXIT_USAGE};
}

/// What gpupeek-plot (plot/) shares with `gpupeek`: `plot`'s flags and their parser, the
/// history window they choose, and the exit statuses.
pub mod plotting {
    pub use crate::fit::terminal_size;
    pub use crate::history::export::rfc3339;
    pub use crate::history::{load, since_text, Window};
    pub use crate::plot::{command_line, Args, Image};
    pub use crate::write_stdout;
    pub use crate::{exit_status, Exit, EXIT_NO_HISTORY, EXIT_OS, EXIT_USAGE};
}
