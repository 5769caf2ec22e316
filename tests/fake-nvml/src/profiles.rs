//! Driver profiles: which NVML entry points a driver generation exports, and the
//! version string it reports. One declaration per driver; the e2e harness links one
//! `libfake_nvml_<name>.so` per profile from the static library, with
//! [`Profile::version_script`] as its symbol table, so that a function the driver lacks
//! really is missing (`dlsym` fails), as it would be on that machine.
//!
//! What a function writes on a given driver follows the scenario's `driver_version`
//! ([`crate::procs`]), which a test sets to [`Profile::driver_version`].

use crate::EXPORTED;

/// One driver generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// Names the library: `libfake_nvml_<name>.so`.
    pub name: &'static str,
    /// What `nvmlSystemGetDriverVersion` says.
    pub driver_version: &'static str,
    /// Functions of [`EXPORTED`] this driver does not have, in groups.
    pub absent: &'static [&'static [&'static str]],
    /// A newer driver whose absent functions this one lacks too.
    pub before: Option<&'static Profile>,
}

const V2: [&str; 2] = [
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
];
const V3: [&str; 2] = [
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
];
const DETAIL_LIST: &str = "nvmlDeviceGetRunningProcessDetailList";
/// Entry points newer than R470 that the daemon falls back from: memory with
/// `reserved` (`_v2`, R510), GPM (R520), clock *event* reasons (R535, which renamed the
/// throttle reasons) and the versioned temperature call (R550).
const NEWER_THAN_470: [&str; 9] = [
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleFree",
    "nvmlGpmSampleGet",
    "nvmlGpmMetricsGet",
    "nvmlGpmMigSampleGet",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetTemperatureV",
];
/// MIG queries R450 (the first MIG driver) lacks: the versioned profile info (with the
/// profile's name) and the device attributes, both R470.
const NEWER_THAN_450: [&str; 2] = [
    "nvmlDeviceGetGpuInstanceProfileInfoV",
    "nvmlDeviceGetAttributes_v2",
];
/// Fabric registration (NVSwitch systems), R525.
const NEWER_THAN_520: &str = "nvmlDeviceGetGpuFabricInfo";
/// Added with R510 (NVML 11.6).
const NEWER_THAN_470_PCIE: &str = "nvmlDeviceGetGpuMaxPcieLinkGeneration";
/// Added with R535 (NVML 12.2).
const NEWER_THAN_470_ENGINES: [&str; 2] =
    ["nvmlDeviceGetJpgUtilization", "nvmlDeviceGetOfaUtilization"];
/// Of those, the one newer than R535.
const NEWER_THAN_535: &str = "nvmlDeviceGetTemperatureV";
/// The GSP firmware mode (R510, NVML 11.6) and the row remapper histogram (R520).
const NEWER_THAN_470_RAS: [&str; 2] = [
    "nvmlDeviceGetGspFirmwareMode",
    "nvmlDeviceGetRowRemapperHistogram",
];
/// The PCI info with class codes, the C2C mode, the versioned fabric info (with the
/// health mask), the SRAM ECC status and the platform info (R550, NVML 12.4).
const NEWER_THAN_535_INFO: [&str; 5] = [
    "nvmlDeviceGetPlatformInfo",
    "nvmlDeviceGetPciInfoExt",
    "nvmlDeviceGetC2cModeInfoV",
    "nvmlDeviceGetGpuFabricInfoV",
    "nvmlDeviceGetSramEccErrorStatus",
];
/// Confidential computing's protected memory (R535).
const NEWER_THAN_470_CC: &str = "nvmlDeviceGetConfComputeProtectedMemoryUsage";
/// The vGPU capability queries (R525).
const NEWER_THAN_470_VGPU: [&str; 2] = [
    "nvmlGetVgpuDriverCapabilities",
    "nvmlDeviceGetVgpuCapabilities",
];
/// The thermal margin (R560, NVML 12.6), the DRAM encryption mode (R570), the
/// addressing mode and the GPU's hostname (R580, NVML 12.9: "Changes between v575 and
/// v580" in NVML's API reference).
const NEWER_THAN_550: [&str; 4] = [
    "nvmlDeviceGetMarginTemperature",
    "nvmlDeviceGetDramEncryptionMode",
    "nvmlDeviceGetAddressingMode",
    "nvmlDeviceGetHostname_v1",
];

/// The GPU's run time from its black box (R610, NVML 13.3).
const NEWER_THAN_595: [&str; 1] = ["nvmlDeviceGetBBXTimeData_v1"];

/// MIG (R450, NVML 11.0, with the A100): its queries, row remapping (A100), and `nvmlEventSetWait_v2`, whose
/// event data carries the MIG instance of an Xid (drivers before it have only
/// `nvmlEventSetWait`).
const NEWER_THAN_440: [&str; 12] = [
    "nvmlEventSetWait_v2",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetGpuInstanceProfileInfo",
    "nvmlDeviceGetGpuInstanceById",
    "nvmlGpuInstanceGetInfo",
    "nvmlDeviceGetRemappedRows",
];

