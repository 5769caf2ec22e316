//! The values nvidia-smi 595's and 610's `--query-gpu` added that ABI 1.11 publishes
//! (in `valid4`), all read on the near-static tier ([`crate::tiers::STATIC`], every
//! 30 s), never on the fast tick:
//!
//! - the inactive remapped rows (`remapped_rows.*_inactive`): field values 301 and 302
//!   (R595+), in one call;
//! - the base GPU power limits (`gpu.base.*`): field values 190, 192, 189, 187 and 188
//!   with the GPU base power scope (R610+), in one call. nvml.h's note on that scope
//!   says it "only supports _MIN_LIMIT, _MAX_LIMIT, _DEFAULT_LIMIT, and _CURRENT_LIMIT":
//!   the requested limit (192) is asked in the same call and stays unknown where the
//!   driver answers it "not supported";
//! - the GPU's run time from its black box (`bbx.time_run`):
//!   `nvmlDeviceGetBBXTimeData_v1` (R610+), looked up by name once per session;
//! - power smoothing's state, active profile and admin overrides: see
//!   [`crate::smoothing::sample4`].
//!
//! Which ids a driver has, and where, is [`Numbering`]'s to say.

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::field_id;

use gpupeek_shm::layout::gpu_valid4 as v4;
use gpupeek_shm::GpuRecord;

use crate::details3::Unbound;
use crate::numbering::{Numbering, POWER_SCOPE_GPU_BASE};
use crate::reads::Fill;
use crate::smoothing::Plans;

/// The base GPU power limits: bits and field ids. nvidia-smi 610's `--help-query-gpu`
/// describes `gpu.base.current` as the setting "requested by software" and
/// `gpu.base.requested` as the one "currently enforced", the other way round from the
/// field ids' meaning (`NVML_FI_DEV_POWER_CURRENT_LIMIT`: "Limit currently enforced";
/// `..._REQUESTED_LIMIT`: "requested by NVML or any other userspace client"), and from
/// how it maps `power.limit`/`enforced.power.limit` for the module scope: the fields
/// follow the ids.
const GPU_BASE: [(u64, u32); 5] = [
    (
        v4::GPU_BASE_CURRENT,
        field_id::NVML_FI_DEV_POWER_CURRENT_LIMIT,
    ),
    (
        v4::GPU_BASE_REQUESTED,
        field_id::NVML_FI_DEV_POWER_REQUESTED_LIMIT,
    ),
    (
        v4::GPU_BASE_DEFAULT,
        field_id::NVML_FI_DEV_POWER_DEFAULT_LIMIT,
    ),
    (v4::GPU_BASE_MIN, field_id::NVML_FI_DEV_POWER_MIN_LIMIT),
    (v4::GPU_BASE_MAX, field_id::NVML_FI_DEV_POWER_MAX_LIMIT),
];

/// The `valid4` value read with the identity, once per session (see
/// [`crate::reads::read_identity`]): never copied with the near-static ones.
pub const IDENTITY4: u64 = v4::MINOR_NUMBER;

/// Reads the near-static `valid4` values of one GPU; `smoothing`: the session's power
/// smoothing calls, planned from `numbering` when it began.
pub fn sample_static(
    nvml: &Nvml,
    unbound: &Unbound,
    numbering: Numbering,
    smoothing: &Plans,
    d: &Device,
    f: &mut Fill,
) {
    if let Some(ids) = numbering.remapped_rows_inactive() {
        if let Some(answers) = f.call(|| crate::fields::some(nvml, d, ids)) {
            let [cor, unc] = answers;
            if let Ok(n) = cor {
                f.rec.remapped_rows_correctable_inactive = clamp(n);
                f.rec.valid4 |= v4::REMAPPED_ROWS_CORRECTABLE_INACTIVE;
            }
            if let Ok(n) = unc {
                f.rec.remapped_rows_uncorrectable_inactive = clamp(n);
                f.rec.valid4 |= v4::REMAPPED_ROWS_UNCORRECTABLE_INACTIVE;
            }
        }
    }
    if numbering.gpu_base_scope() {
        let ids = GPU_BASE.map(|(_, id)| id);
        let scope = POWER_SCOPE_GPU_BASE;
        if let Some(answers) = f.call(|| crate::fields::some_scoped(nvml, d, ids, scope)) {
            for ((bit, _), answer) in GPU_BASE.iter().zip(answers) {
                let Ok(mw) = answer else { continue };
                let r = &mut *f.rec;
                *match *bit {
                    v4::GPU_BASE_CURRENT => &mut r.gpu_base_current_mw,
                    v4::GPU_BASE_REQUESTED => &mut r.gpu_base_requested_mw,
                    v4::GPU_BASE_DEFAULT => &mut r.gpu_base_default_mw,
                    v4::GPU_BASE_MIN => &mut r.gpu_base_min_mw,
                    _ => &mut r.gpu_base_max_mw,
                } = clamp(mw);
                r.valid4 |= bit;
            }
        }
    }
    if let Some(s) = f.call(|| bbx_time_run(unbound, d)) {
        f.rec.bbx_time_run_s = s;
        f.rec.valid4 |= v4::BBX_TIME_RUN;
    }
    crate::smoothing::sample4(nvml, smoothing, d, f);
}

