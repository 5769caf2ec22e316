//! The fleet as a table or a JSON document.
//!
//! `--group-by host` (the default): a summary line, then a block per host, hosts with
//! the most free GPUs and MIG devices first and hosts that could not be read last, each
//! with its reason; in a block, free GPUs first. A GPU row: index, name, utilisation,
//! memory used/total (MiB), a status (`free`, `busy`, `IDLE` for memory held with
//! nothing running, `MIG` for a GPU split into MIG devices, or the GPU's own state) and
//! its users; under a `MIG` GPU a row per device (`└ MIG 3g.40gb (1/0)`: profile, GPU
//! and compute instance), with its memory, status and users. `--group-by
//! user|pod|job`: a row per group with the hosts, GPUs, processes and GPU memory it
//! holds.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use gpupeek::fleetview::GroupBy;
use serde::Serialize;

use crate::model::{Gpu, Mig, Process, Report};

/// Colours, or none.
#[derive(Clone, Copy)]
pub struct Paint(pub bool);

impl Paint {
    fn paint(self, code: &str, text: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
}

/// Counts for the summary line and the JSON's `summary`.
#[derive(Serialize)]
pub struct Summary {
    hosts: usize,
    hosts_failed: usize,
    gpus: usize,
    gpus_free: usize,
    gpus_idle_allocated: usize,
    mig_devices: usize,
    mig_devices_free: usize,
    mig_devices_idle_allocated: usize,
}

/// The summary of `reports`.
pub fn summary(reports: &[Report]) -> Summary {
    let gpus = || reports.iter().flat_map(|r| &r.gpus);
    let migs = || gpus().flat_map(|g| &g.mig);
    Summary {
        hosts: reports.len(),
        hosts_failed: reports.iter().filter(|r| r.error.is_some()).count(),
        gpus: gpus().count(),
        gpus_free: gpus().filter(|g| g.free).count(),
        gpus_idle_allocated: gpus().filter(|g| g.idle_allocated).count(),
        mig_devices: migs().count(),
        mig_devices_free: migs().filter(|m| m.free).count(),
        mig_devices_idle_allocated: migs().filter(|m| m.idle_allocated).count(),
    }
}

/// How many free GPUs and MIG devices `r` has.
fn free_units(r: &Report) -> usize {
    let gpus = r.gpus.iter().filter(|g| g.free).count();
    gpus + r
        .gpus
        .iter()
        .flat_map(|g| &g.mig)
        .filter(|m| m.free)
        .count()
}

/// Hosts with the most free GPUs and MIG devices first, failed hosts last, then by name
/// ([`by_name`]).
pub fn sort(reports: &mut [Report]) {
    reports.sort_by(|a, b| {
        let key = |r: &Report| (r.error.is_some(), std::cmp::Reverse(free_units(r)));
        key(a).cmp(&key(b)).then_with(|| by_name(&a.host, &b.host))
    });
}

/// Names in the order people number machines: runs of digits by their value, so
/// `gpu-2` before `gpu-10` and `10.0.0.9` before `10.0.0.10` (as `sort -V` and `ls -v`
/// put them); of equal values, the one with more leading zeros first, as `sort -V` has
/// them; the rest byte by byte.
pub fn by_name(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    let digits = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
    fn value(run: &[u8]) -> &[u8] {
        let zeros = run.iter().take_while(|&&c| c == b'0').count();
        &run[zeros..]
    }
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let (n, m) = (digits(a), digits(b));
                let (run_a, run_b) = (&a[..n], &b[..m]);
                let (va, vb) = (value(run_a), value(run_b));
                let order = va
                    .len()
                    .cmp(&vb.len())
                    .then_with(|| va.cmp(vb))
                    .then_with(|| m.cmp(&n));
                if order != Ordering::Equal {
                    return order;
                }
                (a, b) = (&a[n..], &b[m..]);
            }
            (Some(x), Some(y)) if x != y => return x.cmp(y),
            _ => (a, b) = (&a[1..], &b[1..]),
        }
    }
}

