//! GPU assignments from a `List` answer, and the join of a GPU (or MIG instance) to the
//! containers it is assigned to.

use crate::api::ListPodResourcesResponse;

/// A container a device is assigned to.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owner {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The container's name.
    pub container: String,
}

/// A device id as NVIDIA's and GKE's device plugins allocate them, without a sharing
/// suffix (`::N` of NVIDIA's time-slicing and MPS, `/vgpuN` of GKE's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceId {
    /// `GPU-<uuid>`: a whole GPU by UUID (NVIDIA's plugin, the default strategy).
    Gpu(String),
    /// `MIG-<uuid>`: a MIG device by UUID (NVIDIA's plugin, drivers since R470).
    Mig(String),
    /// `MIG-GPU-<uuid>/<gi>/<ci>`: a MIG device by its parent's UUID and GPU instance
    /// (NVIDIA's plugin, drivers before R470).
    MigOfGpu {
        /// The parent GPU's UUID (`GPU-...`).
        gpu_uuid: String,
        /// GPU instance id.
        gpu_instance_id: u32,
    },
    /// `N` (NVIDIA's plugin with `--device-id-strategy=index`) or `nvidiaN` (GKE's): a
    /// whole GPU by NVML index (GKE's number is the `/dev/nvidiaN` minor, NVML's index on
    /// GKE's nodes).
    Index(u32),
    /// `nvidiaN/giM` (GKE's): GPU instance `M` of GPU `N`.
    MigOfIndex {
        /// The parent GPU's index.
        index: u32,
        /// GPU instance id.
        gpu_instance_id: u32,
    },
    /// `N:M` (NVIDIA's plugin with `--device-id-strategy=index` and MIG): MIG device `M`
    /// of GPU `N`, `M` as `nvmlDeviceGetMigDeviceHandleByIndex` numbers them.
    MigByIndex {
        /// The parent GPU's index.
        index: u32,
        /// The MIG device's index on its parent.
        mig_index: u32,
    },
}

impl DeviceId {
    /// Parses a device id; `None` for a form gpupeek does not know.
    pub fn parse(id: &str) -> Option<DeviceId> {
        let id = id.split("::").next().unwrap_or(id);
        let id = match id.find("/vgpu") {
            Some(at) => &id[..at],
            None => id,
        };
        if let Some(rest) = id.strip_prefix("MIG-GPU-") {
            let mut parts = rest.split('/');
            let uuid = parts.next()?;
            let gi = parts.next()?.parse().ok()?;
            return Some(DeviceId::MigOfGpu {
                gpu_uuid: format!("GPU-{uuid}"),
                gpu_instance_id: gi,
            });
        }
        if id.starts_with("MIG-") {
            return Some(DeviceId::Mig(id.to_owned()));
        }
        if id.starts_with("GPU-") {
            return Some(DeviceId::Gpu(id.to_owned()));
        }
        let number = |s: &str| {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse().ok())
                .flatten()
        };
        if let Some(n) = number(id) {
            return Some(DeviceId::Index(n));
        }
        if let Some((gpu, mig)) = id.split_once(':') {
            return Some(DeviceId::MigByIndex {
                index: number(gpu)?,
                mig_index: number(mig)?,
            });
        }
        let gke = id.strip_prefix("nvidia")?;
        match gke.split_once("/gi") {
            None => Some(DeviceId::Index(number(gke)?)),
            Some((index, gi)) => Some(DeviceId::MigOfIndex {
                index: number(index)?,
                gpu_instance_id: number(gi)?,
            }),
        }
    }
}

/// A GPU, or a MIG instance of one, to look up.
#[derive(Debug, Clone, Copy)]
pub struct Device<'a> {
    /// NVML index of the GPU.
    pub index: u32,
    /// The GPU's UUID (`GPU-...`), when known.
    pub uuid: Option<&'a str>,
    /// The MIG instance on it, for a MIG device.
    pub mig: Option<MigDevice<'a>>,
}

