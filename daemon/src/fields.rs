//! Scalar values read in one `nvmlDeviceGetFieldValues` call per GPU per tick: power
//! (the 1 s average, the value `nvmlDeviceGetPowerUsage` gives on Ampere and newer),
//! total energy (mJ) and the cumulative PCIe byte counters.
//!
//! "Not supported" differs per GPU and per driver, and real drivers report it per
//! entry (`nvmlReturn` of each `nvmlFieldValue_t`), not for the call: a field one GPU
//! reports as not supported is never asked of it again in this NVML session, and its
//! value comes from the single getter instead (the caller's fallback). A driver without
//! the function, or that refuses the whole batch as not supported, marks every field.
//!
//! # PCIe throughput
//!
//! `nvmlDeviceGetPcieThroughput` sleeps in the driver for the 20 ms it samples a byte
//! counter over, per direction: 40 ms per GPU per tick, 320 ms of each second on 8 GPUs,
//! for a 20 ms glimpse of the tick. The counters behind it are exposed as field values
//! (`NVML_FI_DEV_PCIE_COUNT_TX_BYTES`/`RX_BYTES`, NVML 12.2+ drivers): read in the same
//! batch, for about the price of one more field, they give the true average over the
//! whole window between two ticks. Where a GPU lacks them the caller takes GPM's PCIe
//! rates (Hopper; already sampled for the GPM fields) or, failing both, reads
//! `nvmlDeviceGetPcieThroughput` on a slow cadence of its own (see [`crate::tiers`]).
//! Counters may wrap: a window where one went backwards gives no rate.

// bindgen's constant names are NVML's C names.
#![allow(non_upper_case_globals)]

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::field_id::*;
use nvml_wrapper_sys::bindings::*;

/// The fields, in the order of a batch's answers: power (mW), total energy since the
/// driver loaded (mJ), the PCIe counters, then the instantaneous power (mW) and the
/// memory temperature (°C) that nvidia-smi's `power.draw.instant` and
/// `temperature.memory` print, which have no getter of their own.
const IDS: [u32; N] = [
    NVML_FI_DEV_POWER_AVERAGE,
    NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
    NVML_FI_DEV_PCIE_COUNT_TX_BYTES,
    NVML_FI_DEV_PCIE_COUNT_RX_BYTES,
    NVML_FI_DEV_POWER_INSTANT,
    NVML_FI_DEV_MEMORY_TEMP,
];
/// How many fields a batch asks for.
const N: usize = 6;
/// Index of the cumulative PCIe bytes sent.
pub const PCIE_TX: usize = 2;
/// Index of the cumulative PCIe bytes received.
pub const PCIE_RX: usize = 3;

/// One field's answer: `None` when it was not asked (not supported: use the getter).
pub type Answer = Option<Result<u64, NvmlError>>;

/// The field-value state of one GPU in one NVML session.
#[derive(Debug, Default)]
pub struct Fields {
    /// Bit `i` set: field `IDS[i]` is not supported on this GPU.
    unsupported: u8,
    /// The PCIe counters (tx, rx) and their timestamp (µs) at the last tick.
    pcie_last: Option<(u64, u64, i64)>,
    /// Timestamp (µs) of the PCIe counters the last batch read.
    pcie_stamp: i64,
}

/// Treats "no such function" and "not supported" alike.
fn unsupported(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::NotSupported | NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)
    )
}

fn blank(id: u32) -> nvmlFieldValue_t {
    nvmlFieldValue_t {
        fieldId: id,
        scopeId: 0,
        timestamp: 0,
        latencyUsec: 0,
        valueType: 0,
        nvmlReturn: 0,
        value: nvmlValue_t { ullVal: 0 },
    }
}

/// An entry's value as an unsigned integer, when it is one.
fn value_of(e: &nvmlFieldValue_t) -> Option<u64> {
    // SAFETY: each arm reads the union member `valueType` says the driver wrote.
    unsafe {
        match e.valueType {
            nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT => Some(u64::from(e.value.uiVal)),
            nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG => Some(e.value.ulVal),
            nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG => Some(e.value.ullVal),
            nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_SHORT => Some(u64::from(e.value.usVal)),
            nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_INT => u64::try_from(e.value.siVal).ok(),
            nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_LONG_LONG => {
                u64::try_from(e.value.sllVal).ok()
            }
            _ => None,
        }
    }
}

/// An entry's value as a number: an unsigned integer's, or a double's (NVML's power
/// smoothing values may come as doubles); `None` for a negative or non-finite one.
fn number_of(e: &nvmlFieldValue_t) -> Option<f64> {
    if e.valueType == nvmlValueType_enum_NVML_VALUE_TYPE_DOUBLE {
        // SAFETY: `valueType` says the driver wrote the double.
        let x = unsafe { e.value.dVal };
        return (x.is_finite() && x >= 0.0).then_some(x);
    }
    value_of(e).map(|x| x as f64)
}

