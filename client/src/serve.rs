//! `gpupeek serve`: the Prometheus exporter is a program of its own, `gpupeek-serve`
//! (serve/), which `gpupeek serve` runs in its place.
//!
//! The exporter needs TLS (rustls), YAML, bcrypt and gzip; linked into `gpupeek`, they
//! made every one-shot call load a binary more than twice the size and apply half as
//! many relocations again, about 10% of the call (docs/PERFORMANCE.md). So `gpupeek` keeps only
//! `serve`'s flag table ([`crate::commands::SERVE`]: `--help`, completions and the man
//! page come from it, and a bad flag is refused here as before), then executes
//! `gpupeek-serve` with the same arguments: the one next to the running `gpupeek`
//! executable, else the first on `PATH`. Without one, `gpupeek serve` says so in one line
//! and exits with status 11. `gpupeek-serve` parses the same table with [`command_line`]
//! and renders with [`crate::metrics`], both from this library.

use std::ffi::CString;
use std::path::Path;

use gpupeek_flags::Parser;
use nix::errno::Errno;

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

    /// `--kubelet.pod-resources-socket`.
    pub kubelet_socket: Option<std::path::PathBuf>,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            listen: DEFAULT_LISTEN.into(),
            shm: None,
            options: metrics::Options::default(),
            web_config: None,
            kubelet_socket: None,
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

/// Runs `gpupeek-serve` with `argv` in place of this process: the one next to this
/// executable, else the first on `PATH`; returns only if it cannot.
///
/// `execv` itself, not `std::process::Command`, whose spawning code makes the dynamic
/// loader bind more libc symbols at every start of every command (about 8,600
/// instructions, docs/PERFORMANCE.md).
pub fn exec(argv: &[String]) -> Result<(), Exit> {
    use std::os::unix::ffi::OsStrExt;
    let exe = std::env::current_exe().ok();
    let beside = exe.as_deref().and_then(Path::parent).map(Path::to_path_buf);
    let path = std::env::var_os("PATH").unwrap_or_default();
    let on_path = std::env::split_paths(&path).filter(|dir| !dir.as_os_str().is_empty());
    let args = std::iter::once(PROGRAM)
        .chain(argv.iter().map(String::as_str))
        .map(CString::new)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| Exit::new(EXIT_USAGE, "an argument holds a NUL byte"))?;
    for program in beside
        .clone()
        .into_iter()
        .chain(on_path)
        .map(|d| d.join(PROGRAM))
    {
        let Ok(c_path) = CString::new(program.as_os_str().as_bytes()) else {
            continue;
        };
        match nix::unistd::execv(&c_path, &args) {
            Err(Errno::ENOENT | Errno::ENOTDIR) => continue,
            Err(e) => {
                return Err(Exit::new(
                    EXIT_OS,
                    format!("cannot run {}: {}", program.display(), e.desc()),
                ))
            }
        }
    }
    let dir = beside.map_or_else(|| "gpupeek's directory".into(), |d| d.display().to_string());
    Err(Exit::new(
        EXIT_NO_SERVE,
        format!(
            "serve needs {PROGRAM}, which is neither in {dir} nor on PATH (it is installed \
             with gpupeek: make install)"
        ),
    ))
}
