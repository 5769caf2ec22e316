//! Fuzz target: the reader against arbitrary segment bytes and arbitrary header numbers.
//!
//! Each input becomes a segment image (see `gpupeek_e2e::hostile` for the encoding),
//! is put at `/dev/shm/gpupeek-fuzz-PID` with the mode and owner a reader trusts, and is
//! opened and read the way a client does. Any verdict (a snapshot or an error) is fine;
//! a panic, an out-of-bounds access or a signal is a crash.
#![no_main]

use std::sync::OnceLock;

use gpupeek_e2e::hostile;
use libfuzzer_sys::fuzz_target;

fn name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| format!("gpupeek-fuzz-{}", std::process::id()))
}

fuzz_target!(|data: &[u8]| {
    hostile::place(name(), &hostile::image_from_fuzz_input(data));
    let _ = hostile::read_like_a_client(name());
    // Nothing is left in /dev/shm when the fuzzer stops.
    hostile::remove(name());
});