/// Several field values in one call of their own, ids known only at run time (the
/// driver's numbering decides them), each entry with `scopeId` `scope` and read as a
/// number whatever its type (see [`number_of`]): each entry's number or error, in `ids`' order, or
/// the call's error. No call for no ids.
pub fn numbers_scoped(
    nvml: &Nvml,
    device: &Device,
    ids: &[u32],
    scope: u32,
) -> Result<Vec<Result<f64, NvmlError>>, NvmlError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let get = nvml
        .lib()
        .nvmlDeviceGetFieldValues
        .as_ref()
        .map_err(|_| NvmlError::FunctionNotFound)?;
    let mut entries: Vec<nvmlFieldValue_t> = ids
        .iter()
        .map(|&id| nvmlFieldValue_t {
            scopeId: scope,
            ..blank(id)
        })
        .collect();
    let n = i32::try_from(entries.len()).map_err(|_| NvmlError::InvalidArg)?;
    // SAFETY: `get` has the C signature `nvmlReturn_t (nvmlDevice_t, int,
    // nvmlFieldValue_t *)`; the handle is from the live session and `entries` holds `n`
    // initialised, writable entries.
    nvml_try(unsafe { get(device.handle(), n, entries.as_mut_ptr()) })?;
    Ok(entries
        .iter()
        .map(|e| nvml_try(e.nvmlReturn).and_then(|()| number_of(e).ok_or(NvmlError::NotSupported)))
        .collect())
}

/// The entries of one field-value call for `ids`, each with `scopeId` `scope`.
fn entries<const K: usize>(
    nvml: &Nvml,
    device: &Device,
    ids: [u32; K],
    scope: u32,
) -> Result<[nvmlFieldValue_t; K], NvmlError> {
    let get = nvml
        .lib()
        .nvmlDeviceGetFieldValues
        .as_ref()
        .map_err(|_| NvmlError::FunctionNotFound)?;
    let mut entries = ids.map(|id| nvmlFieldValue_t {
        scopeId: scope,
        ..blank(id)
    });
    // SAFETY: `get` has the C signature `nvmlReturn_t (nvmlDevice_t, int,
    // nvmlFieldValue_t *)`; the handle is from the live session and `entries` holds `K`
    // initialised, writable entries.
    nvml_try(unsafe { get(device.handle(), K as i32, entries.as_mut_ptr()) })?;
    Ok(entries)
}

/// One field value in a call of its own (for a slow tier): its value, or the entry's
/// (or the call's) error.
pub fn one(nvml: &Nvml, device: &Device, id: u32) -> Result<u64, NvmlError> {
    let get = nvml
        .lib()
        .nvmlDeviceGetFieldValues
        .as_ref()
        .map_err(|_| NvmlError::FunctionNotFound)?;
    let mut entry = blank(id);
    // SAFETY: `get` has the C signature `nvmlReturn_t (nvmlDevice_t, int,
    // nvmlFieldValue_t *)`; the handle is from the live session and `entry` is one
    // initialised, writable entry.
    nvml_try(unsafe { get(device.handle(), 1, &mut entry) })?;
    nvml_try(entry.nvmlReturn)?;
    value_of(&entry).ok_or(NvmlError::NotSupported)
}

/// Several field values in one call of their own (for a slow tier): each entry's value
/// or error, or the call's error.
pub fn some<const K: usize>(
    nvml: &Nvml,
    device: &Device,
    ids: [u32; K],
) -> Result<[Result<u64, NvmlError>; K], NvmlError> {
    some_scoped(nvml, device, ids, NVML_POWER_SCOPE_GPU)
}

/// [`some`] with each entry's `scopeId` set to `scope` (`NVML_POWER_SCOPE_MODULE` asks
/// the power fields for the whole module of a Grace superchip).
pub fn some_scoped<const K: usize>(
    nvml: &Nvml,
    device: &Device,
    ids: [u32; K],
    scope: u32,
) -> Result<[Result<u64, NvmlError>; K], NvmlError> {
    let entries = entries(nvml, device, ids, scope)?;
    Ok(entries
        .map(|e| nvml_try(e.nvmlReturn).and_then(|()| value_of(&e).ok_or(NvmlError::NotSupported))))
}

impl Fields {
    /// Whether field `i` is still asked of this GPU.
    pub fn supported(&self, i: usize) -> bool {
        self.unsupported & (1 << i) == 0
    }

