//! Reading `/proc/PID/FILE` without allocating: one path and one byte buffer, kept and
//! reused for every file of every process.
//!
//! The buffer grows to fit the largest file read so far (a long command line, a big
//! `status`) and never shrinks, so once the daemon has seen its processes a read makes
//! no heap allocation. What a read returns borrows the buffer until the next read.

use std::borrow::Cow;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// At most this many bytes are zeroed and offered to one `read`, so that a buffer grown
/// for one long command line does not make every small read clear all of it.
const CHUNK: usize = 4096;

/// Files below a `/proc` root, read into kept buffers.
pub struct ProcFiles {
    root: PathBuf,
    /// `ROOT/PID/FILE` of the file being read.
    path: PathBuf,
    buf: Vec<u8>,
}

impl ProcFiles {
    /// Reads below `root` (normally `/proc`).
    pub fn new(root: PathBuf) -> Self {
        ProcFiles {
            root,
            path: PathBuf::new(),
            buf: Vec::new(),
        }
    }

    /// The bytes of `/proc/PID/FILE` (a command line need not be UTF-8); `None` when it
    /// cannot be read.
    ///
    /// A plain read loop: `read_to_end` on a `File` would first `statx` and `lseek` it for
    /// a size hint, two more system calls per file (and /proc files say size 0).
    pub fn read(&mut self, pid: u32, file: &str) -> Option<&[u8]> {
        self.set_path(pid, file);
        let mut f = std::fs::File::open(&self.path).ok()?;
        let bytes = &mut self.buf;
        bytes.clear();
        loop {
            if bytes.len() == bytes.capacity() {
                bytes.reserve(512);
            }
            let start = bytes.len();
            bytes.resize(bytes.capacity().min(start + CHUNK), 0);
            match f.read(&mut bytes[start..]) {
                Ok(0) => {
                    bytes.truncate(start);
                    return Some(bytes);
                }
                Ok(n) => bytes.truncate(start + n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => bytes.truncate(start),
                Err(_) => return None,
            }
        }
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
