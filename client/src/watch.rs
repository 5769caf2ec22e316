//! `-i/--watch [SECS]` (gpustat's `-i`): redraw the view in place every SECS seconds,
//! with a utilisation and memory sparkline per GPU under the table.
//!
//! On a terminal it draws on the alternate screen with the cursor hidden, and reads keys
//! unbuffered with echo and signal keys off: `q` or Ctrl-C quit. Whatever ends it (a
//! key, SIGINT/SIGTERM/SIGHUP, a closed stdout, an error) the terminal's settings and
//! screen are restored, by drop guards. Off a terminal it prints one frame per interval,
//! separated by a blank line. The sparklines show the last [`HISTORY`] samples of the
//! segment's per-GPU history rings (one sample per `max(period, 1 s)`), so a fresh
//! `gpupeek -i` shows the last minutes at once; from a daemon without history rings
//! (ABI 1.0) they hold the samples this client saw (one per new publish). An asleep,
//! lost or not-responding GPU leaves a gap (its earlier memory samples are drawn against
//! its last known total). On a terminal each frame is fitted to its size, asked at every
//! redraw and at once on SIGWINCH ([`fit`]). A daemon that is not up yet, stops, or lets
//! go of the driver on request, replaces the frame with its one-line reason until it is
//! live again: only bad usage ends the loop with an error.

use std::collections::{BTreeMap, VecDeque};
use std::io::IsTerminal;
use std::time::Duration;

use gpupeek_model::{Model, Sample};
use gpupeek_shm::Segment;

use crate::template::spark_bar;
use crate::{cli, fit, Exit, EXIT_USAGE};

mod listen;

/// Samples kept per GPU.
pub const HISTORY: usize = 40;

/// Runs the watch loop on segment `name` until a quit key, a signal or a closed stdout.
/// A daemon that is not up (yet, or any more) is a line saying why, and the loop waits.
pub fn run(args: &cli::Args, name: &str, secs: f64) -> Result<(), Exit> {
    let interval = interval(secs)?;
    let mut history = History::default();
    redraw(interval, true, None, |size, _| {
        Ok(match crate::live::live_segment(name) {
            Ok((segment, snap)) => {
                history.record(&segment, &snap);
                crate::render(args, &snap)? + &history.render(size.map(|s| s.cols))
            }
            Err(exit) if exit.code == EXIT_USAGE => return Err(exit),
            Err(exit) => format!("gpupeek: waiting: {}\n", exit.message),
        })
    })
}

/// Draws `frame(size, partial)` every `interval` (from the start of one frame to the
/// next) until `q`, Ctrl-C, SIGINT/SIGTERM/SIGHUP or a closed stdout; an error from
/// `frame` ends it. With `screen` and a terminal on stdout: on the alternate screen, each
/// frame fitted to the terminal's size (asked at every frame, and a frame drawn at once
/// on SIGWINCH); otherwise each frame is printed as it is, followed by a blank line, and
/// `size` is `None`. Keys and signals are heard while a frame is being made, too: a quit
/// then ends the process at once ([`listen`]). On the screen, `waiting` (a line saying
/// what the first frame waits for) shows until the first frame does, and a frame slow to
/// make may show what it has so far through `partial` ([`Partial`]). `gpupeek -i` and
/// `gpupeek fleet -i` draw through it.
pub fn redraw(
    interval: Duration,
    screen: bool,
    waiting: Option<&str>,
    mut frame: impl FnMut(Option<fit::Size>, &Partial) -> Result<String, Exit>,
) -> Result<(), Exit> {
    let tty = screen && std::io::stdout().is_terminal();
    let listener = listen::Listener::start(tty)?;
    if let Some(line) = waiting.filter(|_| tty) {
        let size = fit::terminal_size();
        let text = size.map_or_else(|| line.to_owned(), |size| draw(line, size));
        listener.show(|| crate::write_stdout(&text))?;
    }
    loop {
        let started = std::time::Instant::now();
        if !listener.making() {
            return Ok(());
        }
        let size = tty.then(fit::terminal_size).flatten();
        let partial = Partial {
            listener: tty.then_some(&listener),
            size,
        };
        let frame = frame(size, &partial)?;
        listener.show(|| write_frame(&frame, size, tty))?;
        if listener.wait(started + interval) == Some(listen::Event::Quit) {
            return Ok(());
        }
    }
}

