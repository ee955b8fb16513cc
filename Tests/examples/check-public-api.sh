#!/bin/sh
# Examples/NAME holds decorators written outside Veneer, each a package of its own that depends
# on Veneer's library products. `make test` builds and tests their sources as targets of
# Veneer's own package (no second build of the whole graph), where they could use what is
# `package` to Veneer; this type-checks the same sources as an outside module would see Veneer:
# against the modules that build made, without Veneer's package name, so that a use of
# anything `package` or `internal` fails here. Seconds, after the build.
set -eu
cd "$(dirname "$0")/../.."
SWIFT=${SWIFT:-swift}
SWIFTC=${SWIFTC:-swiftc}

bin=$($SWIFT build --show-bin-path)
[ -d "$bin/Modules" ] || { echo "check-public-api: no build in $bin: run swift build --build-tests first" >&2; exit 1; }
# The C modules the Swift ones were built against: SwiftPM's generated maps, the packages' own
# include/ maps, and Veneer's system libraries.
maps=$( (ls "$bin"/*.build/module.modulemap Sources/C*/module.modulemap
         find .build/checkouts -path '*/Sources/*/module.modulemap' ! -path '*/Benchmarks/*') \
        | sed 's/^/-Xcc -fmodule-map-file=/')

status=0
for example in Examples/*/; do
    for part in "$example"Sources/* "$example"Tests/*; do
        [ -d "$part" ] || continue
        module=$(basename "$part")
        # shellcheck disable=SC2086 # one flag per map
        if $SWIFTC -typecheck -swift-version 6 -module-name "$module" -I "$bin/Modules" $maps "$part"/*.swift; then
            echo "check-public-api: $part uses Veneer's public API only"
        else
            echo "check-public-api: $part uses what an outside package cannot see" >&2
            status=1
        fi
    done
done
exit "$status"
