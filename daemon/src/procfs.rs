//! What `/proc` tells about a GPU process: owner, command line, CPU and host memory,
//! start time, pid namespace and container.
//!
//! The daemon resolves each process so that readers never have to (and never race with
//! processes that exit). A process that vanished between NVML listing it and us reading
//! `/proc` simply has no details: not an error.
//!
//! Cost: each tick reads two small files per process (`/proc/PID/stat`: CPU time and start
//! time; `statm`: resident memory, exact where `stat`'s copy is an approximation on recent
//! kernels, and what `ps` and psutil report), once however many GPUs list it, each with
//! one `pread` through a descriptor kept open from the process's first tick (for up to
//! [`MAX_KEPT`] processes; see [`ProcFiles::read_kept`]). The slow-changing details (owner,
//! command line, container) are read when a process is first seen, again every
//! [`DETAILS_REFRESH_NS`] for its first [`YOUNG_NS`] (programs rewrite their command line
//! mostly as they start), then every [`DETAILS_REFRESH_OLD_NS`], and at once whenever
//! the name in `stat` changed (an `exec`, or a rename through `prctl`, which
//! `setproctitle` and PyTorch do); its pid namespace, fixed for its life, only until it
//! is known. A process is recognised across ticks by pid and start time, so a recycled
//! pid is a new process. User names are cached per uid.
//!
//! Allocation: files are read into buffers kept across ticks ([`ProcFiles`]), and a
//! refresh replaces a detail only when what it was made from changed (the uid, the raw
//! command line, the raw cgroup text), so a tick that reads only unchanged processes,
//! refresh or not, makes no heap allocation. A new process or a real change may.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use gpupeek_shm::procfs as proc;

use crate::container::{self, Container};
use crate::hooks;
use crate::procfile::ProcFiles;

/// How often the slow-changing details of a process known for less than [`YOUNG_NS`]
/// are read again.
pub const DETAILS_REFRESH_NS: u64 = 5_000_000_000;

/// How often those of a process known for longer are: a command line rewritten without
/// a rename, a new owner or a cgroup move shows up to this late. The refreshes were
/// about a third of the daemon's CPU time with 64 long-running GPU processes.
pub const DETAILS_REFRESH_OLD_NS: u64 = 30_000_000_000;

/// How long a process counts as young (see [`DETAILS_REFRESH_NS`]).
pub const YOUNG_NS: u64 = 60_000_000_000;

/// Most processes whose `stat` and `statm` are kept open (two descriptors each, well
/// inside the 1,024 a service may open by default); the rest are read by path.
pub const MAX_KEPT: usize = 256;

/// Reads process details below a `/proc` root (injectable for tests and containers).
pub struct Procfs {
    files: ProcFiles,
    /// [`DETAILS_REFRESH_NS`] and [`DETAILS_REFRESH_OLD_NS`], or a test hook's.
    details_refresh_ns: (u64, u64),
    ticks_per_sec: u64,
    page_size: u64,
    boot_unix_ns: Option<u64>,
    users: HashMap<u32, String>,
    known: HashMap<u32, Known>,
    tick: u64,
    now_ns: u64,
    /// A process not looked up for this long is forgotten (see [`Self::keep_for`]).
    keep_ns: u64,
}

/// Everything known about one process.
#[derive(Debug, Default)]
pub struct ProcInfo {
    /// Real uid and its user name.
    pub user: Option<(u32, String)>,
    /// `basename(argv[0])`, else `/proc/PID/comm`.
    pub command: Option<String>,
    /// The raw command line (`/proc/PID/cmdline`), empty for kernel threads and zombies.
    pub cmdline: Vec<u8>,
    /// Pid in the process's own pid namespace (0 when the kernel does not say), and that
    /// namespace's inode (0 when it may not be read).
    pub namespace: Option<(u32, u64)>,
    /// The container it runs in.
    pub container: Option<Container>,
    /// CPU use over the last tick, hundredths of a percent of one core; `None` on the
    /// tick a process is first seen.
    pub cpu_centipct: Option<u32>,
    /// Resident memory, bytes.
    pub rss_bytes: Option<u64>,
    /// Start time, Unix epoch ns (`None` when the boot time is unknown).
    pub start_unix_ns: Option<u64>,
}

