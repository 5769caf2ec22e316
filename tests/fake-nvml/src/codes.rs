//! NVML return codes: the names scenarios use for them, and the static
//! messages `nvmlErrorString` hands out.

use std::ffi::CStr;
use std::fmt;

use nvml_wrapper_sys::bindings::*;
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// Shorthand for the success code.
pub const SUCCESS: nvmlReturn_t = nvmlReturn_enum_NVML_SUCCESS;
/// Shorthand for `NVML_ERROR_UNINITIALIZED`.
pub const UNINITIALIZED: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_UNINITIALIZED;
/// Shorthand for `NVML_ERROR_INVALID_ARGUMENT`.
pub const INVALID_ARGUMENT: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
/// Shorthand for `NVML_ERROR_NOT_SUPPORTED`.
pub const NOT_SUPPORTED: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
/// Shorthand for `NVML_ERROR_INSUFFICIENT_SIZE`.
pub const INSUFFICIENT_SIZE: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
/// Shorthand for `NVML_ERROR_NOT_FOUND`.
pub const NOT_FOUND: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
/// Shorthand for `NVML_ERROR_ARGUMENT_VERSION_MISMATCH`.
pub const ARGUMENT_VERSION_MISMATCH: nvmlReturn_t =
    nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
/// Shorthand for `NVML_ERROR_UNKNOWN`.
pub const UNKNOWN: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_UNKNOWN;

/// Every known code: scenario name (without the `NVML_ERROR_` prefix), value,
/// and the message `nvmlErrorString` returns for it.
#[rustfmt::skip]
const TABLE: &[(&str, nvmlReturn_t, &CStr)] = &[
    ("SUCCESS", nvmlReturn_enum_NVML_SUCCESS, c"Success"),
    ("UNINITIALIZED", nvmlReturn_enum_NVML_ERROR_UNINITIALIZED, c"Uninitialized"),
    ("INVALID_ARGUMENT", nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT, c"Invalid Argument"),
    ("NOT_SUPPORTED", nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED, c"Not Supported"),
    ("NO_PERMISSION", nvmlReturn_enum_NVML_ERROR_NO_PERMISSION, c"Insufficient Permissions"),
    ("ALREADY_INITIALIZED", nvmlReturn_enum_NVML_ERROR_ALREADY_INITIALIZED, c"Already Initialized"),
    ("NOT_FOUND", nvmlReturn_enum_NVML_ERROR_NOT_FOUND, c"Not Found"),
    ("INSUFFICIENT_SIZE", nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE, c"Insufficient Size"),
    ("INSUFFICIENT_POWER", nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_POWER, c"Insufficient External Power"),
    ("DRIVER_NOT_LOADED", nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED, c"Driver Not Loaded"),
    ("TIMEOUT", nvmlReturn_enum_NVML_ERROR_TIMEOUT, c"Timeout"),
    ("IRQ_ISSUE", nvmlReturn_enum_NVML_ERROR_IRQ_ISSUE, c"Interrupt Request Issue"),
    ("LIBRARY_NOT_FOUND", nvmlReturn_enum_NVML_ERROR_LIBRARY_NOT_FOUND, c"NVML Shared Library Not Found"),
    ("FUNCTION_NOT_FOUND", nvmlReturn_enum_NVML_ERROR_FUNCTION_NOT_FOUND, c"Function Not Found"),
    ("CORRUPTED_INFOROM", nvmlReturn_enum_NVML_ERROR_CORRUPTED_INFOROM, c"Corrupted infoROM"),
    ("GPU_IS_LOST", nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST, c"GPU is lost"),
    ("RESET_REQUIRED", nvmlReturn_enum_NVML_ERROR_RESET_REQUIRED, c"GPU requires restart"),
    ("OPERATING_SYSTEM", nvmlReturn_enum_NVML_ERROR_OPERATING_SYSTEM, c"The operating system has blocked the request."),
    ("LIB_RM_VERSION_MISMATCH", nvmlReturn_enum_NVML_ERROR_LIB_RM_VERSION_MISMATCH, c"RM has detected an NVML/RM version mismatch."),
    ("IN_USE", nvmlReturn_enum_NVML_ERROR_IN_USE, c"In use by another client"),
    ("MEMORY", nvmlReturn_enum_NVML_ERROR_MEMORY, c"Insufficient Memory"),
    ("NO_DATA", nvmlReturn_enum_NVML_ERROR_NO_DATA, c"No data"),
    ("VGPU_ECC_NOT_SUPPORTED", nvmlReturn_enum_NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, c"The requested vgpu operation is not available on target device, because ECC is enabled"),
    ("INSUFFICIENT_RESOURCES", nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_RESOURCES, c"Insufficient resources"),
    ("FREQ_NOT_SUPPORTED", nvmlReturn_enum_NVML_ERROR_FREQ_NOT_SUPPORTED, c"Frequency not supported"),
    ("ARGUMENT_VERSION_MISMATCH", nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH, c"Argument version mismatch"),
    ("DEPRECATED", nvmlReturn_enum_NVML_ERROR_DEPRECATED, c"Deprecated"),
    ("NOT_READY", nvmlReturn_enum_NVML_ERROR_NOT_READY, c"Not ready"),
    ("GPU_NOT_FOUND", nvmlReturn_enum_NVML_ERROR_GPU_NOT_FOUND, c"GPU not found"),
    ("INVALID_STATE", nvmlReturn_enum_NVML_ERROR_INVALID_STATE, c"Invalid state"),
    ("RESET_TYPE_NOT_SUPPORTED", nvmlReturn_enum_NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, c"Reset type not supported"),
    ("UNKNOWN", nvmlReturn_enum_NVML_ERROR_UNKNOWN, c"Unknown Error"),
];

