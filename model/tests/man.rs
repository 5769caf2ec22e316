//! The man page's field lists are exactly what `examples/gen-man` writes from the field
//! table: a field added, renamed or given another nvidia-smi or Prometheus name without
//! regenerating the page fails here (and so in CI).

use std::path::Path;

#[path = "../examples/gen-man/man.rs"]
mod man;

#[test]
fn the_pages_field_lists_are_what_the_field_table_generates() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(man::PAGE);
    let current = std::fs::read_to_string(path).unwrap();
    for block in man::blocks() {
        let wanted = man::splice(&current, &block).unwrap();
        assert!(
            wanted == current,
            "{} differs from what the field table generates: run `{}`",
            man::PAGE,
            man::COMMAND
        );
    }
}
