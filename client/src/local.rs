//! The reader's own view of a process, from its own `/proc`.
//!
//! When the daemon withholds process details (its basic policy, the default when `/proc`
//! is mounted with `hidepid`), a reader still sees its own processes in `/proc`, exactly as
//! `ps` would show them to that user. This fills in owner, command line, host memory and
//! running time for those, and only those; it is never used for what the daemon
//! publishes itself.

use std::path::Path;

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

/// Reads `/proc/PID`; `None` when it is not there or hidden from us.
pub fn read(pid: u32) -> Option<LocalProc> {
    read_from(Path::new("/proc"), pid)
}

fn read_from(root: &Path, pid: u32) -> Option<LocalProc> {
    let dir = root.join(pid.to_string());
    let status = std::fs::read_to_string(dir.join("status")).ok()?;
    let uid: u32 = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let user = match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => user.name,
        _ => uid.to_string(),
    };
    let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
    let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
    let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
    let (start_ticks, rss_pages) = parse_stat(&stat).unzip();
    let sysconf = |var| {
        nix::unistd::sysconf(var)
            .ok()
            .flatten()
            .and_then(|v| u64::try_from(v).ok())
            .filter(|&v| v > 0)
    };
    let tps = sysconf(nix::unistd::SysconfVar::CLK_TCK).unwrap_or(100);
    let page = sysconf(nix::unistd::SysconfVar::PAGE_SIZE).unwrap_or(4096);
    let boot_secs: Option<u64> = std::fs::read_to_string(root.join("stat"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse().ok())
        });
    let start_unix_ns = boot_secs.zip(start_ticks).map(|(boot, ticks)| {
        boot.saturating_mul(1_000_000_000)
            .saturating_add(ticks.saturating_mul(1_000_000_000) / tps)
    });
    Some(LocalProc {
        uid,
        user,
        cmdline,
        comm: comm.trim_end_matches('\n').to_owned(),
        rss_bytes: rss_pages.map(|p| p.saturating_mul(page)),
        start_unix_ns,
    })
}

/// Start time (ticks) and resident pages from `/proc/PID/stat`, counted from the last `)`.
fn parse_stat(s: &str) -> Option<(u64, u64)> {
    let mut fields = s[s.rfind(')')? + 1..].split_whitespace();
    let start = fields.nth(19)?.parse().ok()?;
    let rss = fields.nth(1)?.parse().ok()?;
    Some((start, rss))
}

impl LocalProc {
    /// Fills the withheld fields of `view`; `published_unix_ns` dates the running time.
    pub fn fill(&self, view: &mut ProcView, published_unix_ns: u64) {
        let mut encoded = [0u8; 328];
        let len = gpupeek_shm::text::encode_argv(&mut encoded, &self.cmdline);
        let argv = gpupeek_shm::text::decode_argv(&encoded, len);
        let base = argv
            .first()
            .map(|a0| a0.rsplit('/').next().unwrap_or(a0).to_owned())
            .filter(|b| !b.is_empty());
        let comm = gpupeek_shm::text::decode(self.comm.as_bytes());
        view.uid = Some(self.uid);
        view.user = Some(gpupeek_shm::text::decode(self.user.as_bytes()));
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
    fn a_missing_process_gives_nothing() {
        assert_eq!(read_from(Path::new("/nonexistent"), 1), None);
    }

    #[test]
    fn stat_is_parsed_past_odd_names() {
        let s = "5 (a) (b)) S 1 1 1 0 -1 0 0 0 0 0 7 8 0 0 20 0 1 0 4242 1000 77 0\n";
        assert_eq!(parse_stat(s), Some((4242, 77)));
    }
}
