//! Test support, not part of the API: a segment of a test's own, cleaned up after it.

use crate::writer::Options;

/// A segment name unique to this process and a tag, with a lock directory of its own
/// under the temporary directory; the segment and the directory are removed when it is
/// dropped.
pub struct TempName(pub String);

impl TempName {
    /// `gpupeek-test-TAG-PID`.
    pub fn new(tag: &str) -> Self {
        TempName(format!("gpupeek-test-{tag}-{}", std::process::id()))
    }

    /// Writer options for `gpus` GPU slots and `procs` process slots (epoch 1, this
    /// process as the writer), locking in this name's own directory (created).
    pub fn options(&self, gpus: u32, procs: u32) -> Options {
        let lock_dir = std::env::temp_dir().join(&self.0);
        // A test whose lock directory cannot be made fails at `Publisher::create`.
        let _ = std::fs::create_dir_all(&lock_dir);
        Options {
            gpu_capacity: gpus,
            proc_capacity: procs,
            lock_dir,
            ..Options::new(1, std::process::id())
        }
    }

    /// The segment's path under /dev/shm.
    pub fn path(&self) -> String {
        format!("/dev/shm/{}", self.0)
    }
}

impl Drop for TempName {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.path());
        let _ = std::fs::remove_dir_all(std::env::temp_dir().join(&self.0));
    }
}
