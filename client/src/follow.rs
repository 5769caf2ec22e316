//! `--follow`: a long-lived client that prints one line per daemon update, for
//! streaming status-bar modules (waybar without `interval`, polybar `tail = true`,
//! i3blocks `interval=persist`).
//!
//! Between updates it sleeps in the kernel on the segment's generation word (a futex the
//! daemon wakes after each publish), so it uses no CPU and sees a publish as soon as it
//! is made. A timed fallback (three periods, at least a second) catches a daemon that
//! died without waking anyone: the follower then prints the output's "down" line
//! (`stopped` class: daemon not responding / no daemon) once and keeps waiting. A daemon
//! that let go of the driver on request keeps its heartbeat: the follower prints the
//! `released` line once and goes on waiting for publishes. A restarted daemon either takes the same object over (its first publish wakes the
//! follower) or re-creates it, which the follower notices at its next timeout and
//! reopens. Only a closed stdout, or bad usage, ends it. An `--id` that named a MIG
//! instance which a reconfiguration then destroyed is not bad usage: the follower prints
//! the output's `error` line (the tooltip says which instance is gone) until the
//! instance is back; an `--id` that names nothing at the first live publish is.

use std::time::Duration;

use gpupeek_shm::Segment;

use crate::outputs::Renderer;
use crate::select::Select;
use crate::{Exit, EXIT_USAGE};

/// How long to sleep between attempts to open a segment that is not there.
const REOPEN_INTERVAL: Duration = Duration::from_secs(1);

/// Follows segment `name` until stdout closes.
pub fn run(renderer: &Renderer, name: &str, ids: Option<&[Select]>) -> Result<(), Exit> {
    let mut printed = String::new();
    let mut named = false;
    loop {
        let segment = match Segment::open(name) {
            Ok(segment) => segment,
            Err(e) => {
                let exit = Exit::from(e);
                if exit.code == EXIT_USAGE {
                    return Err(exit);
                }
                show(&renderer.down(&exit), &mut printed, false)?;
                std::thread::sleep(REOPEN_INTERVAL);
                continue;
            }
        };
        follow(renderer, &segment, ids, &mut printed, &mut named)?;
    }
}

/// Prints a line per publish of `segment` until it is replaced by another object.
fn follow(
    renderer: &Renderer,
    segment: &Segment,
    ids: Option<&[Select]>,
    printed: &mut String,
    named: &mut bool,
) -> Result<(), Exit> {
    let epoch = segment.current_epoch();
    let mut seen = None;
    loop {
        let generation = segment.generation();
        let new = seen != Some(generation);
        seen = Some(generation);
        let (line, period_ns, live) = match segment.snapshot() {
            Ok(snap) => {
                let period_ns = snap.status.period_ns;
                let live = crate::check_live(
                    segment.name(),
                    snap.liveness(gpupeek_shm::mono_now_ns()),
                    period_ns,
                );
                match live {
                    Ok(()) => {
                        let history = segment.histories(&snap, renderer.history());
                        match renderer.live(&snap, &history, ids) {
                            Ok(line) => {
                                *named = true;
                                (line, period_ns, true)
                            }
                            Err(gone) if *named => (renderer.down(&gone), period_ns, false),
                            Err(bad) => return Err(bad),
                        }
                    }
                    Err(exit) => (renderer.down(&exit), period_ns, false),
                }
            }
            Err(e) => (renderer.down(&Exit::from(e)), 0, false),
        };
        // A line per publish; a repeated "down" line only when it changes.
        show(&line, printed, new && live)?;
        if segment.wait_publish(generation, period_ns, epoch).is_none() {
            return Ok(());
        }
    }
}

/// Writes `line` when `always`, or when it differs from the last one written.
fn show(line: &str, printed: &mut String, always: bool) -> Result<(), Exit> {
    if always || line != printed {
        crate::write_stdout(line)?;
        line.clone_into(printed);
    }
    Ok(())
}
