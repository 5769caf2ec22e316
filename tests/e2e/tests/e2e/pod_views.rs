//! `gpupeekd --pod-views`: one segment per pod, with only that pod's GPUs and processes,
//! read by gpupeek inside the pod's own pid and mount namespaces through a read-only
//! mount of the pod's directory. Pods are real cgroups named as the kubelet names them,
//! the allocations come from the fake kubelet pod-resources server, the pod uids from a
//! pod log directory laid out as the kubelet lays it out.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use gpupeek_e2e::{root_or_skip, stderr, stdout, wait_for, Daemon, Sandbox};
use gpupeek_kube::api::{
    ClaimResource, ContainerDevices, ContainerResources, DynamicResource, ListPodResourcesResponse,
    PodResources,
};
use gpupeek_kube::fake::{Answer, FakeKubelet};
use gpupeek_shm::layout::TrackKind;
use gpupeek_shm::{text, Segment, Snapshot, Track};
use serde_json::{json, Value};

use crate::processes::{NamedCgroup, Proc};

const MIB: u64 = 1 << 20;
const UID_A: &str = "aaaaaaaa-1111-4111-8111-000000000001";
const UID_B: &str = "bbbbbbbb-2222-4222-8222-000000000002";
const UID_C: &str = "cccccccc-3333-4333-8333-000000000003";
const GPUS: [&str; 3] = [
    "GPU-00000000-0000-4000-8000-00000000000a",
    "GPU-11111111-1111-4111-8111-11111111111b",
    "GPU-22222222-2222-4222-8222-22222222222c",
];
const NAMES: [&str; 3] = ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "Tesla T4"];

/// The tests that make pod cgroups, one at a time: they name the same pods' cgroups, and
/// one's end (which kills what is left in its cgroups and removes them) would take
/// another's processes with it.
fn pod_cgroups_to_myself() -> std::sync::MutexGuard<'static, ()> {
    static POD_CGROUPS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    POD_CGROUPS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A cgroup named as the kubelet (systemd driver) and containerd name a container of pod
/// `uid`.
fn pod_cgroup(uid: &str, container: char, pid: u32) -> NamedCgroup {
    let parts = [
        "kubepods.slice".to_owned(),
        "kubepods-besteffort.slice".to_owned(),
        format!("kubepods-besteffort-pod{}.slice", uid.replace('-', "_")),
        format!("cri-containerd-{}.scope", container.to_string().repeat(64)),
    ];
    NamedCgroup::create_with(&parts, pid)
}

/// A "container": its own pid and mount namespaces (with its own /proc), running
/// `sleep`; returns it and the host pid of its `sleep` (pid 1 inside).
fn container() -> (Proc, u32) {
    container_as(None)
}

/// [`container`], its `sleep` running as user `uid` when given.
fn container_as(uid: Option<u32>) -> (Proc, u32) {
    let mut cmd = Command::new("unshare");
    cmd.args(["--pid", "--fork", "--kill-child", "--mount", "--mount-proc"]);
    if let Some(uid) = uid {
        let id = uid.to_string();
        cmd.args(["setpriv", "--reuid", &id, "--regid", &id, "--clear-groups"]);
    }
    let holder = Proc::spawn(cmd.args(["sleep", "600"]));
    let children = format!("/proc/{0}/task/{0}/children", holder.pid());
    for _ in 0..500 {
        let inner = std::fs::read_to_string(&children)
            .ok()
            .and_then(|c| c.split_whitespace().next()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.starts_with(b"sleep\0"))
            });
        if let Some(inner) = inner {
            return (holder, inner);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the container's process did not start");
}

/// Three GPUs; `procs` as (GPU, pid, MiB).
fn scenario(procs: &[(usize, u32, u64)]) -> Value {
    let gpus: Vec<Value> = (0..3)
        .map(|g| {
            let processes: Vec<Value> = procs
                .iter()
                .filter(|p| p.0 == g)
                .map(|&(_, pid, mib)| json!({"pid": pid, "used_gpu_memory_bytes": mib * MIB}))
                .collect();
            json!({
                "name": NAMES[g], "uuid": GPUS[g],
                "memory_total_bytes": 80u64 << 30, "memory_used_bytes": (g as u64 + 1) << 30,
                "processes": processes
            })
        })
        .collect();
    json!({ "gpus": gpus })
}