/// The table; on a screen of `rows` lines, cut to them with every host that was not
/// read still in it ([`fit`]).
pub fn table(reports: &[Report], group_by: GroupBy, paint: Paint, rows: Option<usize>) -> String {
    let s = summary(reports);
    let mut out = format!(
        "{} hosts ({} not read), {} GPUs: {} free, {} idle-allocated",
        s.hosts, s.hosts_failed, s.gpus, s.gpus_free, s.gpus_idle_allocated
    );
    if s.mig_devices > 0 {
        let _ = write!(
            out,
            "; {} MIG devices: {} free, {} idle-allocated",
            s.mig_devices, s.mig_devices_free, s.mig_devices_idle_allocated
        );
    }
    out.push('\n');
    let (body, not_read) = match group_by {
        GroupBy::Host => by_host(reports, paint),
        _ => by_group(reports, group_by),
    };
    out + &fit(body, not_read, rows.map(|r| r.saturating_sub(1)))
}

/// `body` (a column header, then rows) and then `not_read` (a line per host not read),
/// in `rows` lines when given: the first rows and a line saying how many more there are,
/// then the hosts not read, so that a watched fleet never hides one below the screen's
/// edge. They take what the rows leave, and at least half the lines when there are
/// that many of them; those beyond are counted in their last line.
fn fit(body: Vec<String>, not_read: Vec<String>, rows: Option<usize>) -> String {
    let lines = |v: &[String]| v.iter().map(|l| format!("{l}\n")).collect::<String>();
    let room = rows.unwrap_or(usize::MAX);
    if body.len().saturating_add(not_read.len()) <= room {
        return lines(&body) + &lines(&not_read);
    }
    let cut = |v: &[String], keep: usize, more: &str| -> String {
        if v.len() <= keep {
            return lines(v);
        }
        let shown = keep.saturating_sub(1);
        match keep {
            0 => String::new(),
            _ => lines(&v[..shown]) + &format!("… {} more {more}\n", v.len() - shown),
        }
    };
    let body_least = body.len().min(room / 2);
    let not_read_keep = not_read.len().min(room - body_least);
    cut(&body, room - not_read_keep, "rows") + &cut(&not_read, not_read_keep, "hosts not read")
}

fn status(g: &Gpu) -> &str {
    match g.state.as_deref() {
        Some(state) if !g.free => state,
        _ if g.free => "free",
        _ if !g.mig.is_empty() => "MIG",
        _ if g.idle_allocated => "IDLE",
        _ => "busy",
    }
}

fn mig_status(m: &Mig) -> &'static str {
    if m.free {
        "free"
    } else if m.idle_allocated {
        "IDLE"
    } else {
        "busy"
    }
}

/// A MIG device's row name: `└ MIG 3g.40gb (1/0)`, `├` for all but a GPU's last.
fn mig_name(m: &Mig, last: bool) -> String {
    let branch = if last { '└' } else { '├' };
    let profile = m.profile.as_deref().unwrap_or("?");
    format!(
        "{branch} MIG {profile} ({}/{})",
        m.gpu_instance_id, m.compute_instance_id
    )
}

/// The USERS column: the users, then the pod the device is assigned to in brackets
/// (`alice,bob [ml/train-0]`, `[ml/train-0]` when nothing runs on it).
fn holders(users: &[String], pod: Option<&str>) -> String {
    let users = users.join(",");
    match pod {
        Some(pod) if users.is_empty() => format!("[{pod}]"),
        Some(pod) => format!("{users} [{pod}]"),
        None => users,
    }
}

/// How a group names a device: `HOST/INDEX` for a GPU, `HOST/INDEX/giID` for a MIG
/// device's GPU instance (GKE's `nvidia0/gi1`).
fn device(host: &str, index: u32, gpu_instance_id: Option<u32>) -> String {
    match gpu_instance_id {
        Some(gi) => format!("{host}/{index}/gi{gi}"),
        None => format!("{host}/{index}"),
    }
}

/// `USED / TOTAL`, `- / TOTAL` or `-`.
fn memory(used: Option<u64>, total: Option<u64>) -> String {
    match (used, total) {
        (Some(u), Some(t)) => format!("{u} / {t}"),
        (None, Some(t)) => format!("- / {t}"),
        _ => "-".into(),
    }
}

