//! The MIG model: what a scenario says about a MIG-capable GPU, and what real drivers
//! derive from it.
//!
//! A GPU with a `mig` object can do MIG; `enabled` says whether MIG mode is on (and
//! `pending` what it will be after a reset). Each instance in `instances` is one MIG
//! device: a compute instance (`compute_instance_id`) of a GPU instance
//! (`gpu_instance_id`) made from one of the GPU's GPU-instance profiles, named by its id
//! (`profile_id`, the `id` NVML reports, as `nvidia-smi mig -lgip` lists them) or by its
//! name (`profile`, `"3g.40gb"`). What a real driver
//! derives, this model derives the same way:
//!
//! - the MIG device's memory is its profile's; what is used is the memory of the GPU's
//!   processes whose instance ids are the instance's, unless `memory_used_bytes` says
//!   (processes may be listed under the instance itself, as `processes`, or on the GPU
//!   with the instance's ids: it is the same);
//! - its SM count is the profile's, in proportion of the compute slices it has
//!   (`compute_slices`, by default all of the GPU instance's);
//! - its name is the parent's with ` MIG ` and the profile: `"NVIDIA H100 80GB HBM3 MIG
//!   3g.40gb"`, or `"... MIG 1c.3g.40gb"` for a compute instance of one slice of three;
//! - with MIG on, the parent's utilisation (and its encoder, decoder and per-process
//!   utilisation) is `NOT_SUPPORTED`, as on every real driver: only GPM sees inside the
//!   instances, per GPU instance (`nvmlGpmMigSampleGet`, from the instance's `gpm`).
//!
//! The profiles default to those of an H100 80GB ([`H100_80GB`]).

use serde::Deserialize;

use crate::scenario::{Gpm, Gpu};

/// `NVML_GPU_INSTANCE_PROFILE_COUNT`: profile indices are `0..PROFILE_COUNT`.
pub const PROFILE_COUNT: u32 = 17;

/// A GPU's MIG configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mig {
    /// MIG mode in force.
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// MIG mode after the next reset; defaults to `enabled`.
    #[serde(default)]
    pub pending: Option<bool>,
    /// `nvmlDeviceGetMaxMigDeviceCount` while MIG is on (0 while it is off).
    #[serde(default = "seven")]
    pub max_devices: u32,
    /// The GPU-instance profiles this GPU offers; [`H100_80GB`] when absent.
    #[serde(default)]
    pub profiles: Option<Vec<Profile>>,
    /// The MIG devices, in the order of their device index.
    #[serde(default)]
    pub instances: Vec<Instance>,
}

fn enabled() -> bool {
    true
}

fn seven() -> u32 {
    7
}

/// One GPU-instance profile, as `nvmlDeviceGetGpuInstanceProfileInfoV` reports it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The profile index asked for (`NVML_GPU_INSTANCE_PROFILE_1_SLICE` is 0...).
    pub index: u32,
    /// The profile id (what `nvmlGpuInstanceInfo_t.profileId` holds).
    pub id: u32,
    /// e.g. `"MIG 1g.10gb"`.
    pub name: String,
    pub slices: u32,
    /// Memory slices an instance takes (`nvmlGpuInstancePlacement_t.size`), which is not
    /// its GPU slices (an H100's 3g.40gb takes 4, its 7g.80gb 8); `slices` when absent.
    #[serde(default)]
    pub memory_slices: Option<u32>,
    pub instance_count: u32,
    pub sm_count: u32,
    pub memory_mib: u64,
}

/// One MIG device.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Instance {
    pub gpu_instance_id: u32,
    #[serde(default)]
    pub compute_instance_id: u32,
    /// The GPU-instance profile's id; or see `profile`.
    #[serde(default)]
    pub profile_id: Option<u32>,
    /// The GPU-instance profile's name without "MIG " (`"3g.40gb"`), instead of its id.
    #[serde(default)]
    pub profile: Option<String>,
    /// Compute slices of the compute instance; all of the GPU instance's by default.
    #[serde(default)]
    pub compute_slices: Option<u32>,
    /// Where the GPU instance starts (`nvmlGpuInstancePlacement_t.start`).
    #[serde(default)]
    pub placement_start: u32,
    /// Its MIG device index (`nvmlDeviceGetMigDeviceHandleByIndex`'s); its place in
    /// `instances` when absent. A driver leaves an index free when the device there is
    /// destroyed (`NOT_FOUND` at it), so the indices of those after it have a gap.
    #[serde(default)]
    pub mig_index: Option<u32>,
    pub uuid: Option<String>,
    /// Memory in use; the sum of its processes' when absent.
    #[serde(default)]
    pub memory_used_bytes: Option<u64>,
    /// `nvmlGpmMigSampleGet` values for its GPU instance; absent: `NOT_SUPPORTED`.
    #[serde(default)]
    pub gpm: Option<Gpm>,
    /// Processes running in it: moved into the GPU's `processes` with its instance ids
    /// when the scenario is loaded (so this is empty afterwards).
    #[serde(default)]
    pub processes: Vec<crate::scenario::Process>,
}

