//! Which process-list entry point a driver has, the bytes per entry it writes through
//! it, and one call of it (see [`super`] for the table and the sources of the rule).

use std::os::raw::c_uint;

use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{self, nvmlDevice_t, nvmlProcessDetailList_t, nvmlReturn_t};

use gpupeek_shm::layout::proc_kind;

/// `nvmlProcessDetailList_v1`: `NVML_STRUCT_VERSION(ProcessDetailList, 1)` in nvml.h.
const PROCESS_DETAIL_LIST_V1: c_uint =
    (std::mem::size_of::<nvmlProcessDetailList_t>() as c_uint) | (1 << 24);
/// `nvmlProcessDetailList_t.mode` for compute and graphics processes.
const MODE_COMPUTE: c_uint = 0;
const MODE_GRAPHICS: c_uint = 1;

/// The process-list entry points this driver has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Api {
    /// `nvmlDeviceGetRunningProcessDetailList`.
    DetailList,
    /// `nvmlDevice{Compute,Graphics}RunningProcesses_v3`.
    V3,
    /// `…_v2`.
    V2,
    /// `nvmlDevice{Compute,Graphics}RunningProcesses`.
    V1,
}

impl Api {
    pub(super) fn name(self) -> &'static str {
        match self {
            Api::DetailList => "nvmlDeviceGetRunningProcessDetailList",
            Api::V3 => "nvmlDevice{Compute,Graphics}RunningProcesses_v3",
            Api::V2 => "nvmlDevice{Compute,Graphics}RunningProcesses_v2",
            Api::V1 => "nvmlDevice{Compute,Graphics}RunningProcesses",
        }
    }
}

/// Bytes per entry that `nvmlDevice*RunningProcesses_v3` writes on driver `version`
/// (`nvmlSystemGetDriverVersion`): 32 on 535.43 to 535.86, else 24. `None` when the
/// version cannot be read.
pub(super) fn v3_entry_bytes(version: Option<&str>) -> Option<usize> {
    let mut parts = version?.split('.').map(str::parse::<u32>);
    match (parts.next(), parts.next()) {
        (Some(Ok(535)), Some(Ok(minor))) if (43..98).contains(&minor) => Some(32),
        (Some(Ok(_)), Some(Ok(_))) => Some(24),
        _ => None,
    }
}

/// The entry point to use and the bytes per entry it writes, from which symbols the
/// library has (`has`) and the driver version.
pub(super) fn choose(has: impl Fn(Api) -> bool, version: Option<&str>) -> Option<(Api, usize)> {
    if has(Api::DetailList) {
        return Some((Api::DetailList, 32));
    }
    match v3_entry_bytes(version) {
        Some(bytes) if has(Api::V3) => return Some((Api::V3, bytes)),
        None if has(Api::V3) && !has(Api::V2) => return Some((Api::V3, 24)),
        _ => {}
    }
    if has(Api::V2) {
        return Some((Api::V2, 24));
    }
    has(Api::V1).then_some((Api::V1, 16))
}

/// One call of `api`'s `kind` list, NVML's protocol: `count` in is the room at `buf`
/// (null when 0), out the entries written or needed.
pub(super) fn list_call(
    nvml: &Nvml,
    d: &Device,
    api: Api,
    kind: u32,
    buf: *mut u8,
    count: &mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: the raw handle is only passed to NVML, while `d`'s session is open.
    let device: nvmlDevice_t = unsafe { d.handle() };
    let lib = nvml.lib();
    let graphics = kind == proc_kind::GRAPHICS;
    let not_found = bindings::nvmlReturn_enum_NVML_ERROR_FUNCTION_NOT_FOUND;
    // SAFETY (every call below): `device` is a device of the live session, `buf` is null
    // or has room for `*count` entries of the size this driver writes through `api`
    // (see `Buffers::resolve`); NVML writes at most `*count` of them.
    match api {
        Api::DetailList => {
            let Ok(get) = &lib.nvmlDeviceGetRunningProcessDetailList else {
                return not_found;
            };
            let mut list = nvmlProcessDetailList_t {
                version: PROCESS_DETAIL_LIST_V1,
                mode: if graphics {
                    MODE_GRAPHICS
                } else {
                    MODE_COMPUTE
                },
                numProcArrayEntries: *count,
                procArray: buf.cast(),
            };
            // SAFETY: see above; `list` is a live, versioned `nvmlProcessDetailList_t`.
            let r = unsafe { get(device, &mut list) };
            *count = list.numProcArrayEntries;
            r
        }
        Api::V3 => {
            let get = if graphics {
                &lib.nvmlDeviceGetGraphicsRunningProcesses_v3
            } else {
                &lib.nvmlDeviceGetComputeRunningProcesses_v3
            };
            let Ok(get) = get else { return not_found };
            // SAFETY: see above.
            unsafe { get(device, count, buf.cast()) }
        }
        Api::V2 => {
            let get = if graphics {
                &lib.nvmlDeviceGetGraphicsRunningProcesses_v2
            } else {
                &lib.nvmlDeviceGetComputeRunningProcesses_v2
            };
            let Ok(get) = get else { return not_found };
            // SAFETY: see above.
            unsafe { get(device, count, buf.cast()) }
        }
        Api::V1 => {
            let get = if graphics {
                &lib.nvmlDeviceGetGraphicsRunningProcesses
            } else {
                &lib.nvmlDeviceGetComputeRunningProcesses
            };
            let Ok(get) = get else { return not_found };
            // SAFETY: see above.
            unsafe { get(device, count, buf.cast()) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v3_entries_are_32_bytes_only_on_535_43_to_535_86() {
        for (version, bytes) in [
            ("535.43.02", Some(32)),
            ("535.54.03", Some(32)),
            ("535.86.10", Some(32)),
            ("535.98", Some(24)),
            ("535.104.05", Some(24)),
            ("530.41.03", Some(24)),
            ("550.54.15", Some(24)),
            ("garbage", None),
        ] {
            assert_eq!(v3_entry_bytes(Some(version)), bytes, "{version}");
        }
    }

    #[test]
    fn the_newest_entry_point_the_driver_has_is_chosen() {
        let all = |_| true;
        let without = |missing: &'static [Api]| move |api| !missing.contains(&api);
        assert_eq!(choose(all, Some("550.54.15")), Some((Api::DetailList, 32)));
        let no_list = without(&[Api::DetailList]);
        assert_eq!(choose(no_list, Some("535.54.03")), Some((Api::V3, 32)));
        assert_eq!(choose(no_list, Some("535.104.05")), Some((Api::V3, 24)));
        assert_eq!(choose(no_list, None), Some((Api::V2, 24)));
        let r535_98 = without(&[Api::DetailList, Api::V3]);
        assert_eq!(choose(r535_98, Some("535.98")), Some((Api::V2, 24)));
        let r450 = without(&[Api::DetailList, Api::V3, Api::V2]);
        assert_eq!(choose(r450, Some("450.51.06")), Some((Api::V1, 16)));
        assert_eq!(choose(|_| false, None), None);
    }
}