/// Looks a code up by name. Accepts the bare name (`"GPU_IS_LOST"`) or the
/// full C name (`"NVML_ERROR_GPU_IS_LOST"`, `"NVML_SUCCESS"`), in any case.
pub fn code_from_name(name: &str) -> Option<nvmlReturn_t> {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper
        .strip_prefix("NVML_ERROR_")
        .or_else(|| upper.strip_prefix("NVML_"))
        .unwrap_or(&upper);
    TABLE
        .iter()
        .find(|(n, _, _)| *n == bare)
        .map(|&(_, code, _)| code)
}

/// The bare name of a code (`"GPU_IS_LOST"`), if it is a known one.
pub fn name_of(code: nvmlReturn_t) -> Option<&'static str> {
    TABLE
        .iter()
        .find(|(_, c, _)| *c == code)
        .map(|&(n, _, _)| n)
}

/// The message for a code, as real NVML words it; unknown codes get the
/// message of `NVML_ERROR_UNKNOWN`.
pub fn message(code: nvmlReturn_t) -> &'static CStr {
    TABLE
        .iter()
        .find(|(_, c, _)| *c == code)
        .map_or(c"Unknown Error", |&(_, _, m)| m)
}

/// A return code named in a scenario file: either a name (see
/// [`code_from_name`]) or a plain number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorCode(pub nvmlReturn_t);

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CodeVisitor;

        impl Visitor<'_> for CodeVisitor {
            type Value = ErrorCode;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an NVML error name such as \"GPU_IS_LOST\", or a number")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<ErrorCode, E> {
                code_from_name(v)
                    .map(ErrorCode)
                    .ok_or_else(|| E::custom(format!("unknown NVML error name {v:?}")))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ErrorCode, E> {
                nvmlReturn_t::try_from(v)
                    .map(ErrorCode)
                    .map_err(|_| E::custom(format!("error code {v} out of range")))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ErrorCode, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom(format!("error code {v} is negative")))
                    .and_then(|v| self.visit_u64(v))
            }
        }

        deserializer.deserialize_any(CodeVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_codes() {
        assert_eq!(code_from_name("GPU_IS_LOST"), Some(15));
        assert_eq!(code_from_name("NVML_ERROR_GPU_IS_LOST"), Some(15));
        assert_eq!(code_from_name("not_supported"), Some(3));
        assert_eq!(code_from_name("NVML_SUCCESS"), Some(0));
        assert_eq!(code_from_name("UNKNOWN"), Some(999));
        assert_eq!(code_from_name("NO_SUCH_ERROR"), None);
    }

    #[test]
    fn codes_map_back_to_names_and_messages() {
        for &(name, code, _) in TABLE {
            assert_eq!(name_of(code), Some(name));
            assert_eq!(code_from_name(name), Some(code));
        }
        assert_eq!(message(9), c"Driver Not Loaded");
        assert_eq!(message(12345), c"Unknown Error");
    }

    #[test]
    fn error_code_deserializes_from_name_or_number() {
        let c: ErrorCode = serde_json::from_str("\"DRIVER_NOT_LOADED\"").unwrap();
        assert_eq!(c, ErrorCode(9));
        let c: ErrorCode = serde_json::from_str("15").unwrap();
        assert_eq!(c, ErrorCode(15));
        assert!(serde_json::from_str::<ErrorCode>("\"BOGUS\"").is_err());
        assert!(serde_json::from_str::<ErrorCode>("-1").is_err());
    }
}
