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
//! (ABI 1.0) they hold the samples this client saw (one per new publish). An asleep GPU,
//! or one whose driver is not responding, leaves a gap. A daemon that stops, or lets go
//! of the driver on request, replaces the frame with its one-line reason until it is
//! live again.

use std::collections::{BTreeMap, VecDeque};
use std::io::{IsTerminal, Read};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gpupeek_model::{Model, Sample};
use gpupeek_shm::Segment;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::termios::{self, LocalFlags, SetArg, SpecialCharacterIndices, Termios};

use crate::template::spark_bar;
use crate::{cli, Exit, EXIT_USAGE};

/// Samples kept per GPU.
pub const HISTORY: usize = 40;

/// Runs the watch loop until a quit key, a signal or a closed stdout.
pub fn run(args: &cli::Args, segment: &Segment, secs: f64) -> Result<(), Exit> {
    let interval = interval(secs)?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| Exit::new(crate::EXIT_OS, format!("cannot handle signals: {e}")))?;
    }
    let tty = std::io::stdout().is_terminal();
    let _raw = RawKeys::enter();
    let _screen = tty.then(Screen::enter).transpose()?;
    let mut history = History::default();
    let mut keys_open = true;
    loop {
        let frame = match crate::live::live_snapshot(segment.name()) {
            Ok(snap) => {
                history.record(segment, &snap);
                crate::render(args, &snap)? + &history.render()
            }
            Err(exit) if exit.code == EXIT_USAGE => return Err(exit),
            Err(exit) => format!("gpupeek: {}\n", exit.message),
        };
        if tty {
            crate::write_stdout(&format!("\x1b[H{}\x1b[J", frame.replace('\n', "\x1b[K\n")))?;
        } else {
            crate::write_stdout(&format!("{frame}\n"))?;
        }
        if wait_for_quit(interval, &stop, &mut keys_open) {
            return Ok(());
        }
    }
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

/// Sleeps for `interval`, returning early (true) on `q`, Ctrl-C or a signal.
fn wait_for_quit(interval: Duration, stop: &AtomicBool, keys_open: &mut bool) -> bool {
    let stdin = std::io::stdin();
    let deadline = std::time::Instant::now() + interval;
    loop {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        let ms = PollTimeout::try_from(left.as_millis().clamp(1, 60_000) as u32)
            .unwrap_or(PollTimeout::MAX);
        if !*keys_open {
            std::thread::sleep(left.min(Duration::from_millis(200)));
            continue;
        }
        let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
        if nix::poll::poll(&mut fds, ms).unwrap_or(0) == 0 {
            continue;
        }
        let mut buf = [0u8; 64];
        match stdin.lock().read(&mut buf) {
            Ok(0) | Err(_) => *keys_open = false,
            Ok(n) => {
                if buf[..n].iter().any(|&b| matches!(b, b'q' | b'Q' | 0x03)) {
                    return true;
                }
            }
        }
    }
}

/// The terminal's settings before we changed them; restored on drop.
struct RawKeys(Termios);

impl RawKeys {
    /// Turns off line buffering, echo and signal keys on a terminal stdin.
    fn enter() -> Option<RawKeys> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).ok()?;
        let mut raw = saved.clone();
        raw.local_flags
            .remove(LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ISIG);
        raw.control_chars[SpecialCharacterIndices::VMIN as usize] = 1;
        raw.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
        termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw).ok()?;
        Some(RawKeys(saved))
    }
}

impl Drop for RawKeys {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &self.0);
    }
}

/// The alternate screen with the cursor hidden; the normal screen back on drop.
struct Screen;

impl Screen {
    fn enter() -> Result<Screen, Exit> {
        crate::write_stdout("\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J")?;
        Ok(Screen)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = crate::write_stdout("\x1b[?25h\x1b[?1049l");
    }
}

/// Utilisation and memory percent per GPU, one sample per publish seen.
#[derive(Default)]
struct History {
    generation: Option<u64>,
    gpus: BTreeMap<u32, VecDeque<Option<(u32, u32)>>>,
}

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
            let sample = g.util_pct.map(|util| {
                let mem = g.memory.map_or(0, |m| 100 * m.used.0 / m.total.0.max(1));
                (util.min(100), mem.min(100) as u32)
            });
            let ring = self.gpus.entry(g.index).or_default();
            if ring.len() == HISTORY {
                ring.pop_front();
            }
            ring.push_back(sample);
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
            let total_mib = g.memory.map_or(0, |m| m.total.mib()).max(1);
            let ring = samples
                .iter()
                .map(|s| {
                    let s = Sample::new(s);
                    s.util_pct.map(|util| {
                        let mem = s.mem_used_mib.map_or(0, |m| u64::from(m) * 100 / total_mib);
                        (util.min(100), mem.min(100) as u32)
                    })
                })
                .collect();
            self.gpus.insert(g.index, ring);
        }
        true
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for (index, ring) in &self.gpus {
            let line = |pick: fn((u32, u32)) -> u32| -> String {
                ring.iter()
                    .map(|s| s.map_or(' ', |s| spark_bar(f64::from(pick(s)) / 100.0)))
                    .collect()
            };
            out.push_str(&format!(
                "[{index}] util {:<width$} mem {}\n",
                line(|s| s.0),
                line(|s| s.1),
                width = HISTORY
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
        ring.extend([Some((0, 100)), Some((50, 50)), None, Some((100, 0))]);
        let text = h.render();
        assert!(text.starts_with("[0] util ▁▅ █"), "{text}");
        assert!(text.trim_end().ends_with("mem █▅ ▁"), "{text}");
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
