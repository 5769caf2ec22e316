//! Tests of the runtime-PM policy on a fake sysfs tree.

use super::*;
use crate::sysfs::tests::FakeSys;

const GPU: &str = "0000:01:00.0";
const SECOND: Duration = Duration::from_secs(1);

fn laptop(tag: &str, status: &str, control: &str) -> (FakeSys, RuntimePm) {
    let sys = FakeSys::new(tag);
    sys.device(GPU, "0x10de", "0x030200", Some("nvidia"));
    sys.power(GPU, status, control);
    let mut pm = RuntimePm::new(sys.0.clone(), true, 10 * SECOND);
    pm.refresh();
    (sys, pm)
}

fn sampled(name: &str, bus_id: &str) -> GpuRecord {
    let mut rec = GpuRecord {
        state: GpuState::Ok as u32,
        valid: v::NAME | v::PCI_BUS_ID | v::UTILIZATION | v::PROCESSES | v::TEMPERATURE,
        util_gpu_pct: 0,
        temp_gpu_c: 45,
        ..Default::default()
    };
    text::encode(&mut rec.name, name);
    text::encode(&mut rec.pci_bus_id, bus_id);
    rec
}

#[test]
fn all_asleep_at_start_parks_with_the_pci_bus_id_from_sysfs() {
    let (_sys, mut pm) = laptop("start", "suspended", "auto");
    let now = Instant::now();
    assert!(pm.park_if_all_asleep(now));
    assert_eq!(pm.gpu_count(), 1);
    let mut rec = GpuRecord::default();
    pm.sleeping_record(0, &mut rec);
    assert_eq!(rec.state, GpuState::Suspended as u32);
    assert_eq!(rec.valid, v::PCI_BUS_ID);
    assert_eq!(text::decode(&rec.pci_bus_id), "00000000:01:00.0");
    assert_eq!(pm.wake(now + 1000 * SECOND), None, "still asleep");
}

#[test]
fn an_awake_gpu_or_runtime_pm_off_does_not_park_at_start() {
    let (_sys, mut pm) = laptop("awake", "active", "auto");
    assert!(!pm.park_if_all_asleep(Instant::now()));
    let (_sys, mut pm) = laptop("on", "suspended", "on");
    assert!(!pm.park_if_all_asleep(Instant::now()));
}

#[test]
fn idle_for_release_after_releases_and_busy_resets_the_clock() {
    let (_sys, mut pm) = laptop("idle", "active", "auto");
    pm.set_gpu_count(1);
    let t0 = Instant::now();
    pm.observe(t0, true);
    assert!(!pm.release_due(t0 + 9 * SECOND));
    pm.observe(t0 + 5 * SECOND, false);
    pm.observe(t0 + 6 * SECOND, true);
    assert!(!pm.release_due(t0 + 15 * SECOND));
    assert!(pm.release_due(t0 + 16 * SECOND));
}

#[test]
fn runtime_pm_off_or_an_unmapped_gpu_never_releases() {
    let (sys, mut pm) = laptop("never", "active", "on");
    pm.set_gpu_count(1);
    let t0 = Instant::now();
    pm.observe(t0, true);
    assert!(!pm.release_due(t0 + 1000 * SECOND));
    sys.power(GPU, "active", "auto");
    pm.refresh();
    assert!(pm.release_due(t0 + 1000 * SECOND));
    // NVML sees two GPUs but sysfs one: the second cannot be watched.
    pm.set_gpu_count(2);
    assert!(!pm.release_due(t0 + 1000 * SECOND));
}

#[test]
fn a_suspended_gpu_releases_at_once_and_keeps_its_identity() {
    let (sys, mut pm) = laptop("suspended", "active", "auto");
    pm.set_gpu_count(1);
    let mut awake = sampled("RTX 4060 Laptop", "00000000:01:00.0");
    awake.valid4 = crate::details4::IDENTITY4 | gpupeek_shm::layout::gpu_valid4::BBX_TIME_RUN;
    (awake.minor_number, awake.bbx_time_run_s) = (1, 99);
    pm.remember(0, &awake);
    sys.power(GPU, "suspended", "auto");
    pm.refresh();
    assert!(pm.asleep(0));
    assert!(pm.release_due(Instant::now()));
    let mut rec = GpuRecord::default();
    pm.sleeping_record(0, &mut rec);
    assert_eq!(rec.state, GpuState::Suspended as u32);
    assert_eq!(text::decode(&rec.name), "RTX 4060 Laptop");
    assert_eq!(rec.valid, v::NAME | v::PCI_BUS_ID, "no dynamic value");
    assert_eq!(rec.temp_gpu_c, 0);
    // Its minor number is identity (DRA and GKE name the GPU by it); the rest of
    // valid4 is not.
    assert_eq!(
        (rec.valid4, rec.minor_number, rec.bbx_time_run_s),
        (crate::details4::IDENTITY4, 1, 0)
    );
}

#[test]
fn after_a_release_the_gpu_is_idle_then_suspended_then_woken() {
    let (sys, mut pm) = laptop("cycle", "active", "auto");
    pm.set_gpu_count(1);
    pm.remember(0, &sampled("GPU", "00000000:01:00.0"));
    let t0 = Instant::now();
    pm.park(t0);
    let mut rec = GpuRecord::default();
    pm.sleeping_record(0, &mut rec);
    assert_eq!(rec.state, GpuState::Idle as u32);
    assert_eq!(pm.wake(t0 + SECOND), None, "still settling");
    sys.power(GPU, "suspended", "auto");
    pm.refresh();
    assert_eq!(pm.wake(t0 + 2 * SECOND), None);
    sys.power(GPU, "active", "auto");
    pm.refresh();
    let addr = PciAddr::parse(GPU).unwrap();
    assert_eq!(pm.wake(t0 + 3 * SECOND), Some(Wake::Woken(addr)));
    assert!(!pm.parked());
    assert_eq!(pm.release_after(), 10 * SECOND);
}

