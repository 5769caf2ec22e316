//! A thread that asks the kubelet every period, so a caller reads the latest answer
//! without waiting on the socket.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{list, DeviceMap};

/// The latest poll.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// The assignments of the last answer; empty when the last call failed (names from
    /// an older answer could be another pod's by now).
    pub map: Arc<DeviceMap>,
    /// Whether the last call succeeded.
    pub up: bool,
}

/// Polls `v1.PodResourcesLister/List` in the background.
#[derive(Debug, Clone)]
pub struct Poller {
    state: Arc<Mutex<State>>,
}

impl Poller {
    /// Asks `socket` once, then every `every` in a thread of its own, each call given
    /// `timeout`. A failing call, and the first success after failures, is said once on
    /// stderr, prefixed with `who`.
    pub fn spawn(who: &'static str, socket: PathBuf, every: Duration, timeout: Duration) -> Poller {
        let mut said = None;
        let first = poll(who, &socket, timeout, &mut said);
        let state = Arc::new(Mutex::new(first));
        let shared = Arc::clone(&state);
        let spawned = std::thread::Builder::new()
            .name("pod-resources".into())
            .spawn(move || loop {
                std::thread::sleep(every);
                let now = poll(who, &socket, timeout, &mut said);
                *shared.lock().unwrap_or_else(|p| p.into_inner()) = now;
            });
        if let Err(e) = spawned {
            say(format_args!("{who}: cannot start polling the kubelet: {e}"));
        }
        Poller { state }
    }

    /// The latest poll's result.
    pub fn current(&self) -> State {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// One call; `said` is the error last said, if the last call failed.
fn poll(who: &str, socket: &Path, timeout: Duration, said: &mut Option<String>) -> State {
    match list(socket, timeout) {
        Ok(response) => {
            if said.take().is_some() {
                say(format_args!(
                    "{who}: kubelet pod-resources {}: answering again",
                    socket.display()
                ));
            }
            State {
                map: Arc::new(DeviceMap::new(&response)),
                up: true,
            }
        }
        Err(e) => {
            let message = e.to_string();
            if said.as_ref() != Some(&message) {
                say(format_args!(
                    "{who}: kubelet pod-resources {}: {message}",
                    socket.display()
                ));
                *said = Some(message);
            }
            State::default()
        }
    }
}

/// A line on stderr; not `eprintln!`, which panics when stderr is a closed pipe.
fn say(line: std::fmt::Arguments) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