struct Known {
    start_ticks: u64,
    /// Its name in `stat`, hashed: a change (an `exec`, a rename) refreshes the details.
    name: u64,
    first_seen_ns: u64,
    seen_tick: u64,
    seen_ns: u64,
    details_at_ns: u64,
    cpu_ticks: u64,
    cpu_at_ns: u64,
    info: ProcInfo,
    /// The raw `/proc/PID/cgroup` that `info.container` was parsed from (empty when it
    /// could not be read: no container either way).
    cgroup: Vec<u8>,
    /// Its `stat` and `statm`, kept open.
    fds: Kept,
}

/// A process's `stat` and `statm`, open.
#[derive(Debug, Default)]
struct Kept {
    stat: Option<std::fs::File>,
    statm: Option<std::fs::File>,
}

impl Procfs {
    /// Reads from `root` (normally `/proc`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let boot_unix_ns = proc::boot_unix_ns(&root);
        Procfs {
            files: ProcFiles::new(root),
            details_refresh_ns: details_refresh_ns(),
            ticks_per_sec: proc::ticks_per_sec(),
            page_size: proc::page_size(),
            boot_unix_ns,
            users: HashMap::new(),
            known: HashMap::new(),
            tick: 0,
            now_ns: 0,
            keep_ns: 0,
        }
    }

    /// Keeps what is known of a process (its CPU time, for the next CPU figure) for
    /// `keep_ns` after its last lookup, for callers that look a process up less often
    /// than every tick; by default only until the tick after its last lookup.
    pub fn keep_for(&mut self, keep_ns: u64) {
        self.keep_ns = keep_ns;
    }

    /// Starts a new tick at monotonic time `now_ns`: processes are read again on their
    /// next lookup, and those not looked up during the last tick (nor, with
    /// [`Self::keep_for`], for that long) are forgotten.
    pub fn new_tick(&mut self, now_ns: u64) {
        let (last, keep_ns) = (self.tick, self.keep_ns);
        self.known
            .retain(|_, k| k.seen_tick == last || now_ns.saturating_sub(k.seen_ns) < keep_ns);
        self.tick += 1;
        self.now_ns = now_ns;
    }

    /// Looks up process `pid`, reading `/proc` only on its first lookup this tick.
    /// `None` when the process is gone (or its `/proc` entry is hidden from us).
    pub fn lookup(&mut self, pid: u32) -> Option<&ProcInfo> {
        let tick = self.tick;
        if self.known.get(&pid).is_some_and(|k| k.seen_tick == tick) {
            return self.known.get(&pid).map(|k| &k.info);
        }
        // Descriptors from earlier ticks are this process's, or fail and are opened again.
        let mut fds = match self.known.get_mut(&pid) {
            Some(k) => std::mem::take(&mut k.fds),
            None => Kept::default(),
        };
        let keep = fds.stat.is_some() || self.known.len() < MAX_KEPT;
        let stat = self.files.read_kept(&mut fds.stat, keep, pid, "stat");
        let parsed =
            stat.and_then(|b| Some((proc::parse_stat(&String::from_utf8_lossy(b))?, name_hash(b))));
        let Some((stat, name)) = parsed else {
            self.known.remove(&pid);
            return None;
        };
        let now = self.now_ns;
        let (tps, page_size, boot) = (self.ticks_per_sec, self.page_size, self.boot_unix_ns);
        let same = self
            .known
            .get(&pid)
            .is_some_and(|k| k.start_ticks == stat.start_ticks);
        if !same {
            let info = ProcInfo {
                start_unix_ns: boot.map(|b| b + proc::ticks_to_ns(stat.start_ticks, tps)),
                ..ProcInfo::default()
            };
            self.known.insert(
                pid,
                Known {
                    start_ticks: stat.start_ticks,
                    name,
                    first_seen_ns: now,
                    seen_tick: tick,
                    seen_ns: now,
                    details_at_ns: 0,
                    cpu_ticks: stat.cpu_ticks,
                    cpu_at_ns: now,
                    info,
                    cgroup: Vec::new(),
                    fds: Kept::default(),
                },
            );
        }
        let k = self.known.get_mut(&pid).expect("inserted above");
        let (young, old) = self.details_refresh_ns;
        let period = if now.saturating_sub(k.first_seen_ns) < YOUNG_NS {
            young
        } else {
            old
        };
        if !same || k.name != name || now.saturating_sub(k.details_at_ns) >= period {
            k.details_at_ns = now;
            k.name = name;
            refresh_details(&mut self.files, &mut self.users, pid, k);
        }
        if same {
            let elapsed = now.saturating_sub(k.cpu_at_ns);
            if elapsed > 0 {
                let used = stat.cpu_ticks.saturating_sub(k.cpu_ticks);
                k.info.cpu_centipct = Some(centipct(used, tps, elapsed));
                k.cpu_ticks = stat.cpu_ticks;
                k.cpu_at_ns = now;
            }
        }
        let statm = self.files.read_kept(&mut fds.statm, keep, pid, "statm");
        let resident = statm.and_then(|b| proc::parse_statm_resident(&String::from_utf8_lossy(b)));
        let k = self.known.get_mut(&pid).expect("inserted above");
        k.info.rss_bytes = resident.map(|p| p.saturating_mul(page_size));
        k.fds = fds;
        (k.seen_tick, k.seen_ns) = (tick, now);
        Some(&k.info)
    }

    /// What the last lookup of `pid` found, without reading `/proc`; `None` when it is
    /// not known (any more).
    pub fn cached(&self, pid: u32) -> Option<&ProcInfo> {
        self.known.get(&pid).map(|k| &k.info)
    }
}

