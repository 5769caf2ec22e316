//! The rule of issue 18, kept true mechanically: past the model nobody tests a validity
//! bit or casts a state number. Scans the readers' sources (the client and the template
//! language; the daemon writes records and may use bits) outside their tests, which
//! build raw records as fixtures.

use std::path::{Path, PathBuf};

/// What only the model may write: validity-bit tests and raw state decoding.
const FORBIDDEN: &[&str] = &[
    "valid &",
    "valid !=",
    "from_raw(",
    "gpu_valid",
    "proc_valid",
    "status_valid",
    "history_valid",
    "proc_kind::",
    "clock_event_reason::",
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The lines of `path` that are not test code: all of it before `#[cfg(test)]`, none
/// of a file that is only tests.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    let name = path.file_name().unwrap().to_string_lossy();
    if name == "tests.rs" || name == "testing.rs" {
        return Vec::new();
    }
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(i, l)| (i + 1, l.to_owned()))
        .collect()
}

/// A cast of a state to or from its number: `GpuState::Ok as u32`, `g.state as u32`.
fn casts_a_state(line: &str) -> bool {
    line.split(" as u").next().is_some_and(|before| {
        line.contains(" as u") && (before.ends_with(".state") || before.contains("State::"))
    })
}

#[test]
fn no_reader_tests_a_validity_bit_or_casts_a_state_outside_the_model() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["client/src", "render/src"] {
        sources(&root.join(dir), &mut files);
    }
    assert!(files.len() > 10, "found the sources");
    let mut found = Vec::new();
    for file in &files {
        for (n, line) in code_lines(file) {
            if FORBIDDEN.iter().any(|f| line.contains(f)) || casts_a_state(&line) {
                found.push(format!("{}:{n}: {}", file.display(), line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "decode in gpupeek-model instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_what_it_forbids() {
    assert!(casts_a_state("state: GpuState::Ok as u32,"));
    assert!(casts_a_state("if rec.state as usize == 1 {"));
    assert!(!casts_a_state("let n = shown as u32;"));
}
