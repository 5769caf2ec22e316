//! `--by-user`: who is using the machine's GPUs, and how much. One row per user, across
//! every GPU shown: the GPUs they are on, their process count, GPU memory, the sum of their
//! processes' SM utilisation (200% = two GPUs' worth), CPU and host memory. Processes whose
//! owner the daemon withholds (and the reader cannot see) are grouped as `?`.

use std::fmt::Write;

use serde::Serialize;

use crate::style::{self as s, Painter};
use crate::table::bytes2human;
use crate::view::{ProcView, View};

/// One user's share.
#[derive(Debug, Serialize, PartialEq)]
pub struct UserRow {
    /// User name; `None` when withheld.
    pub username: Option<String>,
    /// Uid; `None` when withheld.
    pub uid: Option<u32>,
    /// What their processes use.
    #[serde(flatten)]
    pub usage: Usage,
}

/// What a group of processes (a user's, a container's) uses: the columns `--by-user`
/// and `--by-container` share.
#[derive(Debug, Serialize, PartialEq, Default)]
pub struct Usage {
    /// GPU indices, ascending.
    pub gpus: Vec<u32>,
    /// Number of (process, GPU) pairs.
    pub processes: u32,
    /// GPU memory, MiB; `None` when no process's memory is known.
    pub gpu_memory_usage: Option<u64>,
    /// Sum of the processes' SM utilisation, percent; `None` when none is known.
    pub sm_utilization: Option<u32>,
    /// Sum of the processes' CPU use, percent of one core (each process counted once).
    pub cpu_percent: Option<f64>,
    /// Sum of resident host memory, bytes (each process counted once).
    pub cpu_memory_usage: Option<u64>,
}

impl Usage {
    /// Most GPU memory first.
    pub(crate) fn by_memory(a: &Usage, b: &Usage) -> std::cmp::Ordering {
        b.gpu_memory_usage.cmp(&a.gpu_memory_usage)
    }
}

/// Every process on the GPUs in `view`, grouped by `key`: each group's usage, in the
/// order groups first appear, GPUs ascending. A process on several GPUs counts once
/// for its CPU use and host memory.
pub(crate) fn group<K: PartialEq>(view: &View, key: impl Fn(&ProcView) -> K) -> Vec<(K, Usage)> {
    let mut groups: Vec<(K, Usage)> = Vec::new();
    let mut counted_pids: Vec<(usize, u32)> = Vec::new();
    for gpu in &view.gpus {
        for p in gpu.processes.iter().flatten() {
            let k = key(p);
            let at = match groups.iter().position(|(g, _)| *g == k) {
                Some(at) => at,
                None => {
                    groups.push((k, Usage::default()));
                    groups.len() - 1
                }
            };
            let usage = &mut groups[at].1;
            if !usage.gpus.contains(&gpu.index) {
                usage.gpus.push(gpu.index);
            }
            usage.processes += 1;
            add(&mut usage.gpu_memory_usage, p.gpu_mem_mib);
            add(&mut usage.sm_utilization, p.gpu_util_pct.map(|u| u[0]));
            if !counted_pids.contains(&(at, p.host_pid)) {
                counted_pids.push((at, p.host_pid));
                add(&mut usage.cpu_memory_usage, p.host_mem_bytes);
                if let Some(cpu) = p.cpu_percent {
                    *usage.cpu_percent.get_or_insert(0.0) += cpu;
                }
            }
        }
    }
    for (_, usage) in &mut groups {
        usage.gpus.sort_unstable();
    }
    groups
}

/// Rows for every user with a process on the GPUs in `view`, most GPU memory first.
pub fn rows(view: &View) -> Vec<UserRow> {
    let mut rows: Vec<UserRow> = group(view, |p| (p.uid, p.user.clone()))
        .into_iter()
        .map(|((uid, username), usage)| UserRow {
            username,
            uid,
            usage,
        })
        .collect();
    rows.sort_by(|a, b| {
        Usage::by_memory(&a.usage, &b.usage).then_with(|| a.username.cmp(&b.username))
    });
    rows
}

/// GPU processes in `view` that no row counts: withheld by the daemon (`--process-info
/// none`) or beyond the process table's slots.
pub fn not_shown(view: &View) -> u32 {
    view.gpus.iter().map(|g| g.processes_not_shown).sum()
}

