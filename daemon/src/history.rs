//! When to append to the segment's per-GPU history rings, and what a sample holds.
//!
//! One sample per GPU every `max(period, 1 s)` (the *step*), so the default 300-slot ring
//! covers five minutes at 1 s and proportionally more at slower periods. A GPU that was
//! not sampled this tick (asleep, idle with NVML released, lost or failing) still gets a
//! sample, with every validity bit clear: readers draw a gap, and the ring's time axis
//! stays regular. While NVML is down nothing is appended at all (no GPU is published);
//! the timestamps show the hole. Nor while an NVML session starts: the first sample waits
//! for the first tick on which every GPU has answered, so a ring does not begin with a
//! gap that only says the daemon had just started.

use std::time::{Duration, Instant};

use gpupeek_shm::layout::{gpu_valid, history_valid, GpuState};
use gpupeek_shm::{GpuRecord, HistorySample};

/// The shortest time between two history samples.
pub const MIN_STEP: Duration = Duration::from_secs(1);

/// Decides on which ticks a sample is appended.
#[derive(Debug)]
pub struct Clock {
    step: Duration,
    slack: Duration,
    next: Option<Instant>,
}

impl Clock {
    /// A clock for a daemon sampling every `period`.
    pub fn new(period: Duration) -> Self {
        Clock {
            step: period.max(MIN_STEP),
            // Ticks jitter around their deadlines: half a period early still counts.
            slack: period / 2,
            next: None,
        }
    }

    /// A clock that is due every `step` (at least every tick) for a daemon sampling
    /// every `period`; the process tier's (see [`crate::proctier`]).
    pub fn every(step: Duration, period: Duration) -> Self {
        Clock {
            step: step.max(period),
            slack: period / 2,
            next: None,
        }
    }

    /// Like [`Self::every`], first due at `first`.
    pub fn every_from(step: Duration, period: Duration, first: Instant) -> Self {
        Clock {
            next: Some(first),
            ..Clock::every(step, period)
        }
    }

    /// The sample this tick was due to take was not taken: the next tick takes it.
    pub fn again(&mut self) {
        self.next = None;
    }

    /// Time between two samples, ns.
    pub fn step_ns(&self) -> u64 {
        self.step.as_nanos() as u64
    }

    /// True (and the next sample is scheduled) when the tick at `now` should append.
    pub fn due(&mut self, now: Instant) -> bool {
        if self.next.is_some_and(|next| now + self.slack < next) {
            return false;
        }
        let next = self.next.map_or(now, |n| n) + self.step;
        self.next = Some(if next <= now { now + self.step } else { next });
        true
    }
}

/// The history sample of a just-published GPU record.
pub fn sample_of(gpu: &GpuRecord) -> HistorySample {
    let mut s = HistorySample {
        sample_mono_ns: gpupeek_shm::mono_now_ns(),
        ..Default::default()
    };
    // Values of a GPU in any other state are not current: the sample is a gap.
    if GpuState::from_raw(gpu.state) != Some(GpuState::Ok) {
        return s;
    }
    if gpu.sample_mono_ns != 0 {
        s.sample_mono_ns = gpu.sample_mono_ns;
    }
    let has = |bit| gpu.valid & bit != 0;
    if has(gpu_valid::UTILIZATION) {
        s.util_gpu_pct = gpu.util_gpu_pct.min(100) as u8;
        s.util_mem_pct = gpu.util_mem_pct.min(100) as u8;
        s.valid |= history_valid::UTILIZATION | history_valid::UTIL_MEM;
    }
    if has(gpu_valid::MEMORY) {
        s.mem_used_mib = u32::try_from(gpu.mem_used_bytes >> 20).unwrap_or(u32::MAX);
        s.valid |= history_valid::MEMORY;
    }
    if has(gpu_valid::POWER_DRAW) {
        s.power_draw_mw = gpu.power_draw_mw;
        s.valid |= history_valid::POWER_DRAW;
    }
    if has(gpu_valid::TEMPERATURE) {
        s.temp_gpu_c = gpu.temp_gpu_c.clamp(i16::MIN.into(), i16::MAX.into()) as i16;
        s.valid |= history_valid::TEMPERATURE;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fast_daemon_appends_once_a_second() {
        let period = Duration::from_millis(100);
        let mut clock = Clock::new(period);
        let start = Instant::now();
        let appended = (0..50).filter(|&i| clock.due(start + period * i)).count();
        assert_eq!(appended, 5);
        assert_eq!(clock.step_ns(), 1_000_000_000);
    }

    #[test]
    fn a_sample_not_taken_is_taken_on_the_next_tick() {
        let mut clock = Clock::new(Duration::from_secs(1));
        let start = Instant::now();
        assert!(clock.due(start));
        clock.again();
        assert!(clock.due(start + Duration::from_millis(50)));
        assert!(!clock.due(start + Duration::from_millis(100)));
    }

    #[test]
    fn a_slow_daemon_appends_every_tick_even_when_ticks_come_a_little_early() {
        let period = Duration::from_secs(2);
        let mut clock = Clock::new(period);
        let start = Instant::now();
        let early = Duration::from_millis(30);
        assert!(clock.due(start));
        for i in 1..10 {
            assert!(clock.due(start + period * i - early), "tick {i}");
        }
    }

    #[test]
    fn a_clock_every_second_at_10ms_ticks_is_due_once_a_second_and_every_tick_at_1s() {
        let period = Duration::from_millis(10);
        let mut clock = Clock::every(Duration::from_secs(1), period);
        let start = Instant::now();
        let jitter = Duration::from_micros(300);
        let due: Vec<u32> = (0..350)
            .filter(|&i| clock.due(start + period * i + jitter * (i % 3)))
            .collect();
        assert_eq!(due, [0, 100, 200, 300]);
        let period = Duration::from_secs(1);
        let mut clock = Clock::every(period, period);
        assert!((0..20).all(|i| clock.due(start + period * i + jitter * (i % 3))));
    }

    #[test]
    fn a_gpu_that_was_not_sampled_gives_a_gap() {
        let mut gpu = GpuRecord {
            state: GpuState::Suspended as u32,
            valid: gpu_valid::UTILIZATION | gpu_valid::MEMORY,
            util_gpu_pct: 50,
            sample_mono_ns: 7,
            ..Default::default()
        };
        assert_eq!(sample_of(&gpu).valid, 0);
        assert_ne!(
            sample_of(&gpu).sample_mono_ns,
            7,
            "stale time of a sleeping GPU"
        );
        gpu.state = GpuState::Ok as u32;
        gpu.mem_used_bytes = 3 << 20;
        let s = sample_of(&gpu);
        assert_eq!(s.sample_mono_ns, 7);
        assert_eq!(
            s.valid,
            history_valid::UTILIZATION | history_valid::UTIL_MEM | history_valid::MEMORY
        );
        assert_eq!((s.util_gpu_pct, s.mem_used_mib), (50, 3));
    }
}
