#!/usr/bin/env bash
# Checks the systemd units under systemd/:
#   - systemd-analyze verify                                 (syntax, directives, ExecStart)
#   - systemd-analyze security --offline=yes --threshold=20  (hardening; exposure must be <= 2.0)
#   - each socket unit, verified with the service it activates (and with the drop-in examples
#     of systemd/examples/NAME.socket.d/ folded in), and the production layout it promises:
#     the socket under /run/veneer, group veneer-clients, mode 0660
#
# Runs from any directory. Exits 0 with "skipped" when systemd-analyze is missing.
# Set VENEER_BINARY to verify ExecStart against a real veneer binary; otherwise
# /usr/local/bin/veneer is replaced by an existing stand-in (true) in a temporary copy.
set -euo pipefail

THRESHOLD="${THRESHOLD:-20}"
script="${BASH_SOURCE[0]}"
[[ "$script" == */* ]] || script="./$script"
REPO_ROOT="$(cd "${script%/*}/../.." && pwd)"

# Resolve a relative VENEER_BINARY against the caller's directory, before cd.
stand_in="${VENEER_BINARY:-$(type -P true || true)}"
if [[ -n "$stand_in" && "$stand_in" != /* ]]; then
    stand_in="$PWD/$stand_in"
fi

cd "$REPO_ROOT"

if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "skipped: systemd-analyze not found"
    exit 0
fi
echo "using $(systemd-analyze --version | head -n1)"

if [[ -z "$stand_in" || ! -f "$stand_in" || ! -x "$stand_in" ]]; then
    echo "FAIL: ExecStart stand-in '$stand_in' is not an executable file" >&2
    exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

shopt -s nullglob
units=(systemd/*.service)
if [[ ${#units[@]} -eq 0 ]]; then
    echo "FAIL: no systemd/*.service files found in $REPO_ROOT" >&2
    exit 1
fi

failed=0
for unit in "${units[@]}"; do
    name="${unit##*/}"
    # A template (foo@.service) is verified as an instance (foo@test.service).
    verify_name="${name/@./@test.}"
    copy="$tmp/$verify_name"
    # Point ExecStart at a binary that exists so verify does not complain about it.
    sed "s#/usr/local/bin/veneer#${stand_in}#g" "$unit" > "$copy"

    echo "==> systemd-analyze verify $unit (as $verify_name, ExecStart binary -> $stand_in)"
    out="$tmp/verify.out"
    # --man=no: Documentation= points at an installed README, not a man page.
    if systemd-analyze verify --man=no "$copy" >"$out" 2>&1; then
        rc=0
    else
        rc=$?
    fi
    # Drop known harmless noise: template/instance-name complaints and messages about
    # units other than ours (e.g. the host's own unit files when systemd is not PID 1).
    problems="$(grep -v -E 'Failed to prepare filename|instance name' "$out" \
                | grep -F "$verify_name" || true)"
    [[ -s "$out" ]] && sed 's/^/    /' "$out"
    if [[ $rc -ne 0 || -n "$problems" ]]; then
        echo "FAIL: verify $unit (exit $rc)"
        failed=1
    else
        echo "ok: verify $unit"
    fi

    echo "==> systemd-analyze security --offline=yes --threshold=$THRESHOLD $unit"
    if systemd-analyze security --offline=yes --threshold="$THRESHOLD" --no-pager "$unit" >"$out" 2>&1; then
        rc=0
    else
        rc=$?
    fi
    grep -E 'Overall exposure' "$out" | sed 's/^/    /' || true
    if [[ $rc -ne 0 ]]; then
        grep -v -E '^✓' "$out" | sed 's/^/    /'
        echo "FAIL: security $unit (exit $rc, threshold $THRESHOLD)"
        failed=1
    else
        echo "ok: security $unit"
    fi
done

# ---- Socket units: the socket-activated service -------------------------------------------
sockets=(systemd/*.socket)
for unit in "${sockets[@]}"; do
    name="${unit##*/}"
    instance="${name/@./@test.}"
    service="${instance%.socket}.service"
    dir="$tmp/sockets"
    rm -rf "$dir" && mkdir -p "$dir"
    sed "s#/usr/local/bin/veneer#${stand_in}#g" "systemd/${name%.socket}.service" > "$dir/$service"
    variants=("$unit")
    for dropin in systemd/examples/"$name".d/*.conf; do variants+=("$dropin"); done
    for variant in "${variants[@]}"; do
        # A drop-in's [Socket] lines are folded into the unit (verify reads no drop-in folder).
        if [[ "$variant" == "$unit" ]]; then cp "$unit" "$dir/$instance"; else
            { sed '/^\[Install\]/,$d' "$unit"; grep -v -E '^\s*(#|\[Socket\]|$)' "$variant"; sed -n '/^\[Install\]/,$p' "$unit"; } > "$dir/$instance"
        fi
        echo "==> systemd-analyze verify $variant (with $service)"
        out="$tmp/verify.out"
        if (cd "$dir" && systemd-analyze verify --man=no "$instance" "$service") >"$out" 2>&1; then rc=0; else rc=$?; fi
        problems="$(grep -v -E 'Failed to prepare filename|instance name' "$out" | grep -F -e "$instance" -e "$service" || true)"
        [[ -s "$out" ]] && sed 's/^/    /' "$out"
        if [[ $rc -ne 0 || -n "$problems" ]]; then echo "FAIL: verify $variant (exit $rc)"; failed=1; else echo "ok: verify $variant"; fi
    done
    for line in 'ListenStream=/run/veneer/%i.sock' 'SocketGroup=veneer-clients' 'SocketMode=0660'; do
        if grep -q -x -F "$line" "$unit"; then echo "ok: $unit has $line"; else echo "FAIL: $unit lacks $line"; failed=1; fi
    done
    if grep -q -x -F 'ListenStream=127.0.0.1:8080' systemd/examples/"$name".d/*.conf; then
        echo "ok: a drop-in example adds 127.0.0.1:8080"
    else
        echo "FAIL: no drop-in example in systemd/examples/$name.d/ adds 127.0.0.1:8080"; failed=1
    fi
done

if [[ $failed -ne 0 ]]; then
    echo "check-units: FAILED"
    exit 1
fi
echo "check-units: all $(( ${#units[@]} + ${#sockets[@]} )) unit(s) passed"
