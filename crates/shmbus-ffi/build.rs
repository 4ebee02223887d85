//! Gives libshmbus.so its soname, `libshmbus.so.<major>` (`libshmbus.so.0`), so programs
//! linked against it record that name (not `libshmbus.so`, nor the path they were linked
//! with) and find it through the loader's search path. `make install-c` installs the library
//! as `libshmbus.so.<version>` with the `libshmbus.so.<major>` and `libshmbus.so` links.

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets CARGO_PKG_VERSION_MAJOR");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libshmbus.so.{major}");
}
