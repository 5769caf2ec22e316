//! Reading `/proc/PID/FILE` without allocating: one path and one byte buffer, kept and
//! reused for every file of every process.
//!
//! The buffer grows to fit the largest file read so far (a long command line, a big
//! `status`) and never shrinks, so once the daemon has seen its processes a read makes
//! no heap allocation. What a read returns borrows the buffer until the next read.
//!
//! A file read every tick (`stat`, `statm`) can be read through a descriptor kept from
//! the last read ([`ProcFiles::read_kept`]): one `pread` from offset 0, where a read by
//! path is four system calls (open, read, the read that finds the end, close) and a walk
//! of the path. procfs makes the file anew on every read from offset 0, and the
//! descriptor stays bound to the process it was opened for: once that process is gone,
//! reading fails (`ESRCH`) even if its pid was given to another, and the file is opened
//! again by path.

use std::borrow::Cow;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// At most this many bytes are zeroed and offered to one `read`, so that a buffer grown
/// for one long command line does not make every small read clear all of it.
const CHUNK: usize = 4096;

/// Files below a `/proc` root, read into kept buffers.
pub struct ProcFiles {
    root: PathBuf,
    /// `ROOT/PID/FILE` of the file being read.
    path: PathBuf,
    buf: Vec<u8>,
    /// `root` is a procfs mount, whose files are made anew on every read from offset 0
    /// (false for a directory of plain files standing in for `/proc` in tests).
    procfs: bool,
}

impl ProcFiles {
    /// Reads below `root` (normally `/proc`).
    pub fn new(root: PathBuf) -> Self {
        ProcFiles {
            procfs: is_procfs(&root),
            root,
            path: PathBuf::new(),
            buf: Vec::new(),
        }
    }

    /// The bytes of `/proc/PID/FILE`, read through `kept` when it holds a descriptor of
    /// that file (see the module's notes), else by path; the descriptor is then left in
    /// `kept` when `keep` says so and the root is a procfs. `kept` is emptied when
    /// reading through it fails: its process is gone. `None` when the file cannot be
    /// read.
    pub fn read_kept(
        &mut self,
        kept: &mut Option<File>,
        keep: bool,
        pid: u32,
        file: &str,
    ) -> Option<&[u8]> {
        if let Some(f) = kept {
            if read_whole_at_start(f, &mut self.buf) {
                return Some(&self.buf);
            }
            *kept = None;
        }
        self.set_path(pid, file);
        let mut f = File::open(&self.path).ok()?;
        if !read_to_end(&mut f, &mut self.buf) {
            return None;
        }
        if keep && self.procfs {
            *kept = Some(f);
        }
        Some(&self.buf)
    }

    /// The bytes of `/proc/PID/FILE` (a command line need not be UTF-8); `None` when it
    /// cannot be read.
    ///
    /// A plain read loop: `read_to_end` on a `File` would first `statx` and `lseek` it for
    /// a size hint, two more system calls per file (and /proc files say size 0).
    pub fn read(&mut self, pid: u32, file: &str) -> Option<&[u8]> {
        self.set_path(pid, file);
        let mut f = File::open(&self.path).ok()?;
        read_to_end(&mut f, &mut self.buf).then_some(&self.buf)
    }

    /// The text of `/proc/PID/FILE`, bytes that are not UTF-8 replaced by U+FFFD; `None`
    /// when it cannot be read. A process's name (in `stat`, `status` and `comm`) is
    /// whatever bytes it chose, or its file name cut at 15 bytes, possibly inside a
    /// character, so it need not be UTF-8: the rest of the file must still be read.
    /// Borrows the buffer (no allocation) when the file is valid UTF-8.
    pub fn read_str(&mut self, pid: u32, file: &str) -> Option<Cow<'_, str>> {
        self.read(pid, file).map(String::from_utf8_lossy)
    }

    /// The inode that `/proc/PID/FILE` leads to, following links: for `ns/pid`, the
    /// process's pid namespace (the number in the link's `pid:[N]`), found with one
    /// `statx` where reading the link would allocate its target.
    pub fn inode(&mut self, pid: u32, file: &str) -> Option<u64> {
        self.set_path(pid, file);
        std::fs::metadata(&self.path).ok().map(|m| m.ino())
    }

    fn set_path(&mut self, pid: u32, file: &str) {
        let mut digits = [0u8; 10];
        let mut start = digits.len();
        let mut rest = pid;
        loop {
            start -= 1;
            digits[start] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        let path = self.path.as_mut_os_string();
        path.clear();
        path.push(self.root.as_os_str());
        self.path
            .push(std::ffi::OsStr::from_bytes(&digits[start..]));
        self.path.push(file);
    }
}

