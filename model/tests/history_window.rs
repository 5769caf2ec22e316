//! `history::window`: the raw ring read back as wall-clock points, gaps kept as gaps and
//! the window's start honoured.

use std::time::Duration;

use gpupeek_model::history::{window, Metric, Stat};
use gpupeek_shm::layout::{gpu_valid, history_valid, DaemonState};
use gpupeek_shm::testing::TempName;
use gpupeek_shm::{text, GpuRecord, HistorySample, Publisher, Segment, StatusRecord};
use zerocopy::FromZeros;

const S: u64 = 1_000_000_000;

fn publisher(name: &TempName) -> Publisher {
    Publisher::create(&name.0, &name.options(2, 4)).unwrap()
}

fn sample(at_s: u64, util: u8, valid: u16) -> HistorySample {
    HistorySample {
        sample_mono_ns: at_s * S,
        mem_used_mib: 1000 + u32::from(util),
        power_draw_mw: 250_500,
        util_gpu_pct: util,
        util_mem_pct: 0,
        temp_gpu_c: 40,
        valid,
        reserved: 0,
    }
}

#[test]
fn window_maps_the_ring_to_wall_clock_keeps_gaps_and_starts_where_asked() {
    let name = TempName::new("window");
    let publisher = publisher(&name);
    let mut gpu = GpuRecord::new_zeroed();
    gpu.index = 3;
    gpu.valid = gpu_valid::NAME | gpu_valid::UUID;
    text::encode(&mut gpu.name, "NVIDIA H100 80GB HBM3");
    text::encode(&mut gpu.uuid, "GPU-0000");
    publisher.write_gpu(0, &gpu);
    let all = history_valid::UTILIZATION
        | history_valid::MEMORY
        | history_valid::POWER_DRAW
        | history_valid::TEMPERATURE;
    for (at, util, valid) in [(100, 10, all), (101, 20, all), (102, 0, 0), (103, 40, all)] {
        publisher.append_history(0, S, &sample(at, util, valid));
    }
    let mut status = StatusRecord::new_zeroed();
    status.state = DaemonState::Live as u32;
    status.gpu_count = 1;
    status.period_ns = S;
    status.heartbeat_mono_ns = 103 * S;
    status.published_unix_ns = 1_700_000_000 * S;
    publisher.set_status(&status);
    publisher.bump_generation();

    let segment = Segment::open(&name.0).unwrap();
    let snap = segment.snapshot().unwrap();
    let series = window(&segment, &snap, Duration::from_secs(60));
    assert_eq!(series.len(), 1);
    let s = &series[0];
    assert_eq!((s.gpu_index, s.uuid.as_str()), (3, "GPU-0000"));
    assert_eq!(s.name, "NVIDIA H100 80GB HBM3");
    let starts: Vec<u64> = s.points.iter().map(|p| p.start_unix_ns).collect();
    let now = 1_700_000_000 * S;
    assert_eq!(starts, [now - 3 * S, now - 2 * S, now - S, now]);
    let utils: Vec<Option<Stat>> = s
        .points
        .iter()
        .map(|p| p.get(Metric::Utilization))
        .collect();
    assert_eq!(
        utils,
        [
            Some(Stat::one(10.0)),
            Some(Stat::one(20.0)),
            None,
            Some(Stat::one(40.0))
        ]
    );
    assert!(s.points[2].is_gap() && s.points[2].samples == 0);
    assert_eq!(s.points[1].get(Metric::PowerDraw), Some(Stat::one(250.5)));
    assert_eq!(
        s.points[1].get(Metric::SmClock),
        None,
        "not in the raw ring"
    );
    assert!(s.points.iter().all(|p| p.span_ns == S));

    let last_two = window(&segment, &snap, Duration::from_secs(1));
    assert_eq!(
        last_two[0].points.len(),
        2,
        "the window starts a second before now"
    );
}

/// A GPU whose track has wrapped its raw ring (700 samples a second into 600 slots) and
/// holds 10 s buckets under them, published at `now`.
fn wrapped_track(name: &TempName, now: u64) -> Publisher {
    use gpupeek_shm::layout::{TrackKind, DEFAULT_RAW_SLOTS};
    use gpupeek_shm::{TierBucket, TrackHead};
    let publisher = publisher(name);
    let mut gpu = GpuRecord::new_zeroed();
    gpu.valid = gpu_valid::UUID;
    text::encode(&mut gpu.uuid, "GPU-0000");
    publisher.write_gpu(0, &gpu);
    let mut head = TrackHead {
        kind: TrackKind::Gpu as u32,
        raw_step_ns: S,
        tier1_width_ns: 10 * S,
        tier2_width_ns: 60 * S,
        raw_written: 700,
        tier1_written: 70,
        ..Default::default()
    };
    text::encode(&mut head.uuid, "GPU-0000");
    let t0 = now - 700 * S;
    let bucket = |start: u64| TierBucket {
        start_unix_ns: start,
        samples: 1,
        valid: 1,
        util_pct_min: 5,
        util_centipct_mean: 500,
        util_pct_max: 5,
        ..Default::default()
    };
    let slots = DEFAULT_RAW_SLOTS as u64;
    let raw = (0..700u64).map(|i| (0, (i % slots) as usize, bucket(t0 + i * S)));
    let tier1 = (0..70u64).map(|j| (1, j as usize, bucket(t0 + j * 10 * S)));
    publisher.write_track(0, &head, raw.chain(tier1));
    let mut status = StatusRecord::new_zeroed();
    status.state = DaemonState::Live as u32;
    status.gpu_count = 1;
    status.period_ns = S;
    status.published_unix_ns = now;
    publisher.set_status(&status);
    publisher.bump_generation();
    publisher
}

#[test]
fn a_window_inside_the_raw_tier_is_raw_samples_from_its_start() {
    let name = TempName::new("window-tiers");
    let now = 1_700_000_000 * S;
    let _publisher = wrapped_track(&name, now);
    let segment = Segment::open(&name.0).unwrap();
    let snap = segment.snapshot().unwrap();
    for since in [95, 300, 600] {
        let series = window(&segment, &snap, Duration::from_secs(since));
        let points = &series[0].points;
        assert!(
            points.iter().all(|p| p.span_ns == S),
            "--since {since}s: raw only"
        );
        assert_eq!(points[0].start_unix_ns, now - since * S, "--since {since}s");
        assert_eq!(points.len() as u64, since, "--since {since}s");
    }
    // Beyond the raw ring: 10 s buckets up to where the raw samples begin.
    let series = window(&segment, &snap, Duration::from_secs(650));
    let spans: Vec<u64> = series[0].points.iter().map(|p| p.span_ns / S).collect();
    assert_eq!(spans[..5], [10; 5]);
    assert_eq!(spans[5..], [1; 600]);
}
