#!/usr/bin/env bash
# Headless Chromium (Debian's package) for the HTML report tests; skipped when present.
# The tests drive it with the Python playwright package (executable_path=/usr/bin/chromium);
# 'playwright install' is never run: it would download a browser build of its own.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "chromium.sh: /usr/bin/chromium is missing; install Debian's chromium package as root" >&2
  exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
/usr/bin/chromium --version