/// The column header and a row per GPU and MIG device of the hosts read; a line per
/// host not read.
fn by_host(reports: &[Report], paint: Paint) -> (Vec<String>, Vec<String>) {
    let width = |f: &dyn Fn(&Report) -> usize, min: usize| {
        reports.iter().map(f).max().unwrap_or(0).max(min)
    };
    let hw = width(&|r| r.host.chars().count(), 4);
    let nw = width(
        &|r| {
            let gpus = r.gpus.iter().map(|g| name(g).chars().count());
            let migs = r.gpus.iter().flat_map(|g| &g.mig);
            let migs = migs.map(|m| mig_name(m, true).chars().count());
            gpus.chain(migs).max().unwrap_or(0)
        },
        4,
    );
    let mut out = vec![format!(
        "{:<hw$}  {:>3}  {:<nw$}  {:>4}  {:>15}  {:<6}  USERS",
        "HOST", "GPU", "NAME", "UTIL", "MEMORY (MiB)", "STATUS"
    )];
    let mut not_read = Vec::new();
    for r in reports {
        if let Some(e) = &r.error {
            let line = format!("{:<hw$}  {}: {}", r.host, e.kind, e.reason);
            not_read.push(paint.paint("31", &line));
            continue;
        }
        if r.gpus.is_empty() {
            out.push(format!("{:<hw$}  (no GPU)", r.host));
        }
        for (i, g) in r.gpus.iter().enumerate() {
            let host = if i == 0 { r.host.as_str() } else { "" };
            let util = g.utilization_pct.map_or("-".into(), |u| format!("{u}%"));
            let mem = memory(g.memory_used_mib, g.memory_total_mib);
            let st = painted(status(g), paint);
            let line = format!(
                "{host:<hw$}  {:>3}  {:<nw$}  {util:>4}  {mem:>15}  {st}  {}",
                g.index,
                name(g),
                holders(&g.users, g.pod.as_deref())
            );
            out.push(line.trim_end().to_owned());
            for (j, m) in g.mig.iter().enumerate() {
                let mem = memory(m.memory_used_mib, m.memory_total_mib);
                let line = format!(
                    "{:<hw$}  {:>3}  {:<nw$}  {:>4}  {mem:>15}  {}  {}",
                    "",
                    "",
                    mig_name(m, j + 1 == g.mig.len()),
                    "-",
                    painted(mig_status(m), paint),
                    holders(&m.users, m.pod.as_deref())
                );
                out.push(line.trim_end().to_owned());
            }
        }
    }
    (out, not_read)
}

/// `status` padded to its column, coloured by what it says.
fn painted(status: &str, paint: Paint) -> String {
    let colour = match status {
        "free" => "32",
        "busy" | "MIG" => "",
        "IDLE" => "33",
        _ => "31",
    };
    match colour {
        "" => format!("{status:<6}"),
        _ => paint.paint(colour, &format!("{status:<6}")),
    }
}

fn name(g: &Gpu) -> &str {
    g.name.as_deref().unwrap_or("-")
}

/// One row of `--group-by user|pod|job`.
#[derive(Debug, Default, Serialize)]
pub struct Group {
    /// The user, pod or job.
    pub name: String,
    /// Hosts it runs on.
    pub hosts: BTreeSet<String>,
    /// GPUs and MIG devices it holds (`host/index`, `host/index/giID`): those its
    /// processes run on, and with `--group-by pod` those assigned to the pod.
    pub gpus: BTreeSet<String>,
    /// Its processes.
    pub processes: usize,
    /// GPU memory its processes hold, MiB (as far as known).
    pub memory_mib: u64,
}

fn group_key(p: &Process, by: GroupBy) -> Option<String> {
    match by {
        GroupBy::User => p.user.clone(),
        GroupBy::Pod => p.pod.clone(),
        GroupBy::Job => Some(match &p.job {
            Some(id) => format!("slurm:{id}"),
            None => format!(
                "{}:{}",
                p.user.as_deref().unwrap_or("?"),
                p.command.as_deref().unwrap_or("?")
            ),
        }),
        GroupBy::Host => None,
    }
}

/// The rows of `--group-by` `by`, the most GPU memory first, and how many processes
/// belong to none.
pub fn groups(reports: &[Report], by: GroupBy) -> (Vec<Group>, usize) {
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    let mut none = 0;
    for r in reports {
        for g in &r.gpus {
            let gpu = device(&r.host, g.index, None);
            if by == GroupBy::Pod {
                // Devices assigned to a pod, whether or not anything runs on them.
                let assigned = g.pod.iter().map(|pod| (pod, gpu.clone()));
                let migs = g.mig.iter().filter_map(|m| {
                    let pod = m.pod.as_ref()?;
                    Some((pod, device(&r.host, g.index, Some(m.gpu_instance_id))))
                });
                for (pod, dev) in assigned.chain(migs) {
                    let e = groups.entry(pod.clone()).or_default();
                    e.hosts.insert(r.host.clone());
                    e.gpus.insert(dev);
                }
            }
            if g.processes.is_empty() && by == GroupBy::User {
                // Users without processes: Prometheus with --per-user only.
                for user in &g.users {
                    let e = groups.entry(user.clone()).or_default();
                    e.hosts.insert(r.host.clone());
                    e.gpus.insert(gpu.clone());
                }
            }
            for p in &g.processes {
                let Some(key) = group_key(p, by) else {
                    none += 1;
                    continue;
                };
                let e = groups.entry(key).or_default();
                e.hosts.insert(r.host.clone());
                e.gpus.insert(device(&r.host, g.index, p.gpu_instance_id));
                e.processes += 1;
                e.memory_mib += p.memory_mib.unwrap_or(0);
            }
        }
    }
    let mut rows: Vec<Group> = groups
        .into_iter()
        .map(|(name, g)| Group { name, ..g })
        .collect();
    rows.sort_by(|a, b| {
        b.memory_mib
            .cmp(&a.memory_mib)
            .then_with(|| by_name(&a.name, &b.name))
    });
    (rows, none)
}

