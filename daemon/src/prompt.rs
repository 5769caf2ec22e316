//! The prompt file (`--prompt-file`, `--prompt-format`): one line of text that the
//! daemon renders from what it has just published and rewrites every tick, so that a
//! shell prompt can read it with a builtin (`read -r`) instead of forking `gpupeek`.
//!
//! The line is exactly what `gpupeek --format TEMPLATE` prints for the same records
//! (same engine, [`gpupeek_render`], plain markup, trailing newline); "GPU asleep" when
//! every GPU sleeps; "GPU not responding" when no GPU is awake and the driver does not
//! answer for one, and `[GPU 1 not responding]` after the values when some others are
//! awake; "GPU: NVML error" while NVML fails; [`RELEASED_TEXT`] while the daemon has
//! let go of NVML on request; and, after a clean stop,
//! [`STOPPED_TEXT`], which cannot be mistaken for values. A daemon that is killed cannot
//! write that line; `gpupeekd --prompt-stopped`, run by the service manager once the
//! daemon is gone (the unit's `ExecStopPost`), writes it in its place.
//!
//! Replacement is atomic: the text goes to a temporary file in the same directory,
//! created `O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC` with mode 0644, then renamed over the
//! target, so a reader sees the old line or the new one, never a partial or empty one.
//! The daemon runs as root: it never follows a symlink, neither at the temporary name
//! (`O_EXCL|O_NOFOLLOW` refuse one; a leftover is unlinked, not followed) nor at the
//! target (rename replaces the link itself). Every call is relative to a descriptor of
//! the directory, opened once (again after a failure).
//!
//! A line equal to the one last written is not written again: a reader sees the same
//! bytes either way, so the file's mtime is not a heartbeat (the segment has one).
//! Write failures are logged once per episode (and when writing works again) and never
//! stop the segment being published. Each tick reuses the same buffers: rendering and
//! comparing allocate nothing for a numeric template.

use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use gpupeek_model::{Gpu, Status};
use gpupeek_render::{
    all_asleep, none_responding, note_not_responding, Data, Plain, Template, ASLEEP_TEXT,
    NOT_RESPONDING_TEXT,
};
use gpupeek_shm::layout::DaemonState;
use gpupeek_shm::{GpuRecord, History, StatusRecord};
use nix::errno::Errno;
use nix::fcntl::{openat, renameat, OFlag, AT_FDCWD};
use nix::sys::stat::{fchmod, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};

use crate::history;

/// The template used when `--prompt-format` is not given: mean utilisation and the
/// memory used on every GPU together, as gpupeek's prompt outputs show by default.
pub const DEFAULT_FORMAT: &str = "{util}% {mem_used:GiB:.1}G";

/// What the file says after a clean stop.
pub const STOPPED_TEXT: &str = "gpupeekd stopped";

/// What the file says while NVML fails.
pub const NVML_ERROR_TEXT: &str = "GPU: NVML error";

/// What the file says while the daemon has let go of NVML on an operator's request (GPU
/// reset, MIG change): alive, on purpose, and publishing no GPU.
pub const RELEASED_TEXT: &str = "gpupeekd released";

/// The prompt file and the buffers reused every tick.
pub struct PromptFile {
    dir_path: PathBuf,
    /// File name of the target and of the temporary file, in `dir_path`.
    name: CString,
    tmp_name: CString,
    template: Template,
    dir: Option<OwnedFd>,
    line: String,
    written: String,
    /// The model of this tick's records (empty between ticks; see [`recycle`]).
    gpus: Vec<Gpu<'static>>,
    /// Samples per GPU the template's sparklines draw (0: none are kept).
    keep: usize,
    /// The newest `keep` history samples of each GPU, by index, oldest first.
    history: Vec<(u32, History)>,
    failing: bool,
}

impl PromptFile {
    /// Checks the flags: the path must name a file, the template must parse. Nothing is
    /// created yet. The error is one line.
    pub fn new(path: &Path, format: Option<&str>) -> Result<PromptFile, String> {
        let source = format.unwrap_or(DEFAULT_FORMAT);
        let template = Template::parse(source).map_err(|e| e.one_line("--prompt-format"))?;
        let keep = template.sparkline_width();
        let bad = |why: &str| format!("bad --prompt-file {}: {why}", path.display());
        // Absolute, since a detached daemon changes its directory to /.
        let path = std::path::absolute(path).map_err(|e| bad(&e.to_string()))?;
        let name = path
            .file_name()
            .filter(|_| !path.as_os_str().as_bytes().ends_with(b"/"))
            .ok_or_else(|| bad("it names no file"))?;
        let dir_path = path.parent().unwrap_or(Path::new("/")).to_path_buf();
        let c = |bytes: &[u8]| CString::new(bytes).map_err(|_| bad("it contains a NUL byte"));
        let tmp = [b".", name.as_bytes(), b".tmp"].concat();
        Ok(PromptFile {
            dir_path,
            name: c(name.as_bytes())?,
            tmp_name: c(&tmp)?,
            template,
            dir: None,
            line: String::new(),
            written: String::new(),
            gpus: Vec::new(),
            keep,
            history: Vec::new(),
            failing: false,
        })
    }

