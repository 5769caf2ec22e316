//! `fake-nvml`: a stand-in for `libnvidia-ml.so`, built as a `cdylib`
//! (`libfake_nvml.so`) for gpupeek's tests, and as a static library from which the
//! e2e harness links one library per driver profile (see [`profiles`]); as an `rlib` it
//! gives the harness those profiles.
//!
//! It exports the subset of the NVML C API the daemon uses, with the exact C
//! signatures, so `nvml-wrapper` can load it via
//! `Nvml::builder().lib_path(..)`. What it reports comes from a JSON
//! scenario file named by `$FAKE_NVML_SCENARIO` (see [`scenario`]), re-read
//! whenever the file changes, so a test can change the "hardware" while the
//! daemon runs (one `stat()` a call; `$FAKE_NVML_SCENARIO_READ_ONCE=1` reads it once
//! instead, for benchmarks: see [`state`]). Forced errors, per-call latency, and "not supported" values
//! are all expressed in the scenario.
//!
//! If `$FAKE_NVML_CALLS_DIR` is set, every exported call rewrites
//! `$FAKE_NVML_CALLS_DIR/<pid>.calls` with per-function call counts and the
//! number of open init references, and the simulated time spent per function
//! (see [`calls`] and [`latency`]). If `$FAKE_NVML_SYSFS_ROOT` names a
//! fake sysfs tree, calls on a GPU that tree says is runtime-suspended are counted too
//! (see [`sysfs`]).
//!
//! Like real NVML, init/shutdown are reference counted and every other call
//! (except `nvmlErrorString`) returns `NVML_ERROR_UNINITIALIZED` while no
//! reference is held. Device handles are opaque: `index + 1` cast to a
//! pointer, validated on every use; MIG device handles carry their parent and instance
//! ids (see [`mig`]).

// The exported `unsafe extern "C"` functions are NVML's C API; their safety
// contract is NVML's (valid, writable output pointers of the documented
// types and sizes, or null), stated once here instead of on each function.
#![allow(clippy::missing_safety_doc)]

pub mod calls;
pub mod codes;
#[macro_use]
pub mod device;
pub mod details;
pub mod events;
mod ffi;
pub mod fields;
pub mod gpm;
pub mod latency;
pub mod mig;
mod mig_api;
pub mod newer;
pub mod procs;
pub mod profiles;
pub mod scenario;
pub mod smoothing;
pub mod state;
pub mod sysfs;
pub mod system;

