#!/usr/bin/env bash
# The peers `switchyard bench gateway` measures against, from Debian: nginx (proxy_cache with
# proxy_cache_lock) and the load generator wrk. Needs root (or sudo); a no-op where both are
# present.
set -euo pipefail
if command -v wrk >/dev/null 2>&1 && { command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; }; then
  echo "nginx and wrk are installed"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
# nginx-light has proxy_cache; the package's service is not started where there is no init.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nginx-light wrk >/dev/null
echo "installed: $(/usr/sbin/nginx -v 2>&1), $(wrk --version 2>&1 | head -1)"
