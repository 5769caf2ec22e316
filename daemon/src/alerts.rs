//! Alerts: one log line when a GPU starts to be in trouble, one when it is over.
//!
//! Each condition is an episode with hysteresis, so a value hovering at a threshold does
//! not log every tick: temperature, memory use and power draw start an episode when they
//! reach their threshold and end it only once they are [`MARGIN`] units (°C or percentage
//! points) below it; a clock event (throttle) reason starts an episode when NVML reports
//! it and ends it after it has been absent for [`CLEAR_TICKS`] ticks in a row; a GPU is
//! lost from the tick NVML reports it lost (or stops listing it) until it is sampled
//! normally again; and a GPU's queries fail from the first tick one of them fails with
//! an error other than "not supported" until a tick where none does. Episodes start as warnings and end as info messages, through the
//! daemon's logger (stderr in the foreground, syslog when detached).
//!
//! Only published values are judged: a field the GPU does not support never alerts, and
//! a lost or suspended GPU's stale values are ignored.

use gpupeek_shm::layout::{clock_event_reason as r, gpu_valid as v, GpuState};
use gpupeek_shm::{text, GpuRecord};

/// How far below a value threshold a value must fall to end its episode (°C or points).
pub const MARGIN: u32 = 5;
/// Consecutive ticks without a throttle reason that end its episode.
pub const CLEAR_TICKS: u8 = 3;

/// Clock event reasons that can alert: (NVML bit, flag name, description).
/// The names are nvidia-smi's (`clocks_event_reasons.NAME`,
/// [`gpupeek_shm::layout::clock_event_reason::NAMES`]; a test keeps them in step).
pub const THROTTLE_REASONS: [(u64, &str, &str); 5] = [
    (r::SW_POWER_CAP, "sw_power_cap", "the software power cap"),
    (r::HW_SLOWDOWN, "hw_slowdown", "a hardware slowdown"),
    (
        r::SW_THERMAL_SLOWDOWN,
        "sw_thermal_slowdown",
        "a software thermal slowdown",
    ),
    (
        r::HW_THERMAL_SLOWDOWN,
        "hw_thermal_slowdown",
        "a hardware thermal slowdown",
    ),
    (
        r::HW_POWER_BRAKE_SLOWDOWN,
        "hw_power_brake_slowdown",
        "the hardware power brake",
    ),
];

/// What makes an alert; `None` (or a zero mask) turns that condition off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// GPU temperature, °C.
    pub temp_c: Option<u32>,
    /// Memory used, percent of total.
    pub memory_pct: Option<u32>,
    /// Power draw, percent of the enforced limit.
    pub power_pct: Option<u32>,
    /// Clock event reason bits that alert.
    pub throttle_mask: u64,
    /// Whether a lost GPU, or one whose NVML queries fail, alerts.
    pub lost: bool,
}

impl Thresholds {
    /// No alerts at all.
    pub const OFF: Thresholds = Thresholds {
        temp_c: None,
        memory_pct: None,
        power_pct: None,
        throttle_mask: 0,
        lost: false,
    };
}

/// Parses `--alert-throttle`: comma-separated reason names, or `none`.
pub fn parse_throttle(s: &str) -> Result<u64, String> {
    if s == "none" {
        return Ok(0);
    }
    let mut mask = 0;
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let bit = THROTTLE_REASONS
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|(bit, _, _)| *bit)
            .ok_or_else(|| {
                let names: Vec<&str> = THROTTLE_REASONS.iter().map(|(_, n, _)| *n).collect();
                format!(
                    "unknown clock event reason {name:?}: use {} or none",
                    names.join(", ")
                )
            })?;
        mask |= bit;
    }
    Ok(mask)
}

/// Episode state of one GPU.
#[derive(Debug, Clone, Default)]
struct GpuEpisodes {
    /// Sampled at least once (so that "no longer listed" means something).
    seen: bool,
    /// Identity for messages, kept for when the GPU is gone.
    label: String,
    /// What `label` was made from (see [`identity_of`]).
    identity: Vec<u8>,
    lost: bool,
    /// Some NVML query of this GPU fails (other than "not supported").
    failing: bool,
    temp: bool,
    memory: bool,
    power: bool,
    /// Throttle reasons in an episode.
    throttled: u64,
    /// Per reason of [`THROTTLE_REASONS`]: ticks it has been absent while in an episode.
    absent_ticks: [u8; THROTTLE_REASONS.len()],
}

