//! Counters that restart when the driver reloads (energy, volatile ECC counts) are
//! published monotonic: a reader's delta over any window is never negative.

use gpupeek_e2e::{wait_for, Sandbox};
use gpupeek_shm::layout::gpu_valid as v;
use serde_json::json;

#[test]
fn energy_and_ecc_that_restart_from_zero_keep_counting_up_from_where_they_were() {
    let sb = Sandbox::new("counters");
    let gpu = |energy: u64, ecc: u64| {
        json!({"gpus": [{
            "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-00000001",
            "memory_total_bytes": 80u64 << 30, "energy_mj": energy,
            "ecc_corrected_volatile": ecc, "ecc_uncorrected_volatile": 0
        }]})
    };
    sb.write_scenario(&gpu(5_000_000, 7));
    let daemon = sb.start_daemon("20ms");
    sb.wait_live(&daemon);
    let segment = sb.segment();
    let read = || {
        let g = segment.snapshot().unwrap().gpus[0];
        assert_ne!(g.valid & v::ENERGY, 0);
        (g.energy_mj, g.ecc_corrected_volatile_count)
    };
    assert_eq!(read(), (5_000_000, 7));

    // The driver reloads: its counters start again from (nearly) zero.
    sb.write_scenario(&gpu(1_000, 0));
    let mut last = read();
    wait_for("the counters to move on", &daemon, || {
        let now = read();
        assert!(now.0 >= last.0 && now.1 >= last.1, "{now:?} after {last:?}");
        last = now;
        now == (5_001_000, 7)
    });
    sb.write_scenario(&gpu(3_000, 2));
    wait_for("the counters to grow", &daemon, || read() == (5_003_000, 9));
}
