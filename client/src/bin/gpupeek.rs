//! The `gpupeek` binary: the C runtime enters [`main`] directly (`no_main`, see
//! [`gpupeek::main`] for why), which runs the program of the `gpupeek` library.
#![no_main]

/// The process entry point, called by the C runtime; returns the exit status.
#[no_mangle]
pub extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    gpupeek::main().into()
}
