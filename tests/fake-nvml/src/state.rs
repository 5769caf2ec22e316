//! Process-wide state: the init reference count and the current scenario,
//! re-read from `$FAKE_NVML_SCENARIO` whenever the file changes.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::scenario::Scenario;

/// Environment variable naming the scenario file.
pub const SCENARIO_ENV: &str = "FAKE_NVML_SCENARIO";

/// Environment variable that, set to `1`, makes the scenario file be read once: no call
/// after the first that parsed looks at the file again. For benchmarks, where the
/// `stat()` each call makes under the state's lock is the fake's cost, not a driver's.
pub const READ_ONCE_ENV: &str = "FAKE_NVML_SCENARIO_READ_ONCE";

/// Identifies one version of the scenario file. Besides mtime and size it
/// holds inode and ctime, so a rename-into-place or a same-size rewrite within
/// one coarse timestamp tick is still noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &Metadata) -> Self {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

struct State {
    /// Successful inits minus shutdowns.
    refcount: u64,
    /// Last scenario that parsed.
    scenario: Option<Arc<Scenario>>,
    /// Path and stamp of the file version last looked at.
    seen: Option<(std::ffi::OsString, Stamp)>,
    /// Why the file version last looked at was rejected, if it was.
    current_error: Option<String>,
}

static STATE: Mutex<State> = Mutex::new(State {
    refcount: 0,
    scenario: None,
    seen: None,
    current_error: None,
});

fn lock() -> MutexGuard<'static, State> {
    STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a call sees after the scenario check.
pub struct Snapshot {
    /// Whether the library is initialized.
    pub initialized: bool,
    /// The scenario in force (the last one that parsed).
    pub scenario: Option<Arc<Scenario>>,
    /// Why the scenario file as it is right now cannot be used, if so.
    pub current_error: Option<String>,
}

/// Whether the scenario file is read once only ([`READ_ONCE_ENV`]): nothing in it changes
/// while the library is loaded.
pub fn read_once() -> bool {
    static READ_ONCE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *READ_ONCE.get_or_init(|| std::env::var_os(READ_ONCE_ENV).is_some_and(|v| v == "1"))
}

/// Checks the scenario file with one `stat()`, re-reads it if it changed, and
/// returns the state a call should act on.
pub fn refresh() -> Snapshot {
    let read_once = read_once();
    let mut st = lock();
    if read_once && st.scenario.is_some() && st.current_error.is_none() {
        return Snapshot {
            initialized: st.refcount > 0,
            scenario: st.scenario.as_ref().map(Scenario::current),
            current_error: None,
        };
    }
    match std::env::var_os(SCENARIO_ENV) {
        None => {
            st.seen = None;
            st.current_error = Some(format!("{SCENARIO_ENV} is not set"));
        }
        Some(path) => match std::fs::metadata(&path) {
            Err(e) => {
                st.seen = None;
                st.current_error = Some(format!("cannot stat {path:?}: {e}"));
            }
            Ok(meta) => {
                let stamp = Stamp::of(&meta);
                let unchanged = matches!(&st.seen, Some((p, s)) if *p == path && *s == stamp);
                if !unchanged {
                    reload(&mut st, path);
                }
            }
        },
    }
    Snapshot {
        initialized: st.refcount > 0,
        scenario: st.scenario.as_ref().map(Scenario::current),
        current_error: st.current_error.clone(),
    }
}

/// Reads and parses the file; keeps the previous scenario if that fails.
fn reload(st: &mut State, path: std::ffi::OsString) {
    let result = File::open(&path).and_then(|mut f| {
        // Stamp from the open file before reading, so any later write is
        // seen as a change by the next call.
        let stamp = Stamp::of(&f.metadata()?);
        let mut text = String::new();
        f.read_to_string(&mut text)?;
        Ok((stamp, text))
    });
    match result {
        Err(e) => {
            st.seen = None;
            st.current_error = Some(format!("cannot read {path:?}: {e}"));
        }
        Ok((stamp, text)) => {
            match Scenario::parse(&text) {
                Ok(scenario) => {
                    st.scenario = Some(Arc::new(scenario));
                    st.current_error = None;
                }
                Err(e) => {
                    let msg = format!("invalid scenario {path:?}: {e}");
                    if st.scenario.is_some() {
                        eprintln!("fake-nvml: {msg}; keeping the previous scenario");
                    }
                    st.current_error = Some(msg);
                }
            }
            st.seen = Some((path, stamp));
        }
    }
}

/// Counts one successful init.
pub fn add_ref() {
    let mut st = lock();
    st.refcount = st.refcount.saturating_add(1);
}

/// Drops one init reference; false if there was none.
pub fn release() -> bool {
    let mut st = lock();
    if st.refcount == 0 {
        return false;
    }
    st.refcount -= 1;
    true
}

/// Successful inits minus shutdowns.
pub fn open_handles() -> u64 {
    lock().refcount
}