/// The refresh periods of young and old processes: [`DETAILS_REFRESH_NS`] and
/// [`DETAILS_REFRESH_OLD_NS`], unless the test hook [`hooks::DETAILS_REFRESH_MS`] gives
/// one for both.
fn details_refresh_ns() -> (u64, u64) {
    let Some(ms) = hooks::get::<u64>(hooks::DETAILS_REFRESH_MS) else {
        return (DETAILS_REFRESH_NS, DETAILS_REFRESH_OLD_NS);
    };
    let hook = hooks::DETAILS_REFRESH_MS;
    log::info!("test hook {hook}: process details are read again every {ms} ms");
    let ns = ms.saturating_mul(1_000_000);
    (ns, ns)
}

/// The name in a `/proc/PID/stat` (between the first `(` and the last `)`: it may hold
/// either), hashed so that it is remembered without an allocation.
fn name_hash(stat: &[u8]) -> u64 {
    let open = stat.iter().position(|&b| b == b'(').map_or(0, |i| i + 1);
    let close = stat.iter().rposition(|&b| b == b')').unwrap_or(open);
    crate::statefile::fnv1a(stat.get(open..close).unwrap_or_default())
}

/// Reads the slow-changing details of `pid` into `k` again, replacing each only when
/// what it is made from changed, so that refreshing an unchanged process allocates
/// nothing. `users` caches user names by uid.
fn refresh_details(
    files: &mut ProcFiles,
    users: &mut HashMap<u32, String>,
    pid: u32,
    k: &mut Known,
) {
    let info = &mut k.info;
    let status = files
        .read_str(pid, "status")
        .and_then(|s| Some((proc::real_uid(&s)?, ns_pid(&s))));
    match status {
        Some((uid, _)) if info.user.as_ref().is_some_and(|(known, _)| *known == uid) => {}
        Some((uid, _)) => {
            let name = users.entry(uid).or_insert_with(|| proc::user_name(uid));
            info.user = Some((uid, name.clone()));
        }
        None => info.user = None,
    }
    // Another user's `ns/pid` needs ptrace access (CAP_SYS_PTRACE for a daemon whose
    // capabilities are dropped), while its status is world-readable: the pid in its own
    // namespace is kept then, with the namespace unknown (inode 0). A process's own pid
    // namespace is fixed for its life: once known, it is not looked up again.
    let known_inode = info.namespace.map(|(_, inode)| inode).filter(|&i| i != 0);
    info.namespace = status.and_then(|(_, ns_pid)| {
        let inode = known_inode.or_else(|| files.inode(pid, "ns/pid"));
        (ns_pid != 0 || inode.is_some()).then(|| (ns_pid, inode.unwrap_or(0)))
    });
    let cmdline = files.read(pid, "cmdline").unwrap_or_default();
    let cmdline_changed = cmdline != info.cmdline.as_slice();
    if cmdline_changed {
        info.cmdline.clear();
        info.cmdline.extend_from_slice(cmdline);
    }
    refresh_command(files, pid, info, cmdline_changed);
    let cgroup = files.read(pid, "cgroup").unwrap_or_default();
    if cgroup != k.cgroup.as_slice() {
        info.container = std::str::from_utf8(cgroup).ok().and_then(container::parse);
        k.cgroup.clear();
        k.cgroup.extend_from_slice(cgroup);
    }
}