/// The kubelet's answer: each (pod name, allocated GPU or MIG device), in namespace `ml`.
/// A device named `gpu-...` is a device of NVIDIA's DRA driver in a resource claim of the
/// pod's; any other, a device plugin's device id.
pub(crate) fn allocations(pods: &[(&str, &str)]) -> Answer {
    Answer::Pods(ListPodResourcesResponse {
        pod_resources: pods
            .iter()
            .map(|&(name, gpu)| {
                let mut container = ContainerResources {
                    name: "main".into(),
                    devices: Vec::new(),
                    dynamic_resources: Vec::new(),
                };
                if gpu.starts_with("gpu-") {
                    container.dynamic_resources.push(DynamicResource {
                        claim_name: format!("{name}-gpu"),
                        claim_namespace: "ml".into(),
                        claim_resources: vec![ClaimResource {
                            driver_name: "gpu.nvidia.com".into(),
                            pool_name: "node-1".into(),
                            device_name: gpu.into(),
                            share_id: None,
                        }],
                    });
                } else {
                    container.devices.push(ContainerDevices {
                        resource_name: "nvidia.com/gpu".into(),
                        device_ids: vec![gpu.into()],
                    });
                }
                PodResources {
                    name: name.into(),
                    namespace: "ml".into(),
                    containers: vec![container],
                }
            })
            .collect(),
    })
}

struct Pods {
    sb: Sandbox,
    views: PathBuf,
    logs: PathBuf,
    socket: PathBuf,
}

impl Pods {
    fn new(tag: &str) -> Self {
        let sb = Sandbox::new(tag);
        let views = sb.dir.join("pods");
        let logs = sb.dir.join("podlogs");
        for (pod, uid) in [
            ("train-a", UID_A),
            ("train-b", UID_B),
            ("idle-c", UID_C),
            // Not a uid: no pod may name a directory with it.
            ("evil", "..%2f..%2fetc"),
            ("evil2", "not-a-uuid"),
        ] {
            std::fs::create_dir_all(logs.join(format!("ml_{pod}_{uid}"))).unwrap();
        }
        let socket = sb.dir.join("kubelet.sock");
        Pods {
            sb,
            views,
            logs,
            socket,
        }
    }

    fn start_daemon(&self) -> Daemon {
        self.start_daemon_env(&[])
    }

    /// [`Pods::start_daemon`] with `env` set.
    fn start_daemon_env(&self, env: &[(&str, &str)]) -> Daemon {
        self.start_daemon_with(env, &[])
    }

    /// [`Pods::start_daemon`] with `env` set and `flags` added.
    fn start_daemon_with(&self, env: &[(&str, &str)], flags: &[&str]) -> Daemon {
        let (views, socket, logs) = (
            self.views.to_str().unwrap(),
            self.socket.to_str().unwrap(),
            self.logs.to_str().unwrap(),
        );
        let env: Vec<(&str, &std::ffi::OsStr)> =
            env.iter().map(|&(k, v)| (k, v.as_ref())).collect();
        let base = [
            "--process-interval",
            "100ms",
            "--pod-views",
            views,
            "--kubelet-socket",
            socket,
            "--pod-log-dir",
            logs,
        ];
        self.sb
            .start_daemon_env("100ms", &[&base[..], flags].concat(), &env)
    }

    fn view_path(&self, uid: &str) -> String {
        self.views
            .join(uid)
            .join("gpupeek")
            .to_str()
            .unwrap()
            .to_owned()
    }

    /// Pod `uid`'s view once it shows a MIG instance, checked to be GPU instance `gi` of
    /// the GPU `parent` (its UUID) alone.
    fn mig_view(&self, daemon: &Daemon, uid: &str, parent: &str, gi: u32) -> Snapshot {
        let path = self.view_path(uid);
        let mut snap = None;
        wait_for(&format!("pod {uid}'s MIG instance"), daemon, || {
            snap = Segment::open(&path).and_then(|s| s.snapshot()).ok();
            snap.as_ref().is_some_and(|s| !s.mig.is_empty())
        });
        let snap = snap.unwrap();
        assert_eq!(uuids(&snap), [parent], "pod {uid}");
        let instances: Vec<u32> = snap.mig.iter().map(|m| m.gpu_instance_id).collect();
        assert_eq!(instances, [gi], "pod {uid}");
        snap
    }

    /// Pod `uid`'s view once it shows `gpus` GPUs and `procs` processes.
    fn view_when(&self, daemon: &Daemon, uid: &str, gpus: usize, procs: usize) -> Snapshot {
        let path = self.view_path(uid);
        let mut snap = None;
        wait_for(&format!("the view of pod {uid}"), daemon, || {
            snap = Segment::open(&path).and_then(|s| s.snapshot()).ok();
            snap.as_ref()
                .is_some_and(|s| s.gpus.len() == gpus && s.processes.len() == procs)
        });
        snap.unwrap()
    }
}

