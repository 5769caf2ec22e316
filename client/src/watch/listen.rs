//! What [`super::redraw`] listens to while it draws, on a thread of its own: `q`, `Q` or
//! Ctrl-C on stdin (a terminal's keys are read unbuffered, with echo and signal keys
//! off), SIGINT, SIGTERM and SIGHUP (quit) and SIGWINCH (draw again at once).
//!
//! Listening beside the drawing rather than between frames means that a frame that takes
//! long (a fleet round waits up to its `--timeout` for a host that does not answer) never
//! holds a quit back: a quit that comes while a frame is being made restores the terminal
//! and ends the process from this thread, with status 0 as a quit between frames has, the
//! frame left unfinished. The terminal is restored however the loop ends, by drop.

use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::termios::{self, LocalFlags, SetArg, SpecialCharacterIndices, Termios};
use signal_hook::SigId;

use crate::{Exit, EXIT_OS};

/// What the listener heard between frames.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// `q`, Ctrl-C or a signal to stop.
    Quit,
    /// The terminal was resized.
    Resize,
}

/// The listening thread and the terminal state it shares with the drawing one.
pub struct Listener {
    events: mpsc::Receiver<Event>,
    shared: Arc<Mutex<Shared>>,
    /// Written to when the listener is dropped, to end the thread.
    stop: UnixStream,
    signals: Vec<SigId>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    /// A frame is being made: a quit ends the process at once.
    busy: bool,
    /// A quit was heard between frames.
    quit: bool,
    terminal: Terminal,
}

/// What to put back on the terminal: its settings before its keys were read raw, and the
/// normal screen (and cursor) when the alternate one is on.
struct Terminal {
    saved: Option<Termios>,
    screen: bool,
}

impl Terminal {
    fn restore(&mut self) {
        if std::mem::take(&mut self.screen) {
            let _ = crate::write_stdout("\x1b[?25h\x1b[?1049l");
        }
        if let Some(saved) = self.saved.take() {
            let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &saved);
        }
    }
}

impl Listener {
    /// Reads a terminal stdin's keys raw, switches to the alternate screen (hiding the
    /// cursor) with `screen`, and starts listening.
    pub fn start(screen: bool) -> Result<Listener, Exit> {
        let os = |what: &str, e: std::io::Error| Exit::new(EXIT_OS, format!("{what}: {e}"));
        let (quit_rx, quit_tx) = UnixStream::pair().map_err(|e| os("cannot handle signals", e))?;
        let (resize_rx, resize_tx) =
            UnixStream::pair().map_err(|e| os("cannot handle signals", e))?;
        let (stop_rx, stop) = UnixStream::pair().map_err(|e| os("cannot start", e))?;
        let mut signals = Vec::new();
        let hooks = [
            (signal_hook::consts::SIGINT, &quit_tx),
            (signal_hook::consts::SIGTERM, &quit_tx),
            (signal_hook::consts::SIGHUP, &quit_tx),
            (signal_hook::consts::SIGWINCH, &resize_tx),
        ];
        for (signal, pipe) in hooks {
            let pipe = pipe
                .try_clone()
                .map_err(|e| os("cannot handle signals", e))?;
            let id = signal_hook::low_level::pipe::register(signal, pipe)
                .map_err(|e| os("cannot handle signals", e))?;
            signals.push(id);
        }
        let shared = Arc::new(Mutex::new(Shared {
            busy: false,
            quit: false,
            terminal: Terminal {
                saved: raw_keys(),
                screen: false,
            },
        }));
        let (tx, rx) = mpsc::channel();
        let mut listener = Listener {
            events: rx,
            shared: Arc::clone(&shared),
            stop,
            signals,
            thread: None,
        };
        if screen {
            crate::write_stdout("\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J")?;
            listener.lock().terminal.screen = true;
        }
        let pipes = Pipes {
            stop: stop_rx,
            quit: quit_rx,
            resize: resize_rx,
        };
        let thread = std::thread::Builder::new()
            .name("keys".into())
            .stack_size(64 << 10)
            .spawn(move || listen(&pipes, &shared, &tx))
            .map_err(|e| os("cannot start", e))?;
        listener.thread = Some(thread);
        Ok(listener)
    }

    /// A frame is about to be made: false when a quit came before it (then there is no
    /// frame to make); from here until [`Self::show`], a quit ends the process.
    pub fn making(&self) -> bool {
        let mut shared = self.lock();
        shared.busy = !shared.quit;
        shared.busy
    }

