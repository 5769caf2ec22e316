//! `gpupeek serve`: the Prometheus exporter is a program of its own, `gpupeek-serve`
//! (serve/), which `gpupeek serve` runs in its place.
//!
//! The exporter needs TLS (rustls), YAML, bcrypt and gzip; linked into `gpupeek`, they
//! made every one-shot call load a binary 2.5 times the size and apply twice the
//! relocations, about 9% of the call (docs/PERFORMANCE.md). So `gpupeek` keeps only
//! `serve`'s flag table ([`crate::commands::SERVE`]: `--help`, completions and the man
//! page come from it, and a bad flag is refused here as before), then executes
//! `gpupeek-serve` with the same arguments: the one next to the running `gpupeek`
//! executable, else the first on `PATH`. Without one, `gpupeek serve` says so in one line
//! and exits with status 11. `gpupeek-serve` parses the same table with [`command_line`]
//! and renders with [`crate::metrics`], both from this library.

use std::path::{Path, PathBuf};

use gpupeek_flags::Parser;

use crate::{commands, metrics, Exit, EXIT_NO_SERVE, EXIT_OS, EXIT_USAGE};

/// The exporter's program, installed next to `gpupeek`.
pub const PROGRAM: &str = "gpupeek-serve";

/// Default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9477";

/// The flags of `gpupeek serve` (their table is `crate::commands::SERVE`).
#[derive(Debug)]
pub struct Args {
    /// `--listen`.
    pub listen: String,

    /// `--shm`.
    pub shm: Option<String>,

    /// What the exposition holds (`--names`).
    pub options: metrics::Options,

    /// `--web.config.file`.
    pub web_config: Option<String>,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            listen: DEFAULT_LISTEN.into(),
            shm: None,
            options: metrics::Options::default(),
            web_config: None,
        }
    }
}

/// Parses `serve`'s arguments (what follows `serve`, after `--shm` if one came before
/// it): the flags, or `Err` of the help text for `--help`; `Err` outside for bad usage.
pub fn parse(argv: Vec<String>) -> Result<Result<Args, String>, String> {
    crate::cli::sub(&mut Parser::new(argv), &commands::SERVE, Args::default())
}

/// `gpupeek-serve`'s command line: its flags, or `None` once `--help` is printed.
pub fn command_line() -> Result<Option<Args>, Exit> {
    let argv = crate::utf8_args()?;
    crate::verdict::check_env().map_err(|message| Exit::new(EXIT_USAGE, message))?;
    match parse(argv).map_err(|e| Exit::new(EXIT_USAGE, e))? {
        Ok(args) => Ok(Some(args)),
        Err(help) => crate::write_stdout(&help).map(|()| None),
    }
}

/// Runs `gpupeek-serve` with `argv` in place of this process; returns only if it cannot.
pub fn exec(argv: &[String]) -> Result<(), Exit> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().ok();
    let beside = exe
        .as_deref()
        .and_then(Path::parent)
        .map(|dir| dir.join(PROGRAM))
        .filter(|path| path.exists());
    // A name without a slash is looked up on PATH.
    let program = beside.unwrap_or_else(|| PathBuf::from(PROGRAM));
    let error = std::process::Command::new(&program).args(argv).exec();
    if error.kind() == std::io::ErrorKind::NotFound {
        let dir = exe
            .as_deref()
            .and_then(Path::parent)
            .map_or_else(|| "gpupeek's directory".into(), |d| d.display().to_string());
        return Err(Exit::new(
            EXIT_NO_SERVE,
            format!(
                "serve needs {PROGRAM}, which is neither in {dir} nor on PATH (it is \
                 installed with gpupeek: make install)"
            ),
        ));
    }
    Err(Exit::new(
        EXIT_OS,
        format!("cannot run {}: {error}", program.display()),
    ))
}