/// Writes `frame` to stdout: fitted to `size` on a terminal whose size is known, from the
/// top-left corner on one whose size is not, as a paragraph off a terminal.
fn write_frame(frame: &str, size: Option<fit::Size>, tty: bool) -> Result<(), Exit> {
    match size {
        Some(size) => crate::write_stdout(&draw(frame, size)),
        None if tty => {
            crate::write_stdout(&format!("\x1b[H{}\x1b[J", frame.replace('\n', "\x1b[K\n")))
        }
        None => crate::write_stdout(&format!("{frame}\n")),
    }
}

/// What a frame has so far, shown before it is made: on a terminal's screen only, where
/// it is replaced by the next (off a terminal each frame is a document of its own, so
/// there it is never shown).
pub struct Partial<'a> {
    listener: Option<&'a listen::Listener>,
    size: Option<fit::Size>,
}

impl Partial<'_> {
    /// Whether [`Self::show`] shows anything.
    pub fn wanted(&self) -> bool {
        self.listener.is_some()
    }

    /// Shows `frame` now, in place, as [`redraw`] shows a frame; a quit heard while it is
    /// written ends the process, as one heard while a frame is made does.
    pub fn show(&self, frame: &str) -> Result<(), Exit> {
        let Some(listener) = self.listener else {
            return Ok(());
        };
        listener.show(|| write_frame(frame, self.size, true))?;
        listener.resume();
        Ok(())
    }
}

/// The escape sequences that redraw the screen from its top-left corner with `frame`
/// fitted to `size`. Each row is cleared before it is written (clearing after a line as
/// wide as the screen would erase its last cell), and the last row gets no newline, so
/// a full screen never scrolls.
fn draw(frame: &str, size: fit::Size) -> String {
    let lines = fit::frame(frame, size);
    let mut out = String::from("\x1b[H");
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push_str("\r\n");
        }
        out.push_str("\x1b[2K");
        out.push_str(line);
    }
    if lines.len() < size.rows {
        // Below the frame: cleared from the start of the next row down.
        out.push_str(if lines.is_empty() {
            "\x1b[J"
        } else {
            "\r\n\x1b[J"
        });
    }
    out
}

/// Longest `--watch` interval, a day: any longer and the deadline could overflow.
pub const MAX_INTERVAL_SECS: f64 = 86_400.0;

