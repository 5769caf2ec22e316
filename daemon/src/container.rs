//! Which container a process runs in, from its cgroup path (`/proc/PID/cgroup`).
//!
//! Container runtimes name the cgroup of each container after its id, in one of a few
//! well-known shapes (systemd and cgroupfs drivers, cgroup v1 and v2):
//!
//! | runtime    | cgroup path component                                   |
//! |------------|---------------------------------------------------------|
//! | docker     | `docker-<id>.scope`, or `<id>` below `/docker/`          |
//! | containerd | `cri-containerd-<id>.scope`                              |
//! | cri-o      | `crio-<id>.scope`                                        |
//! | podman     | `libpod-<id>.scope`, or `<id>` below `/libpod_parent/`   |
//! | lxc        | `lxc.payload.<name>`, or `<name>` below `/lxc/`          |
//! | kubepods   | `<id>` below a `pod<uid>` component, runtime unknown     |
//!
//! A Slurm job is not a container, but it is what its processes run in on a shared
//! cluster, and its cgroup names it the same way (runtime "slurm", the job id as the id):
//! `job_<id>` below `slurmstepd.scope` (cgroup v2, `<node>_slurmstepd.scope` with several
//! slurmds on one host) or below `slurm/uid_<uid>` (cgroup v1, `slurm_<node>` likewise).
//!
//! A Kubernetes pod uid comes from a `pod<uid>` component (`kubepods-burstable-pod<uid>.slice`
//! with `_` for `-` under the systemd driver). Anything else is "not in a container".

/// A process's container, as its cgroup names it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Container {
    /// "docker", "containerd", "cri-o", "podman", "lxc", "kubepods" or "slurm".
    pub runtime: &'static str,
    /// Container id (hex for all but lxc, where it is the container's name, and slurm,
    /// where it is the job id).
    pub id: String,
    /// Kubernetes pod uid, when the container is in a pod.
    pub pod_uid: Option<String>,
}

/// Parses the contents of `/proc/PID/cgroup`; `None` when the process is in no container.
pub fn parse(cgroup: &str) -> Option<Container> {
    // The unified (v2) line "0::/path" comes last on hybrid systems; any line will do,
    // since every hierarchy of a containerised process carries the container's id.
    cgroup
        .lines()
        .rev()
        .filter_map(|line| line.splitn(3, ':').nth(2))
        .find_map(parse_path)
}

fn parse_path(path: &str) -> Option<Container> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if let Some(job) = slurm_job(&parts) {
        return Some(Container {
            runtime: "slurm",
            id: job.to_owned(),
            pod_uid: None,
        });
    }
    let pod_uid = parts.iter().find_map(|p| pod_uid(p));
    for (i, part) in parts.iter().enumerate().rev() {
        let name = part.strip_suffix(".scope").unwrap_or(part);
        let prefixed = [
            ("docker-", "docker"),
            ("cri-containerd-", "containerd"),
            ("crio-", "cri-o"),
            ("libpod-", "podman"),
        ];
        for (prefix, runtime) in prefixed {
            if let Some(id) = name.strip_prefix(prefix) {
                // `crio-conmon-<id>` and `libpod-conmon-<id>` are the runtime's monitor,
                // not the container; they fail the hex check.
                if is_container_id(id) {
                    return Some(Container {
                        runtime,
                        id: id.to_owned(),
                        pod_uid,
                    });
                }
            }
        }
        if let Some(name) = name.strip_prefix("lxc.payload.") {
            return Some(lxc(name));
        }
        let parent = if i > 0 { parts[i - 1] } else { "" };
        if is_container_id(name) {
            let runtime = match parent {
                "docker" => "docker",
                "libpod_parent" => "podman",
                _ if pod_uid.is_some() => "kubepods",
                _ => continue,
            };
            return Some(Container {
                runtime,
                id: name.to_owned(),
                pod_uid,
            });
        }
        if parent == "lxc" && !name.is_empty() {
            return Some(lxc(name));
        }
    }
    None
}

fn lxc(name: &str) -> Container {
    Container {
        runtime: "lxc",
        id: name.to_owned(),
        pod_uid: None,
    }
}

/// The job id of a Slurm job's cgroup path: `job_<digits>` right below slurmstepd's
/// scope (v2) or below `uid_<uid>` under `slurm` (v1).
fn slurm_job<'a>(parts: &[&'a str]) -> Option<&'a str> {
    let under_slurmstepd = |p: &str| p == "slurmstepd.scope" || p.ends_with("_slurmstepd.scope");
    let under_slurm = |p: &str| p == "slurm" || p.starts_with("slurm_");
    parts.windows(2).enumerate().find_map(|(i, w)| {
        let id = w[1].strip_prefix("job_")?;
        let parent_ok = under_slurmstepd(w[0])
            || (w[0].starts_with("uid_") && i > 0 && under_slurm(parts[i - 1]));
        (parent_ok && !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then_some(id)
    })
}

