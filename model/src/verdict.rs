//! The verdict: whether a GPU that NVML calls "utilised" is really working.
//!
//! NVML's utilisation only says that some kernel ran during its sample window. The verdict
//! combines it with the clock event (throttle) reasons, GPM's SM activity (Hopper and
//! newer) and how long the GPU has been idle, in this order; the first that applies wins:
//!
//! | verdict        | when                                                              |
//! |----------------|-------------------------------------------------------------------|
//! | `thermal`      | clock event reasons include SW or HW thermal slowdown             |
//! | `power-capped` | clock event reasons include SW power cap or HW power brake        |
//! | `hw-slowdown`  | clock event reasons include HW slowdown (no thermal/power bit)    |
//! | `starved`      | utilisation ≥ `busy` % but GPM SM activity < `starved` %          |
//! | `idle-holding` | utilisation 0 % for ≥ `idle` s with ≥ `idle_mem` MiB of memory used |
//! | `healthy`      | none of the above, and every input needed to rule them out is known |
//!
//! There is no verdict (`None`) for a GPU that was not sampled normally, or when an input
//! needed to decide is missing: no utilisation, no clock event reasons, a busy GPU
//! without GPM (starved or not cannot be told), or an idle GPU holding memory whose idle
//! time the daemon did not publish.
//!
//! A MIG instance has no NVML utilisation (see [`judge_mig`]): its verdict comes from
//! its parent's clock event reasons and its own memory and GPM SM activity.
//!
//! Thresholds default to `busy=80,starved=30,idle=300,idle_mem=1024` and are set with
//! `GPUPEEK_VERDICT_THRESHOLDS` (any subset of those keys, comma-separated).

use std::sync::OnceLock;

use crate::{ClockEventReasons as Reasons, Gpu};

/// Environment variable holding the thresholds.
pub const ENV: &str = "GPUPEEK_VERDICT_THRESHOLDS";

/// What a GPU is doing, beyond "utilised".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Clocks held down by temperature.
    Thermal,
    /// Clocks held down by the power limit or the power brake.
    PowerCapped,
    /// Clocks held down by HW slowdown for another reason.
    HwSlowdown,
    /// Kernels run, but the SMs are mostly empty: waiting on data or tiny launches.
    Starved,
    /// Nothing has run for a while, yet memory stays allocated.
    IdleHolding,
    /// None of the above.
    Healthy,
}

impl Verdict {
    /// The word shown in the table, JSON, metrics and queries.
    pub fn name(self) -> &'static str {
        match self {
            Self::Thermal => "thermal",
            Self::PowerCapped => "power-capped",
            Self::HwSlowdown => "hw-slowdown",
            Self::Starved => "starved",
            Self::IdleHolding => "idle-holding",
            Self::Healthy => "healthy",
        }
    }

    /// Every verdict, in precedence order.
    pub const ALL: [Verdict; 6] = [
        Self::Thermal,
        Self::PowerCapped,
        Self::HwSlowdown,
        Self::Starved,
        Self::IdleHolding,
        Self::Healthy,
    ];
}

/// The thresholds of the verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Utilisation from which a GPU counts as busy, percent.
    pub busy_pct: u32,
    /// GPM SM activity under which a busy GPU is starved, percent.
    pub starved_pct: u32,
    /// Idle time after which held memory is reported, seconds.
    pub idle_secs: u64,
    /// Memory used from which an idle GPU is "holding" it, MiB.
    pub idle_mem_mib: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            busy_pct: 80,
            starved_pct: 30,
            idle_secs: 300,
            idle_mem_mib: 1024,
        }
    }
}

impl Thresholds {
    /// Parses `key=value,...` over the defaults; the error names the bad part.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut t = Thresholds::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("{ENV}: {part:?} is not key=value"))?;
            let bad = || format!("{ENV}: bad value {value:?} for {key}");
            let pct = |v: &str| v.parse().ok().filter(|p| *p <= 100).ok_or_else(bad);
            match key.trim() {
                "busy" => t.busy_pct = pct(value)?,
                "starved" => t.starved_pct = pct(value)?,
                "idle" => t.idle_secs = value.parse().map_err(|_| bad())?,
                "idle_mem" => t.idle_mem_mib = value.parse().map_err(|_| bad())?,
                other => {
                    return Err(format!(
                        "{ENV}: unknown key {other:?} (use busy, starved, idle, idle_mem)"
                    ))
                }
            }
        }
        Ok(t)
    }

    /// The thresholds from the environment, parsed once (see [`check_env`]).
    pub fn current() -> Thresholds {
        *CURRENT.get_or_init(|| from_env().unwrap_or_default())
    }
}