fn uuids(snap: &Snapshot) -> Vec<String> {
    snap.gpus.iter().map(|g| text::decode(&g.uuid)).collect()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn each_pod_sees_its_own_gpus_and_processes_and_a_gone_pods_view_is_removed() {
    if !root_or_skip("each_pod_sees_its_own_gpus_and_processes_and_a_gone_pods_view_is_removed") {
        return;
    }
    let _cgroups = pod_cgroups_to_myself();
    let pods = Pods::new("podviews");
    let (_box_a, a) = container();
    let _cg_a = pod_cgroup(UID_A, 'a', a);
    let b = Proc::sleeper();
    let _cg_b = pod_cgroup(UID_B, 'b', b.pid());
    let host = Proc::sleeper();
    pods.sb.write_scenario(&scenario(&[
        (0, a, 1000),
        (0, host.pid(), 300),
        (1, b.pid(), 500),
    ]));
    let kubelet = FakeKubelet::start(
        &pods.socket,
        allocations(&[
            ("train-a", GPUS[0]),
            ("train-b", GPUS[1]),
            ("idle-c", GPUS[2]),
            ("evil", GPUS[2]),
            ("evil2", GPUS[2]),
        ]),
    );
    let daemon = pods.start_daemon();
    pods.sb.wait_live(&daemon);

    let view_a = pods.view_when(&daemon, UID_A, 1, 1);
    assert_eq!(uuids(&view_a), [GPUS[0]]);
    let p = &view_a.processes[0];
    assert_eq!(
        p.pid, 1,
        "the pid in the pod's own namespace, not the host's {a}"
    );
    assert_eq!(p.gpu_mem_bytes, 1000 * MIB);
    assert_eq!(
        view_a.proc_head.pid_ns_inode,
        gpupeek_shm::procfs::pid_ns_inode(Path::new(&format!("/proc/{a}/ns/pid"))).unwrap()
    );
    // Other pods (and the host) only as the GPU's memory in use.
    assert_eq!(view_a.gpus[0].mem_used_bytes, 1 << 30);

    let view_b = pods.view_when(&daemon, UID_B, 1, 1);
    assert_eq!(uuids(&view_b), [GPUS[1]]);
    assert_eq!(view_b.processes[0].pid, b.pid());
    // A view's slot is not its GPU's index: gpupeek keys by the record, not the slot.
    let out = gpupeek_e2e::run_with_watchdog({
        let mut cmd = Command::new(&gpupeek_e2e::bins().client);
        cmd.args(["--shm", &pods.view_path(UID_B), "--json"]);
        cmd
    });
    assert_eq!(out.status.code(), Some(0), "{}", gpupeek_e2e::stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["gpus"].as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(doc["gpus"][0]["index"], 1, "{doc}");
    assert_eq!(doc["gpus"][0]["uuid"], GPUS[1], "{doc}");
    assert_eq!(doc["gpus"][0]["processes"][0]["pid"], b.pid(), "{doc}");
    // Allocated, running nothing yet: its GPU and no process.
    let view_c = pods.view_when(&daemon, UID_C, 1, 0);
    assert_eq!(uuids(&view_c), [GPUS[2]]);

    // The views directory holds the three pods' uids and nothing a pod named.
    assert_eq!(entries(&pods.views), [UID_A, UID_B, UID_C]);
    let meta = std::fs::metadata(pods.view_path(UID_A)).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta.mode() & 0o777, 0o644);
    assert_eq!(meta.uid(), 0);

    // Pod B goes, and the kubelet removes its log directory: its view is removed, its
    // directory too. Pod C goes from the kubelet's allocations, its log directory
    // still there (the kubelet removes it later): its view is removed, the directory
    // (which a pod still running would hold mounted) is kept.
    drop(b);
    std::fs::remove_dir(pods.logs.join(format!("ml_train-b_{UID_B}"))).unwrap();
    pods.sb
        .write_scenario(&scenario(&[(0, a, 1000), (0, host.pid(), 300)]));
    kubelet.set(allocations(&[("train-a", GPUS[0])]));
    wait_for("pod B's and C's views removed", &daemon, || {
        !pods.views.join(UID_B).exists() && !Path::new(&pods.view_path(UID_C)).exists()
    });
    assert_eq!(entries(&pods.views), [UID_A, UID_C]);
    assert!(entries(&pods.views.join(UID_C)).is_empty());
    for uid in [UID_B, UID_C] {
        assert!(
            daemon.log().contains(&format!("pod {uid} is gone")),
            "{}",
            daemon.log()
        );
    }
    assert_eq!(uuids(&pods.view_when(&daemon, UID_A, 1, 1)), [GPUS[0]]);
    // The main segment still has every GPU and process.
    let main = pods.sb.segment().snapshot().unwrap();
    assert_eq!(main.gpus.len(), 3);
    assert_eq!(main.processes.len(), 2);
}

#[test]
fn gpupeek_in_a_pods_namespaces_reads_only_its_read_only_view() {
    if !root_or_skip("gpupeek_in_a_pods_namespaces_reads_only_its_read_only_view") {
        return;
    }
    let _cgroups = pod_cgroups_to_myself();
    let pods = Pods::new("podns");
    let (_box_a, a) = container();
    let _cg_a = pod_cgroup(UID_A, 'a', a);
    let b = Proc::sleeper();
    let _cg_b = pod_cgroup(UID_B, 'b', b.pid());
    pods.sb
        .write_scenario(&scenario(&[(0, a, 1000), (1, b.pid(), 500)]));
    let _kubelet = FakeKubelet::start(
        &pods.socket,
        allocations(&[("train-a", GPUS[0]), ("train-b", GPUS[1])]),
    );
    let daemon = pods.start_daemon();
    pods.sb.wait_live(&daemon);
    pods.view_when(&daemon, UID_A, 1, 1);

    // In the pod's mount namespace: /dev/shm is the pod's own (the main segment is not
    // there), and the pod's directory is mounted read-only where the pod mounts it.
    let mount_point = pods.sb.dir.join("pod-mount");
    std::fs::create_dir_all(&mount_point).unwrap();
    let in_pod = |script: &str| {
        let mut cmd = Command::new("nsenter");
        cmd.args(["--target", &a.to_string(), "--pid", "--mount", "--"])
            .args(["sh", "-c", script])
            .env_remove("GPUPEEK_SHM");
        gpupeek_e2e::run_with_watchdog(cmd)
    };
    let setup = in_pod(&format!(
        "mount -t tmpfs none /dev/shm && mount --bind {dir} {at} && \
         mount -o remount,bind,ro {at}",
        dir = pods.views.join(UID_A).display(),
        at = mount_point.display(),
    ));
    if !setup.status.success() {
        // CI runs as root with mount namespaces: there, this is a failure.
        assert!(
            std::env::var_os("CI").is_none(),
            "cannot mount in the pod's namespace: {}",
            stderr(&setup)
        );
        eprintln!(
            "skipping gpupeek_in_a_pods_namespaces_reads_only_its_read_only_view: \
             cannot mount in the pod's namespace: {}",
            stderr(&setup)
        );
        return;
    }
    let view = mount_point.join("gpupeek");
    let gpupeek = |args: &str| {
        in_pod(&format!(
            "GPUPEEK_SHM={} exec {} {args}",
            view.display(),
            gpupeek_e2e::bins().client.display()
        ))
    };

    // The main segment is not visible in the pod.
    let main = in_pod(&format!(
        "exec {} --shm {}",
        gpupeek_e2e::bins().client.display(),
        pods.sb.shm
    ));
    assert_ne!(main.status.code(), Some(0), "{}", stdout(&main));

    let out = gpupeek("--json");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpus = doc["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 1, "{doc}");
    assert_eq!(gpus[0]["uuid"], GPUS[0]);
    let procs = gpus[0]["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 1, "{doc}");
    assert_eq!(procs[0]["pid"], 1, "{doc}");
    assert_eq!(
        procs[0]["host_pid"], 1,
        "no host pid in the pod's view: {doc}"
    );
    assert_eq!(procs[0]["gpu_memory_usage"], 1000);
    let json = stdout(&out);
    assert!(
        !json.contains(GPUS[1]) && !json.contains(NAMES[1]),
        "{json}"
    );

    let out = gpupeek("-p --no-header");
    let table = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(table.lines().count(), 1, "{table}");
    assert!(table.contains(NAMES[0]), "{table}");
    assert!(table.ends_with("/1(1000M)\n"), "{table}");

    let out = gpupeek("-o waybar");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let bar = stdout(&out);
    assert!(!bar.contains(NAMES[1]), "{bar}");
    let out = gpupeek("--format '{count} {0.uuid}'");
    assert_eq!(
        stdout(&out).trim(),
        format!("1 {}", GPUS[0]),
        "{}",
        stderr(&out)
    );

    // The C and Python readers read the view by its path as well.
    if let Some(reader) = gpupeek_e2e::compile_c_reader(&pods.sb) {
        let out = in_pod(&format!("exec {} {}", reader.display(), view.display()));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains(GPUS[0]) && !text.contains(GPUS[1]), "{text}");
    }
    let out = in_pod(&format!(
        "cd {} && exec python3 -c 'import sys, gpupeek; s = gpupeek.snapshot(sys.argv[1]); \
         print(len(s.gpus), s.gpus[0].uuid, [p.pid for p in s.processes])' {}",
        gpupeek_e2e::repo().join("contrib/python").display(),
        view.display()
    ));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), format!("1 {} [1]", GPUS[0]));

    // The pod cannot write to its view, nor add anything beside it.
    let write = in_pod(&format!("echo x >> {}", view.display()));
    assert_ne!(write.status.code(), Some(0));
    assert!(stderr(&write).contains("Read-only"), "{}", stderr(&write));
    let create = in_pod(&format!("touch {}/other", mount_point.display()));
    assert_ne!(create.status.code(), Some(0));
    let meta = std::fs::metadata(pods.view_path(UID_A)).unwrap();
    let size = Segment::open(&pods.view_path(UID_A))
        .unwrap()
        .geometry()
        .segment_size as u64;
    assert_eq!(meta.len(), size);
}