#[test]
fn a_suspend_between_two_reads_still_counts_as_sleeping_then_waking() {
    let (sys, mut pm) = laptop("blink", "active", "auto");
    let time = sys
        .0
        .join("bus/pci/devices")
        .join(GPU)
        .join("power/runtime_suspended_time");
    std::fs::write(&time, "1200\n").unwrap();
    pm.set_gpu_count(1);
    let t0 = Instant::now();
    pm.park(t0);
    assert_eq!(pm.wake(t0 + SECOND), None, "has not suspended yet");
    // Suspended for 300 ms and woken again between two ticks: only the counter shows it.
    std::fs::write(&time, "1500\n").unwrap();
    let addr = PciAddr::parse(GPU).unwrap();
    assert_eq!(pm.wake(t0 + 2 * SECOND), Some(Wake::Woken(addr)));
}

#[test]
fn a_gpu_that_stays_awake_after_a_release_doubles_the_next_wait() {
    let (sys, mut pm) = laptop("stayed", "active", "auto");
    std::fs::write(
        sys.0
            .join("bus/pci/devices")
            .join(GPU)
            .join("power/autosuspend_delay_ms"),
        "5000\n",
    )
    .unwrap();
    pm.set_gpu_count(1);
    let t0 = Instant::now();
    pm.park(t0);
    assert_eq!(
        pm.wake(t0 + 14 * SECOND),
        None,
        "10 s + 5 s autosuspend delay"
    );
    let addr = PciAddr::parse(GPU).unwrap();
    assert_eq!(pm.wake(t0 + 15 * SECOND), Some(Wake::StayedAwake(addr)));
    assert_eq!(pm.release_after(), 20 * SECOND);
    pm.park(t0 + 100 * SECOND);
    assert_eq!(pm.wake(t0 + 124 * SECOND), None, "20 s + 5 s");
    assert_eq!(pm.wake(t0 + 125 * SECOND), Some(Wake::StayedAwake(addr)));
    assert_eq!(pm.release_after(), 40 * SECOND);
    // A later release that lets it sleep brings the wait back.
    pm.park(t0 + 200 * SECOND);
    sys.power(GPU, "suspended", "auto");
    pm.refresh();
    assert_eq!(pm.wake(t0 + 300 * SECOND), None);
    sys.power(GPU, "active", "auto");
    pm.refresh();
    assert_eq!(pm.wake(t0 + 301 * SECOND), Some(Wake::Woken(addr)));
    assert_eq!(pm.release_after(), 10 * SECOND);
}

#[test]
fn the_wait_before_a_release_doubles_up_to_ten_minutes() {
    let (_sys, mut pm) = laptop("cap", "active", "auto");
    pm.set_gpu_count(1);
    let mut t = Instant::now();
    for _ in 0..12 {
        pm.park(t);
        t += 2 * MAX_RELEASE_AFTER;
        assert!(matches!(pm.wake(t), Some(Wake::StayedAwake(_))));
    }
    assert_eq!(pm.release_after(), MAX_RELEASE_AFTER);
}

#[test]
fn unreadable_sysfs_or_runtime_pm_switched_off_wakes_the_daemon() {
    let (sys, mut pm) = laptop("unreadable", "suspended", "auto");
    let t0 = Instant::now();
    assert!(pm.park_if_all_asleep(t0));
    sys.power(GPU, "active", "on");
    pm.refresh();
    let addr = PciAddr::parse(GPU).unwrap();
    assert_eq!(pm.wake(t0), Some(Wake::PmOff(addr)));
    pm.park(t0);
    std::fs::remove_dir_all(sys.0.join("bus/pci/devices").join(GPU)).unwrap();
    pm.refresh();
    assert_eq!(pm.wake(t0), Some(Wake::Unreadable(addr)));
}

#[test]
fn no_gpu_in_sysfs_unreadable_sysfs_or_the_policy_off_changes_nothing() {
    let sys = FakeSys::new("empty");
    let t0 = Instant::now();
    for mut pm in [
        RuntimePm::new(sys.0.clone(), true, SECOND),
        RuntimePm::new(sys.0.join("missing"), true, SECOND),
        RuntimePm::new(sys.0.clone(), false, SECOND),
    ] {
        pm.refresh();
        assert!(!pm.park_if_all_asleep(t0));
        pm.set_gpu_count(1);
        pm.observe(t0, true);
        assert!(!pm.asleep(0));
        assert!(!pm.release_due(t0 + 1000 * SECOND));
    }
    sys.device(GPU, "0x10de", "0x030200", Some("nvidia"));
    sys.power(GPU, "suspended", "auto");
    let mut off = RuntimePm::new(sys.0.clone(), false, SECOND);
    off.refresh();
    assert!(!off.park_if_all_asleep(t0), "the policy is off");
}

#[test]
fn idleness_needs_a_readable_process_list_and_zero_utilisation() {
    let rec = sampled("GPU", "00000000:01:00.0");
    assert!(idle(&rec, 0));
    assert!(!idle(&rec, 1), "a compute process");
    let busy = GpuRecord {
        util_gpu_pct: 3,
        ..rec
    };
    assert!(!idle(&busy, 0));
    let no_list = GpuRecord {
        valid: rec.valid & !v::PROCESSES,
        ..rec
    };
    assert!(!idle(&no_list, 0));
    let lost = GpuRecord {
        state: GpuState::Lost as u32,
        ..rec
    };
    assert!(!idle(&lost, 0));
}
