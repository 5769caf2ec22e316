//! `gpupeek plot`'s flags: the charts are drawn by a program of its own, `gpupeek-plot`
//! (plot/), which `gpupeek plot` runs in its place ([`crate::companion`]), so the one-shot
//! `gpupeek` links no plotting library and no font (docs/PERFORMANCE.md). `gpupeek`
//! keeps only its flag table ([`crate::commands::PLOT`]); `gpupeek-plot` parses the same
//! table with [`command_line`] and reads the window with [`crate::history::load`].

use std::time::Duration;

use gpupeek_flags::Parser;
use gpupeek_model::history::Metric;

use crate::select::Select;
use crate::{commands, history, Exit, EXIT_USAGE};

/// The plotting program, installed next to `gpupeek`.
pub const PROGRAM: &str = "gpupeek-plot";

/// What `-o FILE` writes, by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Image {
    /// `.png`.
    Png,
    /// `.svg`.
    Svg,
}

impl Image {
    /// The kind of image `path` names by its extension (case-insensitive).
    pub fn of(path: &str) -> Result<Image, String> {
        let ext = std::path::Path::new(path)
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("png") => Ok(Image::Png),
            Some("svg") => Ok(Image::Svg),
            _ => Err(format!(
                "cannot tell what to write to {path:?}: name a .png or .svg file"
            )),
        }
    }
}

/// The flags of `gpupeek plot` (their table is `crate::commands::PLOT`).
#[derive(Debug)]
pub struct Args {
    /// `--shm`.
    pub shm: Option<String>,
    /// `--since`.
    pub since: Duration,
    /// `-i/--id`.
    pub id: Option<Vec<Select>>,
    /// `--metric` (those with values when not given).
    pub metrics: Option<Vec<Metric>>,
    /// `-o/--output`: the file, and what it is.
    pub output: Option<(String, Image)>,
    /// `--term`.
    pub term: bool,
    /// `--width`.
    pub width: Option<u32>,
    /// `--height`.
    pub height: Option<u32>,
    /// `--no-color`.
    pub no_color: bool,
}

impl Default for Args {
    fn default() -> Self {
        let h = history::Args::default();
        Args {
            shm: None,
            since: h.since,
            id: None,
            metrics: None,
            output: None,
            term: false,
            width: None,
            height: None,
            no_color: false,
        }
    }
}

/// The largest `--width` or `--height`: pixels of an image, cells of a terminal chart.
pub const MAX_SIZE: u32 = 16_384;

/// Parses `--width` or `--height`.
pub fn parse_size(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_SIZE).contains(&n) => Ok(n),
        _ => Err(format!("bad size {s:?}: use a number from 1 to {MAX_SIZE}")),
    }
}

/// Parses `plot`'s arguments (what follows `plot`, after `--shm` if one came before it):
/// the flags, or `Err` of the help text for `--help`; `Err` outside for bad usage.
pub fn parse(argv: Vec<String>) -> Result<Result<Args, String>, String> {
    let args = crate::cli::sub(&mut Parser::new(argv), &commands::PLOT, Args::default())?;
    if let Ok(a) = &args {
        if a.term && a.output.is_some() {
            return Err("--term and -o/--output do not go together: choose one".into());
        }
    }
    Ok(args)
}

/// `gpupeek-plot`'s command line: its flags, or `None` once `--help` is printed.
pub fn command_line() -> Result<Option<Args>, Exit> {
    let argv = crate::utf8_args()?;
    match parse(argv).map_err(|e| Exit::new(EXIT_USAGE, e))? {
        Ok(args) => Ok(Some(args)),
        Err(help) => crate::write_stdout(&help).map(|()| None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_output_file_says_what_to_write() {
        let args = parse(strings(&["-o", "x.SVG", "--since", "6h"]))
            .unwrap()
            .unwrap();
        assert_eq!(args.output, Some(("x.SVG".into(), Image::Svg)));
        assert_eq!(args.since, Duration::from_secs(6 * 3600));
        let err = parse(strings(&["-o", "x.jpg"])).unwrap_err();
        assert_eq!(
            err,
            "-o: cannot tell what to write to \"x.jpg\": name a .png or .svg file"
        );
        assert!(parse(strings(&["-o", "x.png", "--term"])).is_err());
        assert!(parse(strings(&["--width", "0"])).is_err());
        assert!(parse(strings(&["--metric", "util,nope"])).is_err());
    }
}