#[test]
fn a_pod_holding_a_mig_instance_sees_its_gpu_and_that_instance_only() {
    let pods = Pods::new("podmig");
    let (_procs, pids) = crate::mig::four_sleepers();
    pods.sb.write_scenario(&crate::mig::three_way(&pids));
    // Pod A holds GI 5 by its MIG UUID (NVIDIA's plugin), pod B GI 13 as GKE names it,
    // pod C GI 1 as NVIDIA's index strategy does (MIG device 0 of GPU 0: the fake
    // numbers the instances in order).
    let _kubelet = FakeKubelet::start(
        &pods.socket,
        allocations(&[
            ("train-a", "MIG-00000005-7d1c-5b8e-9d2a-00000000000e"),
            ("train-b", "nvidia0/gi13"),
            ("idle-c", "0:0"),
        ]),
    );
    let daemon = pods.start_daemon();
    pods.sb.wait_live(&daemon);
    let parent = "GPU-a1b2c3d4-0000-1111-2222-333344445555";
    for (uid, gi) in [(UID_A, 5), (UID_B, 13), (UID_C, 1)] {
        let snap = pods.mig_view(&daemon, uid, parent, gi);
        // Its processes are not known to be the pod's (no pod cgroup): none shown.
        assert!(snap.processes.is_empty());
    }
}

