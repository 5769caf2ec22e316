//! The values nvidia-smi 590's `--query-gpu` added that ABI 1.6 publishes (in
//! `valid3`), each from the NVML call nvidia-smi makes for it, none on the fast tick:
//!
//! - **Near-static**, with [`crate::tiers::STATIC`] every 30 s ([`sample_static`]): the
//!   PCI class codes (`nvmlDeviceGetPciInfoExt`, R550+), the GSP firmware mode
//!   (`nvmlDeviceGetGspFirmwareMode`), the addressing mode
//!   (`nvmlDeviceGetAddressingMode`, R580+), the C2C mode (`nvmlDeviceGetC2cModeInfoV`),
//!   the infoROM checksum (`nvmlDeviceValidateInforom`), the power management mode
//!   (`nvmlDeviceGetPowerManagementMode`, which 590+ drivers call deprecated) and the
//!   row remapper histogram (`nvmlDeviceGetRowRemapperHistogram`).
//! - **Slow ticks** ([`sample_slow`]): the thermal margin, nvidia-smi's T.Limit
//!   temperature (`nvmlDeviceGetMarginTemperature`, R560+), which moves with the
//!   temperature.
//!
//! nvml-wrapper has none of these calls; each is made through the loaded library's
//! symbol, and a symbol the driver lacks leaves the value unknown.

use std::os::raw::c_uint;

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{self, nvmlDevice_t, nvmlReturn_t};

use gpupeek_shm::layout::gpu_valid3 as v3;

use crate::reads::Fill;

/// The values read with [`crate::tiers::STATIC`].
pub const STATIC3: u64 = v3::PCI_CLASS
    | v3::GSP_MODE
    | v3::ADDRESSING_MODE
    | v3::C2C_MODE
    | v3::INFOROM_CHECKSUM
    | v3::POWER_MANAGEMENT
    | v3::REMAPPED_ROWS_HISTOGRAM;

/// The values read on slow ticks.
pub const SLOW3: u64 = v3::TEMP_TLIMIT;

/// nvml.h's `NVML_STRUCT_VERSION(name, ver)` for a struct of type `T`.
const fn version<T>(ver: u32) -> c_uint {
    std::mem::size_of::<T>() as c_uint | (ver << 24)
}

/// Calls the library's `name` symbol, `call(symbol, handle)`, or answers
/// `FunctionNotFound` when this driver does not export it.
macro_rules! raw {
    ($nvml:expr, $d:expr, $name:ident, |$f:ident, $h:ident| $call:expr) => {{
        let $f = $nvml
            .lib()
            .$name
            .as_ref()
            .map_err(|_| NvmlError::FunctionNotFound)?;
        // SAFETY: the handle belongs to the live session `$nvml` holds.
        let $h: nvmlDevice_t = unsafe { $d.handle() };
        let ret: nvmlReturn_t = $call;
        nvml_try(ret)
    }};
}

/// The near-static values: see [`STATIC3`].
pub fn sample_static(nvml: &Nvml, d: &Device, f: &mut Fill) {
    f.field3(
        v3::PCI_CLASS,
        || pci_class(nvml, d),
        |r, (base, sub)| {
            r.pci_base_class = base;
            r.pci_sub_class = sub;
        },
    );
    f.field3(
        v3::GSP_MODE,
        || gsp_mode(nvml, d),
        |r, (current, default)| {
            r.gsp_mode_current = current;
            r.gsp_mode_default = default;
        },
    );
    f.field3(
        v3::ADDRESSING_MODE,
        || addressing_mode(nvml, d),
        |r, m| r.addressing_mode = m,
    );
    f.field3(v3::C2C_MODE, || c2c_mode(nvml, d), |r, m| r.c2c_mode = m);
    f.field3(
        v3::INFOROM_CHECKSUM,
        || inforom_valid(nvml, d),
        |r, valid| r.inforom_checksum_valid = valid.into(),
    );
    f.field3(
        v3::POWER_MANAGEMENT,
        || power_management(nvml, d),
        |r, m| r.power_management_mode = m,
    );
    f.field3(
        v3::REMAPPED_ROWS_HISTOGRAM,
        || remapper_histogram(nvml, d),
        |r, h| {
            r.remapped_rows_hist_max = h.max;
            r.remapped_rows_hist_high = h.high;
            r.remapped_rows_hist_partial = h.partial;
            r.remapped_rows_hist_low = h.low;
            r.remapped_rows_hist_none = h.none;
        },
    );
}

/// The slow-tick values: see [`SLOW3`].
pub fn sample_slow(nvml: &Nvml, d: &Device, f: &mut Fill) {
    f.field3(
        v3::TEMP_TLIMIT,
        || margin_temperature(nvml, d),
        |r, t| r.temp_tlimit_c = t,
    );
}

