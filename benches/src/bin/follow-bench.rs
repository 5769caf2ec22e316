//! Follow-mode latency and cost: `follow-bench SEGMENT SECONDS COMMAND [ARGS...]` runs
//! COMMAND (a `gpupeek --follow` against SEGMENT's live daemon) for SECONDS and, for every
//! line it prints, measures publish -> line latency: the daemon's heartbeat in the status
//! record (`CLOCK_MONOTONIC`, taken just before the generation bump that wakes
//! followers) to `CLOCK_MONOTONIC` when this program's blocking read returns the line.
//!
//! Pairing a line with its publish: after each line, the generation and the status are
//! read (retried until the generation is the same on both sides of the status read).
//! The line is paired only when that generation is exactly one past the previous
//! paired line's and its heartbeat is not later than the line's receipt; otherwise (the
//! follower coalesced two publishes, or a new publish came between the line and this
//! read) the line is counted as unpaired and left out, never guessed. The first line
//! (printed at start-up, not for a publish) is skipped.
//!
//! The follower's cost is taken from /proc between the first and the last paired line:
//! CPU time from `schedstat` (ns on CPU) and from `stat` (utime+stime, in clock ticks),
//! and voluntary / involuntary context switches from `status`, each per update.
//! Prints one row: `updates unpaired p50 p99 max cpu_us/update ticks vol/update invol/update`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpupeek_shm::{mono_now_ns, Segment};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: follow-bench SEGMENT SECONDS COMMAND [ARGS...]");
        std::process::exit(2);
    }
    let segment = Segment::open(&args[0]).expect("open segment");
    let seconds: u64 = args[1].parse().expect("seconds");
    let mut child = Command::new(&args[2])
        .args(&args[3..])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn follower");
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    lines.next().expect("a first line").expect("readable");
    let (latencies, unpaired, first, last) = measure(&segment, &mut lines, pid, seconds);
    let _ = child.kill();
    let _ = child.wait();
    report(&latencies, unpaired, &first, &last);
}

/// Reads lines for `seconds`; returns the paired latencies (ns), the unpaired count,
/// and the follower's counters at the first and at the last paired line.
fn measure(
    segment: &Segment,
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    pid: u32,
    seconds: u64,
) -> (Vec<u64>, u64, Counters, Counters) {
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut latencies = Vec::new();
    let mut unpaired = 0;
    let mut previous: Option<u64> = None;
    let (mut first, mut last) = (None, Counters::default());
    while Instant::now() < end {
        let Some(Ok(_line)) = lines.next() else {
            panic!("the follower stopped");
        };
        let received = mono_now_ns();
        let (generation, heartbeat) = publish(segment);
        let follows = previous.is_none_or(|p| generation == p + 1);
        previous = Some(generation);
        if !follows || heartbeat > received {
            unpaired += 1;
            continue;
        }
        let counters = Counters::of(pid);
        if first.is_none() {
            // The window opens at the first paired line: its latency is not counted.
            first = Some(counters);
            continue;
        }
        last = counters;
        latencies.push(received - heartbeat);
    }
    (latencies, unpaired, first.unwrap_or_default(), last)
}

/// The newest publish: (generation, heartbeat ns), read consistently.
fn publish(segment: &Segment) -> (u64, u64) {
    loop {
        let before = segment.generation();
        let status = segment.status().expect("status record");
        if segment.generation() == before {
            return (before, status.heartbeat_mono_ns);
        }
    }
}

/// A process's CPU time and context switches.
#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    cpu_ns: u64,
    ticks: u64,
    voluntary: u64,
    involuntary: u64,
}

impl Counters {
    fn of(pid: u32) -> Self {
        let read = |file: &str| std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap();
        let schedstat = read("schedstat");
        let stat = read("stat");
        // Fields after the command (which may hold spaces) start after the last ')'.
        let after: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let status = read("status");
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map_or(0, |v| v.trim().parse().unwrap())
        };
        Counters {
            cpu_ns: schedstat.split(' ').next().unwrap().parse().unwrap(),
            // utime and stime are fields 14 and 15 of stat, 12 and 13 after the command.
            ticks: after[11].parse::<u64>().unwrap() + after[12].parse::<u64>().unwrap(),
            voluntary: field("voluntary_ctxt_switches:"),
            involuntary: field("nonvoluntary_ctxt_switches:"),
        }
    }
}

fn report(latencies: &[u64], unpaired: u64, first: &Counters, last: &Counters) {
    let mut sorted = latencies.to_vec();
    sorted.sort_unstable();
    let n = sorted.len().max(1) as u64;
    let at = |q: f64| sorted.get(((sorted.len() as f64 - 1.0) * q).round() as usize);
    let us = |v: Option<&u64>| v.map_or("-".into(), |ns| format!("{:.0}", *ns as f64 / 1e3));
    let per = |a: u64, b: u64| format!("{:.2}", (b - a) as f64 / n as f64);
    println!(
        "{:>7} {:>8} {:>8} {:>8} {:>8} {:>10.1} {:>6} {:>9} {:>9}",
        sorted.len(),
        unpaired,
        us(at(0.5)),
        us(at(0.99)),
        us(sorted.last()),
        (last.cpu_ns - first.cpu_ns) as f64 / 1e3 / n as f64,
        last.ticks - first.ticks,
        per(first.voluntary, last.voluntary),
        per(first.involuntary, last.involuntary),
    );
}