/// Tracks every GPU's episodes and logs their starts and ends.
pub struct Alerts {
    thresholds: Thresholds,
    gpus: Vec<GpuEpisodes>,
    /// The identity of the GPU being judged, in a buffer kept across ticks.
    scratch: Vec<u8>,
}

impl Alerts {
    /// Alerts on `thresholds`.
    pub fn new(thresholds: Thresholds) -> Self {
        Alerts {
            thresholds,
            gpus: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Judges GPU `rec.index` as just sampled.
    pub fn observe(&mut self, rec: &GpuRecord) {
        if self.thresholds == Thresholds::OFF {
            return;
        }
        let slot = rec.index as usize;
        if self.gpus.len() <= slot {
            self.gpus.resize(slot + 1, GpuEpisodes::default());
        }
        let t = self.thresholds;
        let g = &mut self.gpus[slot];
        if rec.valid & v::NAME != 0 || g.label.is_empty() {
            // Built again only when the identity changed: a tick allocates nothing.
            identity_of(rec, &mut self.scratch);
            if g.identity != self.scratch {
                g.identity.clone_from(&self.scratch);
                g.label = label(rec);
            }
        }
        g.seen = true;
        match GpuState::from_raw(rec.state) {
            Some(GpuState::Lost) => {
                if t.lost && !g.lost {
                    g.lost = true;
                    // Lost says it all: no separate "queries fail" episode.
                    g.failing = false;
                    log::warn!("{}: GPU is lost (fell off the bus?)", g.label);
                }
                return;
            }
            Some(GpuState::Ok) => {
                if g.lost {
                    g.lost = false;
                    log::info!("{}: GPU is back", g.label);
                }
            }
            Some(GpuState::Error) => {
                judge_failing(g, rec, t.lost);
                return;
            }
            _ => return,
        }
        judge_failing(g, rec, t.lost);
        judge_values(g, rec, &t);
        judge_throttle(g, rec, t.throttle_mask);
    }

    /// Notes that NVML now lists `count` GPUs: GPUs seen before at higher indices are lost.
    pub fn observe_count(&mut self, count: u32) {
        if !self.thresholds.lost {
            return;
        }
        for g in self.gpus.iter_mut().skip(count as usize) {
            if g.seen && !g.lost {
                g.lost = true;
                log::warn!("{}: GPU is no longer listed by NVML", g.label);
            }
        }
    }
}

/// Everything [`label`] depends on, as bytes: index, which of name and UUID are known,
/// and them.
fn identity_of(rec: &GpuRecord, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&rec.index.to_ne_bytes());
    out.extend_from_slice(&(rec.valid & (v::NAME | v::UUID)).to_ne_bytes());
    out.extend_from_slice(&rec.name);
    out.extend_from_slice(&rec.uuid);
}

/// "GPU 0 (NVIDIA H100 80GB HBM3, GPU-1234...)".
fn label(rec: &GpuRecord) -> String {
    let mut parts = Vec::new();
    if rec.valid & v::NAME != 0 {
        parts.push(text::decode(&rec.name));
    }
    if rec.valid & v::UUID != 0 {
        parts.push(text::decode(&rec.uuid));
    }
    if parts.is_empty() {
        format!("GPU {}", rec.index)
    } else {
        format!("GPU {} ({})", rec.index, parts.join(", "))
    }
}

/// Starts or ends the episode of NVML queries failing on this GPU (the record's
/// `nvml_error_code`: the first error of the tick other than "not supported" or "lost").
fn judge_failing(g: &mut GpuEpisodes, rec: &GpuRecord, on: bool) {
    let failing = rec.nvml_error_code != 0;
    if !on || failing == g.failing {
        return;
    }
    g.failing = failing;
    if failing {
        let code = rec.nvml_error_code;
        let what = nvml_wrapper::error::nvml_try(code as u32)
            .err()
            .map_or_else(|| "error".to_owned(), |e| e.to_string());
        log::warn!(
            "{}: NVML queries fail: {what} (code {code}); their values are not published",
            g.label
        );
    } else {
        log::info!("{}: NVML queries work again", g.label);
    }
}

/// Starts or ends a value episode; returns true when the state changed.
fn episode(active: &mut bool, value: u64, threshold: u32) -> bool {
    let threshold = u64::from(threshold);
    if !*active && value >= threshold {
        *active = true;
        return true;
    }
    if *active && value < threshold.saturating_sub(u64::from(MARGIN)) {
        *active = false;
        return true;
    }
    false
}

fn percent(part: u64, whole: u64) -> u64 {
    (u128::from(part) * 100 / u128::from(whole.max(1))) as u64
}

fn judge_values(g: &mut GpuEpisodes, rec: &GpuRecord, t: &Thresholds) {
    if let (Some(limit), true) = (t.temp_c, rec.valid & v::TEMPERATURE != 0) {
        let temp = rec.temp_gpu_c.max(0) as u64;
        if episode(&mut g.temp, temp, limit) {
            if g.temp {
                log::warn!(
                    "{}: temperature {temp} °C reached the alert threshold of {limit} °C",
                    g.label
                );
            } else {
                log::info!(
                    "{}: temperature back to {temp} °C (alert threshold {limit} °C)",
                    g.label
                );
            }
        }
    }
    if let (Some(limit), true) = (t.memory_pct, rec.valid & v::MEMORY != 0) {
        let pct = percent(rec.mem_used_bytes, rec.mem_total_bytes);
        if rec.mem_total_bytes > 0 && episode(&mut g.memory, pct, limit) {
            let (used, total) = (rec.mem_used_bytes >> 20, rec.mem_total_bytes >> 20);
            if g.memory {
                log::warn!(
                    "{}: memory {pct}% used ({used} of {total} MiB) reached the alert threshold of {limit}%",
                    g.label
                );
            } else {
                log::info!(
                    "{}: memory use back to {pct}% ({used} of {total} MiB; alert threshold {limit}%)",
                    g.label
                );
            }
        }
    }
    let power_valid = v::POWER_DRAW | v::POWER_LIMIT;
    if let (Some(limit), true) = (t.power_pct, rec.valid & power_valid == power_valid) {
        let pct = percent(rec.power_draw_mw.into(), rec.power_limit_mw.into());
        if rec.power_limit_mw > 0 && episode(&mut g.power, pct, limit) {
            let (draw, cap) = (rec.power_draw_mw / 1000, rec.power_limit_mw / 1000);
            if g.power {
                log::warn!(
                    "{}: power draw {draw} W is {pct}% of the {cap} W limit (alert threshold {limit}%)",
                    g.label
                );
            } else {
                log::info!(
                    "{}: power draw back to {draw} W, {pct}% of the {cap} W limit (alert threshold {limit}%)",
                    g.label
                );
            }
        }
    }
}

fn judge_throttle(g: &mut GpuEpisodes, rec: &GpuRecord, mask: u64) {
    if mask == 0 || rec.valid & v::CLOCK_EVENT_REASONS == 0 {
        return;
    }
    let now = rec.clock_event_reasons & mask;
    for (i, (bit, name, what)) in THROTTLE_REASONS.iter().enumerate() {
        let active = g.throttled & bit != 0;
        if now & bit != 0 {
            g.absent_ticks[i] = 0;
            if !active {
                g.throttled |= bit;
                log::warn!(
                    "{}: clocks slowed by {what} ({name}; clock event reasons {:#x})",
                    g.label,
                    rec.clock_event_reasons
                );
            }
        } else if active {
            g.absent_ticks[i] += 1;
            if g.absent_ticks[i] >= CLEAR_TICKS {
                g.throttled &= !bit;
                g.absent_ticks[i] = 0;
                log::info!("{}: clocks no longer slowed by {what} ({name})", g.label);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_names_parse_to_nvml_bits() {
        assert_eq!(parse_throttle("none"), Ok(0));
        assert_eq!(parse_throttle("hw_thermal_slowdown,sw_power_cap"), Ok(0x44));
        for (bit, name, _) in THROTTLE_REASONS {
            assert_eq!(r::name(bit), Some(name), "nvidia-smi's name for {bit:#x}");
        }
        assert!(parse_throttle("hw_slowdown,bogus")
            .unwrap_err()
            .contains("\"bogus\""));
    }

    #[test]
    fn a_value_episode_needs_the_margin_to_end() {
        let mut active = false;
        assert!(
            episode(&mut active, 85, 85),
            "reaching the threshold starts"
        );
        assert!(!episode(&mut active, 90, 85), "staying above logs nothing");
        assert!(!episode(&mut active, 81, 85), "inside the margin stays on");
        assert!(
            episode(&mut active, 79, 85),
            "below threshold - margin ends"
        );
        assert!(!active);
        assert!(!episode(&mut active, 84, 85));
    }
}