/// GPUs in `view` whose processes nobody knows (lost, failing, or the driver not
/// responding): the rows leave them out, so the table must say so rather than show
/// them as unused. An asleep GPU has no process: it is not one of these.
pub fn not_counted(view: &View) -> Vec<u32> {
    view.gpus
        .iter()
        .filter(|g| g.problem().is_some())
        .map(|g| g.index)
        .collect()
}

/// Adds `value`, when known, to `total`.
pub(crate) fn add<T: std::ops::AddAssign + Default>(total: &mut Option<T>, value: Option<T>) {
    if let Some(v) = value {
        *total.get_or_insert_with(T::default) += v;
    }
}

/// The per-user table; `not_shown` processes (see [`not_shown`]) are said to be missing.
pub fn render(rows: &[UserRow], not_shown: u32, not_counted: &[u32], paint: Painter) -> String {
    let users = KeyColumn {
        title: "USER",
        cells: rows
            .iter()
            .map(|r| r.username.as_deref().unwrap_or("?").to_owned())
            .collect(),
    };
    let usages: Vec<&Usage> = rows.iter().map(|r| &r.usage).collect();
    render_table(&[users], &usages, not_shown, not_counted, paint)
}

/// A column that names a grouped table's rows: its title and a cell per row, padded to
/// the longest of them.
pub(crate) struct KeyColumn<'a> {
    pub title: &'a str,
    pub cells: Vec<String>,
}

