#!/usr/bin/env bash
# Checks the Debian package as a server without Swift would see it:
#   - unpacks veneer_*.deb with dpkg-deb -x into a scratch root;
#   - the binary: stripped (debug symbols in veneer-dbgsym, by build id), no RUNPATH/RPATH,
#     `ldd` resolves every library, none under /opt/swift, only the expected system libraries;
#   - runs `veneer version` and `veneer check --config <scratch>/etc/veneer/veneer.yaml` from
#     the scratch root with an empty environment (env -i PATH=/usr/bin:/bin);
#   - the contents: unit, conffile, docs, manual page, completions, Depends;
#   - lintian reports no error.
#
#   Tests/packaging/check-package.sh [DEB_DIR]
#
# Without DEB_DIR it builds the package first (make deb, which installs dpkg-dev, lintian and
# binutils when missing). Every failed check is reported; the exit status is 1 if any failed.
set -euo pipefail

script="${BASH_SOURCE[0]}"
[[ "$script" == */* ]] || script="./$script"
REPO_ROOT="$(cd "${script%/*}/../.." && pwd)"

if [[ $# -eq 0 ]]; then
    make -C "$REPO_ROOT" --no-print-directory deb
    deb_dir="$REPO_ROOT/.build/deb"
else
    deb_dir="$(cd "$1" && pwd)"
fi

shopt -s nullglob
debs=("$deb_dir"/veneer_*.deb)
dbgsyms=("$deb_dir"/veneer-dbgsym_*.deb)
shopt -u nullglob
[[ ${#debs[@]} -eq 1 ]] || { echo "FAIL: expected one veneer_*.deb in $deb_dir, found ${#debs[@]}" >&2; exit 1; }
deb="${debs[0]}"
for tool in dpkg-deb lintian readelf ldd; do
    command -v "$tool" >/dev/null || { echo "FAIL: $tool is missing (make package-deps installs it)" >&2; exit 1; }
done

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
root="$scratch/root"
dpkg-deb -x "$deb" "$root"
dpkg-deb -e "$deb" "$scratch/DEBIAN"
bin="$root/usr/bin/veneer"

failed=0
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; failed=1; }
# check DESCRIPTION COMMAND...: passes when COMMAND succeeds.
check() {
    local what="$1"; shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}

echo "==> $deb"

# ---- The binary without the toolchain ------------------------------------------------------
dynamic="$(readelf -d "$bin")"
if grep -E '\((RUNPATH|RPATH)\)' <<<"$dynamic"; then
    fail "usr/bin/veneer has a RUNPATH or RPATH (above)"
else
    pass "no RUNPATH or RPATH"
fi

# What a Debian 12 server has without Swift; anything else (the toolchain's libswiftCore,
# libFoundation, ICU, libcurl or libxml2 for FoundationNetworking/FoundationXML) fails here.
allowed='linux-vdso.so.1 ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libstdc++.so.6 libgcc_s.so.1 libyaml-0.so.2 libz.so.1 libdl.so.2 libpthread.so.0 librt.so.1 libutil.so.1'
libs="$(env -i PATH=/usr/bin:/bin ldd "$bin" 2>&1)" || fail "ldd usr/bin/veneer failed: $libs"
sed 's/^/    /' <<<"$libs"
if grep -q 'not found' <<<"$libs"; then fail "ldd: a library is not found"; else pass "ldd: every library found"; fi
if grep -q '/opt/swift' <<<"$libs"; then fail "ldd: a library under /opt/swift"; else pass "ldd: nothing under /opt/swift"; fi
unexpected=""
while read -r name _; do
    [[ -n "$name" ]] || continue
    name="${name##*/}"
    [[ " $allowed " == *" $name "* ]] || unexpected="$unexpected $name"
done <<<"$libs"
if [[ -n "$unexpected" ]]; then fail "ldd: libraries a server without Swift may lack:$unexpected"; else pass "ldd: system libraries only"; fi

sections="$(readelf -S -W "$bin")"
if grep -q '\.debug_info' <<<"$sections"; then fail "usr/bin/veneer is not stripped (.debug_info)"; else pass "stripped"; fi
check "a .gnu_debuglink to veneer.debug" grep -q '\.gnu_debuglink' <<<"$sections"
build_id="$(readelf -n "$bin" | sed -n 's/^ *Build ID: *//p')"
if [[ -z "$build_id" ]]; then
    fail "usr/bin/veneer has no build id"
elif [[ ${#dbgsyms[@]} -ne 1 ]]; then
    fail "expected one veneer-dbgsym_*.deb in $deb_dir, found ${#dbgsyms[@]}"
else
    debug_file="usr/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug"
    dpkg-deb -x "${dbgsyms[0]}" "$scratch/dbgsym"
    if [[ -f "$scratch/dbgsym/$debug_file" ]] \
        && [[ "$(readelf -n "$scratch/dbgsym/$debug_file" 2>/dev/null | sed -n 's/^ *Build ID: *//p')" == "$build_id" ]] \
        && readelf -S -W "$scratch/dbgsym/$debug_file" | grep -q '\.debug_info'; then
        pass "veneer-dbgsym has the debug symbols of this build ($debug_file)"
    else
        fail "veneer-dbgsym lacks $debug_file with this build id and .debug_info"
    fi
fi

# ---- Running it from the scratch root, with an empty environment ---------------------------
run() { (cd "$scratch" && env -i PATH=/usr/bin:/bin "$@"); }
upstream=""
# `veneer version`: the version on the first line, the license on the second.
if version_out="$(run "$bin" version 2>&1)" && [[ "$(head -n 1 <<<"$version_out")" =~ ^veneer\ ([0-9][0-9A-Za-z.+~-]*)$ ]]; then
    upstream="${BASH_REMATCH[1]}"
    pass "veneer version: $(head -n 1 <<<"$version_out")"
else
    fail "veneer version: '$version_out'"
fi
check "veneer version names the license" grep -q 'Apache License, Version 2.0 (Apache-2.0)' <<<"$version_out"

config="$root/etc/veneer/veneer.yaml"
# As systemd runs an instance: credentials and state in the directories it names.
mkdir -p "$scratch/credentials" "$scratch/state"
echo dummy-secret > "$scratch/credentials/client-secret"
echo dummy-refresh-token > "$scratch/credentials/refresh-token"
for environment in production staging; do
    if out="$(run CREDENTIALS_DIRECTORY="$scratch/credentials" STATE_DIRECTORY="$scratch/state" \
            "$bin" check --config "$config" -e "$environment" 2>&1)"; then
        pass "veneer check -e $environment: $out"
    else
        fail "veneer check --config etc/veneer/veneer.yaml -e $environment:"; sed 's/^/    /' <<<"$out"
    fi
done
# The development environment reads its sample posts from /usr/share/veneer: the scratch root
# stands in for / (a copy of the configuration that says so).
sed "s|/usr/share/veneer/|$root/usr/share/veneer/|" "$config" > "$scratch/development.yaml"
if ! grep -q "$root/usr/share/veneer/fixtures/posts.json" "$scratch/development.yaml"; then
    fail "etc/veneer/veneer.yaml does not seed development from /usr/share/veneer/fixtures/posts.json"
elif out="$(run "$bin" check --config "$scratch/development.yaml" -e development 2>&1)"; then
    pass "veneer check -e development: $out"
else
    fail "veneer check -e development (sample posts from the package):"; sed 's/^/    /' <<<"$out"
fi

# ---- Contents -----------------------------------------------------------------------------
for path in usr/bin/veneer lib/systemd/system/veneer@.service lib/systemd/system/veneer@.socket \
    usr/share/doc/veneer/examples/veneer@.socket.d/loopback.conf etc/veneer/veneer.yaml \
    usr/share/veneer/fixtures/posts.json \
    usr/share/doc/veneer/README.md usr/share/doc/veneer/copyright usr/share/doc/veneer/changelog.Debian.gz \
    usr/share/doc/veneer/examples/veneer.yaml usr/share/man/man1/veneer.1.gz \
    usr/share/bash-completion/completions/veneer usr/share/zsh/vendor-completions/_veneer \
    usr/share/fish/vendor_completions.d/veneer.fish; do
    check "/$path" test -s "$root/$path"
done
if [[ -e "$root/usr/lib/debug" ]]; then fail "usr/lib/debug belongs in veneer-dbgsym"; else pass "no debug files in veneer"; fi

check "/etc/veneer/veneer.yaml is a conffile" grep -qx /etc/veneer/veneer.yaml "$scratch/DEBIAN/conffiles"
unit="$root/lib/systemd/system/veneer@.service"
check "the unit runs /usr/bin/veneer" grep -q '^ExecStart=/usr/bin/veneer run ' "$unit"
if grep -n '/usr/local' "$unit"; then fail "the unit still names /usr/local (above)"; else pass "no /usr/local in the unit"; fi
doc_url="$(sed -n 's|^Documentation=file://||p' "$unit")"
check "the unit's Documentation= ($doc_url) is in the package" test -n "$doc_url" -a -f "$root$doc_url"
socket_unit="$root/lib/systemd/system/veneer@.socket"
socket_doc="$(sed -n 's|^Documentation=file://||p' "$socket_unit")"
check "the socket unit's Documentation= ($socket_doc) is in the package" test -n "$socket_doc" -a -f "$root$socket_doc"
for line in 'ListenStream=/run/veneer/%i.sock' 'SocketGroup=veneer-clients' 'SocketMode=0660'; do
    check "the socket unit has $line" grep -q -x -F "$line" "$socket_unit"
done
check "postinst creates the group veneer-clients" grep -q 'groupadd --system veneer-clients' "$scratch/DEBIAN/postinst"

control="$scratch/DEBIAN/control"
depends="$(sed -n 's/^Depends: //p' "$control")"
check "Depends ($depends) has libyaml-0-2" grep -qE '(^|, )libyaml-0-2( |,|$)' <<<"$depends"
check "Depends has libc6" grep -qE '(^|, )libc6 ' <<<"$depends"
# A binary with RELR relocations starts only with glibc 2.36 or later (GLIBC_ABI_DT_RELR).
if readelf -V "$root/usr/bin/veneer" 2>/dev/null | grep -q GLIBC_ABI_DT_RELR; then
    libc="$(sed -nE 's/(^|.*, )libc6 \(>= ([^)]+)\).*/\2/p' <<<"$depends")"
    check "Depends asks libc6 (>= 2.36) for RELR relocations (it asks $libc)" dpkg --compare-versions "${libc:-0}" ge 2.36
fi
check "Depends has passwd (postinst's groupadd)" grep -qE '(^|, )passwd( |,|$)' <<<"$depends"
package_version="$(sed -n 's/^Version: //p' "$control")"
check "Version $package_version is the binary's $upstream with a Debian revision" \
    test -n "$upstream" -a "${package_version%-*}" == "$upstream"

check "the manual page is veneer(1)" sh -c 'gzip -dc "$1" | grep -q "^\.Dt VENEER 1"' sh "$root/usr/share/man/man1/veneer.1.gz"
check "the manual page names the license" sh -c 'gzip -dc "$1" | tr -s " \n" " " | grep -q "Apache License, Version 2.0"' sh "$root/usr/share/man/man1/veneer.1.gz"
check "copyright: Veneer's own files are Apache-2.0" \
    awk '/^Files: \*$/ { own = 1; next } own && /^License:/ { exit ($2 == "Apache-2.0" ? 0 : 1) }' "$root/usr/share/doc/veneer/copyright"
check "copyright points to the common licenses" grep -q '/usr/share/common-licenses/Apache-2.0' "$root/usr/share/doc/veneer/copyright"
check "the bash completion completes veneer" \
    env -i PATH=/usr/bin:/bin bash -c 'source "$1" && complete -p veneer >/dev/null' bash "$root/usr/share/bash-completion/completions/veneer"
check "the zsh completion is for veneer" grep -qx '#compdef veneer' "$root/usr/share/zsh/vendor-completions/_veneer"
check "the fish completion is for veneer" grep -qx "complete -c 'veneer' -f" "$root/usr/share/fish/vendor_completions.d/veneer.fish"

# ---- lintian ------------------------------------------------------------------------------
# Errors fail; warnings and notes are printed. Overrides (with their reasons) are in the package.
echo "==> lintian"
lint="$(lintian "$deb" 2>&1 | grep -v 'running with root privileges' || true)"
[[ -z "$lint" ]] || sed 's/^/    /' <<<"$lint"
if grep -q '^E: ' <<<"$lint"; then fail "lintian reports errors"; else pass "lintian: no error"; fi

if [[ $failed -ne 0 ]]; then
    echo "check-package: FAILED"
    exit 1
fi
echo "check-package: $(basename "$deb") passed"
