//! Writes, or checks, the generated sections of the C and Python readers
//! (`contrib/c/gpupeek.h`, `contrib/python/gpupeek.py`) from the Rust definitions of the
//! segment, so that the records, bits, states and constants are declared once, in
//! shm-layout, and the readers cannot drift from them.
//!
//! ```text
//! cargo run -p gpupeek-shm --example gen-readers -- --write   # rewrite the blocks
//! cargo run -p gpupeek-shm --example gen-readers -- --check   # exit 1 if one differs
//! ```
//!
//! `cargo test -p gpupeek-shm --test readers` runs the same check.

use std::path::Path;
use std::process::ExitCode;

mod render;

fn main() -> ExitCode {
    let write = match std::env::args().nth(1).as_deref() {
        Some("--write") => true,
        Some("--check") | None => false,
        Some(other) => {
            eprintln!("gen-readers: unknown argument {other:?}; use --write or --check");
            return ExitCode::from(2);
        }
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut stale = false;
    for block in render::blocks() {
        let path = root.join(block.path);
        let current = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("gen-readers: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        };
        let wanted = match render::splice(&current, &block) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("gen-readers: {e}");
                return ExitCode::FAILURE;
            }
        };
        if wanted == current {
            continue;
        }
        if write {
            if let Err(e) = std::fs::write(&path, wanted) {
                eprintln!("gen-readers: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
            println!("gen-readers: rewrote {}", block.path);
        } else {
            eprintln!(
                "gen-readers: {} is not what shm-layout generates",
                block.path
            );
            stale = true;
        }
    }
    if stale {
        eprintln!("gen-readers: run `{}`", render::COMMAND);
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
