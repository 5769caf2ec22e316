//! `--by-container`: which containers use the machine's GPUs, and how much. One row per
//! container (as the daemon read it from each process's cgroup: docker, containerd,
//! CRI-O, podman, lxc or a Kubernetes pod's), one `host` row for the processes in no
//! container, across every GPU shown, with the same columns as `--by-user`. Processes
//! whose details the daemon withholds (`--process-info basic` or `none`) cannot be
//! placed: they are grouped as `?`, never as `host`.

use gpupeek_shm::ProcPolicy;
use serde::Serialize;

use crate::byuser::{group, render_table, KeyColumn, Usage};
use crate::style::Painter;
use crate::view::{ContainerView, ProcView, View};

/// One container's share.
#[derive(Debug, Serialize, PartialEq)]
pub struct ContainerRow {
    /// `runtime:id` (the id's first 12 characters, as `docker ps` shows it), `host` for
    /// processes in no container, `?` when the daemon withholds where they run.
    pub name: String,
    /// The container; `None` for `host` and `?`.
    pub container: Option<ContainerJson>,
    /// What its processes use.
    #[serde(flatten)]
    pub usage: Usage,
}

/// A container as `--json` writes it.
#[derive(Debug, Serialize, PartialEq, Clone)]
pub struct ContainerJson {
    /// "docker", "containerd", "cri-o", "podman", "lxc" or "kubepods".
    pub runtime: String,
    /// The whole id (or lxc name).
    pub id: String,
    /// Kubernetes pod uid.
    pub pod_uid: Option<String>,
}

/// The group a process belongs to: its container, `host`, or `?` when withheld.
fn group_of(p: &ProcView, policy: Option<ProcPolicy>) -> (String, Option<ContainerJson>) {
    match &p.container {
        Some(ContainerView {
            runtime,
            id,
            pod_uid,
        }) => {
            let short: String = id.chars().take(12).collect();
            let c = ContainerJson {
                runtime: runtime.clone(),
                id: id.clone(),
                pod_uid: pod_uid.clone(),
            };
            (format!("{runtime}:{short}"), Some(c))
        }
        // The daemon reads every process's cgroup under the full policy only: without
        // it, "no container published" says nothing about where the process runs.
        None if policy == Some(ProcPolicy::Full) => ("host".into(), None),
        None => ("?".into(), None),
    }
}

/// Rows for every container with a process on the GPUs in `view`, most GPU memory first.
pub fn rows(view: &View) -> Vec<ContainerRow> {
    let mut rows: Vec<ContainerRow> = group(view, |p| group_of(p, view.proc_policy))
        .into_iter()
        .map(|((name, container), usage)| ContainerRow {
            name,
            container,
            usage,
        })
        .collect();
    rows.sort_by(|a, b| Usage::by_memory(&a.usage, &b.usage).then_with(|| a.name.cmp(&b.name)));
    rows
}

/// The per-container table, with `--by-user`'s last lines (see [`crate::byuser::render`]).
pub fn render(
    rows: &[ContainerRow],
    not_shown: u32,
    not_counted: &[u32],
    paint: Painter,
) -> String {
    let mut keys = vec![KeyColumn {
        title: "CONTAINER",
        cells: rows.iter().map(|r| r.name.clone()).collect(),
    }];
    let pods: Vec<String> = rows
        .iter()
        .map(|r| {
            let pod = r.container.as_ref().and_then(|c| c.pod_uid.as_deref());
            pod.unwrap_or("-").to_owned()
        })
        .collect();
    // The pod column only when some container is in a pod.
    if pods.iter().any(|p| p != "-") {
        keys.push(KeyColumn {
            title: "POD",
            cells: pods,
        });
    }
    let usages: Vec<&Usage> = rows.iter().map(|r| &r.usage).collect();
    render_table(&keys, &usages, not_shown, not_counted, paint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::gpu_view as gpu;
    use crate::view::GpuView;

    const ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn proc(pid: u32, container: Option<(&str, Option<&str>)>, mem: u64) -> ProcView {
        ProcView {
            pid,
            host_pid: pid,
            gpu_mem_mib: Some(mem),
            gpu_util_pct: Some([10, 0, 0, 0]),
            cpu_percent: Some(25.0),
            host_mem_bytes: Some(1 << 20),
            container: container.map(|(runtime, pod)| ContainerView {
                runtime: runtime.into(),
                id: ID.into(),
                pod_uid: pod.map(str::to_owned),
            }),
            ..ProcView::default()
        }
    }

    fn view(policy: ProcPolicy, gpus: Vec<GpuView>) -> View {
        View {
            driver_version: None,
            published_unix_ns: 0,
            proc_policy: Some(policy),
            processes_age_ms: None,
            gpus,
        }
    }

    #[test]
    fn containers_are_summed_across_gpus_and_the_host_is_its_own_group() {
        let pod = Some("c0ffee00-1111-2222-3333-444455556666");
        let v = view(
            ProcPolicy::Full,
            vec![
                gpu(
                    0,
                    vec![
                        proc(10, Some(("containerd", pod)), 1000),
                        proc(20, None, 50),
                    ],
                ),
                gpu(1, vec![proc(10, Some(("containerd", pod)), 2000)]),
                gpu(2, vec![proc(30, Some(("docker", None)), 10)]),
            ],
        );
        let rows = rows(&v);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            ["containerd:0123456789ab", "host", "docker:0123456789ab"]
        );
        let c = &rows[0];
        assert_eq!(c.usage.gpus, [0, 1]);
        assert_eq!(c.usage.processes, 2);
        assert_eq!(c.usage.gpu_memory_usage, Some(3000));
        assert_eq!(c.usage.cpu_percent, Some(25.0), "one process on two GPUs");
        assert_eq!(c.container.as_ref().unwrap().id, ID);
        assert_eq!(rows[1].container, None);
        let text = render(&rows, 0, &[], Painter::new(false, true, false));
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("CONTAINER                POD  "),
            "{text}"
        );
        assert!(
            lines[1]
                .starts_with("containerd:0123456789ab  c0ffee00-1111-2222-3333-444455556666  0,1"),
            "{text}"
        );
        assert!(
            lines[2].starts_with("host                     -   "),
            "{text}"
        );
    }

    #[test]
    fn withheld_processes_are_not_counted_as_the_hosts() {
        let v = view(ProcPolicy::Basic, vec![gpu(0, vec![proc(10, None, 100)])]);
        let rows = rows(&v);
        assert_eq!(rows[0].name, "?");
        let text = render(&rows, 0, &[], Painter::new(false, true, false));
        assert!(!text.contains("POD"), "no pod, no pod column: {text}");
        assert!(
            text.lines().nth(1).unwrap().starts_with("?          0 "),
            "{text}"
        );
    }
}