/// A MIG instance.
#[derive(Debug, Clone, Copy)]
pub struct MigDevice<'a> {
    /// GPU instance id.
    pub gpu_instance_id: u32,
    /// The MIG device's index on its GPU (`nvmlDeviceGetMigDeviceHandleByIndex`'s),
    /// when known.
    pub mig_index: Option<u32>,
    /// The MIG device's UUID (`MIG-...`), when known.
    pub uuid: Option<&'a str>,
}

/// Every NVIDIA device the kubelet says is assigned, with its container.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceMap {
    assigned: Vec<(DeviceId, Owner)>,
}

impl DeviceMap {
    /// The assignments in `response` of resources named `nvidia.com/...` (`gpu`,
    /// `gpu.shared`, `mig-1g.10gb`, ...), the ids gpupeek knows.
    pub fn new(response: &ListPodResourcesResponse) -> DeviceMap {
        let mut assigned = Vec::new();
        for pod in &response.pod_resources {
            for container in &pod.containers {
                let owner = Owner {
                    namespace: pod.namespace.clone(),
                    pod: pod.name.clone(),
                    container: container.name.clone(),
                };
                for devices in &container.devices {
                    if !devices.resource_name.starts_with("nvidia.com/") {
                        continue;
                    }
                    for id in devices.device_ids.iter().filter_map(|d| DeviceId::parse(d)) {
                        assigned.push((id, owner.clone()));
                    }
                }
            }
        }
        DeviceMap { assigned }
    }

    /// Whether nothing is assigned.
    pub fn is_empty(&self) -> bool {
        self.assigned.is_empty()
    }

    /// The containers `device` is assigned to, each once, in namespace, pod and container
    /// order: none, one, or several when the device is shared. A MIG instance's are its
    /// own, not its GPU's.
    pub fn owners(&self, device: &Device) -> Vec<&Owner> {
        let same = |a: &str, b: Option<&str>| b.is_some_and(|b| a.eq_ignore_ascii_case(b));
        let mut owners: Vec<&Owner> = self
            .assigned
            .iter()
            .filter(|(id, _)| match (id, device.mig) {
                (DeviceId::Gpu(uuid), None) => same(uuid, device.uuid),
                (DeviceId::Index(i), None) => *i == device.index,
                (DeviceId::Mig(uuid), Some(m)) => same(uuid, m.uuid),
                (
                    DeviceId::MigOfGpu {
                        gpu_uuid,
                        gpu_instance_id,
                    },
                    Some(m),
                ) => same(gpu_uuid, device.uuid) && *gpu_instance_id == m.gpu_instance_id,
                (
                    DeviceId::MigOfIndex {
                        index,
                        gpu_instance_id,
                    },
                    Some(m),
                ) => *index == device.index && *gpu_instance_id == m.gpu_instance_id,
                (DeviceId::MigByIndex { index, mig_index }, Some(m)) => {
                    *index == device.index && Some(*mig_index) == m.mig_index
                }
                _ => false,
            })
            .map(|(_, owner)| owner)
            .collect();
        owners.sort();
        owners.dedup();
        owners
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ContainerDevices, ContainerResources, PodResources};

    const GPU: &str = "GPU-11111111-2222-3333-4444-555555555555";
    const MIG: &str = "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";

