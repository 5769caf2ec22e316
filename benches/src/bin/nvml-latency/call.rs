//! One NVML call ready to be timed: a [`Probe`] is a name and a closure over a raw
//! symbol of the loaded library, its device handle and its own output buffer. The
//! helpers here build probes for the shapes NVML's getters share; `probes.rs` lists the
//! calls; `main.rs` makes the rest (load, init and shutdown, device count, handles).
//!
//! A probe never changes anything on the GPU: only getters are called. Output buffers
//! are zeroed once, written by NVML on every call and never read back (except a field
//! value's own return code), so what a driver writes into them cannot be misread.

use std::mem::{align_of, size_of, MaybeUninit};
use std::os::raw::{c_char, c_int, c_uint};

use nvml_wrapper_sys::bindings::{self as b, nvmlDevice_t, nvmlReturn_t};

/// What a timed call runs: one NVML call, returning its code.
pub type Call<'a> = Box<dyn FnMut() -> nvmlReturn_t + 'a>;

/// A named NVML call, or the reason it cannot be made (`FUNCTION_NOT_FOUND` when the
/// library lacks the symbol).
pub struct Probe<'a> {
    /// Row name: the C function, with its argument in parentheses where it matters.
    pub name: String,
    /// The call, or the code that stands in for its result.
    pub call: Result<Call<'a>, String>,
}

impl<'a> Probe<'a> {
    /// A probe named `name` running `call`.
    pub fn new(name: impl Into<String>, call: Result<Call<'a>, String>) -> Self {
        Probe {
            name: name.into(),
            call,
        }
    }
}

/// The reason shown for an entry point the library does not export.
pub const MISSING: &str = "FUNCTION_NOT_FOUND";

/// `nvmlReturn_t`'s name, as nvml.h spells it without `NVML_` / `NVML_ERROR_`.
pub fn code_name(code: nvmlReturn_t) -> String {
    let name = match code {
        b::nvmlReturn_enum_NVML_SUCCESS => "SUCCESS",
        b::nvmlReturn_enum_NVML_ERROR_UNINITIALIZED => "UNINITIALIZED",
        b::nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT => "INVALID_ARGUMENT",
        b::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED => "NOT_SUPPORTED",
        b::nvmlReturn_enum_NVML_ERROR_NO_PERMISSION => "NO_PERMISSION",
        b::nvmlReturn_enum_NVML_ERROR_ALREADY_INITIALIZED => "ALREADY_INITIALIZED",
        b::nvmlReturn_enum_NVML_ERROR_NOT_FOUND => "NOT_FOUND",
        b::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE => "INSUFFICIENT_SIZE",
        b::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_POWER => "INSUFFICIENT_POWER",
        b::nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED => "DRIVER_NOT_LOADED",
        b::nvmlReturn_enum_NVML_ERROR_TIMEOUT => "TIMEOUT",
        b::nvmlReturn_enum_NVML_ERROR_IRQ_ISSUE => "IRQ_ISSUE",
        b::nvmlReturn_enum_NVML_ERROR_LIBRARY_NOT_FOUND => "LIBRARY_NOT_FOUND",
        b::nvmlReturn_enum_NVML_ERROR_FUNCTION_NOT_FOUND => "FUNCTION_NOT_FOUND",
        b::nvmlReturn_enum_NVML_ERROR_CORRUPTED_INFOROM => "CORRUPTED_INFOROM",
        b::nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST => "GPU_IS_LOST",
        b::nvmlReturn_enum_NVML_ERROR_RESET_REQUIRED => "RESET_REQUIRED",
        b::nvmlReturn_enum_NVML_ERROR_OPERATING_SYSTEM => "OPERATING_SYSTEM",
        b::nvmlReturn_enum_NVML_ERROR_LIB_RM_VERSION_MISMATCH => "LIB_RM_VERSION_MISMATCH",
        b::nvmlReturn_enum_NVML_ERROR_IN_USE => "IN_USE",
        b::nvmlReturn_enum_NVML_ERROR_MEMORY => "MEMORY",
        b::nvmlReturn_enum_NVML_ERROR_NO_DATA => "NO_DATA",
        b::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_RESOURCES => "INSUFFICIENT_RESOURCES",
        b::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH => "ARGUMENT_VERSION_MISMATCH",
        b::nvmlReturn_enum_NVML_ERROR_DEPRECATED => "DEPRECATED",
        b::nvmlReturn_enum_NVML_ERROR_NOT_READY => "NOT_READY",
        b::nvmlReturn_enum_NVML_ERROR_GPU_NOT_FOUND => "GPU_NOT_FOUND",
        b::nvmlReturn_enum_NVML_ERROR_INVALID_STATE => "INVALID_STATE",
        b::nvmlReturn_enum_NVML_ERROR_UNKNOWN => "UNKNOWN",
        other => return format!("code {other}"),
    };
    name.to_owned()
}

