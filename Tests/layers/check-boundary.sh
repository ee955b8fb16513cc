#!/bin/sh
# The decorator boundary (README, Writing a decorator): the runtime and the command line name
# no decorator and no origin (Registry+Standard.swift, the one line per decorator, aside): what
# a decorator offers is found through its factory and the protocols its handler adopts. And
# every module declares in Package.swift the modules it imports.
set -eu
cd "$(dirname "$0")/../.."

status=0

# Code lines only: a comment may give a decorator as an example.
code() {
    find "$@" -name '*.swift' ! -name 'Registry+Standard.swift' -exec grep -HnvE '^[[:space:]]*//' {} +
}

# The public types of the decorators and origins, but the HTTP clients the runtime runs and
# shuts down (the transports of every origin and token endpoint, and their metrics).
types=$(grep -rhoE '^public (final )?(struct|class|enum|actor|protocol) [A-Za-z0-9_]+' Sources/VeneerDecorators Sources/VeneerOrigins \
    | awk '{print $NF}' | grep -vxE 'StandardTransportProvider|UpstreamMetrics' | sort -u)
# The names they are registered under.
names=$(grep -rhA1 -E 'static let factory = (Decorator|Origin)Factory\($' Sources/VeneerDecorators Sources/VeneerOrigins \
    | sed -n 's/^[[:space:]]*name: "\([a-z_]*\)",.*/\1/p' | sort -u)
[ -n "$types" ] && [ -n "$names" ] || { echo "check-boundary: found no decorator types or names to look for"; exit 1; }

for type in $types; do
    if code Sources/VeneerRuntime Sources/veneer | grep -wF "$type"; then
        echo "check-boundary: the runtime or the command line names $type"
        status=1
    fi
done
if code Sources/VeneerRuntime Sources/veneer | grep -E '^[^:]+:[0-9]+:[[:space:]]*import VeneerDecorators'; then
    echo "check-boundary: only Registry+Standard.swift imports the decorators"
    status=1
fi
for name in $names; do
    if code Sources/VeneerRuntime Sources/veneer | grep -F "\"$name\""; then
        echo "check-boundary: the runtime or the command line names the decorator or origin \"$name\""
        status=1
    fi
done

# What a Sources module imports, but the system's own modules.
imports() {
    grep -rhoE '^(@[A-Za-z_]+(\([A-Za-z]+\))? )*import ((struct|class|enum|protocol|typealias|func|var|let) )?[A-Za-z0-9_]+' "Sources/$1" \
        | sed -E 's/.*import ((struct|class|enum|protocol|typealias|func|var|let) )?//' | sort -u \
        | grep -vxE 'Foundation|Glibc|Darwin|Musl|Dispatch|Synchronization'
}

# The names in target $1's dependencies in Package.swift (targets, products and packages).
declared() {
    awk -v target="$1" '
        /^[[:space:]]*targets: \[/ { targets = 1 }
        !targets { next }
        /^[[:space:]]*\.(target|executableTarget|systemLibrary|testTarget)\(/ { inside = 0; deps = 0 }
        !inside && match($0, /name: "[A-Za-z0-9_]+"/) { if (substr($0, RSTART + 7, RLENGTH - 8) == target) inside = 1; next }
        inside && /dependencies: \[/ { deps = 1 }
        inside && deps {
            line = $0
            while (match(line, /"[A-Za-z0-9_-]+"/)) { print substr(line, RSTART + 1, RLENGTH - 2); line = substr(line, RSTART + RLENGTH) }
            if ($0 ~ /\],?[[:space:]]*$/) exit
        }
    ' Package.swift
}

for dir in Sources/*/; do
    module=$(basename "$dir")
    [ -n "$(find "$dir" -name '*.swift' | head -n 1)" ] || continue
    have=" $(declared "$module" | tr '\n' ' ') "
    for imported in $(imports "$module"); do
        case "$have" in
            *" $imported "*) ;;
            *) echo "check-boundary: $module imports $imported, which Package.swift does not declare for it"; status=1 ;;
        esac
    done
done

[ "$status" = 0 ] && echo "check-boundary: the runtime and the command line name no decorator or origin; every module declares what it imports"
exit "$status"