/// The column header, a row per group (and how many processes are in none); a line per
/// host not read.
fn by_group(reports: &[Report], by: GroupBy) -> (Vec<String>, Vec<String>) {
    let (rows, none) = groups(reports, by);
    let title = match by {
        GroupBy::User => "USER",
        GroupBy::Pod => "POD",
        _ => "JOB",
    };
    let w = rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(title.len());
    let mut out = vec![format!(
        "{title:<w$}  {:>5}  {:>5}  {:>5}  {:>12}",
        "HOSTS", "GPUS", "PROCS", "MEMORY (MiB)"
    )];
    for g in &rows {
        out.push(format!(
            "{:<w$}  {:>5}  {:>5}  {:>5}  {:>12}",
            g.name,
            g.hosts.len(),
            g.gpus.len(),
            g.processes,
            g.memory_mib
        ));
    }
    if none > 0 {
        let noun = if none == 1 { "process" } else { "processes" };
        out.push(format!("({none} {noun} in no {})", title.to_lowercase()));
    }
    let not_read = reports
        .iter()
        .filter_map(|r| r.error.as_ref().map(|e| (r, e)))
        .map(|(r, e)| format!("{}: not read: {}: {}", r.host, e.kind, e.reason))
        .collect();
    (out, not_read)
}

#[derive(Serialize)]
struct Document<'a> {
    hosts: &'a [Report],
    summary: Summary,
    #[serde(skip_serializing_if = "Option::is_none")]
    groups: Option<Vec<Group>>,
}