/// The symbol behind a `NvmlLib` field, or [`MISSING`].
pub fn sym<F: Copy, E>(field: &Result<F, E>) -> Result<F, String> {
    field.as_ref().map(|f| *f).map_err(|_| MISSING.to_owned())
}

/// `NVML_STRUCT_VERSION(T, v)`: the struct's size in the low bits, `v` in the top byte.
pub fn struct_version<T>(v: u32) -> c_uint {
    let size = u32::try_from(size_of::<T>()).expect("an NVML struct is small");
    size | (v << 24)
}

/// A getter `f(device, &mut out)`.
pub type Get<T> = unsafe extern "C" fn(nvmlDevice_t, *mut T) -> nvmlReturn_t;
/// A getter `f(device, which, &mut out)`.
pub type GetWith<A, T> = unsafe extern "C" fn(nvmlDevice_t, A, *mut T) -> nvmlReturn_t;
/// A string getter `f(device, buffer, length)`.
pub type GetString = unsafe extern "C" fn(nvmlDevice_t, *mut c_char, c_uint) -> nvmlReturn_t;
/// A process list `f(device, &mut count, entries)`.
pub type ProcList<T> = unsafe extern "C" fn(nvmlDevice_t, *mut c_uint, *mut T) -> nvmlReturn_t;
/// `nvmlDeviceGetFieldValues`.
pub type FieldValues =
    unsafe extern "C" fn(nvmlDevice_t, c_int, *mut b::nvmlFieldValue_t) -> nvmlReturn_t;

/// A probe of `f(dev, &mut out)` with `out` a zeroed `T`.
///
/// `f` must be an NVML getter that writes at most one `T` through its pointer and `dev`
/// a handle of the session live while the probe is called (both hold for the typed
/// `NvmlLib` fields and the handles `probes.rs` passes).
pub fn get<'a, T: 'a, E>(name: &str, f: &Result<Get<T>, E>, dev: nvmlDevice_t) -> Probe<'a> {
    let call = sym(f).map(|f| -> Call<'a> {
        let mut out = MaybeUninit::<T>::zeroed();
        Box::new(move || {
            // SAFETY: `f` has the C signature `nvmlReturn_t (nvmlDevice_t, T *)` (the
            // bindings type it so) and writes at most one `T` into `out`, which is valid
            // for that write; `dev` is a handle of the live session (see above).
            unsafe { f(dev, out.as_mut_ptr()) }
        })
    });
    Probe::new(name, call)
}

/// A probe of `f(dev, which, &mut out)`, named `name(label)`; as [`get`].
pub fn get_with<'a, A: Copy + 'a, T: 'a, E>(
    name: &str,
    label: &str,
    f: &Result<GetWith<A, T>, E>,
    dev: nvmlDevice_t,
    which: A,
) -> Probe<'a> {
    let call = sym(f).map(|f| -> Call<'a> {
        let mut out = MaybeUninit::<T>::zeroed();
        Box::new(move || {
            // SAFETY: as in `get`: `f` is typed `nvmlReturn_t (nvmlDevice_t, A, T *)` by
            // the bindings, `which` is a value of its enum argument, `out` is valid for
            // one `T`, and `dev` is a live handle.
            unsafe { f(dev, which, out.as_mut_ptr()) }
        })
    });
    Probe::new(format!("{name}({label})"), call)
}

