#!/usr/bin/env bash
# Prometheus and promtool (Debian's prometheus package) for the alert-rule and scrape tests;
# skipped when present. The tests start their own server (127.0.0.1, a temp config): the
# package's service is never started here.
set -euo pipefail
if [ -x /usr/bin/prometheus ] && [ -x /usr/bin/promtool ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "prometheus.sh: prometheus/promtool are missing; install Debian's prometheus package as root" >&2
  exit 1
fi
apt-get update -qq
# policy-rc.d or no systemd: the package's service is not started (and need not be)
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
/usr/bin/promtool --version | head -n 1
