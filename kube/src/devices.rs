//! GPU assignments from a `List` answer, and the join of a GPU (or MIG instance) to the
//! containers it is assigned to.
//!
//! Devices come from device plugins (`devices`, by resource name `nvidia.com/...`) and
//! from NVIDIA's DRA driver (`dynamic_resources`, by driver name `gpu.nvidia.com`): see
//! [`DeviceId`] for every form of id either gives.

use crate::api::ListPodResourcesResponse;

/// The name NVIDIA's DRA driver publishes its GPU and MIG devices under.
pub const NVIDIA_DRA_DRIVER: &str = "gpu.nvidia.com";

/// A container a device is assigned to; serialized as `serve`'s `/snapshot` has it.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct Owner {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The container's name.
    pub container: String,
    /// The resource claim that gave it the device, for a device of a DRA driver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim: Option<Claim>,
}

/// A device of a resource claim (DRA), as the kubelet names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct Claim {
    /// The claim's name.
    pub name: String,
    /// The claim's namespace.
    pub namespace: String,
    /// The DRA driver's name (`gpu.nvidia.com`).
    pub driver: String,
    /// The pool the device is in (the node's name, for NVIDIA's driver).
    pub pool: String,
    /// The device's name in its pool (`gpu-0`).
    pub device: String,
}

/// A device id as NVIDIA's and GKE's device plugins allocate them, without a sharing
/// suffix (`::N` of NVIDIA's time-slicing and MPS, `/vgpuN` of GKE's), or a device name
/// of NVIDIA's DRA driver.
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
    /// `N` (NVIDIA's plugin with `--device-id-strategy=index`): a whole GPU by NVML index.
    Index(u32),
    /// `nvidiaN` (GKE's): a whole GPU by minor number, N of `/dev/nvidiaN`.
    Minor(u32),
    /// `nvidiaN/giM` (GKE's): GPU instance `M` of the GPU with minor number `N`.
    MigOfMinor {
        /// The parent GPU's minor number.
        minor: u32,
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
    /// `gpu-N` (NVIDIA's DRA driver): a whole GPU by minor number (by NVML index in
    /// releases before 25.8).
    DraGpu(u32),
    /// `gpu-N-mig-REST` (NVIDIA's DRA driver): a MIG device of the GPU with minor number
    /// `N` (index before 25.8), named by its GPU instance's profile and placement. REST is
    /// `PROFILE-PROFILEID-START` in today's releases, `PROFILE-START[-END]` and
    /// `PROFILEID-START-SIZE` in earlier ones (PROFILE: `1g.10gb` without its dots).
    DraMig {
        /// The parent GPU's minor number.
        minor: u32,
        /// What follows `-mig-`.
        rest: String,
    },
}

impl DeviceId {
    /// Parses a device plugin's device id; `None` for a form gpupeek does not know.
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
            None => Some(DeviceId::Minor(number(gke)?)),
            Some((minor, gi)) => Some(DeviceId::MigOfMinor {
                minor: number(minor)?,
                gpu_instance_id: number(gi)?,
            }),
        }
    }

    /// Parses a device name NVIDIA's DRA driver published; `None` for another form (its
    /// VFIO devices, IMEX channels, compute domains).
    pub fn parse_dra(name: &str) -> Option<DeviceId> {
        let rest = name.strip_prefix("gpu-")?;
        match rest.split_once("-mig-") {
            None => Some(DeviceId::DraGpu(number(rest)?)),
            Some((minor, mig)) => {
                let known = !mig.is_empty()
                    && mig
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
                known.then_some(())?;
                Some(DeviceId::DraMig {
                    minor: number(minor)?,
                    rest: mig.to_owned(),
                })
            }
        }
    }
}

