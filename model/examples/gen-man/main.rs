//! Writes, or checks, the generated blocks of `man/gpupeek.1` from the field table
//! (`gpupeek_model::FIELDS`), so the page's field lists cannot drift from the fields
//! the outputs publish.
//!
//! ```text
//! cargo run -p gpupeek-model --example gen-man -- --write   # rewrite the blocks
//! cargo run -p gpupeek-model --example gen-man -- --check   # exit 1 if one differs
//! ```
//!
//! `cargo test -p gpupeek-model --test man` runs the same check.

use std::path::Path;
use std::process::ExitCode;

mod man;

fn main() -> ExitCode {
    let write = match std::env::args().nth(1).as_deref() {
        Some("--write") => true,
        Some("--check") | None => false,
        Some(other) => {
            eprintln!("gen-man: unknown argument {other:?}; use --write or --check");
            return ExitCode::from(2);
        }
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(man::PAGE);
    let current = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("gen-man: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    };
    let mut wanted = current.clone();
    for block in man::blocks() {
        match man::splice(&wanted, &block) {
            Ok(text) => wanted = text,
            Err(e) => {
                eprintln!("gen-man: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if wanted == current {
        return ExitCode::SUCCESS;
    }
    if !write {
        eprintln!(
            "gen-man: {} is not what the field table generates: run `{}`",
            man::PAGE,
            man::COMMAND
        );
        return ExitCode::FAILURE;
    }
    if let Err(e) = std::fs::write(&path, wanted) {
        eprintln!("gen-man: {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    println!("gen-man: rewrote {}", man::PAGE);
    ExitCode::SUCCESS
}
