//! What `/proc` tells about a GPU process: its owner and command name.
//!
//! The daemon resolves each process once per tick so that readers never have to (and
//! never race with processes that exit). A process that vanished between NVML listing it
//! and us reading `/proc` simply has no user or command: not an error. A process is read
//! once per tick however many GPUs it uses; user names are cached per uid. The command is `basename(argv[0])` as gpustat shows it, falling back
//! to `/proc/PID/comm` when the command line is empty.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Reads process details below a `/proc` root (injectable for tests).
pub struct Procfs {
    root: PathBuf,
    users: HashMap<u32, String>,
    this_tick: HashMap<u32, ProcInfo>,
}

/// Owner and command of one process; `None` where `/proc` had nothing.
pub struct ProcInfo {
    /// Real uid and its user name.
    pub user: Option<(u32, String)>,
    /// Command name.
    pub command: Option<String>,
}

impl Procfs {
    /// Reads from `root` (normally `/proc`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Procfs {
            root: root.into(),
            users: HashMap::new(),
            this_tick: HashMap::new(),
        }
    }

    /// Starts a new tick: processes are read again from `/proc` on their next lookup.
    pub fn new_tick(&mut self) {
        self.this_tick.clear();
    }

    /// Looks up process `pid`, reading `/proc` only on its first lookup this tick.
    pub fn lookup(&mut self, pid: u32) -> &ProcInfo {
        if !self.this_tick.contains_key(&pid) {
            let dir = self.root.join(pid.to_string());
            let user = real_uid(&dir).map(|uid| (uid, self.user_name(uid)));
            let info = ProcInfo {
                user,
                command: command(&dir),
            };
            self.this_tick.insert(pid, info);
        }
        &self.this_tick[&pid]
    }

    fn user_name(&mut self, uid: u32) -> String {
        self.users
            .entry(uid)
            .or_insert_with(
                || match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
                    Ok(Some(user)) => user.name,
                    _ => uid.to_string(),
                },
            )
            .clone()
    }
}

/// The real uid from `/proc/PID/status` (what `ps` and gpustat show).
fn real_uid(dir: &Path) -> Option<u32> {
    let status = std::fs::read_to_string(dir.join("status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn command(dir: &Path) -> Option<String> {
    if let Ok(cmdline) = std::fs::read(dir.join("cmdline")) {
        let argv0 = cmdline.split(|&b| b == 0).next().unwrap_or_default();
        let base = argv0.rsplit(|&b| b == b'/').next().unwrap_or_default();
        if !base.is_empty() {
            return Some(String::from_utf8_lossy(base).into_owned());
        }
    }
    let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
    Some(comm.trim_end_matches('\n').to_owned()).filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(pid: u32, status: &str, cmdline: &[u8], comm: &str) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("gpupeek-procfs-{}-{pid}", std::process::id()));
        let dir = root.join(pid.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("status"), status).unwrap();
        std::fs::write(dir.join("cmdline"), cmdline).unwrap();
        std::fs::write(dir.join("comm"), comm).unwrap();
        root
    }

    #[test]
    fn command_is_the_basename_of_argv0_and_user_is_the_real_uid() {
        let root = fake_proc(
            7,
            "Name:\tx\nUid:\t0\t1000\t1000\t1000\n",
            b"/usr/bin/python3\0train.py\0",
            "pt_main_thread\n",
        );
        let mut procfs = Procfs::new(&root);
        let info = procfs.lookup(7);
        assert_eq!(info.command.as_deref(), Some("python3"));
        assert_eq!(info.user, Some((0, "root".to_owned())));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn empty_cmdline_falls_back_to_comm_and_unknown_uid_to_its_number() {
        let root = fake_proc(8, "Uid:\t4000000\t0\t0\t0\n", b"", "kworker\n");
        let mut procfs = Procfs::new(&root);
        let info = procfs.lookup(8);
        assert_eq!(info.command.as_deref(), Some("kworker"));
        assert_eq!(info.user, Some((4000000, "4000000".to_owned())));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_process_is_read_once_per_tick_however_many_gpus_list_it() {
        let root = fake_proc(9, "Uid:\t0\t0\t0\t0\n", b"first\0", "first\n");
        let mut procfs = Procfs::new(&root);
        assert_eq!(procfs.lookup(9).command.as_deref(), Some("first"));
        std::fs::write(root.join("9/cmdline"), b"second\0").unwrap();
        assert_eq!(
            procfs.lookup(9).command.as_deref(),
            Some("first"),
            "same tick"
        );
        procfs.new_tick();
        assert_eq!(
            procfs.lookup(9).command.as_deref(),
            Some("second"),
            "next tick"
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_vanished_process_has_no_details() {
        let mut procfs = Procfs::new("/nonexistent-proc");
        let info = procfs.lookup(1);
        assert!(info.user.is_none() && info.command.is_none());
    }
}