static CURRENT: OnceLock<Thresholds> = OnceLock::new();

fn from_env() -> Result<Thresholds, String> {
    match std::env::var(ENV) {
        Ok(text) => Thresholds::parse(&text),
        Err(std::env::VarError::NotPresent) => Ok(Thresholds::default()),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{ENV} is not UTF-8")),
    }
}

/// Checks `GPUPEEK_VERDICT_THRESHOLDS` at start-up, so a bad value is a usage error.
pub fn check_env() -> Result<(), String> {
    let t = from_env()?;
    let _ = CURRENT.set(t);
    Ok(())
}

/// The verdict for one GPU; `None` when it cannot be told (the GPU is not sampled
/// now, or an input is unknown).
pub fn judge(g: &Gpu, t: &Thresholds) -> Option<Verdict> {
    let util = g.util_pct?;
    let reasons = g.clock_event_reasons?;
    if reasons.any(Reasons::THERMAL) {
        return Some(Verdict::Thermal);
    }
    if reasons.any(Reasons::POWER) {
        return Some(Verdict::PowerCapped);
    }
    if reasons.any(Reasons::HW_SLOWDOWN) {
        return Some(Verdict::HwSlowdown);
    }
    if util >= t.busy_pct {
        let sm = g.gpm.and_then(|m| m.sm_activity)?;
        return Some(if sm.0 < t.starved_pct * 100 {
            Verdict::Starved
        } else {
            Verdict::Healthy
        });
    }
    let holding = g
        .memory
        .is_some_and(|m| m.used.0 >= t.idle_mem_mib * 1024 * 1024);
    if util == 0 && holding {
        let idle_ns = g.idle_ns?;
        if idle_ns >= t.idle_secs.saturating_mul(1_000_000_000) {
            return Some(Verdict::IdleHolding);
        }
    }
    Some(Verdict::Healthy)
}

