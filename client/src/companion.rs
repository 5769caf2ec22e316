//! The companion programs: `gpupeek serve` runs `gpupeek-serve`, `gpupeek top` runs
//! `gpupeek-top`, `gpupeek plot` runs `gpupeek-plot`.
//!
//! The exporter needs TLS, YAML, bcrypt and gzip, the monitor a TUI, the charts plotters
//! and a font; linked into `gpupeek`, they would make every one-shot call load a binary
//! more than twice the size (docs/PERFORMANCE.md). So `gpupeek` keeps only their flag tables (`--help`,
//! completions and the man page come from them, and a bad flag is refused here), then
//! executes the companion with the same arguments: the one next to the running
//! `gpupeek` executable, else the first on `PATH`. Without one, it says so in one line
//! and exits with status 11.

use std::ffi::CString;
use std::path::Path;

use nix::errno::Errno;

use crate::{Exit, EXIT_NO_COMPANION, EXIT_OS, EXIT_USAGE};

/// Runs `program` with `argv` in place of this process: the one next to this
/// executable, else the first on `PATH`; returns only if it cannot.
///
/// `execv` itself, not `std::process::Command`, whose spawning code makes the dynamic
/// loader bind more libc symbols at every start of every command (about 8,600
/// instructions, docs/PERFORMANCE.md).
pub fn exec(program: &str, argv: &[String]) -> Result<(), Exit> {
    use std::os::unix::ffi::OsStrExt;
    let exe = std::env::current_exe().ok();
    let beside = exe.as_deref().and_then(Path::parent).map(Path::to_path_buf);
    let path = std::env::var_os("PATH").unwrap_or_default();
    let on_path = std::env::split_paths(&path).filter(|dir| !dir.as_os_str().is_empty());
    let args = std::iter::once(program)
        .chain(argv.iter().map(String::as_str))
        .map(CString::new)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| Exit::new(EXIT_USAGE, "an argument holds a NUL byte"))?;
    for candidate in beside
        .clone()
        .into_iter()
        .chain(on_path)
        .map(|d| d.join(program))
    {
        let Ok(c_path) = CString::new(candidate.as_os_str().as_bytes()) else {
            continue;
        };
        match nix::unistd::execv(&c_path, &args) {
            Err(Errno::ENOENT | Errno::ENOTDIR) => continue,
            Err(e) => {
                return Err(Exit::new(
                    EXIT_OS,
                    format!("cannot run {}: {}", candidate.display(), e.desc()),
                ))
            }
        }
    }
    let dir = beside.map_or_else(|| "gpupeek's directory".into(), |d| d.display().to_string());
    let command = program.trim_start_matches("gpupeek-");
    Err(Exit::new(
        EXIT_NO_COMPANION,
        format!(
            "{command} needs {program}, which is neither in {dir} nor on PATH (it is \
             installed with gpupeek: make install)"
        ),
    ))
}
