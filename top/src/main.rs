//! `gpupeek-top`: an interactive monitor of the GPUs and their processes, read from
//! gpupeekd's shared-memory segment through the model (no driver call), `gpupeek top`'s
//! program.
//!
//! Three threads feed one loop over a channel, so that the process sleeps in the kernel
//! until something happens: [`source`] waits on the segment's generation word for the
//! daemon's next publish (or a timeout of three periods that notices a dead daemon),
//! one thread blocks reading the terminal (keys, mouse, resizes), and one waits for
//! SIGTERM, SIGHUP and SIGINT. Whatever ends it (q, Esc, Ctrl-C, those signals, a
//! panic) the terminal is restored: raw mode, the alternate screen, the mouse and the
//! cursor. A missing, restarting, stopped or stale daemon never ends it: it says so
//! and waits.
//!
//! Its flags are `gpupeek top`'s, from the `gpupeek` library's table
//! ([`gpupeek::monitor`]): `gpupeek top` parses them, then executes this program.
//!
//! Exit status: 0 quit (a key or a signal), 2 bad usage, a bad segment name or no
//! terminal (one line on stderr), 9 a terminal that cannot be set up or written.

mod app;
mod host;
mod source;
mod text;
mod ui;

use std::io::IsTerminal;
use std::sync::mpsc;

use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::{cursor, execute};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use gpupeek::monitor::{self, Args, Exit, EXIT_OS, EXIT_USAGE};

use crate::app::{Action, App};
use crate::host::HostReader;

/// What wakes the main loop.
pub enum Event {
    /// The daemon published (or is down).
    Feed(Box<source::Feed>),
    /// A key, the mouse or a resize.
    Input(crossterm::event::Event),
    /// SIGTERM, SIGHUP or SIGINT, or the terminal gone.
    Signal,
    /// The segment can never be opened (a bad name).
    Fatal(String),
}

fn main() -> std::process::ExitCode {
    let result = monitor::command_line().and_then(|args| match args {
        None => Ok(()),
        Some(args) => run(args).map_err(|(code, message)| Exit::new(code, message)),
    });
    monitor::exit_status(result).into()
}

/// Puts the terminal back as it was: on drop, and from the panic hook.
fn restore() {
    let _ = execute!(
        std::io::stdout(),
        DisableMouseCapture,
        LeaveAlternateScreen,
        cursor::Show
    );
    let _ = terminal::disable_raw_mode();
}

struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        restore();
    }
}

fn run(args: Args) -> Result<(), (u8, String)> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err((
            EXIT_USAGE,
            "needs a terminal (for one-shot output use gpupeek)".into(),
        ));
    }
    let no_color_env = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let color = !(args.no_color || no_color_env);
    let name = gpupeek_shm::resolve_name(args.shm.as_deref());
    let (tx, rx) = mpsc::channel();
    let os = |what: &str, e: std::io::Error| (EXIT_OS, format!("{what}: {e}"));
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGINT,
    ])
    .map_err(|e| os("cannot handle signals", e))?;
    let signal_tx = tx.clone();
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let _ = signal_tx.send(Event::Signal);
        }
    });

    terminal::enable_raw_mode().map_err(|e| os("cannot set up the terminal", e))?;
    let _restore = Restore;
    let default_hook = std::panic::take_hook();
    // A panic on any thread restores the terminal, is reported, and ends the process
    // (the release build aborts anyway; a debug build must not go on without a thread).
    std::panic::set_hook(Box::new(move |info| {
        restore();
        default_hook(info);
        std::process::exit(101);
    }));
    execute!(
        std::io::stdout(),
        EnterAlternateScreen,
        EnableMouseCapture,
        cursor::Hide
    )
    .map_err(|e| os("cannot set up the terminal", e))?;
    let mut term = Terminal::new(CrosstermBackend::new(std::io::stdout()))
        .map_err(|e| os("cannot set up the terminal", e))?;

    source::spawn(name, tx.clone());
    let input_tx = tx;
    std::thread::spawn(move || {
        while let Ok(ev) = crossterm::event::read() {
            if input_tx.send(Event::Input(ev)).is_err() {
                return;
            }
        }
        // The terminal is gone (a hang-up without SIGHUP): nobody is left to watch.
        let _ = input_tx.send(Event::Signal);
    });

    let hostname = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut app = App::new(hostname, nix::unistd::getuid().as_raw(), color);
    let mut host = HostReader::new(std::path::Path::new("/proc"));
    let mut dirty = true;
    loop {
        if dirty {
            term.draw(|f| ui::draw(f, &mut app))
                .map_err(|e| os("cannot draw", e))?;
        }
        let Ok(event) = rx.recv() else {
            return Ok(());
        };
        dirty = match event {
            Event::Feed(feed) => {
                app.update(*feed, host.read());
                true
            }
            Event::Input(ev) => match app.on_event(&ev) {
                Action::Quit => return Ok(()),
                Action::Redraw => true,
                Action::Nothing => false,
            },
            Event::Signal => return Ok(()),
            Event::Fatal(message) => return Err((EXIT_USAGE, message)),
        };
    }
}