/// The JSON document: every host (with its GPUs or its error), the summary, and with
/// `--group-by user|pod|job` the groups.
pub fn json(reports: &[Report], by: GroupBy) -> String {
    let doc = Document {
        hosts: reports,
        summary: summary(reports),
        groups: (by != GroupBy::Host).then(|| groups(reports, by).0),
    };
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{classify, Fault};

    fn gpu(index: u32, util: u32, used: u64, procs: &[(&str, &str, u64)]) -> Gpu {
        Gpu {
            name: Some("H100".into()),
            utilization_pct: Some(util),
            memory_used_mib: Some(used),
            memory_total_mib: Some(81920),
            processes: procs
                .iter()
                .map(|(user, command, mib)| Process {
                    user: Some(user.to_string()),
                    pid: Some(1),
                    command: Some(command.to_string()),
                    memory_mib: Some(*mib),
                    pod: None,
                    gpu_instance_id: None,
                    job: None,
                })
                .collect(),
            ..Gpu::new(index)
        }
    }

    fn failed(host: &str, kind: &'static str) -> Report {
        Report::failed(host.into(), host.into(), Fault::new(kind, "no answer"))
    }

    fn report(host: &str, gpus: Vec<Gpu>) -> Report {
        let mut r = Report::failed(host.into(), host.into(), Fault::new("x", "y"));
        r.error = None;
        r.gpus = gpus;
        classify(&mut r);
        r
    }

    #[test]
    fn hosts_with_free_gpus_come_first_failed_ones_last_free_gpus_first_in_each() {
        let mut reports = vec![
            Report::failed(
                "z".into(),
                "z".into(),
                Fault::new("refused", "connection refused"),
            ),
            report(
                "a",
                vec![
                    gpu(0, 90, 4000, &[("ann", "train", 4000)]),
                    gpu(1, 0, 0, &[]),
                ],
            ),
            report("b", vec![gpu(0, 0, 0, &[]), gpu(1, 0, 0, &[])]),
        ];
        sort(&mut reports);
        let text = table(&reports, GroupBy::Host, Paint(false), None);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "3 hosts (1 not read), 4 GPUs: 3 free, 0 idle-allocated"
        );
        assert!(lines[2].starts_with("b "), "{text}");
        assert!(
            lines[4].starts_with("a ") && lines[4].contains(" free"),
            "{text}"
        );
        assert!(
            lines[5].contains("busy") && lines[5].ends_with("ann"),
            "{text}"
        );
        assert_eq!(lines[6], "z     refused: connection refused");
    }

    #[test]
    fn hosts_with_numbers_are_in_numeric_order() {
        let mut names = vec![
            "gpu-10",
            "gpu-2",
            "gpu-1",
            "10.0.0.10",
            "10.0.0.9",
            "gpu-02",
            "gpu-1a",
            "gpu-",
            "node7:9477",
            "node10:9477",
            "Gpu-3",
        ];
        names.sort_by(|a, b| by_name(a, b));
        assert_eq!(
            names,
            [
                "10.0.0.9",
                "10.0.0.10",
                "Gpu-3",
                "gpu-",
                "gpu-1",
                "gpu-1a",
                "gpu-02",
                "gpu-2",
                "gpu-10",
                "node7:9477",
                "node10:9477",
            ]
        );
        let mut reports: Vec<Report> = ["n10", "n9", "n1"]
            .into_iter()
            .map(|h| report(h, vec![gpu(0, 0, 0, &[])]))
            .collect();
        sort(&mut reports);
        let hosts: Vec<&str> = reports.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(hosts, ["n1", "n9", "n10"]);
    }

    /// On a screen too short for the table, the hosts not read stay in it, below the
    /// first rows and a count of the rest; when they are many, they take at most what
    /// the rows leave or half the screen, and a count of theirs ends them.
    #[test]
    fn a_fitted_table_keeps_the_hosts_not_read() {
        let mut reports: Vec<Report> = (1..=40)
            .map(|i| report(&format!("n{i}"), vec![gpu(0, 0, 0, &[]), gpu(1, 0, 0, &[])]))
            .collect();
        reports.push(failed("down1", "refused"));
        reports.push(failed("down2", "timeout"));
        sort(&mut reports);
        let text = table(&reports, GroupBy::Host, Paint(false), Some(10));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 10, "{text}");
        assert!(lines[0].starts_with("42 hosts (2 not read)"), "{text}");
        assert!(lines[1].starts_with("HOST"), "{text}");
        assert!(lines[2].starts_with("n1 "), "{text}");
        // 80 GPU rows: the header and 5 rows shown, 75 counted.
        assert!(lines[6].starts_with("n3 "), "{text}");
        assert_eq!(lines[7], "… 75 more rows", "{text}");
        assert!(lines[8].starts_with("down1  refused: no answer"), "{text}");
        assert!(lines[9].starts_with("down2  timeout: no answer"), "{text}");
        // A table that fits is as it was.
        let all = table(&reports, GroupBy::Host, Paint(false), None);
        assert_eq!(table(&reports, GroupBy::Host, Paint(false), Some(200)), all);
        assert_eq!(all.lines().count(), 2 + 80 + 2);

        let mut many: Vec<Report> = (1..=3)
            .map(|i| report(&format!("n{i}"), vec![gpu(0, 0, 0, &[])]))
            .collect();
        many.extend((1..=20).map(|i| failed(&format!("down{i}"), "timeout")));
        sort(&mut many);
        let text = table(&many, GroupBy::User, Paint(false), Some(12));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 12, "{text}");
        assert!(lines[1].starts_with("USER"), "{text}");
        assert_eq!(lines[2], "down1: not read: timeout: no answer", "{text}");
        assert_eq!(lines[10], "down9: not read: timeout: no answer", "{text}");
        assert_eq!(lines[11], "… 11 more hosts not read", "{text}");
    }

    #[test]
    fn a_job_is_a_users_command_across_hosts() {
        let reports = vec![
            report("a", vec![gpu(0, 90, 4000, &[("ann", "train", 4000)])]),
            report(
                "b",
                vec![gpu(0, 90, 2000, &[("ann", "train", 2000), ("bo", "x", 1)])],
            ),
        ];
        let (rows, none) = groups(&reports, GroupBy::Job);
        assert_eq!(none, 0);
        assert_eq!(rows[0].name, "ann:train");
        assert_eq!(rows[0].hosts.len(), 2);
        assert_eq!(rows[0].memory_mib, 6000);
        let (rows, none) = groups(&reports, GroupBy::Pod);
        assert!(rows.is_empty());
        assert_eq!(none, 3);
        let (rows, not_read) = by_group(&reports, GroupBy::Pod);
        assert_eq!(rows.last().unwrap(), "(3 processes in no pod)");
        assert!(not_read.is_empty());
        let one = [report(
            "a",
            vec![gpu(0, 90, 4000, &[("ann", "train", 4000)])],
        )];
        assert_eq!(
            by_group(&one, GroupBy::Pod).0.last().unwrap(),
            "(1 process in no pod)"
        );
    }

    /// A device assigned to a pod is never free: with nothing on it, it is idle-allocated
    /// and its pod is in the table; `--group-by pod` counts each GPU and MIG device the
    /// pod holds, busy or not, once.
    #[test]
    fn a_device_assigned_to_a_pod_is_not_free_and_counts_for_the_pod() {
        let mut held = gpu(0, 0, 0, &[]);
        held.pod = Some("ml/train-0".into());
        let mut busy = gpu(1, 80, 4000, &[("ann", "train", 4000)]);
        busy.pod = Some("ml/train-0".into());
        busy.processes[0].pod = Some("ml/train-0".into());
        let mut split = gpu(2, 0, 0, &[("bo", "serve", 3000)]);
        split.utilization_pct = None;
        split.processes[0].pod = Some("ml/infer".into());
        split.processes[0].gpu_instance_id = Some(1);
        let mig = |gi: u32, pod: Option<&str>, processes: u32| crate::model::Mig {
            gpu_instance_id: gi,
            profile: Some("3g.40gb".into()),
            memory_used_mib: Some(u64::from(processes) * 3000),
            memory_total_mib: Some(40448),
            processes: Some(processes),
            pod: pod.map(str::to_owned),
            ..Default::default()
        };
        split.mig = vec![mig(1, Some("ml/infer"), 1), mig(2, Some("ml/infer"), 0)];
        let reports = [report("a", vec![held, busy, split, gpu(3, 0, 0, &[])])];
        let text = table(&reports, GroupBy::Host, Paint(false), None);
        assert!(
            text.starts_with(
                "1 hosts (0 not read), 4 GPUs: 1 free, 1 idle-allocated; \
                 2 MIG devices: 0 free, 1 idle-allocated\n"
            ),
            "{text}"
        );
        let row = |index: &str| {
            text.lines()
                .skip(2)
                .find(|l| l.split_whitespace().take(2).any(|t| t == index))
                .unwrap_or_else(|| panic!("no GPU {index}: {text}"))
        };
        assert!(
            row("0").contains("IDLE") && row("0").ends_with("  [ml/train-0]"),
            "{text}"
        );
        assert!(row("1").ends_with("busy    ann [ml/train-0]"), "{text}");
        assert!(row("3").contains(" free"), "{text}");
        let idle_device = text
            .lines()
            .find(|l| l.contains("(2/0)"))
            .unwrap_or_default();
        assert!(
            idle_device.contains(" IDLE ") && idle_device.ends_with(" [ml/infer]"),
            "{text}"
        );

        let (rows, none) = groups(&reports, GroupBy::Pod);
        assert_eq!(none, 0);
        let got: Vec<(&str, Vec<&str>, usize)> = rows
            .iter()
            .map(|g| {
                (
                    g.name.as_str(),
                    g.gpus.iter().map(String::as_str).collect(),
                    g.processes,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("ml/train-0", vec!["a/0", "a/1"], 1),
                ("ml/infer", vec!["a/2/gi1", "a/2/gi2"], 1),
            ]
        );
    }

    #[test]
    fn a_slurm_job_is_one_row_whatever_its_ranks_run() {
        let mut reports = vec![
            report("a", vec![gpu(0, 90, 4000, &[("ann", "python", 4000)])]),
            report("b", vec![gpu(1, 90, 3000, &[("ann", "torchrun", 3000)])]),
            report("c", vec![gpu(0, 90, 1000, &[("bo", "x", 1000)])]),
        ];
        for r in &mut reports[..2] {
            r.gpus[0].processes[0].job = Some("4242".into());
        }
        let (rows, none) = groups(&reports, GroupBy::Job);
        assert_eq!(none, 0);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["slurm:4242", "bo:x"], "the most memory first");
        assert_eq!(rows[0].hosts.len(), 2);
        assert_eq!(rows[0].memory_mib, 7000);
    }
}
