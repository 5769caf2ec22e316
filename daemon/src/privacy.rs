//! How much the daemon may publish about processes.
//!
//! The segment is world-readable, so it must not tell anyone more than `/proc` already
//! does. When `/proc` is mounted with `hidepid` (users cannot see each other's
//! processes), the automatic policy publishes only what NVML itself shows every user —
//! pid, GPU memory and utilisation — and withholds user names, command lines and the rest.
//! Readers then fill in their own processes from the `/proc` they can see.

use std::path::Path;
use std::time::{Duration, Instant};

use gpupeek_shm::layout::proc_flags;
use gpupeek_shm::{ProcContext, ProcPolicy};

/// The `--process-info` choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// `full` unless `/proc` hides processes (`hidepid`), then `basic`.
    Auto,
    /// Always this policy.
    Fixed(ProcPolicy),
}

impl std::str::FromStr for Choice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => Choice::Auto,
            "full" => Choice::Fixed(ProcPolicy::Full),
            "basic" => Choice::Fixed(ProcPolicy::Basic),
            "none" => Choice::Fixed(ProcPolicy::None),
            _ => {
                return Err(format!(
                    "bad process-info {s:?}: use auto, full, basic or none"
                ))
            }
        })
    }
}

impl Choice {
    /// The policy in force given whether `/proc` hides processes.
    pub fn policy(self, hidepid: bool) -> ProcPolicy {
        match self {
            Choice::Fixed(policy) => policy,
            Choice::Auto if hidepid => ProcPolicy::Basic,
            Choice::Auto => ProcPolicy::Full,
        }
    }
}

/// Whether the proc filesystem mounted at `mount_point` hides processes from other users,
/// judged from `mountinfo` (the text of `/proc/self/mountinfo`). The last mount on that
/// point wins, as it shadows the others. `None` when no proc mount is there.
pub fn hidepid(mountinfo: &str, mount_point: &Path) -> Option<bool> {
    let mount_point = mount_point.to_str()?;
    let mut found = None;
    for line in mountinfo.lines() {
        // "36 25 0:5 / /proc rw,nosuid master:1 - proc proc rw,hidepid=invisible"
        let Some((mount, fs)) = line.split_once(" - ") else {
            continue;
        };
        let mount: Vec<&str> = mount.split(' ').collect();
        let fs: Vec<&str> = fs.split(' ').collect();
        if mount.len() < 6 || fs.len() < 3 || fs[0] != "proc" {
            continue;
        }
        if unescape(mount[4]) != mount_point {
            continue;
        }
        let options = mount[5].split(',').chain(fs[2].split(','));
        let hidden = options
            .filter_map(|o| o.strip_prefix("hidepid="))
            .any(|v| !matches!(v, "0" | "off"));
        found = Some(hidden);
    }
    found
}

/// Undoes mountinfo's octal escapes (`\040` for a space, and so on).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads `/proc/self/mountinfo` and judges the proc mount at `proc_root`. Unreadable or
/// not a proc mount: assume processes are hidden, the safe side.
pub fn detect_hidepid(proc_root: &Path) -> bool {
    let root = std::fs::canonicalize(proc_root).unwrap_or_else(|_| proc_root.to_owned());
    std::fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|info| hidepid(&info, &root))
        .unwrap_or(true)
}

/// How often `/proc`'s mount options are read again for `hidepid`.
pub const PRIVACY_RECHECK: Duration = Duration::from_secs(60);

/// The process policy in force, and when it was last judged.
pub struct Privacy {
    /// What the process table's head says: policy, flags, pid namespace.
    pub context: ProcContext,
    checked_at: Instant,
}

impl Privacy {
    /// Reads `/proc`'s mount options and decides the policy. Logs it at start
    /// (`previous` is `None`) and when it differs from `previous`, not at every re-check.
    pub fn judge(proc_root: &Path, choice: Choice, previous: Option<&ProcContext>) -> Privacy {
        let hidepid = detect_hidepid(proc_root);
        let policy = choice.policy(hidepid);
        let context = ProcContext {
            flags: if hidepid { proc_flags::HIDEPID } else { 0 },
            pid_ns_inode: crate::procfs::pid_namespace_of(proc_root),
            ..ProcContext::new(policy)
        };
        if previous.is_none_or(|p| p.policy != context.policy || p.flags != context.flags) {
            log::info!(
                "publishing {} process information{}",
                policy.name(),
                if hidepid {
                    " (/proc hides processes: hidepid)"
                } else {
                    ""
                }
            );
        }
        Privacy {
            context,
            checked_at: Instant::now(),
        }
    }

    /// Whether [`PRIVACY_RECHECK`] has passed since the policy was judged.
    pub fn due(&self) -> bool {
        self.checked_at.elapsed() >= PRIVACY_RECHECK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
25 22 0:5 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
40 22 0:40 / /host\\040proc rw,relatime - proc proc rw,hidepid=invisible
41 22 0:41 / /old rw,relatime - proc proc rw,hidepid=2,gid=27
42 22 0:42 / /off rw,relatime - proc proc rw,hidepid=0
43 22 0:43 / /tmp rw - tmpfs tmpfs rw
";

    #[test]
    fn hidepid_is_read_from_the_mount_at_the_proc_root() {
        assert_eq!(hidepid(MOUNTINFO, Path::new("/proc")), Some(false));
        assert_eq!(hidepid(MOUNTINFO, Path::new("/host proc")), Some(true));
        assert_eq!(hidepid(MOUNTINFO, Path::new("/old")), Some(true));
        assert_eq!(hidepid(MOUNTINFO, Path::new("/off")), Some(false));
        assert_eq!(hidepid(MOUNTINFO, Path::new("/tmp")), None, "not proc");
        assert_eq!(hidepid(MOUNTINFO, Path::new("/nowhere")), None);
    }

    #[test]
    fn a_later_mount_on_the_same_point_wins() {
        let remounted = format!("{MOUNTINFO}50 25 0:50 / /proc rw - proc proc rw,hidepid=1\n");
        assert_eq!(hidepid(&remounted, Path::new("/proc")), Some(true));
    }

    #[test]
    fn auto_withholds_details_only_under_hidepid() {
        assert_eq!(Choice::Auto.policy(false), ProcPolicy::Full);
        assert_eq!(Choice::Auto.policy(true), ProcPolicy::Basic);
        let full: Choice = "full".parse().unwrap();
        assert_eq!(full.policy(true), ProcPolicy::Full);
        assert_eq!(
            "none".parse::<Choice>().unwrap().policy(false),
            ProcPolicy::None
        );
        assert!("everything".parse::<Choice>().is_err());
    }
}
