//! Which values are read how often, by what they cost the driver.
//!
//! - **Every tick** (at most 8 NVML calls per GPU in the steady state): memory,
//!   utilisation, temperature (`nvmlDeviceGetTemperatureV`), one
//!   `nvmlDeviceGetFieldValues` batch (power, energy, PCIe byte counters, see
//!   [`crate::fields`]), graphics and SM clocks, and GPM's two calls on GPUs that have it.
//!   The device handle is resolved once per session (again after the GPU was lost).
//! - **Slow ticks** (every `--process-interval`): process lists and their utilisation,
//!   volatile ECC counts, memory clock, P-state, clock event reasons, fan speed, encoder
//!   and decoder utilisation.
//! - **Near-static values, every [`STATIC_PERIOD`]**: enforced power limit, PCIe link
//!   generation and width. By default every tick is also a slow tick, so these have a
//!   cadence of their own.
//! - **PCIe throughput** comes from the field-value counters, else GPM; only a GPU with
//!   neither calls `nvmlDeviceGetPcieThroughput` (20 ms per direction), every
//!   [`PCIE_FALLBACK_PERIOD`].
//!
//! Between two reads a value is republished from [`Carry`], the last record that read
//! it; what the GPU failed to give, or what was forgotten (GPU lost, in error, asleep),
//! is published as no value, never as a stale one.

use gpupeek_shm::layout::gpu_valid as v;
use gpupeek_shm::GpuRecord;

/// How often the near-static values are read again, ns.
pub const STATIC_PERIOD: u64 = 30_000_000_000;
/// How often a GPU without PCIe counters or GPM samples its throughput, ns.
pub const PCIE_FALLBACK_PERIOD: u64 = 10_000_000_000;

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
/// Read by `nvmlDeviceGetPcieThroughput` every [`PCIE_FALLBACK_PERIOD`].
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
}

impl Carry {
    /// Whether the near-static values are due at `now`; if so, the next time is set.
    pub fn static_due(&mut self, now: u64) -> bool {
        due(&mut self.static_due, now, STATIC_PERIOD)
    }

    /// Whether the PCIe fallback is due at `now`; if so, the next time is set.
    pub fn pcie_due(&mut self, now: u64) -> bool {
        due(&mut self.pcie_due, now, PCIE_FALLBACK_PERIOD)
    }

    /// Keeps the `bits` values of `rec`, just read.
    pub fn keep(&mut self, rec: &GpuRecord, bits: u64) {
        copy(rec, &mut self.rec, bits);
    }

    /// Republishes the kept `bits` values into `rec`.
    pub fn put(&self, rec: &mut GpuRecord, bits: u64) {
        copy(&self.rec, rec, bits);
    }

    /// Forgets the `bits` values, and makes the cadenced reads due at once.
    pub fn forget(&mut self, bits: u64) {
        self.rec.valid &= !bits;
        self.static_due = 0;
        self.pcie_due = 0;
    }
}

fn due(at: &mut u64, now: u64, period: u64) -> bool {
    if now < *at {
        return false;
    }
    *at = now.saturating_add(period);
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