/// NVIDIA's DRA driver names a GPU by its minor number (`gpu-0` is `/dev/nvidia0`, here
/// NVML's GPU 1) and a MIG device by its parent's minor number, its profile and its
/// placement, in each release's form; the pods holding them see them.
#[test]
fn pods_holding_dra_devices_see_the_gpu_and_instances_their_claims_name() {
    let pods = Pods::new("poddra");
    let (_procs, pids) = crate::mig::four_sleepers();
    pods.sb
        .write_scenario(&crate::mig::numbered_by_minor(crate::mig::three_way(&pids)));
    let _kubelet = FakeKubelet::start(
        &pods.socket,
        allocations(&[
            ("train-a", "gpu-0"),
            ("train-b", "gpu-1-mig-2g20gb-14-4"),
            ("idle-c", "gpu-1-mig-1g10gb-6"),
        ]),
    );
    let daemon = pods.start_daemon();
    pods.sb.wait_live(&daemon);
    let view_a = pods.view_when(&daemon, UID_A, 1, 0);
    assert_eq!(uuids(&view_a), ["GPU-ffffffff-0000-1111-2222-333344445555"]);
    assert!(view_a.mig.is_empty());
    let parent = "GPU-a1b2c3d4-0000-1111-2222-333344445555";
    for (uid, gi) in [(UID_B, 5), (UID_C, 13)] {
        pods.mig_view(&daemon, uid, parent, gi);
    }
}

#[test]
fn a_pod_views_directory_others_can_write_to_is_refused_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let pods = Pods::new("podbaddir");
    std::fs::create_dir_all(&pods.views).unwrap();
    std::fs::set_permissions(&pods.views, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut cmd = pods.sb.daemon_command("100ms");
    cmd.arg("--pod-views").arg(&pods.views);
    let out = gpupeek_e2e::run_with_watchdog(cmd);
    gpupeek_e2e::assert_one_line_failure(&out, 6, "a world-writable --pod-views");
    let err = stderr(&out);
    assert!(
        err.contains("--pod-views") && err.contains("the group or others can write to it"),
        "{err}"
    );
    assert!(!pods.sb.shm_path().exists(), "no segment made");
    assert!(entries(&pods.views).is_empty());
}

/// A pod whose process runs as another user, under a gpupeekd without CAP_SYS_PTRACE
/// (contrib/kubernetes drops every capability): the daemon may not read the process's
/// `/proc/PID/ns/pid`, only its world-readable status. The process is in the pod's view
/// by the pid it has in the pod, and the view names no pid namespace.
#[test]
fn a_pods_process_of_another_user_is_in_its_view_under_a_daemon_that_may_not_ptrace() {
    if !root_or_skip(
        "a_pods_process_of_another_user_is_in_its_view_under_a_daemon_that_may_not_ptrace",
    ) {
        return;
    }
    let _cgroups = pod_cgroups_to_myself();
    let pods = Pods::new("podviews-noptrace");
    let (_box_a, a) = container_as(Some(65534));
    let _cg_a = pod_cgroup(UID_A, 'a', a);
    pods.sb.write_scenario(&scenario(&[(0, a, 1000)]));
    let _kubelet = FakeKubelet::start(&pods.socket, allocations(&[("train-a", GPUS[0])]));
    let base = {
        let mut cmd = pods.sb.daemon_command("100ms");
        cmd.args(["--process-interval", "100ms", "--pod-views"])
            .arg(&pods.views)
            .arg("--kubelet-socket")
            .arg(&pods.socket)
            .arg("--pod-log-dir")
            .arg(&pods.logs);
        cmd
    };
    // The same daemon, its bounding set without CAP_SYS_PTRACE: root without it.
    let mut cmd = Command::new("setpriv");
    cmd.args(["--bounding-set", "-sys_ptrace", "--"])
        .arg(base.get_program())
        .args(base.get_args());
    for (key, value) in base.get_envs() {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    let daemon = pods.sb.spawn_daemon(cmd);
    pods.sb.wait_live(&daemon);
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.pid())).unwrap();
    let bounding = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap();
    assert_eq!(bounding & (1 << 19), 0, "CAP_SYS_PTRACE (19) is dropped");

    let view = pods.view_when(&daemon, UID_A, 1, 1);
    assert_eq!(uuids(&view), [GPUS[0]]);
    assert_eq!(
        view.processes[0].pid, 1,
        "the pid in the pod, not the host's {a}"
    );
    assert_eq!(view.processes[0].gpu_mem_bytes, 1000 * MIB);
    assert_eq!(view.proc_head.pid_ns_inode, 0, "no namespace named");
}

