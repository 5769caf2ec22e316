//! The command line of `gpupeek`: gpustat's flags, parsed as gpustat's argparse parses
//! them, and the commands (`query`, `metrics`, `serve`, `top`, `history`, `plot`).
//!
//! Each flag is declared once, in a table ([`flags::MAIN`], and the commands' tables in
//! [`crate::commands`]), with the `gpupeek-flags` crate's [`Flag`] type; parsing,
//! `--help`, the OPTIONS lists of gpupeek(1) and the completion scripts
//! (`--print-completion bash|zsh|fish`) all come from those tables. Global flags
//! (`--shm`) may come before or after a command: `gpupeek --shm X metrics` is `gpupeek
//! metrics --shm X`.
//!
//! Why lexopt and a table of our own rather than clap: start-up is most of what a
//! one-shot call costs (docs/PERFORMANCE.md). A clap (4.6, derive) parser of a table this
//! size, measured in a bare program with the same release profile, added about 127,000
//! instructions to every start (165,000 to parse `-cup --shm x`) and 314 KB to the
//! binary: a third more instructions than the whole of a one-shot `gpupeek` (357,000)
//! and a third more file. lexopt only splits arguments (a few hundred lines, no
//! dependency), so parsing costs what the table's look-ups cost: measured the same way,
//! about 1,500 instructions more per call than argh did and 53 KB more file (the man
//! paragraphs and the writers), see docs/PERFORMANCE.md. And the table can say exactly
//! what argparse does with `-P ''` or `-cupP draw`, which clap cannot without
//! work-arounds. The price is our own help, man and completion writers (gpupeek-flags).

pub mod flags;
#[cfg(test)]
mod gpustat;
#[cfg(test)]
mod tests;

use gpupeek_flags::complete::{Shell, Tree};
use gpupeek_flags::{help, Parser, Stop};

pub use flags::MAIN;

use crate::{commands, history, metrics, outputs, plot, query, serve, top};

/// The gpustat-style flags of the table, JSON and one-line outputs.
#[derive(Debug, Default)]
pub struct Args {
    /// `-c`.
    pub show_cmd: bool,
    /// `-u`.
    pub show_user: bool,
    /// `-p`.
    pub show_pid: bool,
    /// `-F`.
    pub show_fan_speed: bool,
    /// `-f`.
    pub show_full_cmd: bool,
    /// `--by-user`.
    pub by_user: bool,
    /// `--by-container`.
    pub by_container: bool,
    /// `-e`: which codec columns (`None`: none, as gpustat's `''`).
    pub show_codec: Option<Codec>,
    /// `-P`: which power columns (`None`: none, as gpustat's `''`).
    pub show_power: Option<Power>,
    /// `-a`.
    pub show_all: bool,
    /// `--id`.
    pub id: Option<Vec<crate::select::Select>>,
    /// `-V`.
    pub verdict: bool,
    /// `--no-header`.
    pub no_header: bool,
    /// `--no-processes`.
    pub no_processes: bool,
    /// `--json`.
    pub json: bool,
    /// `--gpuname-width`.
    pub gpuname_width: Option<usize>,
    /// `--force-color` or `--color`.
    pub color: bool,
    /// `--no-color`.
    pub no_color: bool,
    /// `--shm`.
    pub shm: Option<String>,
    /// `--format`.
    pub format: Option<String>,
    /// `-o`.
    pub output: Option<String>,
    /// `--follow`.
    pub follow: bool,
    /// `--asleep`.
    pub asleep: Option<String>,
    /// `-i`: seconds between redraws (checked when used: gpustat's parser takes any
    /// number, `-i 0` included).
    pub watch: Option<f64>,
    /// `-v`.
    pub version: bool,
    /// `--print-completion`.
    pub print_completion: Option<Shell>,
}

/// Which codec columns to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Codec {
    /// Encoder.
    pub enc: bool,
    /// Decoder.
    pub dec: bool,
}

/// Which power columns to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    /// Draw only.
    Draw,
    /// Draw and limit.
    DrawLimit,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Invocation {
    /// The table, JSON, watch or a one-line output.
    Main(Box<Args>),
    /// `gpupeek query`.
    Query(query::Args),
    /// `gpupeek metrics`.
    Metrics(metrics::Args),
    /// `gpupeek serve`, whose flags are good: `gpupeek-serve` is to run with these
    /// arguments (`--shm` if it came before `serve`, then what came after, as given).
    Serve(Vec<String>),
    /// `gpupeek top`, whose flags are good: `gpupeek-top` is to run with these arguments
    /// (`--shm` if it came before `top`, then what came after, as given).
    Top(Vec<String>),
    /// `gpupeek history`.
    History(history::Args),
    /// `gpupeek plot`, whose flags are good: `gpupeek-plot` is to run with these
    /// arguments (`--shm` if it came before `plot`, then what came after, as given).
    Plot(Vec<String>),
    /// `gpupeek fleet`, whose flags are good: `gpupeek-fleet` is to run with these
    /// arguments (what came after `fleet`, as given).
    Fleet(Vec<String>),
    /// Print this (`--help`, `--version`, `--print-completion`) and exit 0.
    Print(String),
}