/// Every exported NVML function, by C name. Scenario keys (`errors`,
/// `latency_us_by_function`) must be one of these.
pub const EXPORTED: &[&str] = &[
    "nvmlInit_v2",
    "nvmlInitWithFlags",
    "nvmlShutdown",
    "nvmlErrorString",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetNVMLVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetIndex",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetTemperatureV",
    "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetPowerManagementLimit",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetComputeMode",
    "nvmlDeviceGetDisplayActive",
    "nvmlDeviceGetDriverModel",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetFanSpeed",
    "nvmlDeviceGetFanSpeed_v2",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetPerformanceState",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetEncoderUtilization",
    "nvmlDeviceGetDecoderUtilization",
    "nvmlDeviceGetPcieThroughput",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetRunningProcessDetailList",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetProcessUtilization",
    "nvmlDeviceGetSerial",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetVbiosVersion",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetGpuMaxPcieLinkGeneration",
    "nvmlDeviceGetJpgUtilization",
    "nvmlDeviceGetOfaUtilization",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetPowerManagementDefaultLimit",
    "nvmlDeviceGetPowerManagementLimitConstraints",
    "nvmlDeviceGetSupportedClocksThrottleReasons",
    "nvmlDeviceGetDisplayMode",
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetAccountingMode",
    "nvmlDeviceGetAccountingBufferSize",
    "nvmlDeviceGetRetiredPages",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetApplicationsClock",
    "nvmlDeviceGetDefaultApplicationsClock",
    "nvmlDeviceGetEncoderStats",
    "nvmlDeviceGetMemoryErrorCounter",
    "nvmlDeviceGetInforomImageVersion",
    "nvmlDeviceGetInforomVersion",
    "nvmlDeviceGetGpuOperationMode",
    "nvmlDeviceGetGpuFabricInfo",
    "nvmlDeviceGetMarginTemperature",
    "nvmlDeviceGetPciInfoExt",
    "nvmlDeviceGetGspFirmwareMode",
    "nvmlDeviceGetAddressingMode",
    "nvmlDeviceGetC2cModeInfoV",
    "nvmlDeviceValidateInforom",
    "nvmlDeviceGetPowerManagementMode",
    "nvmlDeviceGetRowRemapperHistogram",
    "nvmlDeviceGetGpuFabricInfoV",
    "nvmlDeviceGetSramEccErrorStatus",
    "nvmlDeviceGetConfComputeProtectedMemoryUsage",
    "nvmlDeviceGetDramEncryptionMode",
    "nvmlDeviceGetPlatformInfo",
    "nvmlDeviceGetHostname_v1",
    "nvmlDeviceGetBBXTimeData_v1",
    "nvmlGetVgpuDriverCapabilities",
    "nvmlDeviceGetVgpuCapabilities",
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleFree",
    "nvmlGpmSampleGet",
    "nvmlGpmMetricsGet",
    "nvmlGpmMigSampleGet",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetAttributes_v2",
    "nvmlDeviceGetGpuInstanceProfileInfo",
    "nvmlDeviceGetGpuInstanceProfileInfoV",
    "nvmlDeviceGetGpuInstanceById",
    "nvmlGpuInstanceGetInfo",
    "nvmlEventSetCreate",
    "nvmlEventSetFree",
    "nvmlDeviceGetSupportedEventTypes",
    "nvmlDeviceRegisterEvents",
    "nvmlEventSetWait_v2",
    "nvmlEventSetWait",
];

#[cfg(test)]
mod tests {
    use super::EXPORTED;

    /// Names of the functions defined in `src`, either directly or via the
    /// `scalar_getter!` or `process_list!` macro.
    fn defined(src: &str) -> Vec<String> {
        let mut names = Vec::new();
        let mut lines = src.lines().peekable();
        while let Some(line) = lines.next() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("pub unsafe extern \"C\" fn ") {
                if let Some(name) = rest.split('(').next().filter(|n| n.starts_with("nvml")) {
                    names.push(name.to_owned());
                }
            }
            if line.starts_with("scalar_getter!(") || line.starts_with("process_list!(") {
                let args = lines.by_ref().find(|l| !l.trim().starts_with("///"));
                if let Some(name) = args.and_then(|l| l.trim().split(',').next()) {
                    names.push(name.to_owned());
                }
            }
        }
        names
    }

    #[test]
    fn exported_list_matches_the_code() {
        let mut found = defined(include_str!("system.rs"));
        found.extend(defined(include_str!("device.rs")));
        found.extend(defined(include_str!("gpm.rs")));
        found.extend(defined(include_str!("procs.rs")));
        found.extend(defined(include_str!("fields.rs")));
        found.extend(defined(include_str!("mig_api.rs")));
        found.extend(defined(include_str!("details.rs")));
        found.extend(defined(include_str!("newer.rs")));
        found.extend(defined(include_str!("events.rs")));
        for name in &found {
            assert!(
                EXPORTED.contains(&name.as_str()),
                "{name} missing from EXPORTED"
            );
        }
        for name in EXPORTED {
            assert!(found.iter().any(|f| f == name), "{name} is not defined");
        }
        assert_eq!(found.len(), EXPORTED.len());
        // Each function counts itself under its own name.
        let sources = [
            include_str!("system.rs"),
            include_str!("device.rs"),
            include_str!("gpm.rs"),
            include_str!("procs.rs"),
            include_str!("fields.rs"),
            include_str!("mig_api.rs"),
            include_str!("details.rs"),
            include_str!("newer.rs"),
            include_str!("events.rs"),
        ]
        .concat();
        for name in EXPORTED {
            let quoted = format!("\"{name}\"");
            let via_macro = sources.contains(&format!("{name}, "));
            assert!(
                sources.contains(&quoted) || via_macro,
                "{name} does not record calls under its own name"
            );
        }
    }
}
