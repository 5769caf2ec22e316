//! `gpupeek top`'s flags: the interactive monitor is a program of its own, `gpupeek-top`
//! (top/), which `gpupeek top` runs in its place ([`crate::companion`]), so the one-shot
//! `gpupeek` links no TUI. `gpupeek` keeps only its flag table
//! ([`crate::commands::TOP`]); `gpupeek-top` parses the same table with
//! [`command_line`].

use gpupeek_flags::Parser;

use crate::{commands, Exit, EXIT_USAGE};

/// The monitor's program, installed next to `gpupeek`.
pub const PROGRAM: &str = "gpupeek-top";

/// The flags of `gpupeek top` (their table is `crate::commands::TOP`).
#[derive(Debug, Default)]
pub struct Args {
    /// `--shm`.
    pub shm: Option<String>,

    /// `--no-color`.
    pub no_color: bool,

    /// `--version`.
    pub version: bool,
}

/// Parses `top`'s arguments (what follows `top`, after `--shm` if one came before it):
/// the flags, or `Err` of the help text for `--help`; `Err` outside for bad usage.
pub fn parse(argv: Vec<String>) -> Result<Result<Args, String>, String> {
    crate::cli::sub(&mut Parser::new(argv), &commands::TOP, Args::default())
}

/// `gpupeek-top`'s command line: its flags, or `None` once `--help` or `--version` is
/// printed.
pub fn command_line() -> Result<Option<Args>, Exit> {
    let argv = crate::utf8_args()?;
    match parse(argv).map_err(|e| Exit::new(EXIT_USAGE, e))? {
        Ok(args) if args.version => {
            crate::write_stdout(&format!("gpupeek-top {}\n", env!("CARGO_PKG_VERSION")))
                .map(|()| None)
        }
        Ok(args) => Ok(Some(args)),
        Err(help) => crate::write_stdout(&help).map(|()| None),
    }
}
