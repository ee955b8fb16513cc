#!/usr/bin/env bash
# Turns a tree staged by `make install PREFIX=/usr ...` (what `make deb` does) into
# veneer_VERSION_ARCH.deb and veneer-dbgsym_VERSION_ARCH.deb with dpkg-deb alone (no
# debhelper): control files from packaging/debian/, Depends from dpkg-shlibdeps, the detached
# debug symbols (under usr/lib/debug) moved to the -dbgsym package, as Debian's own builds do.
#
#   packaging/build-deb.sh STAGED_ROOT OUTPUT_DIR
#
# The upstream version is the one `veneer version` prints on its first line; the Debian revision is the latest
# entry of packaging/debian/changelog, whose upstream part must match the binary's.
set -euo pipefail

die() { echo "build-deb: $*" >&2; exit 1; }

[[ $# -eq 2 ]] || die "usage: $0 STAGED_ROOT OUTPUT_DIR"
root="$(cd "$1" && pwd)"
mkdir -p "$2"
out="$(cd "$2" && pwd)"
packaging="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
debian="$packaging/debian"

for tool in dpkg-deb dpkg-shlibdeps dpkg-parsechangelog readelf; do
    command -v "$tool" >/dev/null || die "$tool is missing (make package-deps installs it)"
done
[[ -x "$root/usr/bin/veneer" ]] || die "$root/usr/bin/veneer is missing: stage the tree with make install first"

upstream="$("$root/usr/bin/veneer" version | awk 'NR == 1 { print $2 }')"
version="$(dpkg-parsechangelog -l "$debian/changelog" -S Version)"
[[ "${version%-*}" == "$upstream" ]] \
    || die "packaging/debian/changelog's latest entry is $version but the binary is $upstream: add an entry for $upstream-1"
arch="$(dpkg --print-architecture)"
dbgroot="$(mktemp -d)"
shlibs="$(mktemp -d)"
trap 'rm -rf "$dbgroot" "$shlibs"' EXIT
# Every file's time is the changelog entry's: the same sources give the same package.
export SOURCE_DATE_EPOCH="$(dpkg-parsechangelog -l "$debian/changelog" -S Timestamp)"

doc="$root/usr/share/doc/veneer"
install -d "$doc"
install -m 0644 "$debian/copyright" "$doc/copyright"
# Debian states the license in copyright (Apache-2.0, pointing to /usr/share/common-licenses):
# a second copy of its text in the package is what lintian calls an extra license file.
rm -f "$doc/LICENSE"
gzip -9n < "$debian/changelog" > "$doc/changelog.Debian.gz"
install -D -m 0644 "$debian/lintian-overrides" "$root/usr/share/lintian/overrides/veneer"

# The debug file goes to its own package; the binary names it by build id and debuglink.
build_id="$(readelf -n "$root/usr/bin/veneer" | sed -n 's/^ *Build ID: *//p')"
[[ -n "$build_id" ]] || die "usr/bin/veneer has no build id"
[[ -f "$root/usr/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug" ]] \
    || die "usr/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug is missing"
install -d "$dbgroot/usr/lib" "$dbgroot/usr/share/doc"
mv "$root/usr/lib/debug" "$dbgroot/usr/lib/debug"
rmdir --ignore-fail-on-non-empty "$root/usr/lib"
ln -s veneer "$dbgroot/usr/share/doc/veneer-dbgsym"

# dpkg-shlibdeps reads debian/control of a source tree, and knows a package's root by its DEBIAN.
mkdir "$shlibs/debian"
printf 'Source: veneer\n\nPackage: veneer\nArchitecture: any\n' > "$shlibs/debian/control"
install -d "$root/DEBIAN"
depends="$(cd "$shlibs" && dpkg-shlibdeps -O "$root/usr/bin/veneer" | sed -n 's/^shlibs:Depends=//p')"
[[ -n "$depends" ]] || die "dpkg-shlibdeps found no dependencies"
# RELR relocations (make release links with -z pack-relative-relocs) need glibc 2.36: the
# binary asks for the version GLIBC_ABI_DT_RELR, which has no symbol, so dpkg-shlibdeps does
# not see it and would let the package install where the binary cannot start.
if readelf -V "$root/usr/bin/veneer" | grep -q 'GLIBC_ABI_DT_RELR'; then
    libc="$(sed -nE 's/(^|.*, )libc6 \(>= ([^)]+)\).*/\2/p' <<<"$depends")"
    [[ -n "$libc" ]] || die "Depends ($depends) has no libc6 (>= VERSION) to raise to 2.36 for RELR"
    if dpkg --compare-versions "$libc" lt 2.36; then
        depends="$(sed -E "s/(^|, )libc6 \\(>= $libc\\)/\\1libc6 (>= 2.36)/" <<<"$depends")"
    fi
fi
# postinst creates the group veneer-clients with groupadd (passwd is not essential).
depends="$depends, passwd"

# Modes as Debian expects them, whatever the umask of the build was.
normalize() {
    find "$1" -type d -exec chmod 0755 {} +
    find "$1" -type f -exec chmod 0644 {} +
}

# installed_size ROOT: the size dpkg-gencontrol would compute, in KiB.
installed_size() { du -s -k --apparent-size --exclude=DEBIAN "$1" | cut -f1; }

# control TEMPLATE ROOT DEPENDS: DEBIAN/control from a template.
control() {
    sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@DEPENDS@|$3|" \
        -e "s|@INSTALLED_SIZE@|$(installed_size "$2")|" -e "s|@BUILD_ID@|$build_id|" "$1"
}

# package ROOT NAME: DEBIAN/md5sums, the build, a line for the log.
package() {
    local tree="$1" file="$out/${2}_${version}_${arch}.deb"
    (cd "$tree" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) \
        > "$tree/DEBIAN/md5sums"
    chmod 0644 "$tree/DEBIAN/md5sums"
    find "$tree" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
    dpkg-deb --root-owner-group -Zxz --build "$tree" "$file" >/dev/null
    echo "built $file ($(du -h "$file" | cut -f1))"
}

normalize "$root"
chmod 0755 "$root/usr/bin/veneer"
control "$debian/control.in" "$root" "$depends" > "$root/DEBIAN/control"
# Every file under /etc is the administrator's to edit: a conffile.
(cd "$root" && find etc -type f -printf '/%p\n' | LC_ALL=C sort) > "$root/DEBIAN/conffiles"
install -m 0755 "$debian/postinst" "$debian/postrm" "$root/DEBIAN/"
package "$root" veneer

normalize "$dbgroot"
install -d "$dbgroot/DEBIAN"
control "$debian/dbgsym-control.in" "$dbgroot" "veneer (= $version)" > "$dbgroot/DEBIAN/control"
package "$dbgroot" veneer-dbgsym
