#!/bin/sh
# Installs the shmbus C API: the libraries from LIBDIR (a cargo profile directory holding
# libshmbus.so and libshmbus.a), include/shmbus.h, the header-only C++ API (include/shmbus.hpp
# and include/shmbus/), the pkg-config file and the CMake package.
#
# The shared library is installed as lib/libshmbus.so.<version> (its soname is
# libshmbus.so.<major>, set by build.rs) with the links lib/libshmbus.so.<major> (what the
# loader looks for) and lib/libshmbus.so (what the linker's -lshmbus finds).
#
#   install.sh PREFIX LIBDIR
#
# Usually run through `make install-c PREFIX=...` (which builds the libraries first).
# DESTDIR is honoured for staged installs (the files still name PREFIX).
set -eu
if [ $# -ne 2 ]; then
  echo "usage: $0 PREFIX LIBDIR" >&2
  exit 2
fi
prefix=$1
libdir=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
dest=${DESTDIR:-}$prefix
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)
major=${version%%.*}
rest=${version#*.}
minor=${rest%%.*}

for f in libshmbus.so libshmbus.a; do
  [ -f "$libdir/$f" ] || { echo "install.sh: $libdir/$f is missing; build it with cargo build -p shmbus-ffi" >&2; exit 1; }
done

install -d "$dest/lib" "$dest/include" "$dest/lib/pkgconfig" "$dest/lib/cmake/shmbus"
install -m 755 "$libdir/libshmbus.so" "$dest/lib/libshmbus.so.$version"
ln -sf "libshmbus.so.$version" "$dest/lib/libshmbus.so.$major"
ln -sf "libshmbus.so.$major" "$dest/lib/libshmbus.so"
install -m 644 "$libdir/libshmbus.a" "$dest/lib/libshmbus.a"
install -m 644 "$root/include/shmbus.h" "$dest/include/shmbus.h"
install -d "$dest/include/shmbus"
install -m 644 "$root/include/shmbus.hpp" "$dest/include/shmbus.hpp"
install -m 644 "$root"/include/shmbus/*.hpp "$dest/include/shmbus/"
sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" "$here/shmbus.pc.in" > "$dest/lib/pkgconfig/shmbus.pc"
sed -e "s|@VERSION@|$version|g" -e "s|@VERSION_MAJOR@|$major|g" \
  "$here/shmbusConfig.cmake.in" > "$dest/lib/cmake/shmbus/shmbusConfig.cmake"
sed -e "s|@VERSION@|$version|g" -e "s|@VERSION_MAJOR@|$major|g" -e "s|@VERSION_MINOR@|$minor|g" \
  "$here/shmbusConfigVersion.cmake.in" > "$dest/lib/cmake/shmbus/shmbusConfigVersion.cmake"
echo "installed the shmbus C API $version into $dest"
