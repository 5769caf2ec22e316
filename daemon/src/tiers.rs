//! Which values are read how often, by what they cost the driver.
//!
//! - **Every tick** (at most 8 NVML calls per GPU in the steady state): memory,
//!   utilisation, temperature (`nvmlDeviceGetTemperatureV`), one
//!   `nvmlDeviceGetFieldValues` batch (power, energy, PCIe byte counters, see
//!   [`crate::fields`]), graphics and SM clocks, and GPM's two calls on GPUs that have it.
//!   The device handle is resolved once per session (again after the GPU was lost).
//!   Under MIG the parent's utilisation is not asked for, and each MIG device costs one
//!   memory call, each GPU instance with GPM two GPM calls (see [`crate::mig`]).
//! - **Slow ticks** (every `--process-interval`): process lists and their utilisation,
//!   volatile ECC counts, memory clock, P-state, clock event reasons, fan speed, encoder
//!   and decoder utilisation, video clock and encoder statistics, MIG mode.
//! - **Near-static values, every [`STATIC_PERIOD`]**: enforced power limit, PCIe link
//!   generation and width, and nvidia-smi's near-static values ([`crate::details`]'s
//!   `STATIC2`), on a cadence of their own.
//! - **PCIe throughput** comes from the field-value counters, else GPM; only a GPU with
//!   neither calls `nvmlDeviceGetPcieThroughput`, which samples for 20 ms per call: both
//!   directions at once at first, then one direction in each turn, a turn every
//!   [`PCIE_FALLBACK_PERIOD`] (each direction every two), so that a turn costs one 20 ms
//!   call.
//!
//! The GPUs' turns at the two cadences are spread over the period (see
//! [`Carry::for_gpu`]), as the process tier spreads theirs (see [`crate::proctier`]), so
//! that no tick pays for every GPU at once.
//!
//! Between two reads a value is republished from [`Carry`], the last record that read
//! it; what the GPU failed to give, or what was forgotten (GPU lost, in error, asleep),
//! is published as no value, never as a stale one.

use gpupeek_shm::layout::gpu_valid as v;
use gpupeek_shm::GpuRecord;

/// How often the near-static values are read again, ns.
pub const STATIC_PERIOD: u64 = 30_000_000_000;
/// How often a GPU without PCIe counters or GPM samples one direction of its
/// throughput, ns.
pub const PCIE_FALLBACK_PERIOD: u64 = 15_000_000_000;

/// Read on slow ticks only.
pub const SLOW: u64 = v::PROCESSES
    | v::ECC_CORRECTED
    | v::ECC_UNCORRECTED
    | v::CLOCK_MEM
    | v::PSTATE
    | v::CLOCK_EVENT_REASONS
    | v::FAN_SPEED
    | v::UTIL_ENC
    | v::UTIL_DEC;
/// Read every [`STATIC_PERIOD`].
pub const STATIC: u64 = v::POWER_LIMIT | v::PCIE_LINK_GEN | v::PCIE_LINK_WIDTH;
/// Read by `nvmlDeviceGetPcieThroughput` on a cadence of its own (see [`Carry::pcie_due`]).
pub const PCIE: u64 = v::PCIE_TX | v::PCIE_RX;

/// Copies the fields behind `bits` from `from` into `to`, with their validity bits
/// (bits clear in `from` clear them in `to`).
pub fn copy(from: &GpuRecord, to: &mut GpuRecord, bits: u64) {
    macro_rules! fields {
        ($($bit:ident => $($f:ident),+;)*) => {$(
            if bits & v::$bit != 0 {
                $(to.$f = from.$f;)+
            }
        )*};
    }
    fields! {
        PROCESSES => process_count;
        ECC_CORRECTED => ecc_corrected_volatile_count;
        ECC_UNCORRECTED => ecc_uncorrected_volatile_count;
        CLOCK_MEM => clock_mem_mhz;
        PSTATE => pstate;
        CLOCK_EVENT_REASONS => clock_event_reasons;
        FAN_SPEED => fan_speed_pct;
        UTIL_ENC => util_enc_pct;
        UTIL_DEC => util_dec_pct;
        POWER_LIMIT => power_limit_mw;
        PCIE_LINK_GEN => pcie_link_gen;
        PCIE_LINK_WIDTH => pcie_link_width;
        PCIE_TX => pcie_tx_kbytes_per_s;
        PCIE_RX => pcie_rx_kbytes_per_s;
    }
    to.valid = (to.valid & !bits) | (from.valid & bits);
}