/// R440 (CUDA 10.2): before MIG and `nvmlEventSetWait_v2`. Not in [`PROFILES`]: only
/// the tests of what it lacks link it (see [`OLDER`]).
pub const R440: Profile = Profile {
    name: "r440",
    driver_version: "440.118.02",
    absent: &[&NEWER_THAN_440],
    before: Some(&R450),
};
/// Early R450 (450.51–450.57): only the v1 process lists (16-byte entries).
pub const R450: Profile = Profile {
    name: "r450",
    driver_version: "450.51.06",
    absent: &[
        &NEWER_THAN_470,
        &NEWER_THAN_450,
        &V2,
        &V3,
        &[
            DETAIL_LIST,
            NEWER_THAN_520,
            NEWER_THAN_470_PCIE,
            NEWER_THAN_470_CC,
        ],
        &NEWER_THAN_470_ENGINES,
        &NEWER_THAN_470_RAS,
        &NEWER_THAN_470_VGPU,
        &NEWER_THAN_535_INFO,
        &NEWER_THAN_550,
        &NEWER_THAN_595,
    ],
    before: None,
};
/// R470: v1 and `_v2`.
pub const R470: Profile = Profile {
    name: "r470",
    driver_version: "470.256.02",
    absent: &[
        &NEWER_THAN_470,
        &V3,
        &[
            DETAIL_LIST,
            NEWER_THAN_520,
            NEWER_THAN_470_PCIE,
            NEWER_THAN_470_CC,
        ],
        &NEWER_THAN_470_ENGINES,
        &NEWER_THAN_470_RAS,
        &NEWER_THAN_470_VGPU,
        &NEWER_THAN_535_INFO,
        &NEWER_THAN_550,
        &NEWER_THAN_595,
    ],
    before: None,
};
/// 535.54.03 (CUDA 12.2): `_v3` writes 32-byte entries.
pub const R535_54: Profile = Profile {
    name: "r535_54",
    driver_version: "535.54.03",
    absent: &[
        &[DETAIL_LIST, NEWER_THAN_535],
        &NEWER_THAN_535_INFO,
        &NEWER_THAN_550,
        &NEWER_THAN_595,
    ],
    before: None,
};
/// 535.98: `_v3` withdrawn (it came back in 535.104).
pub const R535_98: Profile = Profile {
    name: "r535_98",
    driver_version: "535.98",
    absent: &[
        &V3,
        &[DETAIL_LIST, NEWER_THAN_535],
        &NEWER_THAN_535_INFO,
        &NEWER_THAN_550,
        &NEWER_THAN_595,
    ],
    before: None,
};
/// R550: `_v3` with 24-byte entries and `nvmlDeviceGetRunningProcessDetailList`, but
/// not the thermal margin or the addressing mode.
pub const CURRENT: Profile = Profile {
    name: "current",
    driver_version: "550.54.15",
    absent: &[&NEWER_THAN_550, &NEWER_THAN_595],
    before: None,
};
/// R590 (nvidia_gpu_exporter's H100 and H200 captures): everything the fake has but
/// R610's.
pub const R590: Profile = Profile {
    name: "r590",
    driver_version: "590.48.01",
    absent: &[&NEWER_THAN_595],
    before: None,
};
/// R610 (nvidia_gpu_exporter's RTX 2080 SUPER capture on 610.57.04): everything the
/// fake has.
pub const R610: Profile = Profile {
    name: "r610",
    driver_version: "610.57.04",
    absent: &[],
    before: None,
};

/// Every profile, oldest first.
pub const PROFILES: &[Profile] = &[R450, R470, R535_54, R535_98, CURRENT, R590, R610];
/// Older drivers the tests link besides [`PROFILES`], for the tests of what they lack.
pub const OLDER: &[Profile] = &[R440];

impl Profile {
    /// The functions this driver exports.
    pub fn exports(&self) -> impl Iterator<Item = &'static str> + '_ {
        EXPORTED
            .iter()
            .copied()
            .filter(|f| !self.absent_groups().any(|group| group.contains(f)))
    }

    /// The groups of functions this driver does not have, with those of the driver it
    /// comes [`before`](Profile::before).
    pub fn absent_groups(&self) -> impl Iterator<Item = &'static [&'static str]> {
        let before = self.before.map_or(&[][..], |p| p.absent);
        self.absent.iter().chain(before).copied()
    }

    /// A GNU ld version script exporting exactly [`Profile::exports`].
    pub fn version_script(&self) -> String {
        let mut script = String::from("{\n  global:\n");
        for f in self.exports() {
            script.push_str(&format!("    {f};\n"));
        }
        script.push_str("  local: *;\n};\n");
        script
    }

    /// The library's file name.
    pub fn library_name(&self) -> String {
        format!("libfake_nvml_{}.so", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_name_only_exported_functions() {
        for p in PROFILES.iter().chain(OLDER) {
            for f in p.absent_groups().flatten() {
                assert!(EXPORTED.contains(f), "{}: {f} is not exported", p.name);
            }
            assert!(p.version_script().contains("nvmlInit_v2;"));
        }
        assert!(R450
            .exports()
            .any(|f| f == "nvmlDeviceGetComputeRunningProcesses"));
        assert!(!R450.exports().any(|f| f == V2[0]));
        assert!(!R470.exports().any(|f| f == "nvmlDeviceGetMemoryInfo_v2"));
        assert!(CURRENT.exports().any(|f| f == "nvmlDeviceGetTemperatureV"));
        assert!(!R440.exports().any(|f| f == "nvmlEventSetWait_v2"));
        assert!(R440.exports().any(|f| f == "nvmlEventSetWait"));
        assert!(R450.exports().any(|f| f == "nvmlEventSetWait_v2"));
        assert!(!R590.exports().any(|f| f == NEWER_THAN_595[0]));
        assert!(R610.exports().any(|f| f == NEWER_THAN_595[0]));
    }
}