/// A built-in profile: index, id, name, slices, memory slices, instances, SMs, memory
/// in MiB.
pub type ProfileRow = (u32, u32, &'static str, u32, u32, u32, u32, u64);

/// The GPU-instance profiles of an H100 80GB HBM3 (`nvidia-smi mig -lgip`, and the
/// placement sizes of `nvidia-smi mig -lgipp`): index, id, name, slices, memory slices,
/// instances, SMs, memory in MiB.
pub const H100_80GB: [ProfileRow; 7] = [
    (0, 19, "MIG 1g.10gb", 1, 1, 7, 16, 9_984),
    (1, 14, "MIG 2g.20gb", 2, 2, 3, 32, 20_096),
    (2, 9, "MIG 3g.40gb", 3, 4, 2, 60, 40_448),
    (3, 5, "MIG 4g.40gb", 4, 4, 1, 64, 40_448),
    (4, 0, "MIG 7g.80gb", 7, 8, 1, 132, 81_152),
    (7, 20, "MIG 1g.10gb+me", 1, 1, 1, 16, 9_984),
    (9, 15, "MIG 1g.20gb", 1, 2, 4, 26, 20_096),
];

impl Mig {
    /// The profiles in force.
    pub fn profiles(&self) -> Vec<Profile> {
        match &self.profiles {
            Some(p) => p.clone(),
            None => H100_80GB
                .iter()
                .map(
                    |&(
                        index,
                        id,
                        name,
                        slices,
                        memory_slices,
                        instance_count,
                        sm_count,
                        memory_mib,
                    )| Profile {
                        index,
                        id,
                        name: name.to_owned(),
                        slices,
                        memory_slices: Some(memory_slices),
                        instance_count,
                        sm_count,
                        memory_mib,
                    },
                )
                .collect(),
        }
    }

    /// The profile with id `id`.
    pub fn profile_by_id(&self, id: u32) -> Option<Profile> {
        self.profiles().into_iter().find(|p| p.id == id)
    }

    /// `nvmlDeviceGetMaxMigDeviceCount`: 0 while MIG is off.
    pub fn max_count(&self) -> u32 {
        if self.enabled {
            self.max_devices
        } else {
            0
        }
    }

    /// The MIG device at device index `index`, while MIG is on.
    pub fn device(&self, index: u32) -> Option<&Instance> {
        if !self.enabled {
            return None;
        }
        (0u32..)
            .zip(&self.instances)
            .find(|(at, i)| i.mig_index.unwrap_or(*at) == index)
            .map(|(_, i)| i)
    }

    /// The MIG device with these ids, while MIG is on.
    pub fn find(&self, gi: u32, ci: u32) -> Option<&Instance> {
        self.enabled.then_some(())?;
        self.instances
            .iter()
            .find(|i| i.gpu_instance_id == gi && i.compute_instance_id == ci)
    }
}

/// What the driver derives for one MIG device of `gpu`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    /// `"3g.40gb"`, or `"1c.3g.40gb"` for a smaller compute instance.
    pub profile: String,
    pub name: Option<String>,
    pub memory_total: u64,
    pub memory_used: u64,
    pub sm_count: u32,
    pub gi_slices: u32,
    pub ci_slices: u32,
}

impl Instance {
    /// Its GPU-instance profile among `mig`'s: by id, else by name.
    pub fn gi_profile(&self, mig: &Mig) -> Option<Profile> {
        match (self.profile_id, &self.profile) {
            (Some(id), _) => mig.profile_by_id(id),
            (None, Some(name)) => mig
                .profiles()
                .into_iter()
                .find(|p| p.name.strip_prefix("MIG ").unwrap_or(&p.name) == name.as_str()),
            (None, None) => None,
        }
    }