fn clamp(x: u64) -> u32 {
    u32::try_from(x).unwrap_or(u32::MAX)
}

/// `nvmlBBXTimeData_v1_t`: one `unsigned int timeRun`.
#[repr(C)]
pub struct BbxTimeData {
    time_run: std::os::raw::c_uint,
}

/// `nvmlDeviceGetBBXTimeData_v1(device, nvmlBBXTimeData_v1_t *)` (nvml.h of CUDA 13.3,
/// R610+), which nvml-wrapper-sys does not bind.
pub type GetBbxTimeData = unsafe extern "C" fn(
    nvml_wrapper_sys::bindings::nvmlDevice_t,
    *mut BbxTimeData,
) -> nvml_wrapper_sys::bindings::nvmlReturn_t;

/// Seconds the GPU has had the driver loaded. A library without the entry point (every
/// driver before R610, and nvidia-smi 610.62's on Windows, which prints `[Function Not
/// Found]`) leaves it unknown, as every other missing entry point.
fn bbx_time_run(unbound: &Unbound, d: &Device) -> Result<u32, NvmlError> {
    let get = unbound.bbx_time_data().ok_or(NvmlError::FunctionNotFound)?;
    let mut data = BbxTimeData { time_run: 0 };
    // SAFETY: `get` is this session's `nvmlDeviceGetBBXTimeData_v1` (see
    // `Unbound::resolve`); the handle belongs to the same live session; `data` is a
    // writable `nvmlBBXTimeData_v1_t`.
    nvml_try(unsafe { get(d.handle(), &mut data) })?;
    Ok(data.time_run)
}

/// Copies every near-static `valid4` value, and their bits, from `from` into `to` (the
/// carry keeps and republishes them together); [`IDENTITY4`]'s stay `to`'s.
pub fn copy4(from: &GpuRecord, to: &mut GpuRecord) {
    macro_rules! fields {
        ($($f:ident),+ $(,)?) => {$(to.$f = from.$f;)+};
    }
    to.valid4 = (to.valid4 & IDENTITY4) | (from.valid4 & !IDENTITY4);
    fields!(
        remapped_rows_correctable_inactive,
        remapped_rows_uncorrectable_inactive,
        gpu_base_current_mw,
        gpu_base_requested_mw,
        gpu_base_default_mw,
        gpu_base_min_mw,
        gpu_base_max_mw,
        bbx_time_run_s,
        power_smoothing_tmp_floor_mw,
        power_smoothing_tmp_ceil_mw,
        power_smoothing_hw_lifetime_pct,
        power_smoothing_enabled,
        power_smoothing_soc_enabled,
        power_smoothing_priv_level,
        power_smoothing_imm_ramp_down,
        power_smoothing_max_pct_tmp_floor,
        power_smoothing_min_pct_tmp_floor,
        power_smoothing_num_preset_profiles,
        power_smoothing_profile_pct_tmp_floor,
        power_smoothing_profile_ramp_up_mw_s,
        power_smoothing_profile_ramp_down_mw_s,
        power_smoothing_profile_ramp_down_hyst_ms,
        power_smoothing_active_profile,
        power_smoothing_admin_pct_tmp_floor,
        power_smoothing_admin_ramp_up_mw_s,
        power_smoothing_admin_ramp_down_mw_s,
        power_smoothing_admin_ramp_down_hyst_ms,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy4_copies_every_near_static_valid4_value_and_leaves_the_identitys() {
        let every: u64 = v4::SET.bits.iter().map(|b| 1u64 << b.bit).sum();
        let from = GpuRecord {
            valid4: every,
            bbx_time_run_s: 7,
            power_smoothing_admin_ramp_down_hyst_ms: 9,
            minor_number: 3,
            ..Default::default()
        };
        let mut to = GpuRecord::default();
        copy4(&from, &mut to);
        assert_eq!((to.valid4, to.bbx_time_run_s), (every & !IDENTITY4, 7));
        assert_eq!(to.power_smoothing_admin_ramp_down_hyst_ms, 9);
        assert_eq!(to.minor_number, 0);
        // The identity's minor number, put before the near-static values are.
        let mut to = GpuRecord {
            valid4: IDENTITY4,
            minor_number: 5,
            ..Default::default()
        };
        copy4(&GpuRecord::default(), &mut to);
        assert_eq!((to.valid4, to.minor_number), (IDENTITY4, 5));
    }
}