/// What the less frequent reads of one GPU last gave, and when they are due again.
#[derive(Debug, Default, Clone, Copy)]
pub struct Carry {
    /// The values (only the fields of [`SLOW`], [`STATIC`] and [`PCIE`] are used).
    rec: GpuRecord,
    /// `CLOCK_MONOTONIC` ns when [`STATIC`] is due (0: now).
    static_due: u64,
    /// `CLOCK_MONOTONIC` ns when the PCIe fallback is due (0: now).
    pcie_due: u64,
    /// The PCIe fallback's next turn reads the receive direction.
    pcie_rx_next: bool,
    /// This GPU's place in a period, from 0 to 1: the second read of a cadence comes
    /// that much of a period later than the others.
    phase: f64,
}

impl Carry {
    /// The carry of GPU `index`. Its cadenced reads come at once, then after a period and
    /// its share of one: the shares of GPUs 0, 1, 2... are the fractional parts of
    /// multiples of the golden ratio, which spread any number of GPUs evenly over the
    /// period without knowing how many there are.
    pub fn for_gpu(index: u32) -> Self {
        const INVERSE_GOLDEN_RATIO: f64 = 0.618_033_988_749_895;
        Carry {
            phase: (f64::from(index) * INVERSE_GOLDEN_RATIO).fract(),
            ..Carry::default()
        }
    }

    /// Whether the near-static values are due at `now`; if so, the next time is set.
    pub fn static_due(&mut self, now: u64) -> bool {
        due(&mut self.static_due, now, STATIC_PERIOD, self.phase)
    }

    /// Which of the [`PCIE`] values the fallback reads at `now` (0: none): both when due
    /// at once, then transmit and receive in turn. If any, the next turn is set.
    pub fn pcie_due(&mut self, now: u64) -> u64 {
        let first = self.pcie_due == 0;
        if !due(&mut self.pcie_due, now, PCIE_FALLBACK_PERIOD, self.phase) {
            return 0;
        }
        if first {
            self.pcie_rx_next = false;
            return PCIE;
        }
        let rx = self.pcie_rx_next;
        self.pcie_rx_next = !rx;
        if rx {
            v::PCIE_RX
        } else {
            v::PCIE_TX
        }
    }

    /// Keeps the `bits` values of `rec`, just read.
    pub fn keep(&mut self, rec: &GpuRecord, bits: u64) {
        copy(rec, &mut self.rec, bits);
    }

    /// Republishes the kept `bits` values into `rec`.
    pub fn put(&self, rec: &mut GpuRecord, bits: u64) {
        copy(&self.rec, rec, bits);
    }

    /// Keeps the [`gpupeek_shm::layout::gpu_valid2`] values `bits2` of `rec`, just read.
    pub fn keep2(&mut self, rec: &GpuRecord, bits2: u64) {
        crate::details::copy2(rec, &mut self.rec, bits2);
    }

    /// Republishes the kept `bits2` values (of `valid2`) into `rec`.
    pub fn put2(&self, rec: &mut GpuRecord, bits2: u64) {
        crate::details::copy2(&self.rec, rec, bits2);
    }

    /// Keeps the [`gpupeek_shm::layout::gpu_valid3`] values `bits3` of `rec`, just read.
    pub fn keep3(&mut self, rec: &GpuRecord, bits3: u64) {
        crate::details::copy3(rec, &mut self.rec, bits3);
    }

    /// Republishes the kept `bits3` values (of `valid3`) into `rec`.
    pub fn put3(&self, rec: &mut GpuRecord, bits3: u64) {
        crate::details::copy3(&self.rec, rec, bits3);
    }

    /// Keeps the [`gpupeek_shm::layout::gpu_valid4`] values of `rec`, just read (all are
    /// near-static).
    pub fn keep4(&mut self, rec: &GpuRecord) {
        crate::details4::copy4(rec, &mut self.rec);
    }

    /// Republishes the kept `valid4` values into `rec`.
    pub fn put4(&self, rec: &mut GpuRecord) {
        crate::details4::copy4(&self.rec, rec);
    }