    /// After a partial frame was shown ([`Self::show`]), the frame is being made again:
    /// a quit heard meanwhile ends the process now, as one heard while making it does.
    pub fn resume(&self) {
        let mut shared = self.lock();
        if shared.quit {
            shared.terminal.restore();
            std::process::exit(0);
        }
        shared.busy = true;
    }

    /// Shows the frame made: `write` runs with quits held back (they are heard after it).
    pub fn show<T>(&self, write: impl FnOnce() -> T) -> T {
        let mut shared = self.lock();
        shared.busy = false;
        write()
    }

    /// Waits until `deadline` or an event, whichever comes first.
    pub fn wait(&self, deadline: Instant) -> Option<Event> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.events.recv_timeout(left) {
            Ok(event) => Some(event),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // The thread is gone (it only ends after a quit): wait as a timer would.
                std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                None
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.lock().busy = false;
        let _ = std::io::Write::write_all(&mut &self.stop, b"x");
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        for id in self.signals.drain(..) {
            signal_hook::low_level::unregister(id);
        }
        self.lock().terminal.restore();
    }
}

/// The read ends the thread polls.
struct Pipes {
    stop: UnixStream,
    quit: UnixStream,
    resize: UnixStream,
}

/// Turns off line buffering, echo and signal keys on a terminal stdin; its settings
/// before, `None` when stdin is no terminal.
fn raw_keys() -> Option<Termios> {
    let stdin = std::io::stdin();
    let saved = termios::tcgetattr(stdin.as_fd()).ok()?;
    let mut raw = saved.clone();
    raw.local_flags
        .remove(LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ISIG);
    raw.control_chars[SpecialCharacterIndices::VMIN as usize] = 1;
    raw.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
    termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw).ok()?;
    Some(saved)
}

/// The thread: until stopped or a quit, passes resizes on and handles a quit (see
/// [`quit`]). Stdin is read until it ends (a closed pipe, `/dev/null`): keys are optional.
fn listen(pipes: &Pipes, shared: &Mutex<Shared>, events: &mpsc::Sender<Event>) {
    let stdin = std::io::stdin();
    let mut keys_open = true;
    loop {
        let (stop, quit_signal, resize, key) = {
            let mut fds = vec![
                PollFd::new(pipes.stop.as_fd(), PollFlags::POLLIN),
                PollFd::new(pipes.quit.as_fd(), PollFlags::POLLIN),
                PollFd::new(pipes.resize.as_fd(), PollFlags::POLLIN),
            ];
            if keys_open {
                fds.push(PollFd::new(stdin.as_fd(), PollFlags::POLLIN));
            }
            match nix::poll::poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(Errno::EINTR) => {}
                // Nothing to listen to that can be listened to: quits end between frames.
                Err(_) => return,
            }
            let ready = |i: usize| {
                fds.get(i).and_then(PollFd::revents).is_some_and(|r| {
                    r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)
                })
            };
            (ready(0), ready(1), ready(2), ready(3))
        };
        if stop {
            return;
        }
        if resize {
            drain(&pipes.resize);
            let _ = events.send(Event::Resize);
        }
        let mut quit_now = quit_signal;
        if key {
            let mut buf = [0u8; 64];
            match stdin.lock().read(&mut buf) {
                Ok(0) => keys_open = false,
                Ok(n) => quit_now |= buf[..n].iter().any(|&b| matches!(b, b'q' | b'Q' | 0x03)),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => keys_open = false,
            }
        }
        if quit_now {
            return quit(shared, events);
        }
    }
}

/// A quit: while a frame is being made, the terminal is restored and the process ends
/// here (status 0); between frames, the drawing thread is told.
fn quit(shared: &Mutex<Shared>, events: &mpsc::Sender<Event>) {
    let mut shared = shared.lock().unwrap_or_else(PoisonError::into_inner);
    if shared.busy {
        shared.terminal.restore();
        std::process::exit(0);
    }
    shared.quit = true;
    let _ = events.send(Event::Quit);
}

/// Reads what the signal handlers wrote (a byte per signal, as many as came).
fn drain(pipe: &UnixStream) {
    let _ = pipe.set_nonblocking(true);
    let mut buf = [0u8; 64];
    while matches!((&mut &*pipe).read(&mut buf), Ok(n) if n > 0) {}
}
