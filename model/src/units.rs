//! Typed units: each published quantity keeps the unit the segment stores it in, and
//! converts to the units outputs show in one place here (MiB rounded down as gpustat
//! does and up as nvidia-smi does, watts, hertz, bytes per second).
//!
//! Percentages, degrees Celsius and counts stay plain integers: their unit is in the
//! field's name (`util_pct`, `temp_c`) and nothing converts them.

/// A size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Bytes(pub u64);

impl Bytes {
    /// Whole mebibytes, rounded down (gpustat's MiB).
    pub fn mib(self) -> u64 {
        self.0 >> 20
    }
    /// Whole mebibytes, rounded up (nvidia-smi's MiB: each of total, reserved, used and
    /// free is rounded up on its own, so an H100's `479 MiB` reserved, `0 MiB` used and
    /// `81081 MiB` free add up to one more than its `81559 MiB` total).
    pub fn mib_ceil(self) -> u64 {
        self.0.div_ceil(1 << 20)
    }
    /// The byte count as a float.
    pub fn f64(self) -> f64 {
        self.0 as f64
    }
}

/// A power in milliwatts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct MilliWatts(pub u64);

impl MilliWatts {
    /// Whole watts, rounded down (gpustat's).
    pub fn whole_watts(self) -> u64 {
        self.0 / 1000
    }
    /// Watts.
    pub fn watts(self) -> f64 {
        self.0 as f64 / 1000.0
    }
}

/// An energy in millijoules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct MilliJoules(pub u64);

impl MilliJoules {
    /// Joules.
    pub fn joules(self) -> f64 {
        self.0 as f64 / 1000.0
    }
}

/// A clock frequency in MHz.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct MegaHertz(pub u64);

impl MegaHertz {
    /// Hertz.
    pub fn hz(self) -> u64 {
        self.0 * 1_000_000
    }
}

/// A throughput in KB/s as NVML reports PCIe throughput (its "KB" is 1024 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct KiloBytesPerSec(pub u64);

impl KiloBytesPerSec {
    /// Bytes per second.
    pub fn bytes_per_s(self) -> u64 {
        self.0 * 1024
    }
}

/// A fraction in hundredths of a percent (GPM metrics, CPU use).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct CentiPercent(pub u32);

impl CentiPercent {
    /// Percent.
    pub fn pct(self) -> f64 {
        f64::from(self.0) / 100.0
    }
    /// A fraction of one (Prometheus's `_ratio`).
    pub fn ratio(self) -> f64 {
        f64::from(self.0) / 10_000.0
    }
}

/// A performance state, 0 (P0, fastest) to 15; shown as `P0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct PState(pub u32);

impl std::fmt::Display for PState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "P{}", self.0)
    }
}

/// Transmit and receive rates of one link, bytes per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxRx {
    /// Transmitted, bytes per second.
    pub tx: u64,
    /// Received, bytes per second.
    pub rx: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mib_and_whole_watts_round_down_as_gpustat_does() {
        assert_eq!(Bytes(85_520_809_984).mib(), 81559);
        assert_eq!(Bytes((1 << 20) - 1).mib(), 0);
        // nvidia-smi 590.48.01 on an H100 80GB HBM3 (nvidia_gpu_exporter's
        // internal/captures): reserved 501481472 B = 478.25 MiB prints `479 MiB`.
        assert_eq!(Bytes(501_481_472).mib_ceil(), 479);
        assert_eq!(Bytes(85_520_809_984).mib_ceil(), 81559);
        assert_eq!(Bytes(1).mib_ceil(), 1);
        assert_eq!(Bytes(0).mib_ceil(), 0);
        assert_eq!(MilliWatts(123_999).whole_watts(), 123);
        assert_eq!(MilliWatts(123_456).watts(), 123.456);
        assert_eq!(MegaHertz(1410).hz(), 1_410_000_000);
        assert_eq!(KiloBytesPerSec(2).bytes_per_s(), 2048);
        assert_eq!(CentiPercent(4250).pct(), 42.5);
        assert_eq!(PState(2).to_string(), "P2");
    }
}