/// A decimal number of ASCII digits alone.
fn number(s: &str) -> Option<u32> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// A GPU, or a MIG instance of one, to look up.
#[derive(Debug, Clone, Copy)]
pub struct Device<'a> {
    /// NVML index of the GPU.
    pub index: u32,
    /// The GPU's UUID (`GPU-...`), when known.
    pub uuid: Option<&'a str>,
    /// The GPU's minor number (N of `/dev/nvidiaN`), when known; the ids that name a GPU
    /// by minor number are matched against its index when not (they are the same on
    /// most machines).
    pub minor: Option<u32>,
    /// The MIG instance on it, for a MIG device.
    pub mig: Option<MigDevice<'a>>,
}

impl Device<'_> {
    /// Whether the GPU is the one with minor number `minor`.
    fn has_minor(&self, minor: u32) -> bool {
        self.minor.unwrap_or(self.index) == minor
    }
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
    /// Its GPU instance's profile as nvidia-smi names it (`3g.40gb`, also for a compute
    /// instance published as `1c.3g.40gb`), when known.
    pub profile: Option<&'a str>,
    /// Its GPU instance's profile id, first memory slice and memory slices, when known.
    pub placement: Option<(u32, u32, u32)>,
    /// No other GPU instance of its GPU has its GPU instance's profile. Where the
    /// placement is not known (the daemon could not ask for it: MIG monitoring needs
    /// privileges a container may lack), a DRA device name with its profile can then
    /// only be this one.
    pub sole_of_profile: bool,
}

impl MigDevice<'_> {
    /// Whether NVIDIA's DRA driver names this MIG device `gpu-N-mig-{rest}` (N checked
    /// by the caller), in any of its releases' forms.
    fn dra_named(&self, rest: &str) -> bool {
        let Some((id, start, size)) = self.placement else {
            let Some(profile) = self.profile.map(dra_profile) else {
                return false;
            };
            let tail = rest
                .strip_prefix(profile.as_str())
                .and_then(|t| t.strip_prefix('-'));
            let placed =
                |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'-');
            return self.sole_of_profile && tail.is_some_and(placed);
        };
        if rest == format!("{id}-{start}-{size}") {
            return true;
        }
        let Some(profile) = self.profile.map(dra_profile) else {
            return false;
        };
        let placement = match size {
            0 | 1 => start.to_string(),
            _ => format!("{start}-{}", start + size - 1),
        };
        rest == format!("{profile}-{id}-{start}") || rest == format!("{profile}-{placement}")
    }
}

/// A GPU instance's profile as NVIDIA's DRA driver writes it in a device name: `3g.40gb`
/// as `3g40gb`, `1g.10gb+me` as `1g10gb-me` (dots dropped, then what a DNS label may
/// not hold made a hyphen, lower case).
fn dra_profile(profile: &str) -> String {
    let out: String = profile
        .chars()
        .filter(|c| *c != '.')
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .collect();
    out.trim_matches('-').to_owned()
}

/// Every NVIDIA device the kubelet says is assigned, with its container.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceMap {
    assigned: Vec<(DeviceId, Owner)>,
}

