//! The reader's own view of a process, from its own `/proc`.
//!
//! When the daemon withholds process details (its basic policy, the default when `/proc`
//! is mounted with `hidepid`), a reader still sees its own processes in `/proc`, exactly as
//! `ps` would show them to that user. This fills in owner, command line, host memory and
//! running time for those, and only those; it is never used for what the daemon
//! publishes itself.

use std::path::Path;

use gpupeek_shm::procfs as proc;

use crate::view::ProcView;

/// What the reader's `/proc` shows about one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalProc {
    /// Real uid.
    pub uid: u32,
    /// User name (the uid as text when it has none).
    pub user: String,
    /// Raw command line.
    pub cmdline: Vec<u8>,
    /// `/proc/PID/comm`, for processes with an empty command line.
    pub comm: String,
    /// Resident memory, bytes.
    pub rss_bytes: Option<u64>,
    /// Start time, Unix epoch ns.
    pub start_unix_ns: Option<u64>,
}

/// Whether `/proc/PID` is not there: the process has exited.
pub fn gone(pid: u32) -> bool {
    !Path::new("/proc").join(pid.to_string()).exists()
}

/// Reads `/proc/PID`; `None` when it is not there or hidden from us.
pub fn read(pid: u32) -> Option<LocalProc> {
    read_from(Path::new("/proc"), pid)
}

fn read_from(root: &Path, pid: u32) -> Option<LocalProc> {
    let dir = root.join(pid.to_string());
    let status = read_text(&dir.join("status"))?;
    let uid = proc::real_uid(&status)?;
    let user = proc::user_name(uid);
    let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
    let comm = read_text(&dir.join("comm")).unwrap_or_default();
    let stat = read_text(&dir.join("stat"));
    let start_ticks = stat
        .as_deref()
        .and_then(proc::parse_stat)
        .map(|s| s.start_ticks);
    let rss_pages = std::fs::read_to_string(dir.join("statm"))
        .ok()
        .and_then(|s| proc::parse_statm_resident(&s));
    let start_unix_ns = proc::boot_unix_ns(root)
        .zip(start_ticks)
        .map(|(boot, ticks)| boot.saturating_add(proc::ticks_to_ns(ticks, proc::ticks_per_sec())));
    Some(LocalProc {
        uid,
        user,
        cmdline,
        comm: comm.trim_end_matches('\n').to_owned(),
        rss_bytes: rss_pages.map(|p| p.saturating_mul(proc::page_size())),
        start_unix_ns,
    })
}

/// A `/proc` file as text, bytes that are not UTF-8 replaced: a process's name (in
/// `status`, `stat` and `comm`) need not be UTF-8, and must not hide the rest of the file.
fn read_text(path: &Path) -> Option<String> {
    std::fs::read(path)
        .ok()
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

impl LocalProc {
    /// The command line's arguments, printable, cut as the daemon would cut them in its
    /// text pool.
    pub fn argv(&self) -> Vec<String> {
        let mut encoded = vec![0u8; gpupeek_shm::layout::MAX_TEXT_PER_PROCESS + 1];
        let len = gpupeek_shm::text::encode_argv(&mut encoded, &self.cmdline);
        gpupeek_shm::text::decode_argv(&encoded, len)
    }

    /// The user name as printable text.
    pub fn user_name(&self) -> String {
        gpupeek_shm::text::decode(self.user.as_bytes())
    }

    /// Fills the withheld fields of `view`; `published_unix_ns` dates the running time.
    pub fn fill(&self, view: &mut ProcView, published_unix_ns: u64) {
        let argv = self.argv();
        let base = argv
            .first()
            .map(|a0| a0.rsplit('/').next().unwrap_or(a0).to_owned())
            .filter(|b| !b.is_empty());
        let comm = gpupeek_shm::text::decode(self.comm.as_bytes());
        view.uid = Some(self.uid);
        view.user = Some(self.user_name());
        view.command = base.or(Some(comm).filter(|c| !c.is_empty()));
        view.full_command = Some(argv);
        view.host_mem_bytes = self.rss_bytes;
        view.running_secs = self
            .start_unix_ns
            .map(|start| published_unix_ns.saturating_sub(start) / 1_000_000_000);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_process_is_visible_to_us() {
        let me = read(std::process::id()).expect("our own /proc entry");
        assert_eq!(me.uid, nix::unistd::getuid().as_raw());
        assert!(!me.cmdline.is_empty());
        assert!(me.rss_bytes.unwrap() > 0);
        let mut view = ProcView::default();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        me.fill(&mut view, now);
        assert!(view.running_secs.unwrap() < 3600, "started just now");
        assert!(view.command.is_some() && view.full_command.is_some());
    }

    #[test]
    fn a_name_that_is_not_utf8_does_not_hide_the_process() {
        let root = std::env::temp_dir().join(format!("gpupeek-local-{}", std::process::id()));
        let dir = root.join("13");
        std::fs::create_dir_all(&dir).unwrap();
        // "обучение" cut at 15 bytes, inside its 8th character, as the kernel does.
        let name: &[u8] = &"обучение".as_bytes()[..15];
        let with_name = |head: &[u8], tail: &str| [head, name, tail.as_bytes()].concat();
        let status = with_name(b"Name:\t", "\nUid:\t4000000\t0\t0\t0\n");
        std::fs::write(dir.join("status"), status).unwrap();
        std::fs::write(dir.join("comm"), with_name(b"", "\n")).unwrap();
        let stat = with_name(
            b"13 (",
            ") S 1 1 1 0 -1 0 0 0 0 0 7 0 0 0 20 0 1 0 500 1000 25 0\n",
        );
        std::fs::write(dir.join("stat"), stat).unwrap();
        std::fs::write(dir.join("cmdline"), b"").unwrap();
        std::fs::write(root.join("stat"), "btime 1700000000\n").unwrap();
        let found = read_from(&root, 13);
        std::fs::remove_dir_all(&root).unwrap();
        let found = found.expect("the process is there");
        assert_eq!((found.uid, found.user.as_str()), (4000000, "4000000"));
        assert_eq!(found.comm, "обучени\u{fffd}");
        assert!(found.start_unix_ns.is_some());
    }

    #[test]
    fn a_missing_process_gives_nothing() {
        assert_eq!(read_from(Path::new("/nonexistent"), 1), None);
    }
}
