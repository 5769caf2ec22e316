//! Where the running driver keeps the field values whose ids nvml.h has changed, and
//! which of the newer ids it has at all: one declaration, resolved once per NVML session
//! from `nvmlSystemGetDriverVersion` (`sampler::Held`).
//!
//! nvml.h has numbered the field values after 250 three ways (NVIDIA's headers as
//! go-nvml syncs them), and a driver answers an id by its own numbering, so the same id
//! is another value on another branch:
//!
//! - R570 (CUDA 12.8): power smoothing (`NVML_FI_PWR_SMOOTHING_ENABLED` to
//!   `..._ADMIN_OVERRIDE_RAMP_DOWN_HYST_VAL`) at 251–268, no slowdown counters;
//! - R575 and R580 (CUDA 12.9, 13.0, the ids nvml-wrapper's bindings have): the
//!   slowdown counters at 251–253, power smoothing at 256–273;
//! - R590 and later (CUDA 13.1+): power smoothing back at 251–268, the counters at
//!   269–271.
//!
//! Later headers only add ids: the inactive remapped rows at 301 and 302 (CUDA 13.2,
//! R595), state-of-charge power smoothing at 300 and the GPU base power scope (CUDA
//! 13.3, R610). Drivers before R570 have none of these; a driver whose version is
//! unknown is asked none of them, rather than read what may be another value.

/// The field numbering of one driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Numbering {
    /// The driver's major version (e.g. 590), `None` when unknown or unparsable.
    major: Option<u32>,
}

/// `NVML_POWER_SCOPE_GPU_BASE`: the base GPU power scope of the power field values
/// (nvml.h of CUDA 13.3, R610+). nvml.h `#define`s it as 3U; the comment above
/// `NVML_FI_DEV_POWER_AVERAGE` says "2 - GPU base scope", but 2 is
/// `NVML_POWER_SCOPE_MEMORY` there: the `#define` is what the driver compares.
pub const POWER_SCOPE_GPU_BASE: u32 = 3;

impl Numbering {
    /// The numbering of the driver `driver_version` (`nvmlSystemGetDriverVersion`).
    pub fn of(driver_version: Option<&str>) -> Numbering {
        let major = driver_version.and_then(|v| v.split('.').next()?.parse::<u32>().ok());
        Numbering { major }
    }

    fn at_least(self, branch: u32) -> bool {
        self.major.is_some_and(|m| m >= branch)
    }

    /// The SW thermal, HW thermal and HW power brake slowdown counters' ids (R575+).
    pub fn slowdown(self) -> Option<[u32; 3]> {
        match self.major? {
            575..=589 => Some([251, 252, 253]),
            590.. => Some([269, 270, 271]),
            _ => None,
        }
    }

    /// The id of `NVML_FI_PWR_SMOOTHING_ENABLED`, the first of power smoothing's
    /// eighteen consecutive ids (to `..._ADMIN_OVERRIDE_RAMP_DOWN_HYST_VAL`) (R570+).
    pub fn power_smoothing(self) -> Option<u32> {
        match self.major? {
            570..=574 | 590.. => Some(251),
            575..=589 => Some(256),
            _ => None,
        }
    }

    /// `NVML_FI_PWR_SMOOTHING_SOC_POWER_SMOOTHING_ENABLED` (first in CUDA 13.3's
    /// nvml.h: R610+; CUDA 13.2's leaves 300 unused).
    pub fn soc_power_smoothing(self) -> Option<u32> {
        self.at_least(610).then_some(300)
    }

    /// `NVML_FI_DEV_REMAPPED_ROWS_COR_INACTIVE` and `..._UNC_INACTIVE` (R595+).
    pub fn remapped_rows_inactive(self) -> Option<[u32; 2]> {
        self.at_least(595).then_some([301, 302])
    }

    /// Whether the driver has the GPU base power scope ([`POWER_SCOPE_GPU_BASE`], R610+).
    pub fn gpu_base_scope(self) -> bool {
        self.at_least(610)
    }
}

#[cfg(test)]
mod tests {
    use super::Numbering;

    #[test]
    fn each_driver_branch_has_its_own_ids() {
        let n = |v: &str| Numbering::of(Some(v));
        assert_eq!(n("580.65.06").slowdown(), Some([251, 252, 253]));
        assert_eq!(n("575.51.03").slowdown(), Some([251, 252, 253]));
        assert_eq!(n("590.48.01").slowdown(), Some([269, 270, 271]));
        assert_eq!(n("610.57.04").slowdown(), Some([269, 270, 271]));
        assert_eq!(n("570.124.06").power_smoothing(), Some(251));
        assert_eq!(n("580.95.05").power_smoothing(), Some(256));
        assert_eq!(n("590.48.01").power_smoothing(), Some(251));
        assert_eq!(n("610.57.04").power_smoothing(), Some(251));
        assert_eq!(n("595.80").soc_power_smoothing(), None);
        assert_eq!(n("610.57.04").soc_power_smoothing(), Some(300));
        assert_eq!(n("590.48.01").remapped_rows_inactive(), None);
        assert_eq!(n("595.80").remapped_rows_inactive(), Some([301, 302]));
        assert!(!n("595.71.05").gpu_base_scope());
        assert!(n("610.62").gpu_base_scope());
        for none in [Some("570.124.06"), Some("550.54.15"), Some("garbage"), None] {
            assert_eq!(Numbering::of(none).slowdown(), None, "{none:?}");
        }
        for none in [Some("565.57.01"), Some("garbage"), None] {
            let n = Numbering::of(none);
            assert_eq!(n.power_smoothing(), None, "{none:?}");
            assert_eq!(n.remapped_rows_inactive(), None, "{none:?}");
            assert!(!n.gpu_base_scope(), "{none:?}");
        }
    }
}