/// The redraw interval `--watch SECS` asks for; a usage error outside 0.01 s to a day.
/// Checked before the segment is opened, so bad usage is reported as such even with no
/// daemon running.
pub fn interval(secs: f64) -> Result<Duration, Exit> {
    if !(0.01..=MAX_INTERVAL_SECS).contains(&secs) {
        return Err(Exit::new(
            EXIT_USAGE,
            format!(
                "--watch {secs}: the interval must be from 0.01 to {MAX_INTERVAL_SECS} seconds"
            ),
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Utilisation and memory percent per GPU, one sample per publish seen; `None` is a gap.
#[derive(Default)]
struct History {
    generation: Option<u64>,
    gpus: BTreeMap<u32, VecDeque<Pair>>,
    /// Each GPU's memory total when last known, MiB: a lost or asleep GPU reports
    /// none, and its earlier samples are still drawn against it (or as gaps).
    totals: BTreeMap<u32, u64>,
}

/// Utilisation and memory percent of one sample.
type Pair = (Option<u32>, Option<u32>);

impl History {
    fn record(&mut self, segment: &Segment, snap: &gpupeek_shm::Snapshot) {
        if self.load_segment(segment, snap) {
            return;
        }
        if self.generation == Some(snap.generation) {
            return;
        }
        self.generation = Some(snap.generation);
        for g in &Model::new(snap).gpus {
            let util = g.util_pct.map(|u| u.min(100));
            let mem = g
                .memory
                .filter(|m| m.total.0 > 0)
                .map(|m| (100 * m.used.0 / m.total.0).min(100) as u32);
            let ring = self.gpus.entry(g.index).or_default();
            if ring.len() == HISTORY {
                ring.pop_front();
            }
            ring.push_back((util, mem));
        }
    }

    /// Replaces the rings with the segment's history; false when it has none.
    fn load_segment(&mut self, segment: &Segment, snap: &gpupeek_shm::Snapshot) -> bool {
        if !segment.geometry().has_history() {
            return false;
        }
        self.gpus.clear();
        let rings = segment.histories(snap, HISTORY);
        for g in &Model::new(snap).gpus {
            // A ring that cannot be read (a writer died mid-append) shows as empty.
            let samples = rings
                .iter()
                .find(|(index, _)| *index == g.index)
                .map_or(&[][..], |(_, h)| &h.samples[..]);
            if let Some(total) = g.memory.map(|m| m.total.mib()).filter(|&t| t > 0) {
                self.totals.insert(g.index, total);
            }
            let total_mib = self.totals.get(&g.index).copied();
            let ring = samples
                .iter()
                .map(|s| {
                    let s = Sample::new(s);
                    let mem = s
                        .mem_used_mib
                        .zip(total_mib)
                        .map(|(used, total)| (u64::from(used) * 100 / total).min(100) as u32);
                    (s.util_pct.map(|u| u.min(100)), mem)
                })
                .collect();
            self.gpus.insert(g.index, ring);
        }
        true
    }

    /// A line per GPU: `[i] util SPARKLINE mem SPARKLINE`, each sparkline the newest
    /// samples that let the line fit in `cols` columns (all [`HISTORY`] off a terminal).
    fn render(&self, cols: Option<usize>) -> String {
        let mut out = String::new();
        for (index, ring) in &self.gpus {
            let head = format!("[{index}] util ");
            let samples = cols.map_or(HISTORY, |cols| {
                (cols.saturating_sub(head.chars().count() + " mem ".len()) / 2).min(HISTORY)
            });
            let newest = ring.iter().skip(ring.len().saturating_sub(samples));
            let line = |pick: fn(&Pair) -> Option<u32>| -> String {
                newest
                    .clone()
                    .map(|s| pick(s).map_or(' ', |p| spark_bar(f64::from(p) / 100.0)))
                    .collect()
            };
            out.push_str(&format!(
                "{head}{:<samples$} mem {}\n",
                line(|s| s.0),
                line(|s| s.1),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparklines_scale_percent_to_eight_levels_and_gap_asleep_samples() {
        let mut h = History::default();
        let ring = h.gpus.entry(0).or_default();
        ring.extend([
            (Some(0), Some(100)),
            (Some(50), Some(50)),
            (None, None),
            (Some(100), Some(0)),
        ]);
        let text = h.render(None);
        assert!(text.starts_with("[0] util ▁▅ █"), "{text}");
        assert!(text.trim_end().ends_with("mem █▅ ▁"), "{text}");
    }

    #[test]
    fn sparklines_keep_the_newest_samples_that_fit_the_width() {
        let mut h = History::default();
        for index in [0, 10] {
            let ring = h.gpus.entry(index).or_default();
            ring.extend((0..HISTORY as u32).map(|n| (Some(n * 2), Some(50))));
            ring.push_back((Some(100), None));
        }
        let wide = h.render(None);
        assert_eq!(fit::width(wide.lines().next().unwrap()), 9 + 40 + 5 + 40);
        for cols in [120, 95, 80, 60, 20, 10] {
            for line in h.render(Some(cols)).lines() {
                assert!(
                    fit::width(line) <= cols.max(15),
                    "{cols}: {line:?} is {} wide",
                    fit::width(line)
                );
                // The newest sample (full utilisation, no memory reading) is kept.
                if cols >= 20 {
                    assert!(line.contains("█ mem "), "{cols}: {line:?}");
                    assert!(line.ends_with(' '), "{cols}: {line:?}");
                }
            }
        }
        let line = h.render(Some(80)).lines().next().unwrap().to_owned();
        assert_eq!(fit::width(&line), 80, "{line:?}");
    }

    #[test]
    fn watch_intervals_outside_a_hundredth_of_a_second_to_a_day_are_usage_errors() {
        assert_eq!(interval(0.5).unwrap(), Duration::from_millis(500));
        assert_eq!(interval(86_400.0).unwrap(), Duration::from_secs(86_400));
        for bad in [0.0, 0.001, -1.0, 86_400.5, 1e20, f64::INFINITY, f64::NAN] {
            let exit = interval(bad).unwrap_err();
            assert_eq!(exit.code, EXIT_USAGE, "{bad}");
            assert!(
                exit.message.contains("0.01 to 86400 seconds"),
                "{}",
                exit.message
            );
        }
    }
}