    /// Reads every field still supported in one call. `Err` only for a failure of
    /// the whole call that is not "not supported" (then no getter should be tried).
    pub fn read(&mut self, nvml: &Nvml, device: &Device) -> Result<[Answer; N], NvmlError> {
        let mut answers: [Answer; N] = Default::default();
        let mut batch = [blank(0); N];
        let mut asked = [0usize; N];
        let mut n = 0;
        for (i, &id) in IDS.iter().enumerate() {
            if self.supported(i) {
                batch[n] = blank(id);
                asked[n] = i;
                n += 1;
            }
        }
        if n == 0 {
            return Ok(answers);
        }
        let result = match nvml.lib().nvmlDeviceGetFieldValues.as_ref() {
            // SAFETY: `get` has the C signature `nvmlReturn_t (nvmlDevice_t, int,
            // nvmlFieldValue_t *)`; the handle is from the live session and `batch` holds
            // `n` (at most N) initialised, writable entries.
            Ok(get) => nvml_try(unsafe { get(device.handle(), n as i32, batch.as_mut_ptr()) }),
            Err(_) => Err(NvmlError::FunctionNotFound),
        };
        match result {
            Ok(()) => {}
            Err(e) if unsupported(&e) => {
                self.unsupported = u8::MAX;
                return Ok(answers);
            }
            Err(e) => return Err(e),
        }
        for (entry, &i) in batch[..n].iter().zip(&asked[..n]) {
            answers[i] = match nvml_try(entry.nvmlReturn) {
                Ok(()) => Some(value_of(entry).ok_or(NvmlError::NotSupported)),
                Err(e) if unsupported(&e) => {
                    self.unsupported |= 1 << i;
                    None
                }
                Err(e) => Some(Err(e)),
            };
            if i == PCIE_TX {
                self.pcie_stamp = entry.timestamp;
            }
        }
        Ok(answers)
    }

    /// PCIe throughput (tx, rx) in KB/s over the window since the last call, from the
    /// counters just read; `None` for the first window, after a wrap, or without them.
    pub fn pcie_rate(&mut self, answers: &[Answer; N]) -> Option<(u32, u32)> {
        let now = match (&answers[PCIE_TX], &answers[PCIE_RX]) {
            (Some(Ok(tx)), Some(Ok(rx))) => Some((*tx, *rx, self.pcie_stamp)),
            _ => None,
        };
        let last = std::mem::replace(&mut self.pcie_last, now);
        rate(last?, now?)
    }

    /// Forgets the kept counters (the GPU failed or slept).
    pub fn forget(&mut self) {
        self.pcie_last = None;
    }
}

/// KB/s (1 KB = 1024 bytes, as NVML's own throughput) between two counter readings.
fn rate((tx0, rx0, t0): (u64, u64, i64), (tx1, rx1, t1): (u64, u64, i64)) -> Option<(u32, u32)> {
    let dt_us = u64::try_from(t1.checked_sub(t0)?).ok().filter(|&d| d > 0)?;
    let per_s = |a: u64, b: u64| -> Option<u32> {
        let bytes = u128::from(b.checked_sub(a)?);
        let kb_s = bytes * 1_000_000 / 1024 / u128::from(dt_us);
        Some(u32::try_from(kb_s).unwrap_or(u32::MAX))
    };
    Some((per_s(tx0, tx1)?, per_s(rx0, rx1)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_kilobytes_per_second_over_the_window() {
        let a = (0, 1024, 1_000_000);
        let b = (2048 * 10, 1024 + 4096, 1_500_000);
        assert_eq!(rate(a, b), Some((40, 8)));
    }

    #[test]
    fn a_counter_that_went_back_or_no_time_gives_no_rate() {
        assert_eq!(rate((10, 10, 0), (5, 20, 1_000_000)), None);
        assert_eq!(rate((10, 10, 5), (20, 20, 5)), None);
        assert_eq!(rate((10, 10, 5), (20, 20, 4)), None);
    }

    #[test]
    fn signed_and_double_values_are_taken_only_when_they_fit() {
        let mut e = blank(1);
        e.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_LONG_LONG;
        e.value.sllVal = -1;
        assert_eq!(value_of(&e), None);
        e.value.sllVal = 7;
        assert_eq!(value_of(&e), Some(7));
        e.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_DOUBLE;
        assert_eq!(value_of(&e), None);
    }

    #[test]
    fn a_number_is_an_unsigned_or_a_double_that_is_finite_and_not_negative() {
        let mut e = blank(1);
        e.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
        e.value.uiVal = 560;
        assert_eq!(number_of(&e), Some(560.0));
        e.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        e.value.ullVal = 4_294_967_295;
        assert_eq!(number_of(&e), Some(4_294_967_295.0));
        e.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_DOUBLE;
        e.value.dVal = 562.5;
        assert_eq!(number_of(&e), Some(562.5));
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            e.value.dVal = bad;
            assert_eq!(number_of(&e), None, "{bad}");
        }
    }
}
