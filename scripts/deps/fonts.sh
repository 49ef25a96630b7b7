#!/usr/bin/env bash
# A CJK font (Debian's fonts-wqy-zenhei) so that headless Chromium draws Chinese text in the
# screenshots the inbox tests write into docs/ (without one it draws empty boxes; the tests
# pass either way). Skipped when a Chinese font is present.
set -euo pipefail
if fc-list :lang=zh 2>/dev/null | grep -q .; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "fonts.sh: no Chinese font; install Debian's fonts-wqy-zenhei as root" >&2
  exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-wqy-zenhei >/dev/null