/// A grouped table (per user, per container): the key columns (the first in bold), then
/// each row's usage, then [`render_notes`].
pub(crate) fn render_table(
    keys: &[KeyColumn],
    usages: &[&Usage],
    not_shown: u32,
    not_counted: &[u32],
    paint: Painter,
) -> String {
    let widths: Vec<usize> = keys
        .iter()
        .map(|k| {
            k.cells
                .iter()
                .map(|c| c.chars().count())
                .chain([k.title.chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let gpus: Vec<String> = usages
        .iter()
        .map(|u| {
            u.gpus
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    let gpu_width = gpus.iter().map(String::len).max().unwrap_or(0).max(4);
    let mut out = String::new();
    for (k, width) in keys.iter().zip(&widths) {
        let _ = write!(out, "{:width$}  ", k.title);
    }
    let _ = writeln!(
        out,
        "{:gpu_width$}  {:>5}  {:>11}  {:>4}  {:>5}  {:>8}",
        "GPUS", "PROCS", "GPU MEMORY", "SM%", "CPU%", "HOST MEM"
    );
    if usages.is_empty() && not_shown == 0 && not_counted.is_empty() {
        out.push_str(&paint.paint(s::YELLOW, "(No GPU processes)"));
        out.push('\n');
    }
    for (i, (usage, gpus)) in usages.iter().zip(&gpus).enumerate() {
        for (n, (k, width)) in keys.iter().zip(&widths).enumerate() {
            let cell = format!("{:width$}", k.cells[i]);
            if n == 0 {
                out.push_str(&paint.paint(s::BOLD_BLACK, cell));
            } else {
                out.push_str(&cell);
            }
            out.push_str("  ");
        }
        let unknown = |v: Option<String>| v.unwrap_or_else(|| "??".into());
        let mem = format!(
            "{:>8} MB",
            unknown(usage.gpu_memory_usage.map(|m| m.to_string()))
        );
        let _ = writeln!(
            out,
            "{gpus:gpu_width$}  {:>5}  {}  {}  {:>5}  {:>8}",
            usage.processes,
            paint.paint(s::YELLOW, format!("{mem:>11}")),
            paint.paint(
                s::GREEN,
                format!(
                    "{:>4}",
                    unknown(usage.sm_utilization.map(|u| u.to_string()))
                )
            ),
            unknown(usage.cpu_percent.map(|c| format!("{c:.0}"))),
            unknown(usage.cpu_memory_usage.map(bytes2human)),
        );
    }
    out + &render_notes(not_shown, not_counted, paint)
}

/// The lines after a grouped table (per user or per container): processes no row counts
/// and GPUs whose processes could not be read.
pub(crate) fn render_notes(not_shown: u32, not_counted: &[u32], paint: Painter) -> String {
    let mut out = String::new();
    if not_shown > 0 {
        let line = format!("({not_shown} GPU processes not shown, so not counted)");
        out.push_str(&paint.paint(s::YELLOW, line));
        out.push('\n');
    }
    if !not_counted.is_empty() {
        let list: Vec<String> = not_counted.iter().map(u32::to_string).collect();
        let (gpus, its) = if list.len() == 1 {
            ("GPU", "its")
        } else {
            ("GPUs", "their")
        };
        let line = format!(
            "({gpus} {} could not be read: {its} processes are not counted)",
            list.join(",")
        );
        out.push_str(&paint.paint(s::RED, line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::gpu_view as gpu;
    use crate::view::ProcView;
    use gpupeek_shm::GpuState;

    fn proc(pid: u32, user: Option<(&str, u32)>, mem: u64, sm: u32) -> ProcView {
        ProcView {
            pid,
            host_pid: pid,
            uid: user.map(|u| u.1),
            user: user.map(|u| u.0.to_owned()),
            gpu_mem_mib: Some(mem),
            gpu_util_pct: Some([sm, 0, 0, 0]),
            cpu_percent: user.map(|_| 50.0),
            host_mem_bytes: user.map(|_| 1 << 30),
            ..ProcView::default()
        }
    }

    #[test]
    fn users_are_summed_across_gpus_and_counted_once_per_process() {
        let alice = Some(("alice", 1000));
        let view = View {
            driver_version: None,
            published_unix_ns: 0,
            proc_policy: None,
            processes_age_ms: None,
            gpus: vec![
                gpu(
                    0,
                    vec![
                        proc(10, alice, 1000, 40),
                        proc(20, Some(("bob", 1001)), 5000, 90),
                    ],
                ),
                gpu(1, vec![proc(10, alice, 2000, 30), proc(30, None, 7, 0)]),
            ],
        };
        let rows = rows(&view);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].username.as_deref(), Some("bob"));
        let a = &rows[1];
        assert_eq!(a.username.as_deref(), Some("alice"));
        assert_eq!(a.usage.gpus, [0, 1]);
        assert_eq!(a.usage.processes, 2);
        assert_eq!(a.usage.gpu_memory_usage, Some(3000));
        assert_eq!(a.usage.sm_utilization, Some(70));
        assert_eq!(
            a.usage.cpu_percent,
            Some(50.0),
            "pid 10 is one process on two GPUs"
        );
        assert_eq!(a.usage.cpu_memory_usage, Some(1 << 30));
        assert_eq!(rows[2].username, None, "withheld owners group together");
        let text = render(
            &rows,
            not_shown(&view),
            &[],
            Painter::new(false, true, false),
        );
        assert!(text.contains("alice  0,1       2"), "{text}");
        assert!(!text.contains("not shown"), "{text}");
    }

    #[test]
    fn processes_the_table_does_not_hold_are_said_to_be_missing() {
        let mut hidden = gpu(0, Vec::new());
        hidden.processes_not_shown = 3;
        let mut full = gpu(1, vec![proc(10, Some(("alice", 1000)), 1000, 40)]);
        full.processes_not_shown = 2;
        let plain = Painter::new(false, true, false);
        let mut view = View {
            driver_version: None,
            published_unix_ns: 0,
            proc_policy: None,
            processes_age_ms: None,
            gpus: vec![hidden],
        };
        let text = render(&rows(&view), not_shown(&view), &[], plain);
        assert!(!text.contains("No GPU processes"), "{text}");
        assert!(
            text.contains("(3 GPU processes not shown, so not counted)"),
            "{text}"
        );
        view.gpus.push(full);
        let text = render(&rows(&view), not_shown(&view), &[], plain);
        assert!(text.contains("alice"), "{text}");
        assert!(text.contains("(5 GPU processes not shown"), "{text}");
        let empty = View {
            gpus: vec![gpu(0, Vec::new())],
            ..view
        };
        let text = render(&rows(&empty), not_shown(&empty), &[], plain);
        assert!(text.contains("(No GPU processes)"), "{text}");
    }

    #[test]
    fn gpus_whose_processes_cannot_be_read_are_named_not_shown_as_unused() {
        let mut hung = gpu(1, Vec::new());
        hung.state = GpuState::NotResponding;
        hung.processes = None;
        let mut asleep = gpu(2, Vec::new());
        asleep.state = GpuState::Suspended;
        asleep.processes = None;
        let view = View {
            driver_version: None,
            published_unix_ns: 0,
            proc_policy: None,
            processes_age_ms: None,
            gpus: vec![gpu(0, Vec::new()), hung, asleep],
        };
        assert_eq!(not_counted(&view), [1]);
        let plain = Painter::new(false, true, false);
        let text = render(&rows(&view), not_shown(&view), &not_counted(&view), plain);
        assert!(!text.contains("No GPU processes"), "{text}");
        assert!(
            text.contains("(GPU 1 could not be read: its processes are not counted)"),
            "{text}"
        );
    }
}