/// A probe of a string getter, into a 256-byte buffer (more than any NVML string).
pub fn get_string<'a, E>(name: &str, f: &Result<GetString, E>, dev: nvmlDevice_t) -> Probe<'a> {
    let call = sym(f).map(|f| -> Call<'a> {
        let mut buf: [c_char; 256] = [0; 256];
        Box::new(move || {
            // SAFETY: `f` writes at most `length` bytes (a NUL-terminated string) into the
            // buffer, and `length` is the buffer's size; `dev` is a live handle.
            unsafe { f(dev, buf.as_mut_ptr(), 256) }
        })
    });
    Probe::new(name, call)
}

/// Entries a process-list buffer says it has room for.
pub const ROOM_ENTRIES: c_uint = 1024;
/// Bytes per entry in a process-list buffer: more than any version's entry (16, 24, or
/// 32 bytes for the `_v3` of drivers 535.43–535.86; 32 for a detail entry).
const ROOM_ENTRY_BYTES: usize = 64;

/// An 8-byte aligned buffer of [`ROOM_ENTRIES`] × 64 bytes for lists whose entry size
/// depends on the driver: the count passed in is [`ROOM_ENTRIES`], so even an entry
/// twice the largest known size cannot write past it.
pub struct Room(Vec<u64>);

impl Room {
    /// A zeroed buffer.
    pub fn new() -> Self {
        Room(vec![0; ROOM_ENTRIES as usize * ROOM_ENTRY_BYTES / 8])
    }

    /// The buffer as an array of `T` (entries of at most 64 bytes, aligned to at most 8).
    pub fn ptr<T>(&mut self) -> *mut T {
        assert!(size_of::<T>() <= ROOM_ENTRY_BYTES && align_of::<T>() <= 8);
        self.0.as_mut_ptr().cast()
    }
}

/// A probe of a process list `f(dev, &mut count, entries)`, with room for
/// [`ROOM_ENTRIES`] entries of up to 64 bytes each.
pub fn process_list<'a, T: 'a>(
    name: &str,
    f: Result<ProcList<T>, String>,
    dev: nvmlDevice_t,
) -> Probe<'a> {
    let call = f.map(|f| -> Call<'a> {
        let mut room = Room::new();
        Box::new(move || {
            let mut count = ROOM_ENTRIES;
            // SAFETY: `f` is an NVML process list taking `(nvmlDevice_t, unsigned int *,
            // entry *)`; it writes at most `count` entries, and the buffer holds
            // `count` entries of 64 bytes, more than any driver's entry size (the count
            // it returns is never used). `dev` is a live handle.
            unsafe { f(dev, &mut count, room.ptr()) }
        })
    });
    Probe::new(name, call)
}

/// A probe of `nvmlDeviceGetFieldValues` for `ids` (scope 0), named `name`. With one id,
/// the code reported is the field's own (`nvmlFieldValue_t.nvmlReturn`) when the call
/// itself succeeds.
pub fn field_values<'a>(
    name: &str,
    f: Result<FieldValues, String>,
    dev: nvmlDevice_t,
    ids: &[u32],
) -> Probe<'a> {
    let mut values: Vec<b::nvmlFieldValue_t> = ids
        .iter()
        .map(|&id| {
            // SAFETY: nvmlFieldValue_t holds integers and a union of numbers; all zeroes
            // is a valid value of each.
            let mut v: b::nvmlFieldValue_t = unsafe { MaybeUninit::zeroed().assume_init() };
            v.fieldId = id;
            v
        })
        .collect();
    let count = c_int::try_from(values.len()).expect("a handful of field ids");
    let call = f.map(|f| -> Call<'a> {
        Box::new(move || {
            // SAFETY: `f` reads the ids of and writes `count` entries of `values`, which
            // holds exactly `count`; `dev` is a live handle.
            let code = unsafe { f(dev, count, values.as_mut_ptr()) };
            match &values[..] {
                [one] if code == b::nvmlReturn_enum_NVML_SUCCESS => one.nvmlReturn,
                _ => code,
            }
        })
    });
    Probe::new(name, call)
}