    /// Forgets the `valid4` values; see [`Carry::forget`].
    pub fn forget4(&mut self) {
        self.rec.valid4 = 0;
        self.static_due = 0;
    }

    /// Forgets the `bits3` values (of `valid3`); see [`Carry::forget`].
    pub fn forget3(&mut self, bits3: u64) {
        self.rec.valid3 &= !bits3;
        self.rec.deprecated3 &= !bits3;
        self.static_due = 0;
    }

    /// Forgets the `bits2` values (of `valid2`); see [`Carry::forget`].
    pub fn forget2(&mut self, bits2: u64) {
        self.rec.valid2 &= !bits2;
        self.rec.deprecated2 &= !bits2;
        self.static_due = 0;
    }

    /// Forgets the `bits` values, and makes the cadenced reads due at once.
    pub fn forget(&mut self, bits: u64) {
        self.rec.valid &= !bits;
        self.static_due = 0;
        self.pcie_due = 0;
    }
}

/// Whether a cadence next due `at` is due at `now`; if so, schedules the next read a
/// `period` later, and after a read that was due at once (the first, or the first after
/// forgetting) also this GPU's `phase` of a period.
fn due(at: &mut u64, now: u64, period: u64, phase: f64) -> bool {
    if now < *at {
        return false;
    }
    let share = if *at == 0 {
        (period as f64 * phase) as u64
    } else {
        0
    };
    *at = now.saturating_add(period).saturating_add(share);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_values_come_back_with_their_bits_and_missing_ones_stay_missing() {
        let mut read = GpuRecord {
            fan_speed_pct: 40,
            pstate: 2,
            valid: v::FAN_SPEED,
            ..Default::default()
        };
        let mut carry = Carry::default();
        carry.keep(&read, SLOW);
        read = GpuRecord::default();
        carry.put(&mut read, SLOW);
        assert_eq!(read.fan_speed_pct, 40);
        assert_eq!(read.valid & SLOW, v::FAN_SPEED, "the P-state was not read");
        carry.forget(SLOW);
        let mut next = GpuRecord::default();
        carry.put(&mut next, SLOW);
        assert_eq!(next.valid, 0);
    }

    #[test]
    fn the_gpus_second_reads_are_spread_over_the_period() {
        // PCIe fallback every 15 s at a 1 s tick: eight GPUs, eight different ticks.
        let tick = 1_000_000_000;
        let mut ticks: Vec<u64> = (0..8)
            .map(|index| {
                let mut carry = Carry::for_gpu(index);
                assert_eq!(carry.pcie_due(tick), PCIE, "the first read is at once");
                (2..=30).find(|&t| carry.pcie_due(t * tick) != 0).unwrap()
            })
            .collect();
        assert!(ticks.iter().all(|t| (16..=30).contains(t)), "{ticks:?}");
        ticks.sort_unstable();
        ticks.dedup();
        assert_eq!(ticks.len(), 8, "{ticks:?}");
    }

    #[test]
    fn the_pcie_fallback_reads_both_directions_at_first_then_one_a_turn() {
        let mut carry = Carry::default();
        let turns: Vec<u64> = (0..5)
            .map(|n| carry.pcie_due(1 + n * PCIE_FALLBACK_PERIOD))
            .collect();
        assert_eq!(
            turns,
            [PCIE, v::PCIE_TX, v::PCIE_RX, v::PCIE_TX, v::PCIE_RX]
        );
        assert_eq!(
            carry.pcie_due(2 + 4 * PCIE_FALLBACK_PERIOD),
            0,
            "between turns"
        );
        carry.forget(PCIE);
        assert_eq!(
            carry.pcie_due(3 + 4 * PCIE_FALLBACK_PERIOD),
            PCIE,
            "after forgetting"
        );
    }

    #[test]
    fn a_cadence_is_due_at_once_then_a_period_later() {
        let mut carry = Carry::default();
        assert!(carry.static_due(5));
        assert!(!carry.static_due(5 + STATIC_PERIOD - 1));
        assert!(carry.static_due(5 + STATIC_PERIOD));
        carry.forget(STATIC);
        assert!(
            carry.static_due(6 + STATIC_PERIOD),
            "forgetting makes it due"
        );
    }
}
