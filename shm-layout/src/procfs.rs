//! Small `/proc` readers shared by the daemon and by readers: both resolve processes (the
//! daemon for everyone, a reader for its own processes when the daemon withholds them), so
//! both parse the same files the same way.

use std::path::Path;

/// The fields of `/proc/PID/stat` gpupeek uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// User plus system CPU time, in clock ticks.
    pub cpu_ticks: u64,
    /// Start time after boot, in clock ticks.
    pub start_ticks: u64,
}

/// Parses `/proc/PID/stat`. The command name may hold spaces and parentheses, so fields
/// are counted from the last `)`.
pub fn parse_stat(s: &str) -> Option<Stat> {
    let mut fields = s[s.rfind(')')? + 1..].split_whitespace();
    // After the name: state is field 3; utime 14, stime 15, starttime 22.
    let mut next = |skip: usize| -> Option<u64> { fields.nth(skip)?.parse().ok() };
    let utime = next(11)?;
    let stime = next(0)?;
    let start_ticks = next(6)?;
    Some(Stat {
        cpu_ticks: utime.saturating_add(stime),
        start_ticks,
    })
}

/// Resident pages: the second field of `/proc/PID/statm` (exact, where `stat`'s copy is an
/// approximation on recent kernels; what `ps` and psutil report).
pub fn parse_statm_resident(s: &str) -> Option<u64> {
    s.split_whitespace().nth(1)?.parse().ok()
}

/// `btime` of `/proc/stat`: boot time in Unix seconds.
pub fn boot_time_secs(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// Boot time in Unix ns, from `ROOT/stat`.
pub fn boot_unix_ns(root: &Path) -> Option<u64> {
    let stat = std::fs::read_to_string(root.join("stat")).ok()?;
    boot_time_secs(&stat).map(|secs| secs.saturating_mul(1_000_000_000))
}

/// Clock ticks per second (`CLK_TCK`), 100 if unknown.
pub fn ticks_per_sec() -> u64 {
    sysconf(nix::unistd::SysconfVar::CLK_TCK).unwrap_or(100)
}

/// Page size in bytes, 4096 if unknown.
pub fn page_size() -> u64 {
    sysconf(nix::unistd::SysconfVar::PAGE_SIZE).unwrap_or(4096)
}

fn sysconf(var: nix::unistd::SysconfVar) -> Option<u64> {
    nix::unistd::sysconf(var)
        .ok()
        .flatten()
        .and_then(|v| u64::try_from(v).ok())
        .filter(|&v| v > 0)
}

/// `ticks` clock ticks in ns.
pub fn ticks_to_ns(ticks: u64, ticks_per_sec: u64) -> u64 {
    u64::try_from(u128::from(ticks) * 1_000_000_000 / u128::from(ticks_per_sec.max(1)))
        .unwrap_or(u64::MAX)
}

/// The inode of a pid namespace link (`/proc/PID/ns/pid` reads `pid:[4026531836]`).
pub fn pid_ns_inode(link: &Path) -> Option<u64> {
    let target = std::fs::read_link(link).ok()?;
    target
        .to_str()?
        .strip_prefix("pid:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The real uid from the text of `/proc/PID/status` (what `ps` and gpustat show).
pub fn real_uid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The user name of `uid`, or the uid as text when it has none.
pub fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => user.name,
        _ => uid.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let s = "12 (a) b (c) R 1 2 3 4 5 6 7 8 9 10 300 200 0 0 20 0 1 0 777 4096 33 1\n";
        assert_eq!(
            parse_stat(s),
            Some(Stat {
                cpu_ticks: 500,
                start_ticks: 777,
            })
        );
        assert_eq!(parse_stat("12 (truncated"), None);
        assert_eq!(parse_stat("12 (x) R 1 2"), None);
    }

    #[test]
    fn small_files_parse() {
        assert_eq!(parse_statm_resident("730 442 415 5 0 89 0\n"), Some(442));
        assert_eq!(
            boot_time_secs("cpu 1 2\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
        assert_eq!(real_uid("Name:\tx\nUid:\t1000\t0\t0\t0\n"), Some(1000));
        assert_eq!(ticks_to_ns(150, 100), 1_500_000_000);
        assert_eq!(user_name(0), "root");
    }

    #[test]
    fn our_own_pid_namespace_has_an_inode() {
        assert!(pid_ns_inode(Path::new("/proc/self/ns/pid")).is_some_and(|i| i > 0));
    }
}