/// Reads `f` from where it stands to its end into `bytes`; false on an error.
fn read_to_end(f: &mut File, bytes: &mut Vec<u8>) -> bool {
    bytes.clear();
    loop {
        let start = grow(bytes);
        match f.read(&mut bytes[start..]) {
            Ok(0) => {
                bytes.truncate(start);
                return true;
            }
            Ok(n) => bytes.truncate(start + n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => bytes.truncate(start),
            Err(_) => return false,
        }
    }
}

/// Reads the procfs file `f` whole from offset 0 into `bytes`; false on an error. A
/// read that fills less than it was offered has read to the end: procfs's generated
/// files (`seq_file`) give all they hold, up to what is asked, in one read, so a file
/// smaller than the buffer takes one `pread`.
fn read_whole_at_start(f: &File, bytes: &mut Vec<u8>) -> bool {
    bytes.clear();
    loop {
        let start = grow(bytes);
        let offered = bytes.len() - start;
        match f.read_at(&mut bytes[start..], start as u64) {
            Ok(n) => {
                bytes.truncate(start + n);
                if n < offered {
                    return true;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => bytes.truncate(start),
            Err(_) => return false,
        }
    }
}

/// Makes room at the end of `bytes` for one read (at most [`CHUNK`] bytes, zeroed) and
/// returns where it starts.
fn grow(bytes: &mut Vec<u8>) -> usize {
    if bytes.len() == bytes.capacity() {
        bytes.reserve(512);
    }
    let start = bytes.len();
    bytes.resize(bytes.capacity().min(start + CHUNK), 0);
    start
}

/// Whether `root` is a procfs mount.
fn is_procfs(root: &Path) -> bool {
    use nix::sys::statfs::{statfs, PROC_SUPER_MAGIC};
    statfs(root).is_ok_and(|s| s.filesystem_type() == PROC_SUPER_MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_bytes_text_and_namespace_inodes_of_real_processes() {
        let mut files = ProcFiles::new("/proc".into());
        let me = std::process::id();
        let cmdline = files.read(me, "cmdline").unwrap().to_vec();
        assert_eq!(
            cmdline,
            std::fs::read(format!("/proc/{me}/cmdline")).unwrap()
        );
        assert!(files.read_str(me, "status").unwrap().starts_with("Name:"));
        let inode = files.inode(me, "ns/pid").unwrap();
        let link = std::fs::read_link("/proc/self/ns/pid").unwrap();
        assert_eq!(link.to_str(), Some(format!("pid:[{inode}]").as_str()));
        assert!(files.read(u32::MAX, "stat").is_none());
        assert!(files.inode(u32::MAX, "ns/pid").is_none());
    }

    /// CPU time (utime + stime, clock ticks) in a `/proc/PID/stat` text.
    fn cpu_ticks(stat: &[u8]) -> u64 {
        let text = String::from_utf8_lossy(stat);
        let after_name = &text[text.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after_name.split(' ').collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }

    /// A child process, killed when dropped (also when a test fails).
    struct Child(std::process::Child);

    impl Drop for Child {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn a_kept_descriptor_reads_the_file_anew_until_its_process_is_gone() {
        let mut files = ProcFiles::new("/proc".into());
        let mut child = Child(
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap(),
        );
        let pid = child.0.id();
        let mut kept = None;
        let first = files
            .read_kept(&mut kept, true, pid, "stat")
            .unwrap()
            .to_vec();
        assert!(kept.is_some(), "a procfs file is kept open");
        assert!(first.starts_with(format!("{pid} (sh) ").as_bytes()));
        // The child spins: a read through the descriptor sees its CPU time grow.
        let start = std::time::Instant::now();
        let grown = loop {
            let now = cpu_ticks(files.read_kept(&mut kept, true, pid, "stat").unwrap());
            if now > cpu_ticks(&first) || start.elapsed() > std::time::Duration::from_secs(10) {
                break now;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(grown > cpu_ticks(&first), "still {grown} ticks");
        assert!(kept.is_some());
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        assert_eq!(files.read_kept(&mut kept, true, pid, "stat"), None);
        assert!(kept.is_none(), "the gone process's descriptor is closed");
        // Not asked to keep: read by path, nothing kept.
        let me = std::process::id();
        assert!(files.read_kept(&mut kept, false, me, "statm").is_some());
        assert!(kept.is_none());
    }

    #[test]
    fn plain_files_standing_in_for_proc_are_never_kept_open() {
        let root =
            std::env::temp_dir().join(format!("gpupeek-procfile-kept-{}", std::process::id()));
        std::fs::create_dir_all(root.join("4")).unwrap();
        std::fs::write(root.join("4/statm"), b"730 25 20 5 0 89 0\n").unwrap();
        let mut files = ProcFiles::new(root.clone());
        let mut kept = None;
        let read = files
            .read_kept(&mut kept, true, 4, "statm")
            .map(<[u8]>::to_vec);
        assert_eq!(read.as_deref(), Some(&b"730 25 20 5 0 89 0\n"[..]));
        assert!(
            kept.is_none(),
            "a removed plain file would still read through a descriptor"
        );
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(files.read_kept(&mut kept, true, 4, "statm"), None);
    }

    #[test]
    fn a_file_longer_than_a_chunk_is_read_whole_and_non_utf8_text_is_replaced() {
        let root = std::env::temp_dir().join(format!("gpupeek-procfile-{}", std::process::id()));
        std::fs::create_dir_all(root.join("3")).unwrap();
        let long: Vec<u8> = (0..3 * CHUNK + 7).map(|i| (i % 251) as u8).collect();
        std::fs::write(root.join("3/cmdline"), &long).unwrap();
        let mut files = ProcFiles::new(root.clone());
        assert_eq!(files.read(3, "cmdline"), Some(long.as_slice()));
        std::fs::write(root.join("3/comm"), b"\xd0\xbe\xd0\n").unwrap();
        assert_eq!(
            files.read_str(3, "comm").as_deref(),
            Some("\u{43e}\u{fffd}\n")
        );
        std::fs::write(root.join("3/cmdline"), b"short\0").unwrap();
        assert!(matches!(
            files.read_str(3, "cmdline"),
            Some(Cow::Borrowed("short\0"))
        ));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