/// Sets the command gpustat shows, `basename(argv[0])`, else `/proc/PID/comm` (read
/// again on every refresh: a program may rename itself).
fn refresh_command(files: &mut ProcFiles, pid: u32, info: &mut ProcInfo, cmdline_changed: bool) {
    let argv0 = info.cmdline.split(|&b| b == 0).next().unwrap_or_default();
    let base = argv0.rsplit(|&b| b == b'/').next().unwrap_or_default();
    if !base.is_empty() {
        if cmdline_changed || info.command.is_none() {
            info.command = Some(String::from_utf8_lossy(base).into_owned());
        }
        return;
    }
    let comm = files.read_str(pid, "comm");
    let comm = comm
        .as_deref()
        .map(|c| c.trim_end_matches('\n'))
        .filter(|c| !c.is_empty());
    if info.command.as_deref() != comm {
        info.command = comm.map(str::to_owned);
    }
}

/// Inode of the pid namespace the pids under `root` belong to: that of its process 1,
/// else our own. 0 when neither can be read.
pub fn pid_namespace_of(root: &Path) -> u64 {
    proc::pid_ns_inode(&root.join("1/ns/pid"))
        .or_else(|| proc::pid_ns_inode(&root.join("self/ns/pid")))
        .unwrap_or(0)
}