    #[test]
    fn every_plugins_device_ids_parse() {
        use DeviceId::*;
        let gpu = || Gpu(GPU.into());
        assert_eq!(DeviceId::parse(GPU), Some(gpu()));
        assert_eq!(DeviceId::parse(&format!("{GPU}::3")), Some(gpu()));
        assert_eq!(DeviceId::parse(MIG), Some(Mig(MIG.into())));
        assert_eq!(DeviceId::parse(&format!("{MIG}::7")), Some(Mig(MIG.into())));
        assert_eq!(
            DeviceId::parse("MIG-GPU-11111111-2222-3333-4444-555555555555/2/0"),
            Some(MigOfGpu {
                gpu_uuid: GPU.into(),
                gpu_instance_id: 2
            })
        );
        assert_eq!(DeviceId::parse("3"), Some(Index(3)));
        assert_eq!(DeviceId::parse("nvidia0"), Some(Index(0)));
        assert_eq!(DeviceId::parse("nvidia1/vgpu4"), Some(Index(1)));
        let gi = |index, gpu_instance_id| {
            Some(MigOfIndex {
                index,
                gpu_instance_id,
            })
        };
        assert_eq!(DeviceId::parse("nvidia0/gi1"), gi(0, 1));
        assert_eq!(DeviceId::parse("nvidia2/gi13/vgpu0"), gi(2, 13));
        let mig = |index, mig_index| Some(MigByIndex { index, mig_index });
        assert_eq!(DeviceId::parse("0:1"), mig(0, 1));
        assert_eq!(DeviceId::parse("3:0::2"), mig(3, 0));
        for unknown in [
            "",
            "nvidia",
            "nvidiactl",
            "nvidia0/gi",
            "gpu0",
            "-1",
            ":1",
            "0:",
            "0:x",
            "a:1",
            "0:1:2",
        ] {
            assert_eq!(DeviceId::parse(unknown), None, "{unknown:?}");
        }
    }

    fn pod(ns: &str, name: &str, container: &str, resource: &str, ids: &[&str]) -> PodResources {
        PodResources {
            name: name.into(),
            namespace: ns.into(),
            containers: vec![ContainerResources {
                name: container.into(),
                devices: vec![ContainerDevices {
                    resource_name: resource.into(),
                    device_ids: ids.iter().map(|s| s.to_string()).collect(),
                }],
            }],
        }
    }

    #[test]
    fn gpus_and_mig_instances_find_their_containers() {
        let response = ListPodResourcesResponse {
            pod_resources: vec![
                pod("ml", "train", "main", "nvidia.com/gpu", &[GPU]),
                pod("ml", "infer", "srv", "nvidia.com/mig-1g.10gb", &[MIG]),
                pod("gke", "a", "c", "nvidia.com/gpu", &["nvidia1/gi2"]),
                pod("idx", "b", "c", "nvidia.com/mig-1g.10gb", &["2:1"]),
                pod(
                    "x",
                    "shared-b",
                    "c",
                    "nvidia.com/gpu.shared",
                    &["nvidia3::1"],
                ),
                pod(
                    "x",
                    "shared-a",
                    "c",
                    "nvidia.com/gpu.shared",
                    &["nvidia3::0"],
                ),
                pod("x", "nic", "c", "example.com/nic", &["0"]),
            ],
        };
        let map = DeviceMap::new(&response);
        let names = |d: Device| -> Vec<String> {
            map.owners(&d)
                .iter()
                .map(|o| format!("{}/{}/{}", o.namespace, o.pod, o.container))
                .collect()
        };
        let lower = GPU.to_lowercase();
        let whole = |index, uuid| Device {
            index,
            uuid,
            mig: None,
        };
        assert_eq!(names(whole(0, Some(GPU))), ["ml/train/main"]);
        assert_eq!(names(whole(0, Some(&lower))), ["ml/train/main"]);
        assert!(
            names(whole(0, None)).is_empty(),
            "no uuid; the index id \"0\" is another vendor's resource"
        );
        assert!(
            names(whole(1, None)).is_empty(),
            "a MIG id is not the GPU's"
        );
        assert_eq!(names(whole(3, None)), ["x/shared-a/c", "x/shared-b/c"]);
        let mig = |index, gi, mig_index, uuid| Device {
            index,
            uuid: None,
            mig: Some(MigDevice {
                gpu_instance_id: gi,
                mig_index: Some(mig_index),
                uuid,
            }),
        };
        assert_eq!(names(mig(0, 5, 0, Some(MIG))), ["ml/infer/srv"]);
        assert!(names(mig(0, 5, 0, None)).is_empty());
        assert_eq!(names(mig(1, 2, 0, None)), ["gke/a/c"]);
        assert!(names(mig(1, 3, 0, None)).is_empty());
        assert_eq!(names(mig(2, 9, 1, None)), ["idx/b/c"]);
        assert!(names(mig(2, 9, 0, None)).is_empty());
        assert!(
            names(whole(2, None)).is_empty(),
            "N:M is a MIG device, not its GPU"
        );
    }
}
