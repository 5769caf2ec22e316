//! `gpupeek serve`'s flags: the Prometheus exporter is a program of its own,
//! `gpupeek-serve` (serve/), which `gpupeek serve` runs in its place
//! ([`crate::companion`]). `gpupeek` keeps only `serve`'s flag table
//! ([`crate::commands::SERVE`]); `gpupeek-serve` parses the same table with
//! [`command_line`] and renders with [`crate::metrics`], both from this library.

use gpupeek_flags::Parser;

use crate::{commands, metrics, Exit, EXIT_USAGE};

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

    /// `--node-name` (`None`: the host name).
    pub node_name: Option<String>,

    /// `--web.max-streams`.
    pub max_streams: usize,
}

/// Default `--web.max-streams`.
pub const DEFAULT_MAX_STREAMS: usize = 16;

impl Default for Args {
    fn default() -> Self {
        Args {
            listen: DEFAULT_LISTEN.into(),
            shm: None,
            options: metrics::Options::default(),
            web_config: None,
            kubelet_socket: None,
            node_name: None,
            max_streams: DEFAULT_MAX_STREAMS,
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