fn margin_temperature(nvml: &Nvml, d: &Device) -> Result<i32, NvmlError> {
    let mut info = bindings::nvmlMarginTemperature_v1_t {
        version: version::<bindings::nvmlMarginTemperature_v1_t>(1),
        marginTemperature: 0,
    };
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlMarginTemperature_t *)` and
    // `info` is a writable struct of the version it names.
    raw!(nvml, d, nvmlDeviceGetMarginTemperature, |f, h| unsafe {
        f(h, &mut info)
    })?;
    Ok(info.marginTemperature)
}

fn pci_class(nvml: &Nvml, d: &Device) -> Result<(u32, u32), NvmlError> {
    let mut info = bindings::nvmlPciInfoExt_v1_t {
        version: version::<bindings::nvmlPciInfoExt_v1_t>(1),
        domain: 0,
        bus: 0,
        device: 0,
        pciDeviceId: 0,
        pciSubSystemId: 0,
        baseClass: 0,
        subClass: 0,
        busId: [0; 32],
    };
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlPciInfoExt_t *)` and `info`
    // is a writable struct of the version it names.
    raw!(nvml, d, nvmlDeviceGetPciInfoExt, |f, h| unsafe {
        f(h, &mut info)
    })?;
    Ok((info.baseClass, info.subClass))
}

fn gsp_mode(nvml: &Nvml, d: &Device) -> Result<(u32, u32), NvmlError> {
    let (mut current, mut default): (c_uint, c_uint) = (0, 0);
    // SAFETY: `f` has the C signature `(nvmlDevice_t, unsigned int *, unsigned int *)`
    // and both outputs are writable.
    raw!(nvml, d, nvmlDeviceGetGspFirmwareMode, |f, h| unsafe {
        f(h, &mut current, &mut default)
    })?;
    Ok((current, default))
}

fn addressing_mode(nvml: &Nvml, d: &Device) -> Result<u32, NvmlError> {
    let mut mode = bindings::nvmlDeviceAddressingMode_v1_t {
        version: version::<bindings::nvmlDeviceAddressingMode_v1_t>(1),
        value: 0,
    };
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlDeviceAddressingMode_t *)`
    // and `mode` is a writable struct of the version it names.
    raw!(nvml, d, nvmlDeviceGetAddressingMode, |f, h| unsafe {
        f(h, &mut mode)
    })?;
    Ok(mode.value)
}

fn c2c_mode(nvml: &Nvml, d: &Device) -> Result<u32, NvmlError> {
    let mut info = bindings::nvmlC2cModeInfo_v1_t { isC2cEnabled: 0 };
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlC2cModeInfo_v1_t *)` and
    // `info` is writable.
    raw!(nvml, d, nvmlDeviceGetC2cModeInfoV, |f, h| unsafe {
        f(h, &mut info)
    })?;
    Ok(info.isC2cEnabled)
}

/// Whether the infoROM checksum validates: `NVML_ERROR_CORRUPTED_INFOROM` is an
/// answer ("invalid"), not a failure.
fn inforom_valid(nvml: &Nvml, d: &Device) -> Result<bool, NvmlError> {
    // SAFETY: `f` has the C signature `(nvmlDevice_t)`.
    match raw!(nvml, d, nvmlDeviceValidateInforom, |f, h| unsafe { f(h) }) {
        Ok(()) => Ok(true),
        Err(NvmlError::CorruptedInfoROM) => Ok(false),
        Err(e) => Err(e),
    }
}

fn power_management(nvml: &Nvml, d: &Device) -> Result<u32, NvmlError> {
    let mut mode: bindings::nvmlEnableState_t = 0;
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlEnableState_t *)` and `mode`
    // is writable.
    raw!(nvml, d, nvmlDeviceGetPowerManagementMode, |f, h| unsafe {
        f(h, &mut mode)
    })?;
    Ok(mode)
}

fn remapper_histogram(
    nvml: &Nvml,
    d: &Device,
) -> Result<bindings::nvmlRowRemapperHistogramValues_t, NvmlError> {
    let mut values = bindings::nvmlRowRemapperHistogramValues_t {
        max: 0,
        high: 0,
        partial: 0,
        low: 0,
        none: 0,
    };
    // SAFETY: `f` has the C signature `(nvmlDevice_t, nvmlRowRemapperHistogramValues_t
    // *)` and `values` is writable.
    raw!(nvml, d, nvmlDeviceGetRowRemapperHistogram, |f, h| unsafe {
        f(h, &mut values)
    })?;
    Ok(values)
}