    /// Renders the line for what was just published (`status` and the GPU records, in
    /// slot order; `history_due` when this tick also appended to the history rings) and
    /// writes it if it changed.
    pub fn update(&mut self, status: &StatusRecord, gpus: &[GpuRecord], history_due: bool) {
        if history_due {
            self.record_history(gpus);
        }
        self.line.clear();
        let status = Status::new(status);
        if status.state == Some(DaemonState::Released) {
            self.line.push_str(RELEASED_TEXT);
        } else if status.state != Some(DaemonState::Live) {
            self.line.push_str(NVML_ERROR_TEXT);
        } else {
            let mut model = recycle(std::mem::take(&mut self.gpus));
            model.extend(gpus.iter().map(Gpu::new));
            if all_asleep(&model) {
                self.line.push_str(ASLEEP_TEXT);
            } else if none_responding(&model) {
                self.line.push_str(NOT_RESPONDING_TEXT);
            } else {
                let data = Data {
                    gpus: &model,
                    status,
                    history: &self.history,
                    mig: &[],
                };
                self.template.render_into(&data, &Plain, &mut self.line);
                note_not_responding(&model, &Plain, &mut self.line);
            }
            self.gpus = recycle(model);
        }
        self.line.push('\n');
        self.write_if_changed();
    }

    /// Appends this tick's samples to the prompt's own copy of the history rings (the
    /// same samples the segment's rings get), keeping as many as the template's widest
    /// sparkline draws; nothing when it has none.
    fn record_history(&mut self, gpus: &[GpuRecord]) {
        if self.keep == 0 {
            return;
        }
        for gpu in gpus {
            let at = match self.history.iter().position(|(i, _)| *i == gpu.index) {
                Some(at) => at,
                None => {
                    let ring = History {
                        samples: Vec::with_capacity(self.keep),
                        ..History::default()
                    };
                    self.history.push((gpu.index, ring));
                    self.history.len() - 1
                }
            };
            let samples = &mut self.history[at].1.samples;
            if samples.len() == self.keep {
                samples.remove(0);
            }
            samples.push(history::sample_of(gpu));
        }
    }

    /// After a clean stop: replaces the line with [`STOPPED_TEXT`].
    pub fn stopped(&mut self) {
        self.set_line(STOPPED_TEXT);
        self.write_if_changed();
    }

    /// Writes [`STOPPED_TEXT`] once, saying why not in one line: `gpupeekd
    /// --prompt-stopped`, run by the service manager after a daemon that could not stop
    /// cleanly (killed, crashed, hung past its watchdog) left its last values behind.
    pub fn mark_stopped(&mut self) -> Result<(), String> {
        self.set_line(STOPPED_TEXT);
        self.replace()
            .map_err(|e| format!("cannot write prompt file {}: {}", self.display(), e.desc()))
    }

    /// A fixed line, with its newline, as the next to write.
    fn set_line(&mut self, text: &str) {
        self.line.clear();
        self.line.push_str(text);
        self.line.push('\n');
    }

    fn write_if_changed(&mut self) {
        if self.line == self.written {
            return;
        }
        match self.replace() {
            Ok(()) => {
                if self.failing {
                    log::info!("prompt file {} written again", self.display());
                    self.failing = false;
                }
                self.written.clear();
                self.written.push_str(&self.line);
            }
            Err(e) => {
                // Reopen the directory next time: it may have been removed and made anew.
                self.dir = None;
                if !self.failing {
                    log::warn!("cannot write prompt file {}: {}", self.display(), e.desc());
                    self.failing = true;
                }
            }
        }
    }

    /// Writes the line to the temporary file and renames it over the target.
    fn replace(&mut self) -> nix::Result<()> {
        if self.dir.is_none() {
            let flags = OFlag::O_DIRECTORY | OFlag::O_PATH | OFlag::O_CLOEXEC;
            self.dir = Some(openat(AT_FDCWD, &self.dir_path, flags, Mode::empty())?);
        }
        let Some(dir) = &self.dir else {
            return Err(Errno::EBADF);
        };
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let mode = Mode::from_bits_truncate(0o644);
        let fd = match openat(dir, self.tmp_name.as_c_str(), flags, mode) {
            // A leftover of a crash, or something planted: unlink it (never follow it).
            Err(Errno::EEXIST) => {
                unlinkat(dir, self.tmp_name.as_c_str(), UnlinkatFlags::NoRemoveDir)?;
                openat(dir, self.tmp_name.as_c_str(), flags, mode)?
            }
            other => other?,
        };
        let written = fchmod(&fd, mode).and_then(|()| {
            let mut file = File::from(fd);
            file.write_all(self.line.as_bytes())
                .map_err(|e| e.raw_os_error().map_or(Errno::EIO, Errno::from_raw))
        });
        let renamed = written
            .and_then(|()| renameat(dir, self.tmp_name.as_c_str(), dir, self.name.as_c_str()));
        if renamed.is_err() {
            let _ = unlinkat(dir, self.tmp_name.as_c_str(), UnlinkatFlags::NoRemoveDir);
        }
        renamed
    }

    fn display(&self) -> String {
        self.dir_path
            .join(std::ffi::OsStr::from_bytes(self.name.as_bytes()))
            .display()
            .to_string()
    }
}

/// Empties `gpus` and hands its allocation back for a model of another lifetime (the
/// standard library collects in place when the element layout is unchanged), so the
/// per-tick model of the records costs no allocation.
fn recycle<'b>(mut gpus: Vec<Gpu>) -> Vec<Gpu<'b>> {
    gpus.clear();
    gpus.into_iter().map(|_| unreachable!()).collect()
}
