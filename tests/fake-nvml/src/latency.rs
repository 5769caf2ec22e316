//! How long each call takes: the scenario's `latency_us` for every call, a named
//! profile (`"latency_profile": "realistic"`) of what real drivers cost per function,
//! and per-function overrides (`latency_us_by_function`), which win over both.
//!
//! The time each call spent sleeping is kept for the calls file (see [`crate::calls`]),
//! so benchmarks can report time spent inside NVML, not only call counts.
//!
//! # The realistic profile
//!
//! Figures for a data-centre GPU on a Linux driver, in µs, from public reports:
//! - `nvmlDeviceGetPcieThroughput`: 20,000. nvml.h says it "is querying a byte counter
//!   over a 20ms interval and thus is the PCIe throughput over that interval": the call
//!   sleeps in the driver for the 20 ms it samples (quoted by go-nvml users, nvitop's
//!   `pcie_throughput` docstring and the NVML API reference).
//! - `nvmlInit_v2`/`nvmlInitWithFlags`: 300,000. Hundreds of ms on multi-GPU servers
//!   (the driver attaches every GPU): NVIDIA/mig-parted#332 measured redundant
//!   Init/Shutdown cycles as the main cost of a service run on 8 B200s;
//!   llnl/variorum#427 "these functions are costly"; gpustat#166 moved to one init for
//!   the same reason. `nvmlShutdown`: 20,000.
//! - Process lists (`nvmlDeviceGet{Compute,Graphics}RunningProcesses*`, every version, and
//!   `nvmlDeviceGetRunningProcessDetailList`): 1,500 each, and
//!   `nvmlDeviceGetProcessUtilization`: 2,000: the driver walks its client list and
//!   sample buffer ("a few ms" in DESIGN.md's survey; nvitop#65 on NVML latency setting
//!   a 1 s floor on its refresh).
//! - Power and energy (`nvmlDeviceGetPowerUsage`, `…TotalEnergyConsumption`): 300 each,
//!   the most expensive of the plain getters (gpustat#54: "querying power usage is most
//!   expensive", made optional for that reason).
//! - `nvmlDeviceGetFieldValues`: 100 per call plus 50 per field asked: one trip into the
//!   driver for the batch, each field still read by it.
//! - GPM: `nvmlGpmSampleGet` and `nvmlGpmMigSampleGet` 500 (each copies a counter block
//!   from the GPU),
//!   `nvmlGpmMetricsGet` 100 (computed on the CPU); alloc/free 10.
//! - `nvmlDeviceGetHandleByIndex_v2`: 200 (gpustat#54: fetching handles every step was
//!   "somewhat expensive"; the handle lookup checks the GPU is still attached).
//! - Every other device getter, the MIG queries included (mode, device handles, instance
//!   ids, attributes, GPU-instance profiles): 100. Public measurements go from ~25 µs each on a
//!   desktop RTX 5080 (davidboulay/OpenKraken#3: four getters in ~0.09 ms) to hundreds
//!   of µs on servers; 100 is the middle of that range. System getters: 50;
//!   `nvmlErrorString`: 0 (a static string).

use std::cell::Cell;
use std::time::Duration;

use serde::Deserialize;

use crate::scenario::Scenario;

/// A named per-function latency table a scenario can switch on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// No table: `latency_us` for every call.
    #[default]
    None,
    /// What real drivers cost (see the module doc).
    Realistic,
}

/// Per-field cost of `nvmlDeviceGetFieldValues` in the realistic profile, µs.
pub const FIELD_VALUE_US: u64 = 50;

/// The realistic profile's latency for `name`, µs.
pub fn realistic_us(name: &str) -> u64 {
    match name {
        "nvmlDeviceGetPcieThroughput" => 20_000,
        "nvmlInit_v2" | "nvmlInitWithFlags" => 300_000,
        "nvmlShutdown" => 20_000,
        // Every version of the lists, and the detail list (one call per mode).
        n if n.contains("RunningProcess") => 1_500,
        "nvmlDeviceGetProcessUtilization" => 2_000,
        "nvmlDeviceGetPowerUsage" | "nvmlDeviceGetTotalEnergyConsumption" => 300,
        "nvmlDeviceGetHandleByIndex_v2" => 200,
        "nvmlDeviceGetFieldValues" => 100,
        "nvmlGpmSampleGet" | "nvmlGpmMigSampleGet" => 500,
        "nvmlGpmSampleAlloc" | "nvmlGpmSampleFree" => 10,
        "nvmlErrorString" => 0,
        n if n.starts_with("nvmlSystem") || n == "nvmlDeviceGetCount_v2" => 50,
        _ => 100,
    }
}

/// The latency the scenario gives `name`, µs: an override, else the profile, else
/// `latency_us`.
pub fn latency_us(scenario: &Scenario, name: &str) -> u64 {
    if let Some(&us) = scenario.latency_us_by_function.get(name) {
        return us;
    }
    match scenario.latency_profile {
        Profile::Realistic => realistic_us(name),
        Profile::None => scenario.latency_us,
    }
}

thread_local! {
    /// Time slept by the call in progress on this thread, µs.
    static SPENT_US: Cell<u64> = const { Cell::new(0) };
}

/// Sleeps `us` as part of the call in progress, and counts it.
pub fn sleep_us(us: u64) {
    if us > 0 {
        std::thread::sleep(Duration::from_micros(us));
        SPENT_US.with(|s| s.set(s.get().saturating_add(us)));
    }
}

/// The simulated time of the call that just ended on this thread, µs; resets it.
pub fn take_spent_us() -> u64 {
    SPENT_US.with(|s| s.replace(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_win_over_the_profile_which_wins_over_the_flat_latency() {
        let s = Scenario::parse(
            r#"{"latency_profile": "realistic", "latency_us": 7,
                "latency_us_by_function": {"nvmlDeviceGetName": 3}}"#,
        )
        .unwrap();
        assert_eq!(latency_us(&s, "nvmlDeviceGetName"), 3);
        assert_eq!(latency_us(&s, "nvmlDeviceGetPcieThroughput"), 20_000);
        assert_eq!(latency_us(&s, "nvmlDeviceGetUUID"), 100);
        let flat = Scenario::parse(r#"{"latency_us": 7}"#).unwrap();
        assert_eq!(latency_us(&flat, "nvmlDeviceGetPcieThroughput"), 7);
    }

    #[test]
    fn every_exported_function_has_a_realistic_cost_below_a_second() {
        for name in crate::EXPORTED {
            assert!(realistic_us(name) < 1_000_000, "{name}");
        }
        assert!(Scenario::parse(r#"{"latency_profile": "fast"}"#).is_err());
    }

    #[test]
    fn sleeping_is_counted_until_taken() {
        take_spent_us();
        sleep_us(1);
        sleep_us(2);
        assert_eq!(take_spent_us(), 3);
        assert_eq!(take_spent_us(), 0);
    }
}
