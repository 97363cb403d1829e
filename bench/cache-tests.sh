#!/usr/bin/env bash
# The public HTTP cache test suite (cache-tests.fyi; npm package http-cache-tests, pinned
# below) run through the switchyard gateway and, in the same run, through nginx proxy_cache
# configured as the suite's own docker set-up configures it (proxy_cache_revalidate on). Prints
# the counts by result kind for both, beside the results the suite's release publishes for
# nginx, Squid, Traffic Server, Apache httpd, Varnish, nuster and Fastly, then the ids of every
# required failure and each test nginx passes that the gateway does not.
#
#   bench/cache-tests.sh                # about 1 minute
#   bench/cache-tests.sh --install-only # fetch the suite (and nginx) and stop
#   bench/cache-tests.sh --no-nginx     # the gateway alone
#
# Needs Node.js and npm (the suite is JavaScript) and nginx (bench/install-peers.sh installs
# it). Results are kept in target/cache-tests/*.json. The gateway is run three times: with its
# defaults (no heuristic freshness, the way it ships), with --heuristic 10 (RFC 9111
# §4.2.2's example), since the suite's heuristic tests are "optimal" ones a cache may skip, and
# with --age-reading suite-0.4.5 (0.4.5 contradicts RFC 9111 §5.1 on nine Age tests).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VERSION=0.4.5
SUITE_HOME=target/peers/cache-tests
SUITE=$SUITE_HOME/node_modules/http-cache-tests
OUT=target/cache-tests
PORT=${CACHE_TESTS_PORT:-18000}
install_only=0 nginx=1
for a in "$@"; do
  case $a in
    --install-only) install_only=1 ;;
    --no-nginx) nginx=0 ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $a (see --help)" >&2; exit 2 ;;
  esac
done

command -v node >/dev/null || { echo "cache-tests: Node.js is needed (apt-get install nodejs npm)" >&2; exit 1; }
if [ ! -f "$SUITE/package.json" ] || ! grep -q "\"version\": \"$VERSION\"" "$SUITE/package.json"; then
  mkdir -p "$SUITE_HOME"
  npm install --prefix "$SUITE_HOME" --no-audit --no-fund --loglevel=error "http-cache-tests@$VERSION" >/dev/null
fi
echo "installed: http-cache-tests $VERSION in $SUITE"
if [ $nginx = 1 ]; then bench/install-peers.sh | grep nginx || true; fi
[ $install_only = 1 ] && exit 0

cargo build --release -q -p switchyard
BIN=$ROOT/target/release/switchyard
mkdir -p "$OUT"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
wait_port() {
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "cache-tests: nothing listens on port $1" >&2
  return 1
}

# The suite's origin: it answers as each test's configuration says and counts requests.
(cd "$SUITE" && exec env npm_config_protocol=http npm_config_port=$PORT npm_config_pidfile="$ROOT/$OUT/origin.pid" \
  node server/server.mjs >"$ROOT/$OUT/origin.log" 2>&1) &
pids+=($!)
wait_port "$PORT"

run_suite() { # NAME PORT
  echo "running the suite through $1 (port $2) ..." >&2
  (cd "$SUITE" && npm_config_base="http://127.0.0.1:$2" npm_package_config_id="" node --no-warnings cli.mjs) >"$OUT/$1.json"
}

"$BIN" gateway serve --origin "http://127.0.0.1:$PORT" --listen "127.0.0.1:$((PORT + 3))" >"$OUT/gateway.log" 2>&1 &
pids+=($!)
"$BIN" gateway serve --origin "http://127.0.0.1:$PORT" --listen "127.0.0.1:$((PORT + 4))" --heuristic 10 >"$OUT/gateway-heuristic.log" 2>&1 &
pids+=($!)
# And reading Age as the suite's release 0.4.5 requires, against RFC 9111 §5.1 (nine tests;
# see `switchyard gateway serve --help`, --age-reading): with it, no required failure.
"$BIN" gateway serve --origin "http://127.0.0.1:$PORT" --listen "127.0.0.1:$((PORT + 5))" --age-reading suite-0.4.5 >"$OUT/gateway-age-suite.log" 2>&1 &
pids+=($!)
names=(switchyard switchyard-heuristic-10 switchyard-age-suite-0.4.5)
ports=($((PORT + 3)) $((PORT + 4)) $((PORT + 5)))

if [ $nginx = 1 ]; then
  NGINX=$(command -v nginx || echo /usr/sbin/nginx)
  N=$ROOT/$OUT/nginx
  rm -rf "$N" && mkdir -p "$N/cache" "$N/tmp"
  # The suite's docker/nginx/nginx.conf, inside the http block Debian's nginx.conf sets up.
  cat >"$N/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $N/nginx.pid;
error_log $N/error.log;
events { worker_connections 1024; }
http {
  sendfile on; tcp_nopush on; types_hash_max_size 2048;
  include /etc/nginx/mime.types; default_type application/octet-stream;
  access_log off; gzip on;
  client_body_temp_path $N/tmp/body; proxy_temp_path $N/tmp/proxy; fastcgi_temp_path $N/tmp/fcgi;
  uwsgi_temp_path $N/tmp/uwsgi; scgi_temp_path $N/tmp/scgi;
  proxy_cache_path $N/cache levels=1:2 keys_zone=my-cache:8m max_size=1000m inactive=600m;
  server {
    listen 127.0.0.1:$((PORT + 2));
    location / {
      proxy_pass http://127.0.0.1:$PORT;
      proxy_cache my-cache;
      proxy_cache_revalidate on;
    }
  }
}
CONF
  "$NGINX" -c "$N/nginx.conf" >"$N/out.log" 2>&1 &
  pids+=($!)
  names+=(nginx)
  ports+=($((PORT + 2)))
  echo "nginx: $("$NGINX" -v 2>&1)"
fi
for p in "${ports[@]}"; do wait_port "$p"; done

# One after another: the suite's tests pause 3 s and count on their own timing.
args=()
for i in "${!names[@]}"; do
  run_suite "${names[$i]}" "${ports[$i]}"
  args+=("${names[$i]}=$OUT/${names[$i]}.json")
done
node bench/cache-tests/summarise.mjs "$SUITE" "${args[@]}" --published --goal | grep -v '^json: '
