//! Prints the segment ABI (every record's size and every field's offset and size), the
//! text that `tests/layout-v1.golden` pins and `gpupeek-shm(5)` documents.

fn main() {
    print!("{}", gpupeek_shm::pin::describe());
}