/// Parses the arguments after the program name; an error is one line for the user.
pub fn parse(argv: Vec<String>) -> Result<Invocation, String> {
    let mut parser = Parser::new(argv.into_iter().map(nvidia_smi_spelling));
    let mut args = Args::default();
    match parser.parse(&MAIN, &mut args).map_err(|e| e.0)? {
        Stop::End => finish(args),
        Stop::Help => Ok(Invocation::Print(main_help())),
        Stop::Word(word) => {
            let before: Vec<&str> = parser.seen().to_vec();
            if let Some(flag) = before.iter().find(|f| !flags::GLOBAL.contains(f)) {
                if commands::NAMES.contains(&word.as_str()) {
                    return Err(format!(
                        "--{flag} is not an option of `gpupeek {word}` (only {} may come \
                         before a command)",
                        flags::GLOBAL.map(|g| format!("--{g}")).join(", ")
                    ));
                }
            }
            let shm = args.shm.take();
            match word.as_str() {
                "query" => sub(&mut parser, &commands::QUERY, query_args(shm))
                    .map(|a| a.map_or_else(Invocation::Print, Invocation::Query))
                    .and_then(commands::check_query),
                "metrics" => sub(&mut parser, &commands::METRICS, metrics_args(shm))
                    .map(|a| a.map_or_else(Invocation::Print, Invocation::Metrics)),
                "history" => sub(
                    &mut parser,
                    &commands::HISTORY,
                    history::Args {
                        shm,
                        ..history::Args::default()
                    },
                )
                .map(|a| a.map_or_else(Invocation::Print, Invocation::History)),
                "fleet" if shm.is_some() => {
                    Err("--shm is not an option of `gpupeek fleet`: it reads other hosts".into())
                }
                "fleet" => {
                    let argv = parser.rest().map_err(|e| e.0)?;
                    crate::fleet::parse(argv.clone())
                        .map(|a| a.map_or_else(Invocation::Print, |_| Invocation::Fleet(argv)))
                }
                "serve" | "top" | "plot" => {
                    let argv: Vec<String> = shm
                        .map(|shm| format!("--shm={shm}"))
                        .into_iter()
                        .chain(parser.rest().map_err(|e| e.0)?)
                        .collect();
                    match word.as_str() {
                        "serve" => serve::parse(argv.clone())
                            .map(|a| a.map_or_else(Invocation::Print, |_| Invocation::Serve(argv))),
                        "top" => top::parse(argv.clone())
                            .map(|a| a.map_or_else(Invocation::Print, |_| Invocation::Top(argv))),
                        _ => plot::parse(argv.clone())
                            .map(|a| a.map_or_else(Invocation::Print, |_| Invocation::Plot(argv))),
                    }
                }
                _ => Err(format!(
                    "unexpected argument {word:?}: gpupeek takes no arguments but flags \
                     and a command ({})",
                    commands::NAMES.join(", ")
                )),
            }
        }
    }
}

/// nvidia-smi's one multi-letter option after a single dash, `-lms MS` (`-lms=MS`), as
/// `--loop-ms`: lexopt, like getopt, would read it as `-l` with the value `ms`.
fn nvidia_smi_spelling(arg: String) -> String {
    match arg.strip_prefix("-lms") {
        Some("") => "--loop-ms".to_owned(),
        Some(rest) if rest.starts_with('=') => format!("--loop-ms{rest}"),
        _ => arg,
    }
}

fn query_args(shm: Option<String>) -> query::Args {
    query::Args {
        query_gpu: String::new(),
        format: "csv".into(),
        id: None,
        shm,
        help_query_gpu: false,
        query_compute_apps: None,
        help_query_compute_apps: false,
        list_gpus: false,
        loop_s: None,
        loop_ms: None,
    }
}

fn metrics_args(shm: Option<String>) -> metrics::Args {
    metrics::Args {
        shm,
        ..metrics::Args::default()
    }
}

