//! Ties the fake GPUs to a fake sysfs tree, to catch a caller that queries a GPU the
//! kernel has runtime-suspended (on real hardware that call would wake it up).
//!
//! When `$FAKE_NVML_SYSFS_ROOT` is set, every call that names one GPU (by handle or by
//! index) reads `<root>/bus/pci/devices/<dddd:bb:dd.f>/power/runtime_status` for that
//! GPU's `pci_bus_id`; if it says `suspended`, the call is counted in the calls file as
//! `suspended_gpu_calls`. A GPU without a `pci_bus_id`, or without the file, is awake.

use crate::scenario::Gpu;

/// Environment variable naming the fake sysfs root (the daemon's `--sysfs-root`).
pub const SYSFS_ROOT_ENV: &str = "FAKE_NVML_SYSFS_ROOT";

/// True when sysfs says `gpu` is runtime-suspended.
pub fn suspended(gpu: &Gpu) -> bool {
    let Some(root) = std::env::var_os(SYSFS_ROOT_ENV) else {
        return false;
    };
    let Some(a) = gpu.pci_address() else {
        return false;
    };
    let device = format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        a.domain, a.bus, a.device, a.function
    );
    let path = std::path::Path::new(&root)
        .join("bus/pci/devices")
        .join(device)
        .join("power/runtime_status");
    std::fs::read_to_string(path).is_ok_and(|s| s.trim() == "suspended")
}