/// Every track of the segment at `path` in use, whole: (kind, UUID, track).
fn tracks_at(path: &str) -> Vec<(u32, String, Track)> {
    let Ok(segment) = Segment::open(path) else {
        return Vec::new();
    };
    (0..segment.track_count())
        .filter_map(|i| segment.track(i, [usize::MAX; 3]).ok().flatten())
        .filter(|t| t.head.kind != TrackKind::Free as u32)
        .map(|t| (t.head.kind, text::decode(&t.head.uuid), t))
        .collect()
}

/// Whether every track holds samples over `span`.
fn all_cover(tracks: &[(u32, String, Track)], span: Duration) -> bool {
    !tracks.is_empty()
        && tracks.iter().all(|(_, _, t)| {
            t.head.last_sample_unix_ns - t.head.integral_start_unix_ns >= span.as_nanos() as u64
        })
}

/// A pod's view keeps the tiered history of its GPU and of its MIG instance from the
/// moment the view is made (what the GPU did before is not the pod's to see), a track
/// each and no more, and a daemon that starts again takes that history over.
#[test]
fn a_pods_view_keeps_its_gpus_history_from_its_start_and_across_a_restart() {
    let pods = Pods::new("podhistory");
    let (_procs, pids) = crate::mig::four_sleepers();
    pods.sb.write_scenario(&crate::mig::three_way(&pids));
    let kubelet = FakeKubelet::start(&pods.socket, allocations(&[]));
    // Raw samples every 100 ms, buckets of 1 s and 6 s.
    let env = [("GPUPEEKD_TEST_HISTORY_UNIT_MS", "100")];
    let mut daemon = pods.start_daemon_env(&env);
    pods.sb.wait_live(&daemon);
    let main = pods.sb.shm_path().to_str().unwrap().to_owned();
    wait_for("the node's history", &daemon, || {
        std::thread::sleep(Duration::from_millis(100));
        all_cover(&tracks_at(&main), Duration::from_millis(500))
    });
    let allocated_at = unix_ns();
    let instance = "MIG-00000005-7d1c-5b8e-9d2a-00000000000e";
    kubelet.set(allocations(&[("train-a", instance)]));
    let path = pods.view_path(UID_A);
    let mut view = Vec::new();
    wait_for("the pod's history", &daemon, || {
        std::thread::sleep(Duration::from_millis(100));
        view = tracks_at(&path);
        view.len() == 2 && all_cover(&view, Duration::from_millis(1500))
    });
    let parent = "GPU-a1b2c3d4-0000-1111-2222-333344445555";
    let shown: Vec<(u32, &str)> = view.iter().map(|(k, u, _)| (*k, u.as_str())).collect();
    assert_eq!(
        shown,
        [
            (TrackKind::Gpu as u32, parent),
            (TrackKind::Mig as u32, instance)
        ]
    );
    let tiers = Segment::open(&path).unwrap().geometry().tiers.unwrap();
    assert_eq!(tiers.track_count, 2, "a track each");
    assert_eq!(tiers.slots, [600, 2160, 1440], "one day of 1 min buckets");
    for (_, uuid, t) in &view {
        assert!(
            t.head.integral_start_unix_ns >= allocated_at,
            "{uuid}: history from before the pod had the GPU"
        );
        let first = t.tiers.iter().flatten().map(|b| b.start_unix_ns).min();
        // A coarse bucket starts at its width's boundary, at most 6 s before.
        assert!(first.unwrap() + 6_000_000_000 >= allocated_at, "{uuid}");
        assert!(t.tiers[0].iter().all(|b| b.start_unix_ns >= allocated_at));
    }
    let node: Vec<_> = tracks_at(&main);
    let node_gpu = node.iter().find(|(_, u, _)| u == parent).unwrap();
    assert!(node_gpu.2.head.integral_start_unix_ns < allocated_at);

    // gpupeek in the pod reads the view's history.
    let out = gpupeek_e2e::run_with_watchdog({
        let mut cmd = Command::new(&gpupeek_e2e::bins().client);
        cmd.args(["--shm", &path, "history", "--since", "1m", "--json"]);
        cmd
    });
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json = stdout(&out);
    assert!(json.contains(parent) && json.contains(instance), "{json}");

    // The daemon stops and starts again: the pod's history goes on where it was.
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(daemon.wait_exit(), Some(0));
    let before = tracks_at(&path);
    let daemon = pods.start_daemon_env(&env);
    pods.sb.wait_live(&daemon);
    let mut after = Vec::new();
    wait_for("the pod's history again", &daemon, || {
        std::thread::sleep(Duration::from_millis(100));
        after = tracks_at(&path);
        after.len() == 2
            && after
                .iter()
                .zip(&before)
                .all(|(a, b)| a.2.head.raw_written > b.2.head.raw_written)
    });
    for ((_, uuid, a), (_, _, b)) in after.iter().zip(&before) {
        assert_eq!(
            a.head.integral_start_unix_ns, b.head.integral_start_unix_ns,
            "{uuid}"
        );
        let starts = |t: &Track| {
            t.tiers[0]
                .iter()
                .map(|b| b.start_unix_ns)
                .collect::<Vec<_>>()
        };
        assert!(starts(a).starts_with(&starts(b)), "{uuid}");
    }
    let log = daemon.log();
    assert!(
        log.contains("pod views: the history of 1 pod(s) taken over"),
        "{log}"
    );
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// A pod given a second GPU outgrows its view: the view is made again for both GPUs,
/// and the first GPU's history comes along.
#[test]
fn a_view_made_again_for_more_gpus_keeps_the_history_it_had() {
    let pods = Pods::new("podregrow");
    pods.sb.write_scenario(&scenario(&[]));
    let kubelet = FakeKubelet::start(&pods.socket, allocations(&[("train-a", GPUS[0])]));
    let env = [("GPUPEEKD_TEST_HISTORY_UNIT_MS", "100")];
    let daemon = pods.start_daemon_env(&env);
    pods.sb.wait_live(&daemon);
    let path = pods.view_path(UID_A);
    let mut before = Vec::new();
    wait_for("the pod's first GPU's history", &daemon, || {
        std::thread::sleep(Duration::from_millis(100));
        before = tracks_at(&path);
        all_cover(&before, Duration::from_millis(1000))
    });
    assert_eq!(before.len(), 1);
    kubelet.set(allocations(&[("train-a", GPUS[0]), ("train-a", GPUS[1])]));
    let mut after = Vec::new();
    wait_for("the view of both GPUs, with history", &daemon, || {
        std::thread::sleep(Duration::from_millis(100));
        after = tracks_at(&path);
        after.len() == 2 && all_cover(&after, Duration::from_millis(200))
    });
    let uuids: Vec<&str> = after.iter().map(|(_, u, _)| u.as_str()).collect();
    assert_eq!(uuids, [GPUS[0], GPUS[1]]);
    assert_eq!(
        Segment::open(&path).unwrap().snapshot().unwrap().gpus.len(),
        2
    );
    let (first, kept) = (&before[0].2, &after[0].2);
    assert_eq!(
        kept.head.integral_start_unix_ns,
        first.head.integral_start_unix_ns
    );
    assert!(kept.head.raw_written > first.head.raw_written);
    assert!(after[1].2.head.integral_start_unix_ns > first.head.last_sample_unix_ns);
}

/// What a pod with `hostUsers: false` runs, as Python: a user namespace whose root is
/// the host's uid 100000 (written into its maps by root, as the kubelet's runtime does),
/// the pod's directory mounted at the pod's mount point through an idmapped mount (the
/// runtime mounts every volume so, on Linux 6.3 and later), and `gpupeek ARGS` as the
/// pod's root, once through that mount and once on the directory itself, then the same
/// with the Python reader (`contrib/python` in `PYTHONPATH`). Prints the four runs' exit
/// statuses, standard outputs and standard errors as JSON.
const USERNS_POD: &str = r#"
import ctypes, json, os, subprocess, sys
view_dir, mount_point, gpupeek = sys.argv[1:4]
holder = subprocess.Popen(["unshare", "--user", "sleep", "60"])
try:
    for _ in range(500):
        if os.readlink(f"/proc/{holder.pid}/ns/user") != os.readlink("/proc/self/ns/user"):
            break
        __import__("time").sleep(0.01)
    for kind in ("uid", "gid"):
        with open(f"/proc/{holder.pid}/{kind}_map", "w") as f:
            f.write("0 100000 65536\n")
    libc = ctypes.CDLL(None, use_errno=True)
    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]
    def check(r, what):
        if r < 0:
            raise OSError(ctypes.get_errno(), what)
        return r
    # open_tree(OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC), mount_setattr(MOUNT_ATTR_IDMAP),
    # move_mount(MOVE_MOUNT_F_EMPTY_PATH): x86_64's and aarch64's numbers alike.
    tree = check(libc.syscall(428, -100, view_dir.encode(), 1 | os.O_CLOEXEC), "open_tree")
    userns = os.open(f"/proc/{holder.pid}/ns/user", os.O_RDONLY)
    attr = MountAttr(0x00100000, 0, 0, userns)
    check(libc.syscall(442, tree, b"", 0x1000, ctypes.byref(attr), ctypes.sizeof(attr)),
          "mount_setattr")
    check(libc.syscall(429, tree, b"", -100, mount_point.encode(), 4), "move_mount")
    runs = []
    python = "import sys, gpupeek; print(len(gpupeek.snapshot(sys.argv[1]).gpus))"
    for reader in ([gpupeek, "--shm"], ["python3", "-c", python]):
        for where in (mount_point, view_dir):
            cmd = ["nsenter", f"--user=/proc/{holder.pid}/ns/user", "--setuid", "0",
                   "--setgid", "0", "--", *reader, os.path.join(where, "gpupeek")]
            if reader[0] == gpupeek:
                cmd += sys.argv[4:]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            runs.append([out.returncode, out.stdout, out.stderr])
    print(json.dumps(runs))
