//! Links `libfake_nvml.so` with `-z nodelete`: `dlclose` (which nvml-wrapper
//! calls whenever an `Nvml` is dropped or fails to init) then leaves it
//! loaded, so call counts and the init reference count cover the whole
//! process instead of restarting at each `dlopen`, and no Rust thread-local
//! destructor can outlive its code.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    println!("cargo:rerun-if-changed=build.rs");
}
