#!/bin/sh
# Takes docs/status-page.png: the README walkthrough's offline environment after a few
# requests (one of them broken on purpose), as headless chromium shows its status page.
# A second Veneer serving the mock's sample posts stands in for staging. Loopback only.
#   docs/screenshot.sh [VENEER_BINARY]
set -eu
veneer=$(realpath "${1:-.build/debug/veneer}")
out=$(realpath docs)/status-page.png
work=$(mktemp -d)
trap 'kill $staging $desk 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
mkdir config
# The walkthrough's YAML block, as the README has it.
awk '/^## Walkthrough/{w=1} w&&/^```yaml/{y=1;next} y&&/^```/{exit} y' "$OLDPWD/README.md" > config/veneer.yaml
printf 'environments:\n  development:\n    origin: { mock: { sample: true } }\n' > staging.yaml
"$veneer" run --config staging.yaml --listen 127.0.0.1:18480 2>/dev/null & staging=$!
STAGING_URL=http://127.0.0.1:18480 "$veneer" run -e staging --listen 127.0.0.1:18481 2>/dev/null & desk=$!
sleep 1
get() { curl -s -o /dev/null "$@"; }
get localhost:18481/posts/1; get 'localhost:18481/posts?userId=1'; get localhost:18481/posts/2
"$veneer" switch offline -e staging >/dev/null
get localhost:18481/posts/1; get localhost:18481/posts/1; get localhost:18481/posts/2; get localhost:18481/posts/3
get -X DELETE localhost:18481/posts/1
get 'localhost:18481/posts?userId=1' -H 'Veneer-Fault: status=503'
get localhost:18481/posts/3 -H 'Veneer-Fault: delay=150ms'
get localhost:18481/posts/1
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/profile" --window-size=1280,900 \
  --screenshot="$out" http://127.0.0.1:18481/-/ 2>/dev/null
echo "wrote $out"