    /// What the driver reports for this device of `gpu`; `None` when its profile is
    /// not one of the GPU's (a scenario error the getters answer `UNKNOWN`).
    pub fn derive(&self, gpu: &Gpu, mig: &Mig) -> Option<Derived> {
        let p = self.gi_profile(mig)?;
        let gi_profile = p.name.strip_prefix("MIG ").unwrap_or(&p.name).to_owned();
        let ci_slices = self
            .compute_slices
            .unwrap_or(p.slices)
            .clamp(1, p.slices.max(1));
        let profile = if ci_slices < p.slices {
            format!("{ci_slices}c.{gi_profile}")
        } else {
            gi_profile
        };
        let memory_total = p.memory_mib << 20;
        let used_by_processes = gpu
            .processes
            .iter()
            .filter(|q| {
                q.gpu_instance_id == Some(self.gpu_instance_id)
                    && q.compute_instance_id == Some(self.compute_instance_id)
            })
            .filter_map(|q| q.used_gpu_memory_bytes)
            .sum();
        Some(Derived {
            name: gpu.name.as_ref().map(|n| format!("{n} MIG {profile}")),
            profile,
            memory_total,
            memory_used: self
                .memory_used_bytes
                .unwrap_or(used_by_processes)
                .min(memory_total),
            sm_count: p.sm_count * ci_slices / p.slices.max(1),
            gi_slices: p.slices,
            ci_slices,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::Scenario;

    fn scenario() -> Scenario {
        Scenario::parse(
            r#"{"gpus": [{"name": "NVIDIA H100 80GB HBM3",
                "processes": [
                    {"pid": 1, "used_gpu_memory_bytes": 100, "gpu_instance_id": 1, "compute_instance_id": 0},
                    {"pid": 2, "used_gpu_memory_bytes": 50, "gpu_instance_id": 1, "compute_instance_id": 0},
                    {"pid": 3, "used_gpu_memory_bytes": 7, "gpu_instance_id": 2, "compute_instance_id": 0}
                ],
                "mig": {"instances": [
                    {"gpu_instance_id": 1, "profile_id": 9},
                    {"gpu_instance_id": 2, "profile_id": 9, "compute_slices": 1, "memory_used_bytes": 9},
                    {"gpu_instance_id": 13, "profile": "1g.10gb"}
                ]}}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn a_mig_device_is_named_and_sized_by_its_profile_as_drivers_do() {
        let s = scenario();
        let (gpu, mig) = (&s.gpus[0], s.gpus[0].mig.as_ref().unwrap());
        let whole = mig.instances[0].derive(gpu, mig).unwrap();
        assert_eq!(whole.profile, "3g.40gb");
        assert_eq!(
            whole.name.as_deref(),
            Some("NVIDIA H100 80GB HBM3 MIG 3g.40gb")
        );
        assert_eq!((whole.memory_total, whole.memory_used), (40_448 << 20, 150));
        assert_eq!(
            (whole.sm_count, whole.gi_slices, whole.ci_slices),
            (60, 3, 3)
        );
        let part = mig.instances[1].derive(gpu, mig).unwrap();
        assert_eq!(part.profile, "1c.3g.40gb");
        assert_eq!((part.sm_count, part.memory_used), (20, 9));
        assert_eq!(
            mig.instances[2].derive(gpu, mig).unwrap().profile,
            "1g.10gb"
        );
    }

    #[test]
    fn devices_exist_only_while_mig_is_on() {
        let s = scenario();
        let mut mig = s.gpus[0].mig.clone().unwrap();
        assert_eq!(mig.max_count(), 7);
        assert!(mig.device(2).is_some() && mig.device(3).is_none());
        assert!(mig.find(13, 0).is_some());
        // A gap: the third device at index 5, none at 2.
        mig.instances[2].mig_index = Some(5);
        assert!(mig.device(2).is_none());
        assert_eq!(mig.device(5).map(|i| i.gpu_instance_id), Some(13));
        mig.enabled = false;
        assert_eq!(mig.max_count(), 0);
        assert!(mig.device(0).is_none() && mig.find(1, 0).is_none());
    }
}
