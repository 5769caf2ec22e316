//! `--pod-labels`: which container and Kubernetes pod each series is about.
//!
//! Per-process series (`--per-process`) gain `container_id` (`RUNTIME://ID`, as
//! kube-state-metrics writes it), `pod_uid` (both from the process's cgroup, as gpupeekd
//! published them) and `namespace`, `pod`, `container`: the names of the pod and container
//! the kubelet's pod-resources API says the process's GPU (its GPU instance, on a MIG GPU)
//! is assigned to (`serve --kubelet.pod-resources-socket`). Every per-process series
//! carries all five; an unknown one is empty.
//!
//! Per-GPU series (gpupeek's and dcgm-exporter's names; nvidia_gpu_exporter's has no such
//! labels) gain, each only when known: `namespace`, `pod` and `container` of the
//! one container the GPU is assigned to; `pod_uid` and `container_id` when every process
//! the segment shows on the GPU is in the same pod (container). With `--names dcgm` they
//! are dcgm-exporter's: `pod`, `namespace`, `container` and `pod_uid` (which it adds
//! with `--kubernetes-enable-pod-uid`), no `container_id`, and for a device of NVIDIA's
//! DRA driver the `dra_*` labels it adds when its DRA support is on: the claim's
//! name and namespace, the driver, pool and device names, and for a MIG device its
//! profile and UUID. A MIG device's series (and, with `--names dcgm`, a GPU instance's)
//! gain the same, for its GPU instance.
//!
//! The join is by device: the pod-resources API names pods, never their uids, so the
//! cgroup's pod uid cannot be matched to a name. A GPU shared by several containers
//! (time-slicing, MPS) names none of them, on its series or its processes'.
//!
//! Privacy: labels come only from what the segment already shows this reader. A process's
//! pod names appear only when the segment publishes its owner (the daemon's process
//! policy is `full`), and a GPU's only when the policy is `full`: under `basic` or `none`
//! a reader who may not see other users' processes learns no pod names from the exporter.

use gpupeek_kube::{Device, MigDevice, Owner};
use gpupeek_model::{Gpu, Model, Process, Text};
use gpupeek_shm::ProcPolicy;

use super::gpu::text;
use super::{escape, Names};

/// The pod labels of a scrape.
pub(super) struct Pods<'m, 'a> {
    model: &'m Model<'a>,
    /// `--pod-labels`.
    on: bool,
    /// The kubelet's assignments, when asked for and answered.
    kube: Option<&'m gpupeek_kube::State>,
}

impl<'m, 'a> Pods<'m, 'a> {
    pub(super) fn new(
        model: &'m Model<'a>,
        on: bool,
        kube: Option<&'m gpupeek_kube::State>,
    ) -> Self {
        Pods { model, on, kube }
    }

    /// The one container GPU `g` (its GPU instance `gi`, on a MIG GPU) is assigned to.
    fn owner(&self, g: &Gpu<'a>, gi: Option<u32>) -> Option<Owner> {
        owner(self.model, self.kube?, g, gi)
    }

    /// `,container_id="...",pod_uid="...",namespace="...",pod="...",container="..."` for
    /// process `p` on `g`; empty without `--pod-labels`.
    pub(super) fn process(&self, p: &Process, g: &Gpu<'a>) -> String {
        if !self.on {
            return String::new();
        }
        let (container_id, pod_uid) = match p.container {
            Some((runtime, id, pod)) => (
                format!("{}://{}", runtime.decode(), id.decode()),
                pod.map(Text::decode).unwrap_or_default(),
            ),
            None => (String::new(), String::new()),
        };
        let owner = if p.user.is_some() {
            self.owner(g, p.mig.map(|(gi, _)| gi))
        } else {
            None
        };
        let owner = owner.unwrap_or_default();
        format!(
            ",container_id=\"{}\",pod_uid=\"{}\",namespace=\"{}\",pod=\"{}\",container=\"{}\"",
            escape(&container_id),
            escape(&pod_uid),
            escape(&owner.namespace),
            escape(&owner.pod),
            escape(&owner.container),
        )
    }

    /// The labels known for GPU `g`, in `names`' label names (see the module's doc);
    /// empty without `--pod-labels` or when the segment does not show every process.
    pub(super) fn gpu(&self, g: &Gpu<'a>, names: Names) -> String {
        self.gpu_or_instance(g, None, names)
    }

