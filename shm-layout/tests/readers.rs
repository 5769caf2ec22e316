//! The C and Python readers' generated sections are exactly what `examples/gen-readers`
//! writes from the Rust definitions: a field, bit, state or constant changed in shm-layout
//! without regenerating them fails here (and so in CI).

use std::path::Path;

use gpupeek_shm::layout::BIT_SETS;

#[path = "../examples/gen-readers/render.rs"]
mod render;

#[test]
fn committed_reader_layouts_are_what_the_generator_writes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for block in render::blocks() {
        let current = std::fs::read_to_string(root.join(block.path)).unwrap();
        let wanted = render::splice(&current, &block).unwrap();
        assert!(
            wanted == current,
            "{} differs from what shm-layout generates: run `{}`",
            block.path,
            render::COMMAND
        );
    }
}

#[test]
fn splice_replaces_only_the_marked_block() {
    let block = render::Block {
        path: "x",
        begin: "# BEGIN GENERATED",
        end: "# END GENERATED",
        text: "# BEGIN GENERATED new\nA = 2\n# END GENERATED\n".into(),
    };
    let old = "head\n# BEGIN GENERATED old\nA = 1\n# END GENERATED\ntail\n";
    assert_eq!(
        render::splice(old, &block).unwrap(),
        "head\n# BEGIN GENERATED new\nA = 2\n# END GENERATED\ntail\n"
    );
    assert!(render::splice("no markers\n", &block).is_err());
}

#[test]
fn every_field_has_at_most_one_validity_bit() {
    for set in BIT_SETS {
        let mut seen = std::collections::BTreeSet::new();
        for bit in set.bits {
            assert!(
                bit.bit < set.width,
                "{}::{} outside its field",
                set.module,
                bit.name
            );
            for field in bit.fields {
                assert!(seen.insert(*field), "{}: {field} has two bits", set.module);
            }
        }
    }
}