impl DeviceMap {
    /// The assignments in `response` of device plugin resources named `nvidia.com/...`
    /// (`gpu`, `gpu.shared`, `mig-1g.10gb`, ...) and of devices of NVIDIA's DRA driver,
    /// the ids gpupeek knows.
    pub fn new(response: &ListPodResourcesResponse) -> DeviceMap {
        let mut assigned = Vec::new();
        for pod in &response.pod_resources {
            for container in &pod.containers {
                let owner = Owner {
                    namespace: pod.namespace.clone(),
                    pod: pod.name.clone(),
                    container: container.name.clone(),
                    claim: None,
                };
                for devices in &container.devices {
                    if !devices.resource_name.starts_with("nvidia.com/") {
                        continue;
                    }
                    for id in devices.device_ids.iter().filter_map(|d| DeviceId::parse(d)) {
                        assigned.push((id, owner.clone()));
                    }
                }
                for claim in &container.dynamic_resources {
                    for d in &claim.claim_resources {
                        if d.driver_name != NVIDIA_DRA_DRIVER {
                            continue;
                        }
                        let Some(id) = DeviceId::parse_dra(&d.device_name) else {
                            continue;
                        };
                        let claim = Claim {
                            name: claim.claim_name.clone(),
                            namespace: claim.claim_namespace.clone(),
                            driver: d.driver_name.clone(),
                            pool: d.pool_name.clone(),
                            device: d.device_name.clone(),
                        };
                        let owner = Owner {
                            claim: Some(claim),
                            ..owner.clone()
                        };
                        assigned.push((id, owner));
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
                (DeviceId::Minor(n) | DeviceId::DraGpu(n), None) => device.has_minor(*n),
                (DeviceId::Mig(uuid), Some(m)) => same(uuid, m.uuid),
                (
                    DeviceId::MigOfGpu {
                        gpu_uuid,
                        gpu_instance_id,
                    },
                    Some(m),
                ) => same(gpu_uuid, device.uuid) && *gpu_instance_id == m.gpu_instance_id,
                (
                    DeviceId::MigOfMinor {
                        minor,
                        gpu_instance_id,
                    },
                    Some(m),
                ) => device.has_minor(*minor) && *gpu_instance_id == m.gpu_instance_id,
                (DeviceId::MigByIndex { index, mig_index }, Some(m)) => {
                    *index == device.index && Some(*mig_index) == m.mig_index
                }
                (DeviceId::DraMig { minor, rest }, Some(m)) => {
                    device.has_minor(*minor) && m.dra_named(rest)
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
        assert_eq!(DeviceId::parse("nvidia0"), Some(Minor(0)));
        assert_eq!(DeviceId::parse("nvidia1/vgpu4"), Some(Minor(1)));
        let gi = |minor, gpu_instance_id| {
            Some(MigOfMinor {
                minor,
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
                dynamic_resources: Vec::new(),
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
            minor: None,
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
            minor: None,
            mig: Some(MigDevice {
                gpu_instance_id: gi,
                mig_index: Some(mig_index),
                uuid,
                profile: None,
                placement: None,
                sole_of_profile: false,
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

    #[test]
    fn dra_device_names_parse() {
        use DeviceId::*;
        assert_eq!(DeviceId::parse_dra("gpu-0"), Some(DraGpu(0)));
        assert_eq!(DeviceId::parse_dra("gpu-12"), Some(DraGpu(12)));
        let mig = |minor, rest: &str| {
            Some(DraMig {
                minor,
                rest: rest.into(),
            })
        };
        assert_eq!(
            DeviceId::parse_dra("gpu-1-mig-3g40gb-9-4"),
            mig(1, "3g40gb-9-4")
        );
        assert_eq!(
            DeviceId::parse_dra("gpu-0-mig-1g10gb-me-20-6"),
            mig(0, "1g10gb-me-20-6")
        );
        assert_eq!(DeviceId::parse_dra("gpu-2-mig-19-3-1"), mig(2, "19-3-1"));
        for unknown in [
            "",
            "gpu-",
            "gpu-x",
            "gpu--1",
            "gpu-0-mig-",
            "gpu-0-mig-1g.10gb-0",
            "gpu-a-mig-1g10gb-0",
            "gpu-vfio-0",
            "imex-channel-0",
            "GPU-0",
            "0",
        ] {
            assert_eq!(DeviceId::parse_dra(unknown), None, "{unknown:?}");
        }
    }

    /// A pod whose container holds a claim of `driver`'s devices `names`.
    fn claimed(ns: &str, name: &str, driver: &str, names: &[&str]) -> PodResources {
        use crate::api::{ClaimResource, DynamicResource};
        PodResources {
            name: name.into(),
            namespace: ns.into(),
            containers: vec![ContainerResources {
                name: "c".into(),
                devices: Vec::new(),
                dynamic_resources: vec![DynamicResource {
                    claim_name: format!("{name}-gpu"),
                    claim_namespace: ns.into(),
                    claim_resources: names
                        .iter()
                        .map(|n| ClaimResource {
                            driver_name: driver.into(),
                            pool_name: "node-1".into(),
                            device_name: n.to_string(),
                            share_id: None,
                        })
                        .collect(),
                }],
            }],
        }
    }

    #[test]
    fn dra_devices_find_their_containers_by_minor_number_and_placement() {
        let nvidia = NVIDIA_DRA_DRIVER;
        let response = ListPodResourcesResponse {
            pod_resources: vec![
                claimed("ml", "whole", nvidia, &["gpu-3"]),
                claimed("ml", "today", nvidia, &["gpu-5-mig-3g40gb-9-4"]),
                claimed("ml", "mid", nvidia, &["gpu-5-mig-1g10gb-me-2"]),
                claimed("ml", "wide", nvidia, &["gpu-5-mig-1g20gb-6-7"]),
                claimed("ml", "old", nvidia, &["gpu-5-mig-14-0-2"]),
                claimed("x", "other-driver", "gpu.example.com", &["gpu-0"]),
            ],
        };
        let map = DeviceMap::new(&response);
        let pods =
            |d: Device| -> Vec<String> { map.owners(&d).iter().map(|o| o.pod.clone()).collect() };
        // Minor number 3 is NVML's index 0 here (a GPU left out of the driver).
        let gpu = |index, minor| Device {
            index,
            uuid: None,
            minor,
            mig: None,
        };
        assert_eq!(pods(gpu(0, Some(3))), ["whole"]);
        assert!(
            pods(gpu(3, Some(4))).is_empty(),
            "gpu-3 is minor 3, not index 3"
        );
        assert_eq!(
            pods(gpu(3, None)),
            ["whole"],
            "no minor: the index stands in"
        );
        assert!(pods(gpu(0, Some(0))).is_empty(), "another driver's gpu-0");
        let mig = |profile, placement| Device {
            index: 1,
            uuid: None,
            minor: Some(5),
            mig: Some(MigDevice {
                gpu_instance_id: 1,
                mig_index: Some(0),
                uuid: None,
                profile,
                placement,
                sole_of_profile: false,
            }),
        };
        assert_eq!(pods(mig(Some("3g.40gb"), Some((9, 4, 4)))), ["today"]);
        assert!(
            pods(mig(Some("3g.40gb"), Some((9, 0, 4)))).is_empty(),
            "the other 3g.40gb"
        );
        assert!(pods(mig(Some("3g.40gb"), None)).is_empty(), "no placement");
        assert_eq!(pods(mig(Some("1g.10gb+me"), Some((20, 2, 1)))), ["mid"]);
        assert_eq!(pods(mig(Some("1g.20gb"), Some((15, 6, 2)))), ["wide"]);
        assert_eq!(pods(mig(None, Some((14, 0, 2)))), ["old"]);
        // No placement (the daemon may not ask for it): a name with the profile is the
        // GPU's one GPU instance of that profile, if it has only one.
        let sole = |profile, sole_of_profile| Device {
            mig: Some(MigDevice {
                sole_of_profile,
                ..mig(Some(profile), None).mig.unwrap()
            }),
            ..mig(None, None)
        };
        assert_eq!(pods(sole("3g.40gb", true)), ["today"]);
        assert!(pods(sole("3g.40gb", false)).is_empty(), "two 3g.40gb");
        assert_eq!(pods(sole("1g.20gb", true)), ["wide"]);
        assert!(
            pods(sole("1g.10gb", true)).is_empty(),
            "1g10gb-me-2 is a 1g.10gb+me's"
        );
        assert_eq!(pods(sole("1g.10gb+me", true)), ["mid"]);
        assert!(
            pods(Device {
                minor: Some(4),
                ..mig(Some("3g.40gb"), Some((9, 4, 4)))
            })
            .is_empty(),
            "another GPU's"
        );
    }
}