/// Parses the rest of the line with a command's table: its arguments, or its help.
pub(crate) fn sub<A>(
    parser: &mut Parser,
    command: &gpupeek_flags::Command<A>,
    mut args: A,
) -> Result<Result<A, String>, String> {
    match parser.parse(command, &mut args).map_err(|e| e.0)? {
        Stop::End => Ok(Ok(args)),
        Stop::Help => Ok(Err(help::render(command))),
        Stop::Word(word) => Err(format!(
            "unexpected argument {word:?} ({} takes only flags)",
            command.name
        )),
    }
}

/// The checks argparse makes after parsing, and what is printed instead of run.
fn finish(args: Args) -> Result<Invocation, String> {
    if args.color && args.no_color {
        return Err("--no-color: not allowed with --force-color (--color)".into());
    }
    if args.version {
        return Ok(Invocation::Print(format!(
            "gpupeek {}\n",
            env!("CARGO_PKG_VERSION")
        )));
    }
    if let Some(shell) = args.print_completion {
        return Ok(Invocation::Print(completion(shell)));
    }
    Ok(Invocation::Main(Box::new(args)))
}

/// `gpupeek --help`: the flags, then the commands and the template language.
pub fn main_help() -> String {
    help::render(&MAIN) + &commands::help() + outputs::HELP
}

/// Every table, for the completion scripts.
fn tree() -> Tree<'static> {
    Tree {
        program: "gpupeek",
        top: MAIN.specs(),
        commands: vec![
            ("query", commands::QUERY.about, commands::QUERY.specs()),
            (
                "metrics",
                commands::METRICS.about,
                commands::METRICS.specs(),
            ),
            ("serve", commands::SERVE.about, commands::SERVE.specs()),
            ("top", commands::TOP.about, commands::TOP.specs()),
            (
                "history",
                commands::HISTORY.about,
                commands::HISTORY.specs(),
            ),
            ("plot", commands::PLOT.about, commands::PLOT.specs()),
            ("fleet", commands::FLEET.about, commands::FLEET.specs()),
        ],
    }
}

/// The completion script for `shell`.
pub fn completion(shell: Shell) -> String {
    gpupeek_flags::complete::script(shell, &tree())
}

/// A flag that sets a `bool` field.
macro_rules! set {
    ($field:ident) => {
        |a, _| {
            a.$field = true;
            Ok(())
        }
    };
}
use set;

/// The flags' value parsers, named in the table.
fn parse_codec(s: &str) -> Result<Option<Codec>, String> {
    let (enc, dec) = match s {
        "" => return Ok(None),
        "enc" => (true, false),
        "dec" => (false, true),
        "enc,dec" => (true, true),
        _ => return Err(format!("bad codec {s:?}: use enc, dec, enc,dec or ''")),
    };
    Ok(Some(Codec { enc, dec }))
}

fn parse_power(s: &str) -> Result<Option<Power>, String> {
    match s {
        "" => Ok(None),
        "draw" => Ok(Some(Power::Draw)),
        "limit" | "draw,limit" | "limit,draw" => Ok(Some(Power::DrawLimit)),
        _ => Err(format!(
            "bad power field {s:?}: use draw, limit, draw,limit, limit,draw or ''"
        )),
    }
}

/// Widest accepted `--gpuname-width`: far beyond any GPU name, far below what
/// formatting can pad to.
pub const MAX_NAME_WIDTH: usize = 1000;

fn parse_width(s: &str) -> Result<usize, String> {
    match s.parse() {
        Ok(width) if width <= MAX_NAME_WIDTH => Ok(width),
        _ => Err(format!(
            "bad width {s:?}: use a number from 0 to {MAX_NAME_WIDTH}"
        )),
    }
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("bad interval {s:?}: use a number of seconds"))
}

impl Args {
    /// A flag of the table view given with `--format`, `--output` or `--follow`, which
    /// print a one-line output instead and would silently ignore it.
    pub fn table_flag_with_line_output(&self) -> Option<&'static str> {
        if self.format.is_none() && self.output.is_none() && !self.follow {
            return None;
        }
        [
            (self.json, "--json"),
            (self.by_user, "--by-user"),
            (self.by_container, "--by-container"),
            (self.watch.is_some(), "--watch"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }

    /// Applies `-a`.
    pub fn expand_show_all(&mut self) {
        if self.show_all {
            self.show_cmd = true;
            self.show_user = true;
            self.show_pid = true;
            self.show_fan_speed = true;
            self.show_codec = Some(Codec {
                enc: true,
                dec: true,
            });
            self.show_power = Some(Power::DrawLimit);
        }
    }
}

/// The gpustat-style flags of `argv`, for tests of what they do.
#[cfg(test)]
pub fn parse_args(argv: &[String]) -> Result<Args, String> {
    match parse(argv.to_vec())? {
        Invocation::Main(args) => Ok(*args),
        other => Err(format!("not the table's flags: {other:?}")),
    }
}