/// The verdict for one MIG instance (`mig`, seen as a GPU by
/// [`gpupeek_model::Mig::as_gpu`], whose clock event reasons are its parent's). NVML
/// gives no utilisation per instance, so activity is GPM's SM activity over the daemon's
/// last GPM window, and no idle time is published per instance:
///
/// - `thermal`, `power-capped`, `hw-slowdown`: as for the GPU (the clocks of every
///   instance are the GPU's);
/// - `idle-holding`: SM activity under 1 % with at least `idle_mem` MiB of the
///   instance's memory used (over that window, not `idle` seconds);
/// - `healthy`: otherwise; `starved` is never told (it needs utilisation).
///
/// `None` when the parent is not sampled now, or its reasons or the instance's SM
/// activity or memory are unknown.
pub fn judge_mig(mig: &Gpu, t: &Thresholds) -> Option<Verdict> {
    let reasons = mig.clock_event_reasons?;
    if reasons.any(Reasons::THERMAL) {
        return Some(Verdict::Thermal);
    }
    if reasons.any(Reasons::POWER) {
        return Some(Verdict::PowerCapped);
    }
    if reasons.any(Reasons::HW_SLOWDOWN) {
        return Some(Verdict::HwSlowdown);
    }
    let sm = mig.gpm.and_then(|m| m.sm_activity)?;
    let used = mig.memory?.used;
    if sm.0 < 100 && used.0 >= t.idle_mem_mib * 1024 * 1024 {
        return Some(Verdict::IdleHolding);
    }
    Some(Verdict::Healthy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpupeek_shm::layout::{gpu_valid as v, GpuState};
    use gpupeek_shm::GpuRecord;

    fn judge(g: &GpuRecord, t: &Thresholds) -> Option<Verdict> {
        super::judge(&Gpu::new(g), t)
    }

    const GIB: u64 = 1 << 30;

    fn gpu(util: u32, reasons: u64) -> GpuRecord {
        GpuRecord {
            state: GpuState::Ok as u32,
            valid: v::UTILIZATION | v::CLOCK_EVENT_REASONS | v::MEMORY,
            util_gpu_pct: util,
            clock_event_reasons: reasons,
            mem_used_bytes: 0,
            sample_mono_ns: 1_000 * 1_000_000_000,
            ..GpuRecord::default()
        }
    }

    fn with_gpm(mut g: GpuRecord, sm_pct: u32) -> GpuRecord {
        g.valid |= v::GPM | v::GPM_SM_ACTIVITY;
        g.gpm_sm_activity_centipct = sm_pct * 100;
        g
    }

    fn idle_for(mut g: GpuRecord, secs: u64, mem: u64) -> GpuRecord {
        g.valid |= v::IDLE_SINCE;
        g.idle_since_mono_ns = g.sample_mono_ns - secs * 1_000_000_000;
        g.mem_used_bytes = mem;
        g
    }

    #[test]
    fn each_case_gets_its_verdict() {
        let t = Thresholds::default();
        let cases = [
            (with_gpm(gpu(98, 0), 10), Verdict::Starved),
            (with_gpm(gpu(98, 0), 85), Verdict::Healthy),
            (with_gpm(gpu(98, 0x4), 90), Verdict::PowerCapped),
            (with_gpm(gpu(98, 0x80), 90), Verdict::PowerCapped),
            (with_gpm(gpu(98, 0x4 | 0x20), 90), Verdict::Thermal),
            (gpu(50, 0x40), Verdict::Thermal),
            (gpu(50, 0x8), Verdict::HwSlowdown),
            (idle_for(gpu(0, 0x1), 600, 4 * GIB), Verdict::IdleHolding),
            (idle_for(gpu(0, 0x1), 60, 4 * GIB), Verdict::Healthy),
            (idle_for(gpu(0, 0x1), 600, GIB / 2), Verdict::Healthy),
            (gpu(40, 0), Verdict::Healthy),
        ];
        for (i, (g, want)) in cases.iter().enumerate() {
            assert_eq!(judge(g, &t), Some(*want), "case {i}");
        }
    }

    #[test]
    fn missing_inputs_give_no_verdict() {
        let t = Thresholds::default();
        let busy_without_gpm = gpu(98, 0);
        let mut no_reasons = with_gpm(gpu(98, 0), 10);
        no_reasons.valid &= !v::CLOCK_EVENT_REASONS;
        let mut no_util = gpu(0, 0);
        no_util.valid &= !v::UTILIZATION;
        let mut holding_no_history = gpu(0, 0);
        holding_no_history.mem_used_bytes = 4 * GIB;
        let mut lost = with_gpm(gpu(98, 0), 10);
        lost.state = GpuState::Lost as u32;
        for g in [
            busy_without_gpm,
            no_reasons,
            no_util,
            holding_no_history,
            lost,
        ] {
            assert_eq!(judge(&g, &t), None, "{g:?}");
        }
    }

    #[test]
    fn thresholds_parse_over_defaults_and_reject_garbage() {
        let t = Thresholds::parse("busy=90, idle=60").unwrap();
        assert_eq!((t.busy_pct, t.idle_secs, t.starved_pct), (90, 60, 30));
        assert_eq!(Thresholds::parse("").unwrap(), Thresholds::default());
        for bad in ["busy", "busy=101", "idle=-1", "nope=3", "starved=x"] {
            assert!(Thresholds::parse(bad).is_err(), "accepted {bad}");
        }
        let t = Thresholds::parse("starved=50").unwrap();
        assert_eq!(judge(&with_gpm(gpu(98, 0), 40), &t), Some(Verdict::Starved));
    }

    #[test]
    fn an_instance_is_judged_by_its_own_memory_and_sm_activity() {
        use crate::{Bytes, CentiPercent, Gpm, Memory};
        let t = Thresholds::default();
        let parent = gpu(0, 0x1);
        let base = Gpu::new(&parent);
        let with = |reasons: u64, sm: Option<u32>, used_gib: u64| {
            let mut g = base;
            g.util_pct = None;
            g.clock_event_reasons = Some(Reasons(reasons));
            g.gpm = sm.map(|pct| Gpm {
                sm_activity: Some(CentiPercent(pct * 100)),
                ..Gpm::default()
            });
            g.memory = Some(Memory {
                total: Bytes(10 * GIB),
                used: Bytes(used_gib * GIB),
                free: Bytes((10 - used_gib) * GIB),
            });
            g
        };
        assert_eq!(
            judge_mig(&with(0, Some(0), 4), &t),
            Some(Verdict::IdleHolding)
        );
        assert_eq!(judge_mig(&with(0, Some(0), 0), &t), Some(Verdict::Healthy));
        assert_eq!(judge_mig(&with(0, Some(60), 4), &t), Some(Verdict::Healthy));
        assert_eq!(
            judge_mig(&with(0x40, Some(60), 4), &t),
            Some(Verdict::Thermal)
        );
        assert_eq!(
            judge_mig(&with(0, None, 4), &t),
            None,
            "no GPM: cannot tell"
        );
        assert_eq!(
            super::judge(&with(0, Some(0), 4), &t),
            None,
            "no utilisation"
        );
    }
}
