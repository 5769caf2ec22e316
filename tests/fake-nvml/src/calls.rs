//! Call counting: after every exported call, when `$FAKE_NVML_CALLS_DIR` is
//! set, `<dir>/<pid>.calls` is atomically rewritten with the counts so far.
//! With `$FAKE_NVML_SYSFS_ROOT` set, a `suspended_gpu_calls N` line follows
//! `open_handles`: calls made on a GPU that fake sysfs says is suspended. After any
//! array write that overran the caller's buffer, a `buffer_overflows N` line ends the
//! file ([`OVERFLOWS`]; see [`crate::procs`]).
//!
//! Each call's simulated latency (see [`crate::latency`]) is added up too: a
//! `time_us T` line (all functions) follows those, and after the `NAME COUNT`
//! lines come `us:NAME T` lines for the functions that slept, so benchmarks can
//! tell time inside NVML by function.
//!
//! Each field id `nvmlDeviceGetFieldValues` was asked for is counted too, in
//! `field:ID N` lines at the end, so a test can tell which fields a tick reads.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Mutex;

/// Environment variable naming the directory for call-count files.
pub const CALLS_DIR_ENV: &str = "FAKE_NVML_CALLS_DIR";

/// The calls file's key for the number of array writes that overran their buffer.
pub const OVERFLOWS: &str = "buffer_overflows";

struct Counts {
    total: u64,
    suspended_gpu_calls: u64,
    overflows: u64,
    /// Per function: calls, and simulated µs spent in them.
    by_function: BTreeMap<&'static str, (u64, u64)>,
    /// Per field id: how many times `nvmlDeviceGetFieldValues` was asked for it.
    fields: BTreeMap<u32, u64>,
}

static COUNTS: Mutex<Counts> = Mutex::new(Counts {
    total: 0,
    suspended_gpu_calls: 0,
    overflows: 0,
    by_function: BTreeMap::new(),
    fields: BTreeMap::new(),
});

/// Counts a call made on a runtime-suspended GPU (written with the next record).
pub fn record_suspended_gpu_call() {
    let mut counts = COUNTS.lock().unwrap_or_else(|p| p.into_inner());
    counts.suspended_gpu_calls = counts.suspended_gpu_calls.saturating_add(1);
}

/// Counts one entry of a field-value call asking for field `id` (written with the
/// call's record).
pub fn record_field(id: u32) {
    let mut counts = COUNTS.lock().unwrap_or_else(|p| p.into_inner());
    *counts.fields.entry(id).or_insert(0) += 1;
}

/// Counts an array write that overran the caller's buffer (written with the next record).
pub fn record_overflow() {
    let mut counts = COUNTS.lock().unwrap_or_else(|p| p.into_inner());
    counts.overflows = counts.overflows.saturating_add(1);
}

/// Counts one call of `function` that slept `spent_us` and, if enabled,
/// rewrites the calls file. `open_handles` is asked for while the count lock is
/// held, so the last file written always carries the latest value.
pub fn record(function: &'static str, spent_us: u64, open_handles: impl FnOnce() -> u64) {
    let mut counts = COUNTS.lock().unwrap_or_else(|p| p.into_inner());
    counts.total = counts.total.saturating_add(1);
    let (n, us) = counts.by_function.entry(function).or_insert((0, 0));
    *n = n.saturating_add(1);
    *us = us.saturating_add(spent_us);

    let Some(dir) = std::env::var_os(CALLS_DIR_ENV) else {
        return;
    };
    let suspended =
        std::env::var_os(crate::sysfs::SYSFS_ROOT_ENV).map(|_| counts.suspended_gpu_calls);
    let mut text = render(counts.total, open_handles(), suspended, &counts.by_function);
    if counts.overflows > 0 {
        let _ = writeln!(text, "{OVERFLOWS} {}", counts.overflows);
    }
    for (id, n) in &counts.fields {
        let _ = writeln!(text, "field:{id} {n}");
    }
    if let Err(e) = write_atomically(Path::new(&dir), std::process::id(), &text) {
        eprintln!("fake-nvml: cannot write call counts to {dir:?}: {e}");
    }
}

/// The calls file's text: `total N`, `open_handles K`, `suspended_gpu_calls S`
/// (when watching sysfs), `time_us T`, then one `NAME COUNT` line per function,
/// then one `us:NAME T` line per function that slept, each sorted by name.
fn render(
    total: u64,
    open_handles: u64,
    suspended_gpu_calls: Option<u64>,
    by_function: &BTreeMap<&'static str, (u64, u64)>,
) -> String {
    let mut text = format!("total {total}\nopen_handles {open_handles}\n");
    // Writing to a String cannot fail.
    if let Some(n) = suspended_gpu_calls {
        let _ = writeln!(text, "suspended_gpu_calls {n}");
    }
    let time_us: u64 = by_function.values().map(|&(_, us)| us).sum();
    let _ = writeln!(text, "time_us {time_us}");
    for (name, (count, _)) in by_function {
        let _ = writeln!(text, "{name} {count}");
    }
    for (name, (_, us)) in by_function.iter().filter(|(_, (_, us))| *us > 0) {
        let _ = writeln!(text, "us:{name} {us}");
    }
    text
}

fn write_atomically(dir: &Path, pid: u32, text: &str) -> std::io::Result<()> {
    let tmp = dir.join(format!("{pid}.calls.tmp"));
    let dest = dir.join(format!("{pid}.calls"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_sorted_counts() {
        let mut m = BTreeMap::new();
        m.insert("nvmlShutdown", (1, 0));
        m.insert("nvmlInit_v2", (2, 0));
        assert_eq!(
            render(3, 1, None, &m),
            "total 3\nopen_handles 1\ntime_us 0\nnvmlInit_v2 2\nnvmlShutdown 1\n"
        );
        assert_eq!(
            render(3, 0, Some(2), &m),
            "total 3\nopen_handles 0\nsuspended_gpu_calls 2\ntime_us 0\nnvmlInit_v2 2\nnvmlShutdown 1\n"
        );
    }

    #[test]
    fn renders_time_spent_by_function() {
        let mut m = BTreeMap::new();
        m.insert("nvmlDeviceGetPcieThroughput", (2, 40_000));
        m.insert("nvmlDeviceGetName", (1, 0));
        assert_eq!(
            render(3, 1, None, &m),
            "total 3\nopen_handles 1\ntime_us 40000\nnvmlDeviceGetName 1\n\
             nvmlDeviceGetPcieThroughput 2\nus:nvmlDeviceGetPcieThroughput 40000\n"
        );
    }

    #[test]
    fn writes_file_atomically() {
        let dir = std::env::temp_dir().join(format!("fake-nvml-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write_atomically(&dir, 42, "total 0\nopen_handles 0\n").unwrap();
        let got = std::fs::read_to_string(dir.join("42.calls")).unwrap();
        assert_eq!(got, "total 0\nopen_handles 0\n");
        assert!(!dir.join("42.calls.tmp").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