finally:
    holder.kill()
"#;

/// A pod with `hostUsers: false` (user namespaces, GA in Kubernetes 1.36): its root is an
/// unprivileged uid of the node, and its runtime mounts its volumes idmapped, so its view,
/// root's on the node, is root's in the pod and gpupeek reads it. Without the idmapped
/// mount the view's owner is a user the pod's namespace does not map, which gpupeek
/// refuses in one line that says so.
#[test]
fn a_user_namespaced_pod_reads_its_view_through_the_idmapped_mount_of_its_volume() {
    if !root_or_skip("a_user_namespaced_pod_reads_its_view_through_the_idmapped_mount") {
        return;
    }
    let pods = Pods::new("podusers");
    pods.sb.write_scenario(&scenario(&[]));
    let _kubelet = FakeKubelet::start(&pods.socket, allocations(&[("train-a", GPUS[0])]));
    let daemon = pods.start_daemon();
    pods.sb.wait_live(&daemon);
    pods.view_when(&daemon, UID_A, 1, 0);
    let mount_point = pods.sb.dir.join("userns-pod");
    std::fs::create_dir_all(&mount_point).unwrap();
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "python3",
        "-c",
        USERNS_POD,
    ])
    .arg(pods.views.join(UID_A))
    .arg(&mount_point)
    .arg(&gpupeek_e2e::bins().client)
    .args(["--json"])
    .env("PYTHONPATH", gpupeek_e2e::repo().join("contrib/python"));
    let out = gpupeek_e2e::run_with_watchdog(cmd);
    if !out.status.success() {
        // CI's kernel has user namespaces and idmapped mounts: there, this is a failure.
        assert!(
            std::env::var_os("CI").is_none(),
            "a user-namespaced pod could not be set up: {}",
            stderr(&out)
        );
        eprintln!(
            "skipping a_user_namespaced_pod_reads_its_view_through_the_idmapped_mount: no \
             user namespace or idmapped mount here: {}",
            stderr(&out)
        );
        return;
    }
    let runs: Vec<(i32, String, String)> = serde_json::from_slice(&out.stdout).unwrap();
    let (code, json, err) = &runs[0];
    assert_eq!(*code, 0, "through the idmapped mount: {err}");
    let doc: Value = serde_json::from_str(json).unwrap();
    assert_eq!(doc["gpus"].as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(doc["gpus"][0]["uuid"], GPUS[0], "{doc}");
    let (code, json, err) = &runs[1];
    assert_eq!(*code, 7, "without it, untrusted: {json}{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("a user outside this user namespace") && err.contains("idmapped"),
        "{err}"
    );
    // The Python reader alike.
    let (code, out, err) = &runs[2];
    assert_eq!((*code, out.trim()), (0, "1"), "{err}");
    let (code, _, err) = &runs[3];
    assert_ne!(*code, 0);
    assert!(
        err.contains("UntrustedError") && err.contains("a user outside this user namespace"),
        "{err}"
    );
}

/// `--history-tracks 0` keeps no tiered history, in the node's segment or in the views.
#[test]
fn without_tiered_history_the_views_keep_none_either() {
    let pods = Pods::new("podnotracks");
    pods.sb.write_scenario(&scenario(&[]));
    let _kubelet = FakeKubelet::start(&pods.socket, allocations(&[("train-a", GPUS[0])]));
    let daemon = pods.start_daemon_with(&[], &["--history-tracks", "0"]);
    pods.sb.wait_live(&daemon);
    pods.view_when(&daemon, UID_A, 1, 0);
    let view = Segment::open(&pods.view_path(UID_A)).unwrap();
    assert_eq!(view.track_count(), 0);
    assert_eq!(pods.sb.segment().track_count(), 0);
}
