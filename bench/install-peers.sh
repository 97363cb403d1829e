#!/usr/bin/env bash
# The peers the benchmarks measure against. From Debian: nginx (proxy_cache with
# proxy_cache_lock) and the load generator wrk for `bench gateway` and `bench deliver`;
# redis-server for `bench jobs`; varnish for `bench memory`; ndpiReader (libndpi-bin) for `bench inspect --peer ndpi`;
# tcpreplay for live capture; curl and openssl for the gateway's TLS and HTTP/2 tests, and
# h2load (nghttp2-client) for `bench gateway`'s HTTP/2 rows; GoAccess and jq read the gateway's access
# log in its tests (combined format and JSON lines); ffmpeg (with ffprobe) for `bench transcode`. From PyPI, into target/peers/venv: Celery with its Redis
# client, the task queue `bench jobs` runs beside the jobs coordinator. Needs root (or sudo)
# for the Debian packages; a no-op where everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }
if ! { have wrk && have nginx && have redis-server && have ndpiReader && have tcpreplay && have varnishd && have valgrind && have curl && have openssl && have h2load && have goaccess && have jq && have ffmpeg; }; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  # nginx-light has proxy_cache; the packages' services are not started where there is no init.
  # libndpi-bin: ndpiReader (nDPI 4.2), the DPI peer of `bench inspect --peer ndpi`; tcpreplay
  # replays captures onto an interface for `inspect --interface`'s tests; varnish (varnishd,
# Varnish 7.1) for `bench memory`, run as a process of the bench's own (no service started).
  # nginx-light is built with http_ssl and http_v2, the gateway's peer over TLS.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nginx-light wrk redis-server libndpi-bin tcpreplay varnish valgrind curl openssl nghttp2-client goaccess jq ffmpeg >/dev/null
fi
echo "installed: $(/usr/sbin/nginx -v 2>&1), $(wrk --version 2>&1 | head -1), $(redis-server --version | cut -d' ' -f1-3)"
echo "installed: $(curl --version | head -1 | cut -d' ' -f1-2), $(openssl version | cut -d' ' -f1-2), $(h2load --version | head -1), $(goaccess --version | head -1), $(jq --version)"
echo "installed: ndpiReader $(dpkg-query -W -f='${Version}' libndpi-bin), $(tcpreplay --version 2>&1 | head -1), $(/usr/sbin/varnishd -V 2>&1 | head -1)"
VENV=target/peers/venv
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import celery, redis, packaging, kombu; assert kombu.__version__ == '5.4.2'" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "celery==5.4.0" "kombu==5.4.2" "redis==5.2.1" packaging
fi
echo "installed: celery $("$VENV/bin/python" -c 'import celery; print(celery.__version__)') in $VENV"