    /// [`Pods::gpu`] for GPU instance `gi` of MIG GPU `g`: the container its MIG device
    /// is assigned to, and the pod uid and container id its own processes share.
    pub(super) fn gpu_instance(&self, g: &Gpu<'a>, gi: u32, names: Names) -> String {
        self.gpu_or_instance(g, Some(gi), names)
    }

    fn gpu_or_instance(&self, g: &Gpu<'a>, gi: Option<u32>, names: Names) -> String {
        if !self.on || !names_devices(self.model) {
            return String::new();
        }
        let owner = self.owner(g, gi);
        let procs: Vec<&Process> = self
            .model
            .processes_on(g.index)
            .filter(|p| gi.is_none() || p.mig.map(|(i, _)| i) == gi)
            .collect();
        // The one value every process on the GPU has, if they all have the same one.
        let common = |of: &dyn Fn(&Process) -> Option<String>| -> Option<String> {
            let first = of(procs.first()?)?;
            procs
                .iter()
                .all(|p| of(p).as_ref() == Some(&first))
                .then_some(first)
        };
        let pod_uid = common(&|p| p.container.and_then(|(_, _, pod)| pod).map(Text::decode));
        let container_id = common(&|p| {
            p.container
                .map(|(runtime, id, _)| format!("{}://{}", runtime.decode(), id.decode()))
        });
        let mut out = String::new();
        let mut label = |name: &str, value: &str| {
            out += &format!(",{name}=\"{}\"", escape(value));
        };
        if let Some(o) = &owner {
            if names == Names::Dcgm {
                label("pod", &o.pod);
                label("namespace", &o.namespace);
            } else {
                label("namespace", &o.namespace);
                label("pod", &o.pod);
            }
            label("container", &o.container);
            if let (Names::Dcgm, Some(claim)) = (names, &o.claim) {
                label("dra_claim_name", &claim.name);
                label("dra_claim_namespace", &claim.namespace);
                label("dra_driver_name", &claim.driver);
                label("dra_pool_name", &claim.pool);
                label("dra_device_name", &claim.device);
                let mig = gi.and_then(|gi| {
                    let mut devices = self.model.mig_on(g.index);
                    devices.find(|m| m.gpu_instance_id == gi)
                });
                if let Some(m) = mig {
                    label(
                        "dra_mig_profile",
                        &m.gpu_instance_profile().unwrap_or_default(),
                    );
                    label("dra_mig_device_uuid", &text(m.uuid));
                }
            }
        }
        if let Some(uid) = &pod_uid {
            label("pod_uid", uid);
        }
        if names != Names::Dcgm {
            if let Some(id) = &container_id {
                label("container_id", id);
            }
        }
        out
    }
}

/// Whether a device's pod may be named from `model`: only when the daemon publishes
/// every process's owner (its `full` policy; see the module's privacy rule).
fn names_devices(model: &Model) -> bool {
    model.proc_policy == Some(ProcPolicy::Full)
}

/// Each GPU, or each GPU instance of a MIG GPU, of `model` that `kube` assigns to one
/// container: `(index, GPU instance, owner)`. `None` when its pod may not be named
/// ([`names_devices`]).
pub(crate) fn assignments(
    model: &Model,
    kube: &gpupeek_kube::State,
) -> Option<Vec<(u32, Option<u32>, Owner)>> {
    if !names_devices(model) {
        return None;
    }
    let mut out = Vec::new();
    for g in &model.gpus {
        let instances = model.gpu_instance_ids(g.index);
        let devices: Vec<Option<u32>> = match instances.is_empty() {
            true => vec![None],
            false => instances.into_iter().map(Some).collect(),
        };
        for gi in devices {
            if let Some(o) = owner(model, kube, g, gi) {
                out.push((g.index, gi, o));
            }
        }
    }
    Some(out)
}

/// What a MIG device may be named by: its index on its GPU, its UUID, its GPU instance's
/// profile and placement (see [`MigDevice`]).
#[derive(Default)]
struct MigNames {
    index: Option<u32>,
    uuid: Option<String>,
    profile: Option<String>,
    placement: Option<(u32, u32, u32)>,
    sole_of_profile: bool,
}

