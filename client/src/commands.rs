//! Subcommands: `gpupeek query`, `gpupeek metrics` and `gpupeek serve`.
//!
//! `main` offers every argument list to [`dispatch`] before its own (gpustat-style) flag
//! parsing; a first argument naming a subcommand is handled here, anything else is left
//! alone. Each subcommand has its own argh flags; `--flag=value` is accepted as well as
//! `--flag value`, because nvidia-smi users write `--query-gpu=...`.

use argh::FromArgs;

use crate::{metrics, query, serve, Exit, EXIT_USAGE};

/// Appended to `gpupeek --help`.
pub const HELP: &str = "
Commands (each has its own --help):
  query --query-gpu=FIELDS --format=csv[,noheader][,nounits] [-i IDS]
                    nvidia-smi-compatible CSV of the named fields
  metrics           Prometheus text exposition (for node_exporter's textfile collector)
  serve [--listen ADDR]
                    serve /metrics over HTTP (default 127.0.0.1:9477), reading the
                    segment at each scrape
";

/// Runs the subcommand named by `argv[0]`, if it names one.
pub fn dispatch(argv: &[String]) -> Option<Result<(), Exit>> {
    let (name, rest) = argv.split_first()?;
    Some(match name.as_str() {
        "query" => parse(name, rest).and_then(query::run),
        "metrics" => parse(name, rest).and_then(metrics::run),
        "serve" => parse(name, rest).and_then(serve::run),
        _ => return None,
    })
}

/// For argh's error about a subcommand named after other arguments (`gpupeek --shm x
/// query` is "Unrecognized argument: query"), the hint to put it first.
pub fn misplaced(argh_error: &str) -> Option<String> {
    let name = argh_error
        .trim_end()
        .strip_prefix("Unrecognized argument: ")?;
    matches!(name, "query" | "metrics" | "serve")
        .then(|| format!("the {name} command comes first: gpupeek {name} [its flags, --shm too]"))
}

/// Parses a subcommand's flags; `--help` prints and exits 0, bad flags exit 2.
fn parse<T: FromArgs>(name: &str, args: &[String]) -> Result<T, Exit> {
    let args = split_equals(args);
    let strs: Vec<&str> = args.iter().map(String::as_str).collect();
    T::from_args(&["gpupeek", name], &strs).map_err(|exit| match exit.status {
        Ok(()) => match crate::write_stdout(&exit.output) {
            Ok(()) => Exit::new(0, ""),
            Err(e) => e,
        },
        Err(()) => Exit::new(EXIT_USAGE, exit.output.trim_end()),
    })
}

/// `--flag=value` becomes `--flag value` (up to a `--`); `gpupeek`'s own flags too.
pub fn split_equals(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len() + 2);
    let mut iter = args.iter();
    for arg in iter.by_ref() {
        if arg == "--" {
            out.push(arg.clone());
            break;
        }
        match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                out.push(flag.to_owned());
                out.push(value.to_owned());
            }
            _ => out.push(arg.clone()),
        }
    }
    out.extend(iter.cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn long_flags_with_equals_are_split_but_values_and_short_flags_are_not() {
        assert_eq!(
            split_equals(&strings(&[
                "--query-gpu=index,name",
                "--format=csv,noheader",
                "-i",
                "0"
            ])),
            strings(&[
                "--query-gpu",
                "index,name",
                "--format",
                "csv,noheader",
                "-i",
                "0"
            ])
        );
        assert_eq!(
            split_equals(&strings(&["--", "--x=y", "a=b"])),
            strings(&["--", "--x=y", "a=b"])
        );
    }

    #[test]
    fn a_subcommand_after_other_arguments_gets_a_hint_to_put_it_first() {
        let hint = misplaced("Unrecognized argument: query\n");
        assert!(hint.unwrap().contains("gpupeek query"));
        assert_eq!(misplaced("Unrecognized argument: quest"), None);
        assert_eq!(misplaced("Required options not provided"), None);
    }

    #[test]
    fn only_subcommand_names_are_dispatched() {
        assert!(dispatch(&strings(&["-cup"])).is_none());
        assert!(dispatch(&[]).is_none());
        let Some(Err(exit)) = dispatch(&strings(&["query", "--bogus"])) else {
            panic!("query with a bad flag must fail");
        };
        assert_eq!(exit.code, EXIT_USAGE);
    }
}
