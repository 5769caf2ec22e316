//! Whole-process cost, interleaved: `oneshot-bench ROUNDS NAME=COMMAND...` runs every
//! command once per round, in turn (fast ones 20 times a round), stdout and stderr to
//! /dev/null, and reports per command the fastest and median wall time from spawn to
//! exit, and the ratio of medians to the first command (the baseline, e.g. `/bin/true`).
//!
//! Interleaving means load that comes and goes on the machine hits every command alike,
//! so the ratios stay meaningful on a busy machine where absolute times do not. All
//! commands get the same environment (the caller's). COMMAND is split on spaces.
//! A command that exits non-zero stops the run: a failing command measures nothing.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Case {
    name: String,
    argv: Vec<String>,
    samples: Vec<Duration>,
}

/// Commands faster than this are run this many times a round.
const FAST: Duration = Duration::from_millis(30);
const FAST_REPEAT: usize = 20;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((rounds, specs)) = args.split_first() else {
        eprintln!("usage: oneshot-bench ROUNDS NAME=COMMAND...");
        std::process::exit(2);
    };
    let rounds: usize = rounds.parse().expect("ROUNDS is a number");
    let mut cases: Vec<Case> = specs
        .iter()
        .map(|spec| {
            let (name, cmd) = spec.split_once('=').expect("NAME=COMMAND");
            Case {
                name: name.to_owned(),
                argv: cmd.split(' ').map(str::to_owned).collect(),
                samples: Vec::new(),
            }
        })
        .collect();
    for case in &mut cases {
        run(case); // warm-up: page cache, Python's bytecode cache
    }
    for _ in 0..rounds {
        for case in &mut cases {
            let fast = case.samples.last().is_some_and(|&t| t < FAST);
            for _ in 0..if fast { FAST_REPEAT } else { 1 } {
                let t = run(case);
                case.samples.push(t);
            }
        }
    }
    let median = |c: &Case| {
        let mut s = c.samples.clone();
        s.sort();
        (s[0], s[s.len() / 2])
    };
    let base = median(&cases[0]).1.as_secs_f64();
    println!(
        "{:<28} {:>7} {:>12} {:>12} {:>10}",
        "command", "runs", "min", "median", "x baseline"
    );
    for case in &cases {
        let (min, med) = median(case);
        println!(
            "{:<28} {:>7} {:>12.3?} {:>12.3?} {:>10.2}",
            case.name,
            case.samples.len(),
            min,
            med,
            med.as_secs_f64() / base
        );
    }
}

fn run(case: &Case) -> Duration {
    let t = Instant::now();
    let status = Command::new(&case.argv[0])
        .args(&case.argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let elapsed = t.elapsed();
    if !status.success() {
        eprintln!(
            "oneshot-bench: {} failed: {status} ({})",
            case.name,
            case.argv.join(" ")
        );
        std::process::exit(1);
    }
    elapsed
}