/// The one container the kubelet's `kube` says GPU `g` (its GPU instance `gi`, on a MIG
/// GPU: any MIG device of it, by UUID, GPU instance or MIG device index) is assigned
/// to; `None` when none is, or several share it.
fn owner(model: &Model, kube: &gpupeek_kube::State, g: &Gpu, gi: Option<u32>) -> Option<Owner> {
    let uuid = text(g.uuid);
    let gpu = Device {
        index: g.index,
        uuid: (!uuid.is_empty()).then_some(uuid.as_str()),
        minor: g.minor_number,
        mig: None,
    };
    // Each MIG device of the GPU instance; one known by its id alone when the MIG table
    // has none (yet) and only a process names it.
    let migs: Vec<MigNames> = match gi {
        None => Vec::new(),
        Some(gi) => model
            .mig_on(g.index)
            .filter(|m| m.gpu_instance_id == gi)
            .map(|m| {
                let profile = m.gpu_instance_profile();
                let same = |o: &gpupeek_model::Mig| {
                    o.gpu_instance_id != gi && o.gpu_instance_profile() == profile
                };
                let placement = m.placement.map(|p| (p.profile_id, p.start, p.size));
                MigNames {
                    index: Some(m.mig_index),
                    uuid: m.uuid.map(Text::decode),
                    // Only asked where no placement is published (see `MigDevice`).
                    sole_of_profile: placement.is_none() && !model.mig_on(g.index).any(same),
                    profile,
                    placement,
                }
            })
            .collect(),
    };
    let unknown = [MigNames::default()];
    let migs = if migs.is_empty() {
        &unknown[..]
    } else {
        &migs[..]
    };
    let mut owners = Vec::new();
    for mig in migs {
        let device = Device {
            mig: gi.map(|gi| MigDevice {
                gpu_instance_id: gi,
                mig_index: mig.index,
                uuid: mig.uuid.as_deref().filter(|u| !u.is_empty()),
                profile: mig.profile.as_deref(),
                placement: mig.placement,
                sole_of_profile: mig.sole_of_profile,
            }),
            ..gpu
        };
        owners.extend(kube.map.owners(&device));
    }
    owners.sort();
    owners.dedup();
    match owners.as_slice() {
        [one] => Some((*one).clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use gpupeek_kube::api::{
        ContainerDevices, ContainerResources, ListPodResourcesResponse, PodResources,
    };
    use gpupeek_kube::{DeviceMap, State};
    use gpupeek_shm::layout::{gpu_valid as v, proc_valid as pv, GpuState};
    use gpupeek_shm::{text as t, GpuRecord, MigRecord, ProcRecord, Snapshot};

    use crate::metrics::{render_with, Names, Options};
    use crate::testing::live_snapshot;

    const GPU0: &str = "GPU-00000000-0000-0000-0000-000000000000";
    const GPU1: &str = "GPU-11111111-1111-1111-1111-111111111111";
    const MIG: &str = "MIG-22222222-2222-2222-2222-222222222222";
    const UID: &str = "5f1c0a2e-7d3b-4e8a-9c61-0b2d4f6a8e10";

    fn gpu(index: u32, uuid: &str) -> GpuRecord {
        let mut g = GpuRecord {
            index,
            state: GpuState::Ok as u32,
            valid: v::UUID | v::TEMPERATURE,
            temp_gpu_c: 40,
            ..Default::default()
        };
        t::encode(&mut g.uuid, uuid);
        g
    }

    fn proc(gpu_index: u32, pid: u32, container: Option<(&str, &str)>) -> ProcRecord {
        let mut p = ProcRecord {
            gpu_index,
            pid,
            uid: 1000,
            valid: pv::GPU_MEMORY | pv::USER,
            gpu_mem_bytes: 1 << 20,
            gpu_instance_id: u32::MAX,
            compute_instance_id: u32::MAX,
            ..Default::default()
        };
        t::encode(&mut p.user, "alice");
        if let Some((id, pod)) = container {
            t::encode(&mut p.container_runtime, "containerd");
            t::encode(&mut p.container_id, id);
            t::encode(&mut p.pod_uid, pod);
            p.valid |= pv::CONTAINER;
        }
        p
    }

    /// GPU 0 whole to ml/train-0/trainer; GPU 1 in MIG mode, its GPU instance 3 to
    /// ml/infer/server; processes: 10 and 11 in one pod's container on GPU 0, 20 in the
    /// MIG instance, 30 on the host on GPU 1.
    fn snapshot(policy: gpupeek_shm::ProcPolicy) -> Snapshot {
        let mut snap = live_snapshot(vec![gpu(0, GPU0), gpu(1, GPU1)]);
        snap.proc_head.policy = policy as u32;
        let mut mig = proc(1, 20, Some(("bbbb", "")));
        (mig.gpu_instance_id, mig.compute_instance_id) = (3, 0);
        snap.processes = vec![
            proc(0, 10, Some(("aaaa", UID))),
            proc(0, 11, Some(("aaaa", UID))),
            mig,
            proc(1, 30, None),
        ];
        let mut m = MigRecord {
            gpu_index: 1,
            gpu_instance_id: 3,
            compute_instance_id: 0,
            ..Default::default()
        };
        t::encode(&mut m.uuid, MIG);
        m.valid = gpupeek_shm::layout::mig_valid::UUID;
        snap.mig = vec![m];
        snap
    }

    fn kube() -> State {
        let pod = |name: &str, container: &str, resource: &str, id: &str| PodResources {
            name: name.into(),
            namespace: "ml".into(),
            containers: vec![ContainerResources {
                name: container.into(),
                devices: vec![ContainerDevices {
                    resource_name: resource.into(),
                    device_ids: vec![id.into()],
                }],
                dynamic_resources: Vec::new(),
            }],
        };
        let response = ListPodResourcesResponse {
            pod_resources: vec![
                pod("train-0", "trainer", "nvidia.com/gpu", GPU0),
                pod("infer", "server", "nvidia.com/mig-1g.10gb", MIG),
            ],
        };
        State {
            map: std::sync::Arc::new(DeviceMap::new(&response)),
            up: true,
        }
    }

    fn render(snap: &Snapshot, names: Names, kube: Option<&State>) -> String {
        let options = Options {
            names,
            per_process: true,
            per_user: false,
            pod_labels: true,
        };
        render_with(Some(snap), "live", 0, &options, kube)
    }

    fn line<'t>(text: &'t str, start: &str) -> &'t str {
        text.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no {start}: {text}"))
    }

    #[test]
    fn processes_and_gpus_are_labelled_with_their_containers_and_pods() {
        let snap = snapshot(gpupeek_shm::ProcPolicy::Full);
        let text = render(&snap, Names::Gpupeek, Some(&kube()));
        assert!(
            text.contains("gpupeek_kubelet_pod_resources_up 1\n"),
            "{text}"
        );
        let p10 = line(&text, "gpupeek_process_gpu_memory_bytes{gpu=\"0\"");
        assert!(
            p10.contains(&format!(
                "pid=\"10\",user=\"alice\",command=\"\",container_id=\"containerd://aaaa\",\
                 pod_uid=\"{UID}\",namespace=\"ml\",pod=\"train-0\",container=\"trainer\"}}"
            )),
            "{p10}"
        );
        let p20 = line(
            &text,
            &format!("gpupeek_process_gpu_memory_bytes{{gpu=\"1\",uuid=\"{GPU1}\",pid=\"20\""),
        );
        assert!(
            p20.contains(
                "container_id=\"containerd://bbbb\",pod_uid=\"\",namespace=\"ml\",pod=\"infer\",\
                 container=\"server\",gpu_instance_id=\"3\",compute_instance_id=\"0\"}"
            ),
            "the MIG instance's pod: {p20}"
        );
        let p30 = line(
            &text,
            &format!("gpupeek_process_gpu_memory_bytes{{gpu=\"1\",uuid=\"{GPU1}\",pid=\"30\""),
        );
        assert!(
            p30.contains("container_id=\"\",pod_uid=\"\",namespace=\"\",pod=\"\",container=\"\"}"),
            "a host process on a GPU no pod holds: {p30}"
        );
        let t0 = line(&text, "gpupeek_gpu_temperature_celsius{gpu=\"0\"");
        assert!(
            t0.ends_with(&format!(
                ",namespace=\"ml\",pod=\"train-0\",container=\"trainer\",pod_uid=\"{UID}\",\
                 container_id=\"containerd://aaaa\"}} 40"
            )),
            "{t0}"
        );
        let mig = line(&text, "gpupeek_mig_info{gpu=\"1\"");
        assert!(
            mig.ends_with(
                ",namespace=\"ml\",pod=\"infer\",container=\"server\",\
                 container_id=\"containerd://bbbb\"} 1"
            ),
            "the MIG device's pod: {mig}"
        );
        let t1 = line(&text, "gpupeek_gpu_temperature_celsius{gpu=\"1\"");
        assert!(
            t1.ends_with("name=\"\"} 40"),
            "GPU 1 is not one pod's: {t1}"
        );

        let dcgm = render(&snap, Names::Dcgm, Some(&kube()));
        let t0 = line(&dcgm, "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"");
        assert!(
            t0.ends_with(&format!(
                ",pod=\"train-0\",namespace=\"ml\",container=\"trainer\",pod_uid=\"{UID}\"}} 40"
            )),
            "{t0}"
        );
    }

    #[test]
    fn the_snapshot_names_the_pod_of_each_gpu_and_mig_device_under_the_full_policy_only() {
        let doc = |policy| {
            let mut snap = snapshot(policy);
            snap.status.heartbeat_mono_ns = gpupeek_shm::mono_now_ns();
            let reading = crate::stream::Reading::new("gpupeek", Ok(snap));
            let text = crate::snapshot::of(&reading, "host1", "node1", Some(&kube()));
            serde_json::from_str::<serde_json::Value>(&text).unwrap()
        };
        assert_eq!(
            doc(gpupeek_shm::ProcPolicy::Full)["pods"],
            serde_json::json!([
                {"gpu": 0, "gpu_instance_id": null, "namespace": "ml", "pod": "train-0",
                 "container": "trainer"},
                {"gpu": 1, "gpu_instance_id": 3, "namespace": "ml", "pod": "infer",
                 "container": "server"},
            ])
        );
        assert_eq!(
            doc(gpupeek_shm::ProcPolicy::Basic)["pods"],
            serde_json::Value::Null
        );
    }

    #[test]
    fn without_the_kubelet_only_the_cgroups_labels_and_without_the_flag_none() {
        let snap = snapshot(gpupeek_shm::ProcPolicy::Full);
        let text = render(&snap, Names::Gpupeek, None);
        assert!(!text.contains("gpupeek_kubelet_pod_resources_up"), "{text}");
        let p10 = line(&text, "gpupeek_process_gpu_memory_bytes{gpu=\"0\"");
        assert!(
            p10.contains("namespace=\"\",pod=\"\",container=\"\"}"),
            "{p10}"
        );
        assert!(p10.contains(&format!("pod_uid=\"{UID}\"")), "{p10}");
        let down = State::default();
        let text = render(&snap, Names::Gpupeek, Some(&down));
        assert!(
            text.contains("gpupeek_kubelet_pod_resources_up 0\n"),
            "{text}"
        );
        let options = Options {
            per_process: true,
            ..Options::default()
        };
        let text = render_with(Some(&snap), "live", 0, &options, Some(&kube()));
        assert!(!text.contains("pod="), "{text}");
        assert!(!text.contains("container_id="), "{text}");
    }

    #[test]
    fn a_reader_the_daemon_withholds_processes_from_learns_no_pod_names() {
        let mut snap = snapshot(gpupeek_shm::ProcPolicy::Basic);
        // The basic policy publishes no owner, command or container.
        for p in &mut snap.processes {
            p.valid = pv::GPU_MEMORY;
        }
        let text = render(&snap, Names::Gpupeek, Some(&kube()));
        assert!(!text.contains("train-0"), "{text}");
        assert!(!text.contains("infer"), "{text}");
        let p10 = line(&text, "gpupeek_process_gpu_memory_bytes{gpu=\"0\"");
        assert!(
            p10.ends_with(
                "container_id=\"\",pod_uid=\"\",namespace=\"\",pod=\"\",container=\"\"} 1048576"
            ),
            "{p10}"
        );
    }

    /// [`kube`]'s assignments made by NVIDIA's DRA driver: GPU 0 as `gpu-0` (no minor
    /// number published: its index), GPU instance 3 of GPU 1 (1g.10gb, profile 19, at
    /// memory slice 2) as `gpu-1-mig-1g10gb-19-2`.
    fn kube_dra() -> State {
        use gpupeek_kube::api::{ClaimResource, DynamicResource};
        let pod = |name: &str, container: &str, device: &str| PodResources {
            name: name.into(),
            namespace: "ml".into(),
            containers: vec![ContainerResources {
                name: container.into(),
                devices: Vec::new(),
                dynamic_resources: vec![DynamicResource {
                    claim_name: format!("{name}-gpu"),
                    claim_namespace: "ml".into(),
                    claim_resources: vec![ClaimResource {
                        driver_name: "gpu.nvidia.com".into(),
                        pool_name: "node-1".into(),
                        device_name: device.into(),
                        share_id: None,
                    }],
                }],
            }],
        };
        let response = ListPodResourcesResponse {
            pod_resources: vec![
                pod("train-0", "trainer", "gpu-0"),
                pod("infer", "server", "gpu-1-mig-1g10gb-19-2"),
            ],
        };
        State {
            map: std::sync::Arc::new(DeviceMap::new(&response)),
            up: true,
        }
    }

    #[test]
    fn dcgm_names_add_dcgm_exporters_dra_labels_for_a_claimed_device() {
        let mut snap = snapshot(gpupeek_shm::ProcPolicy::Full);
        let m = &mut snap.mig[0];
        t::encode(&mut m.profile, "1g.10gb");
        (
            m.gpu_instance_profile_id,
            m.placement_start,
            m.placement_size,
        ) = (19, 2, 1);
        m.valid |=
            gpupeek_shm::layout::mig_valid::PROFILE | gpupeek_shm::layout::mig_valid::PLACEMENT;
        let dcgm = render(&snap, Names::Dcgm, Some(&kube_dra()));
        let t0 = line(&dcgm, "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"");
        assert!(
            t0.contains(
                ",pod=\"train-0\",namespace=\"ml\",container=\"trainer\",\
                 dra_claim_name=\"train-0-gpu\",dra_claim_namespace=\"ml\",\
                 dra_driver_name=\"gpu.nvidia.com\",dra_pool_name=\"node-1\",\
                 dra_device_name=\"gpu-0\","
            ),
            "{t0}"
        );
        assert!(!t0.contains("dra_mig"), "{t0}");
        let instance = dcgm
            .lines()
            .find(|l| l.contains("GPU_I_ID=\"3\"") && l.contains("pod=\"infer\""))
            .unwrap_or_else(|| panic!("no series of GPU instance 3 with its pod: {dcgm}"));
        assert!(
            instance.contains(&format!(
                "dra_device_name=\"gpu-1-mig-1g10gb-19-2\",dra_mig_profile=\"1g.10gb\",\
                 dra_mig_device_uuid=\"{MIG}\""
            )),
            "{instance}"
        );
        // gpupeek's own names carry the pod, not dcgm-exporter's DRA labels.
        let text = render(&snap, Names::Gpupeek, Some(&kube_dra()));
        let t0 = line(&text, "gpupeek_gpu_temperature_celsius{gpu=\"0\"");
        assert!(t0.contains("pod=\"train-0\""), "{t0}");
        assert!(!text.contains("dra_"), "{text}");

        // The snapshot's pods say which claim holds each device.
        snap.status.heartbeat_mono_ns = gpupeek_shm::mono_now_ns();
        let reading = crate::stream::Reading::new("gpupeek", Ok(snap));
        let text = crate::snapshot::of(&reading, "host1", "node1", Some(&kube_dra()));
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let claim = |device: &str, pod: &str| {
            serde_json::json!({"name": format!("{pod}-gpu"), "namespace": "ml",
                               "driver": "gpu.nvidia.com", "pool": "node-1", "device": device})
        };
        assert_eq!(
            doc["pods"],
            serde_json::json!([
                {"gpu": 0, "gpu_instance_id": null, "namespace": "ml", "pod": "train-0",
                 "container": "trainer", "claim": claim("gpu-0", "train-0")},
                {"gpu": 1, "gpu_instance_id": 3, "namespace": "ml", "pod": "infer",
                 "container": "server", "claim": claim("gpu-1-mig-1g10gb-19-2", "infer")},
            ])
        );
    }
}