/// Container ids are lower-case hex, 64 digits in every runtime here (12 accepted).
fn is_container_id(s: &str) -> bool {
    (12..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `pod<uid>` or `kubepods-<qos>-pod<uid>.slice`, with `_` standing for `-`.
fn pod_uid(part: &str) -> Option<String> {
    let part = part.strip_suffix(".slice").unwrap_or(part);
    let at = part.rfind("pod")?;
    if at > 0 && !part[..at].ends_with('-') {
        return None;
    }
    let uid = part[at + 3..].replace('_', "-");
    is_uuid(&uid).then_some(uid)
}

/// True for `8-4-4-4-12` lower- or upper-case hex: the only shape a pod uid has (and
/// the only one that may name a pod view's directory).
pub fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f1e9bd2c8a74e5f9b0d6c1a2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f";
    const POD: &str = "5e0c2a1b-7d3f-4c8e-9a6b-1f2e3d4c5b6a";

    fn container(runtime: &'static str, pod: Option<&str>) -> Option<Container> {
        Some(Container {
            runtime,
            id: ID.into(),
            pod_uid: pod.map(str::to_owned),
        })
    }

    #[test]
    fn docker_with_systemd_and_cgroupfs_drivers() {
        let v2 = format!("0::/system.slice/docker-{ID}.scope\n");
        assert_eq!(parse(&v2), container("docker", None));
        let v1 = format!("12:pids:/docker/{ID}\n11:memory:/docker/{ID}\n0::/\n");
        assert_eq!(parse(&v1), container("docker", None));
    }

    #[test]
    fn kubernetes_containerd_and_crio_with_pod_uids() {
        let pod_ = POD.replace('-', "_");
        let containerd = format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{pod_}.slice/cri-containerd-{ID}.scope\n"
        );
        assert_eq!(parse(&containerd), container("containerd", Some(POD)));
        let crio = format!("0::/kubepods.slice/kubepods-pod{pod_}.slice/crio-{ID}.scope\n");
        assert_eq!(parse(&crio), container("cri-o", Some(POD)));
        let cgroupfs = format!("0::/kubepods/besteffort/pod{POD}/{ID}\n");
        assert_eq!(parse(&cgroupfs), container("kubepods", Some(POD)));
    }

    #[test]
    fn podman_and_lxc() {
        let podman = format!("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope/container\n");
        assert_eq!(parse(&podman), container("podman", None));
        assert_eq!(
            parse("0::/lxc.payload.web1/init.scope\n"),
            Some(lxc("web1"))
        );
        assert_eq!(parse("4:cpu:/lxc/db2\n"), Some(lxc("db2")));
    }

    fn job(id: &str) -> Option<Container> {
        Some(Container {
            runtime: "slurm",
            id: id.into(),
            pod_uid: None,
        })
    }

    #[test]
    fn slurm_jobs_under_cgroup_v2_and_v1() {
        // cgroup/v2 plugin: every step (batch, extern, interactive, numbered) of job 4242.
        for step in [
            "step_batch",
            "step_extern",
            "step_0/user/task_0",
            "step_interactive",
        ] {
            let v2 = format!("0::/system.slice/slurmstepd.scope/job_4242/{step}\n");
            assert_eq!(parse(&v2), job("4242"), "{v2}");
        }
        // Several slurmds on one host name their scope after the node.
        let multi = "0::/system.slice/node7_slurmstepd.scope/job_17/step_0/user/task_3\n";
        assert_eq!(parse(multi), job("17"));
        // cgroup/v1: the job under each controller, the unified line empty.
        let v1 = "11:memory:/slurm/uid_1000/job_99/step_0/task_0\n\
                  4:devices:/slurm/uid_1000/job_99/step_0\n0::/\n";
        assert_eq!(parse(v1), job("99"));
        assert_eq!(
            parse("7:cpuset:/slurm_node7/uid_0/job_5/step_batch\n"),
            job("5")
        );
        // slurmstepd's own cgroup (no job) and look-alikes elsewhere are not jobs.
        for cgroup in [
            "0::/system.slice/slurmstepd.scope/system\n",
            "0::/system.slice/slurmd.service\n",
            "0::/user.slice/job_12\n",
            "0::/system.slice/slurmstepd.scope/job_x1/step_0\n",
            "4:memory:/uid_1000/job_99\n",
        ] {
            assert_eq!(parse(cgroup), None, "{cgroup:?}");
        }
    }

    #[test]
    fn host_processes_and_runtime_monitors_are_not_containers() {
        for cgroup in [
            "0::/user.slice/user-1000.slice/session-3.scope\n",
            "0::/system.slice/sshd.service\n",
            "0::/\n",
            "",
            "garbage without colons",
            &format!("0::/system.slice/crio-conmon-{ID}.scope\n"),
            "0::/system.slice/docker-notanid.scope\n",
            "0::/kubepods.slice/kubepods-podnotauid.slice\n",
        ] {
            assert_eq!(parse(cgroup), None, "{cgroup:?}");
        }
    }
}