/// CPU ticks used over `elapsed_ns`, as hundredths of a percent of one core.
fn centipct(ticks: u64, ticks_per_sec: u64, elapsed_ns: u64) -> u32 {
    let v = u128::from(ticks) * 10_000 * 1_000_000_000
        / (u128::from(ticks_per_sec.max(1)) * u128::from(elapsed_ns.max(1)));
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The innermost namespace pid, from the text of `/proc/PID/status` (0 when missing).
fn ns_pid(status: &str) -> u32 {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .and_then(|v| v.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake `/proc` with one process; removed on drop.
    struct FakeProc(PathBuf);

    impl FakeProc {
        fn new(tag: &str) -> Self {
            let root =
                std::env::temp_dir().join(format!("gpupeek-procfs-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            std::fs::create_dir_all(&root).unwrap();
            std::fs::write(root.join("stat"), "cpu 1 2 3\nbtime 1700000000\n").unwrap();
            FakeProc(root)
        }

        fn process(&self, pid: u32, status: &str, cmdline: &[u8], comm: &str) {
            let dir = self.0.join(pid.to_string());
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("status"), status).unwrap();
            std::fs::write(dir.join("cmdline"), cmdline).unwrap();
            std::fs::write(dir.join("comm"), comm).unwrap();
            std::fs::write(dir.join("statm"), "730 25 20 5 0 89 0\n").unwrap();
            self.stat(pid, 0, 500);
        }

        /// A stand-in for `/proc/PID/ns/pid` (the daemon takes the inode it leads to);
        /// returns that inode.
        fn pid_namespace(&self, pid: u32) -> u64 {
            let file = self.0.join(format!("{pid}/ns/pid"));
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, "").unwrap();
            std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&file).unwrap())
        }

        /// Writes `/proc/PID/stat` with `cpu_ticks` of user time, started at tick 500.
        fn stat(&self, pid: u32, cpu_ticks: u64, start: u64) {
            self.stat_named(pid, "odd) name", cpu_ticks, start);
        }

        /// [`Self::stat`] with the name `name`.
        fn stat_named(&self, pid: u32, name: &str, cpu_ticks: u64, start: u64) {
            let stat = format!(
                "{pid} ({name}) S 1 1 1 0 -1 0 0 0 0 0 {cpu_ticks} 0 0 0 20 0 1 0 {start} 1000 25 0\n"
            );
            std::fs::write(self.0.join(format!("{pid}/stat")), stat).unwrap();
        }
    }

    impl Drop for FakeProc {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const SEC: u64 = 1_000_000_000;

    /// Another user's process, to a daemon without ptrace access: `ns/pid` cannot be
    /// read (here: it is not there), the world-readable status's `NSpid` can. Its pid in
    /// its own namespace is kept, with the namespace unknown; with a link, both.
    #[test]
    fn the_pid_in_its_namespace_is_known_when_the_namespace_link_cannot_be_read() {
        let proc = FakeProc::new("nspid");
        proc.process(
            9,
            "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nNSpid:\t9\t4\n",
            b"x\0",
            "x\n",
        );
        proc.process(
            10,
            "Name:\tx\nUid:\t1000\t1000\t1000\t1000\n",
            b"x\0",
            "x\n",
        );
        proc.process(
            11,
            "Name:\tx\nUid:\t0\t0\t0\t0\nNSpid:\t11\t1\n",
            b"x\0",
            "x\n",
        );
        let inode = proc.pid_namespace(11);
        let mut procfs = Procfs::new(&proc.0);
        procfs.new_tick(SEC);
        assert_eq!(procfs.lookup(9).unwrap().namespace, Some((4, 0)));
        assert_eq!(
            procfs.lookup(10).unwrap().namespace,
            None,
            "no NSpid, no link"
        );
        assert_eq!(procfs.lookup(11).unwrap().namespace, Some((1, inode)));
    }

    #[test]
    fn command_is_the_basename_of_argv0_and_user_is_the_real_uid() {
        let proc = FakeProc::new("cmd");
        proc.process(
            7,
            "Name:\tx\nUid:\t0\t1000\t1000\t1000\nNSpid:\t7\t3\n",
            b"/usr/bin/python3\0train.py\0",
            "pt_main_thread\n",
        );
        let mut procfs = Procfs::new(&proc.0);
        procfs.new_tick(SEC);
        let info = procfs.lookup(7).unwrap();
        assert_eq!(info.command.as_deref(), Some("python3"));
        assert_eq!(info.user, Some((0, "root".to_owned())));
        assert_eq!(info.cmdline, b"/usr/bin/python3\0train.py\0");
        assert_eq!(info.rss_bytes, Some(25 * procfs_page_size()));
        let tps = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .unwrap()
            .unwrap() as u64;
        assert_eq!(
            procfs.lookup(7).unwrap().start_unix_ns,
            Some(1_700_000_000 * SEC + 500 * SEC / tps)
        );
    }

    fn procfs_page_size() -> u64 {
        nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .unwrap()
            .unwrap() as u64
    }

    #[test]
    fn empty_cmdline_falls_back_to_comm_and_unknown_uid_to_its_number() {
        let proc = FakeProc::new("comm");
        proc.process(8, "Uid:\t4000000\t0\t0\t0\n", b"", "kworker\n");
        let mut procfs = Procfs::new(&proc.0);
        procfs.new_tick(SEC);
        let info = procfs.lookup(8).unwrap();
        assert_eq!(info.command.as_deref(), Some("kworker"));
        assert_eq!(info.user, Some((4000000, "4000000".to_owned())));
        assert!(info.cmdline.is_empty());
    }

    #[test]
    fn a_name_that_is_not_utf8_keeps_the_process_and_its_owner() {
        // "обучение" cut at 15 bytes, inside its 8th character, as the kernel does.
        let name: &[u8] = &"обучение".as_bytes()[..15];
        let proc = FakeProc::new("nonutf8");
        proc.process(13, "", b"", "");
        let dir = proc.0.join("13");
        let with_name = |head: &[u8], tail: &str| [head, name, tail.as_bytes()].concat();
        std::fs::write(dir.join("comm"), with_name(b"", "\n")).unwrap();
        let status = with_name(b"Name:\t", "\nUid:\t4000000\t0\t0\t0\nNSpid:\t13\t2\n");
        std::fs::write(dir.join("status"), status).unwrap();
        let stat = with_name(
            b"13 (",
            ") S 1 1 1 0 -1 0 0 0 0 0 7 0 0 0 20 0 1 0 500 1000 25 0\n",
        );
        std::fs::write(dir.join("stat"), stat).unwrap();
        let mut procfs = Procfs::new(&proc.0);
        procfs.new_tick(SEC);
        let info = procfs.lookup(13).expect("a process, not a vanished one");
        assert_eq!(info.user, Some((4000000, "4000000".to_owned())));
        assert_eq!(info.command.as_deref(), Some("обучени\u{fffd}"));
        assert_eq!(info.rss_bytes, Some(25 * procfs_page_size()));
    }

    #[test]
    fn cpu_percent_is_measured_between_ticks() {
        let tps = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .unwrap()
            .unwrap() as u64;
        let proc = FakeProc::new("cpu");
        proc.process(9, "Uid:\t0\t0\t0\t0\n", b"burn\0", "burn\n");
        let mut procfs = Procfs::new(&proc.0);
        procfs.new_tick(SEC);
        assert_eq!(
            procfs.lookup(9).unwrap().cpu_centipct,
            None,
            "no rate on first sight"
        );
        // One and a half cores' worth of ticks over two seconds.
        proc.stat(9, 3 * tps, 500);
        procfs.new_tick(3 * SEC);
        assert_eq!(procfs.lookup(9).unwrap().cpu_centipct, Some(15_000));
        // A recycled pid (new start time) starts over.
        proc.stat(9, 10 * tps, 900);
        procfs.new_tick(4 * SEC);
        assert_eq!(procfs.lookup(9).unwrap().cpu_centipct, None);
    }

    #[test]
    fn a_process_looked_up_every_other_tick_is_kept_for_its_next_cpu_figure() {
        let tps = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .unwrap()
            .unwrap() as u64;
        let proc = FakeProc::new("every-other");
        proc.process(9, "Uid:\t0\t0\t0\t0\n", b"burn\0", "burn\n");
        let mut procfs = Procfs::new(&proc.0);
        procfs.keep_for(3 * SEC);
        procfs.new_tick(SEC);
        procfs.lookup(9);
        // Its GPU's turn is every other tick: the tick between looks up someone else.
        procfs.new_tick(2 * SEC);
        proc.stat(9, 2 * tps, 500);
        procfs.new_tick(3 * SEC);
        assert_eq!(procfs.lookup(9).unwrap().cpu_centipct, Some(10_000));
        // Not looked up for longer than that: forgotten, so no rate on its next sight.
        for t in 4..8 {
            procfs.new_tick(t * SEC);
        }
        assert_eq!(procfs.lookup(9).unwrap().cpu_centipct, None);
    }

    #[test]
    fn details_are_read_once_per_tick_and_refreshed_later() {
        let proc = FakeProc::new("refresh");
        proc.process(10, "Uid:\t0\t0\t0\t0\n", b"first\0", "first\n");
        let mut procfs = Procfs::new(&proc.0);
        procfs.new_tick(SEC);
        assert_eq!(procfs.lookup(10).unwrap().command.as_deref(), Some("first"));
        std::fs::write(proc.0.join("10/cmdline"), b"second\0").unwrap();
        assert_eq!(
            procfs.lookup(10).unwrap().command.as_deref(),
            Some("first"),
            "same tick"
        );
        procfs.new_tick(2 * SEC);
        assert_eq!(
            procfs.lookup(10).unwrap().command.as_deref(),
            Some("first"),
            "details are not re-read every tick"
        );
        procfs.new_tick(SEC + DETAILS_REFRESH_NS);
        assert_eq!(
            procfs.lookup(10).unwrap().command.as_deref(),
            Some("second"),
            "but are after the refresh period"
        );
    }

    #[test]
    fn a_process_known_for_a_minute_is_refreshed_less_often_and_at_once_when_renamed() {
        let proc = FakeProc::new("old");
        proc.process(14, "Uid:\t0\t0\t0\t0\n", b"first\0", "first\n");
        let mut procfs = Procfs::new(&proc.0);
        let command = |procfs: &mut Procfs, t: u64| {
            procfs.new_tick(SEC + t);
            procfs.lookup(14).unwrap().command.clone().unwrap()
        };
        assert_eq!(command(&mut procfs, 0), "first");
        // Looked up every 2 s (a process tick) for a minute: young, refreshed every 5 s.
        let mut t = 0;
        while t < YOUNG_NS {
            t += 2 * SEC;
            command(&mut procfs, t);
        }
        // Old now: a command line rewritten in place is seen within the old period.
        std::fs::write(proc.0.join("14/cmdline"), b"second\0").unwrap();
        let written = t;
        while command(&mut procfs, t) == "first" {
            t += 2 * SEC;
            assert!(t - written <= DETAILS_REFRESH_OLD_NS, "never refreshed");
        }
        // (The young period, with lookups 2 s apart, would have taken at most 7 s.)
        assert!(
            t - written > DETAILS_REFRESH_NS + 2 * SEC,
            "refreshed as if young"
        );
        // A new name in stat (an exec, a prctl rename): read at once.
        std::fs::write(proc.0.join("14/cmdline"), b"/usr/bin/third\0").unwrap();
        proc.stat_named(14, "third", 0, 500);
        assert_eq!(command(&mut procfs, t + 2 * SEC), "third");
    }

    #[test]
    fn the_pid_namespace_is_looked_up_once_and_the_other_details_at_each_refresh() {
        let proc = FakeProc::new("nsonce");
        proc.process(
            13,
            "Uid:\t0\t0\t0\t0\nNSpid:\t13\t1\n",
            b"first\0",
            "first\n",
        );
        let inode = proc.pid_namespace(13);
        let mut procfs = Procfs::new(&proc.0);
        procfs.new_tick(SEC);
        assert_eq!(procfs.lookup(13).unwrap().namespace, Some((1, inode)));
        // Another file (another inode) in its place: a lookup would see it.
        std::fs::write(proc.0.join("13/ns/pid.new"), "").unwrap();
        std::fs::rename(proc.0.join("13/ns/pid.new"), proc.0.join("13/ns/pid")).unwrap();
        let now = std::os::unix::fs::MetadataExt::ino(
            &std::fs::metadata(proc.0.join("13/ns/pid")).unwrap(),
        );
        assert_ne!(now, inode);
        std::fs::write(proc.0.join("13/cmdline"), b"second\0").unwrap();
        procfs.new_tick(SEC + DETAILS_REFRESH_NS);
        let info = procfs.lookup(13).unwrap();
        assert_eq!(info.command.as_deref(), Some("second"), "refreshed");
        assert_eq!(info.namespace, Some((1, inode)), "not looked up again");
    }

    /// Where each detail's text lives: the same addresses mean nothing was replaced.
    fn addresses(info: &ProcInfo) -> [usize; 4] {
        let user = info.user.as_ref().unwrap().1.as_ptr();
        let command = info.command.as_ref().unwrap().as_ptr();
        let container = info.container.as_ref().unwrap().id.as_ptr();
        [user, command, info.cmdline.as_ptr(), container].map(|p| p as usize)
    }

    #[test]
    fn a_refresh_keeps_unchanged_details_and_replaces_changed_ones() {
        let id = "3f1e9bd2c8a74e5f9b0d6c1a2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f";
        let proc = FakeProc::new("keep");
        proc.process(12, "Uid:\t0\t0\t0\t0\n", b"/bin/app\0--x\0", "app\n");
        let cgroup = |id: &str| format!("0::/system.slice/docker-{id}.scope\n");
        std::fs::write(proc.0.join("12/cgroup"), cgroup(id)).unwrap();
        let mut procfs = Procfs::new(&proc.0);
        procfs.new_tick(SEC);
        let first = addresses(procfs.lookup(12).unwrap());
        procfs.new_tick(SEC + DETAILS_REFRESH_NS);
        let info = procfs.lookup(12).unwrap();
        assert_eq!(
            addresses(info),
            first,
            "unchanged details are kept, not rebuilt"
        );
        assert_eq!(info.command.as_deref(), Some("app"));
        assert_eq!(info.container.as_ref().unwrap().id, id);

        let other = id.replace('3', "4");
        std::fs::write(proc.0.join("12/cgroup"), cgroup(&other)).unwrap();
        std::fs::write(proc.0.join("12/cmdline"), b"").unwrap();
        std::fs::write(proc.0.join("12/status"), "Uid:\t4000000\t0\t0\t0\n").unwrap();
        procfs.new_tick(SEC + 2 * DETAILS_REFRESH_NS);
        let info = procfs.lookup(12).unwrap();
        assert_eq!(info.container.as_ref().unwrap().id, other);
        assert_eq!(info.command.as_deref(), Some("app"), "from comm now");
        assert_eq!(info.user, Some((4000000, "4000000".to_owned())));
        assert!(info.cmdline.is_empty());

        std::fs::write(proc.0.join("12/comm"), "renamed\n").unwrap();
        std::fs::remove_file(proc.0.join("12/cgroup")).unwrap();
        procfs.new_tick(SEC + 3 * DETAILS_REFRESH_NS);
        let info = procfs.lookup(12).unwrap();
        assert_eq!(
            info.command.as_deref(),
            Some("renamed"),
            "comm is read again"
        );
        assert_eq!(info.container, None, "an unreadable cgroup is no container");
    }

    #[test]
    fn a_vanished_process_has_no_details_and_is_forgotten() {
        let proc = FakeProc::new("gone");
        proc.process(11, "Uid:\t0\t0\t0\t0\n", b"x\0", "x\n");
        let mut procfs = Procfs::new(&proc.0);
        procfs.new_tick(SEC);
        assert!(procfs.lookup(11).is_some());
        std::fs::remove_dir_all(proc.0.join("11")).unwrap();
        procfs.new_tick(2 * SEC);
        assert!(procfs.lookup(11).is_none());
        assert!(procfs.known.is_empty());
        assert!(Procfs::new("/nonexistent-proc").lookup(1).is_none());
    }

    #[test]
    fn real_proc_gives_our_own_namespace_and_a_cpu_figure() {
        let mut procfs = Procfs::new("/proc");
        let me = std::process::id();
        procfs.new_tick(gpupeek_shm::mono_now_ns());
        let info = procfs.lookup(me).unwrap();
        let (ns_pid, inode) = info.namespace.unwrap();
        assert_eq!(ns_pid, me, "our /proc is that of our own pid namespace");
        assert_eq!(inode, pid_namespace_of(Path::new("/proc")));
        assert!(info.rss_bytes.unwrap() > 0);
    }

    #[test]
    fn a_real_process_is_read_through_kept_descriptors_until_it_is_gone() {
        let mut procfs = Procfs::new("/proc");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        for _ in 0..3 {
            procfs.new_tick(gpupeek_shm::mono_now_ns());
            let info = procfs.lookup(pid).unwrap();
            assert!(info.rss_bytes.unwrap() > 0);
            assert_eq!(info.command.as_deref(), Some("sleep"));
            let fds = &procfs.known[&pid].fds;
            assert!(fds.stat.is_some() && fds.statm.is_some());
        }
        child.kill().unwrap();
        child.wait().unwrap();
        procfs.new_tick(gpupeek_shm::mono_now_ns());
        assert!(procfs.lookup(pid).is_none());
        assert!(
            !procfs.known.contains_key(&pid),
            "forgotten, its descriptors closed"
        );
    }
}
