#!/usr/bin/env bash
# Installs the system tools some tests need, if missing: promtool (alert rule tests) and
# Chromium (the operator page's browser test). Debian packages, via apt-get, as root (CI is).
# Idempotent: does nothing when both are already there.
set -euo pipefail

need=()
command -v promtool >/dev/null 2>&1 || need+=(prometheus)   # Debian's prometheus ships promtool
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -f /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ] || need+=(fonts-wqy-microhei)  # Chinese text in the page screenshot

if [ ${#need[@]} -eq 0 ]; then
    echo "install-test-tools: promtool and chromium already installed"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "install-test-tools: need root (or sudo) to apt-get install ${need[*]}" >&2
        exit 1
    fi
fi

echo "install-test-tools: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# --no-install-recommends keeps the prometheus server from pulling in its web UI extras; the
# package still installs a systemd unit, which does nothing in a container without systemd.
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
# Debian starts the prometheus server where an init system runs; the tests need only promtool.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
command -v promtool >/dev/null && [ -x /usr/bin/chromium ]
echo "install-test-tools: done"
