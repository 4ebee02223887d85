//! Gives libshmbus.so its soname, so programs linked against it record `libshmbus.so` (not
//! the path they were linked with) and find it through the loader's search path.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libshmbus.so");
}
