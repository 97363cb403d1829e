#!/usr/bin/env bash
# Instructions a cache hit costs the gateway (issue 38's hit path), counted by valgrind's
# callgrind: a count, unlike a rate, does not move with the machine's load, so builds can be
# compared on a busy machine. A local origin (Python) answers 1,000 keys with 1 KB bodies,
# public for an hour; each binary given serves them under callgrind, is warmed with every key
# (misses), has its counters zeroed, then serves wrk's requests over those keys for SECS
# seconds (all hits). Prints instructions per hit for each binary, and their ratio to the first.
#
#   bench/hit-instructions.sh OLD_BINARY NEW_BINARY   # e.g. a copy of an older build, then ours
#   HIT_SECS=30 bench/hit-instructions.sh target/release/switchyard
#   HIT_ARGS="--access-log /tmp/hits.log" bench/hit-instructions.sh target/release/switchyard
#                                           # more `gateway serve` flags (the access log's cost)
#
# Needs valgrind, wrk, curl and python3 (bench/install-peers.sh installs wrk and valgrind).
set -euo pipefail
case ${1:-} in -h | --help | "") sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
SECS=${HIT_SECS:-20}
OPORT=${HIT_ORIGIN_PORT:-18720}
GPORT=${HIT_GATEWAY_PORT:-18721}
for tool in valgrind callgrind_control callgrind_annotate wrk curl python3; do
  command -v "$tool" >/dev/null || { echo "hit-instructions: $tool is not installed (bench/install-peers.sh)" >&2; exit 2; }
done
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
cat > "$work/origin.py" <<PY
import http.server, socketserver
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = b"x" * 1024
        self.send_response(200)
        self.send_header("Cache-Control", "public, max-age=3600")
        self.send_header("ETag", '"%d"' % len(self.path))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
S(("127.0.0.1", $OPORT), H).serve_forever()
PY
cat > "$work/keys.lua" <<'LUA'
local i = 0
request = function()
  i = (i + 1) % 1000
  return wrk.format("GET", "/k/" .. i)
end
LUA
for i in $(seq 0 999); do printf 'url = "http://127.0.0.1:%s/k/%s"\noutput = "/dev/null"\n' "$GPORT" "$i"; done > "$work/warm.cfg"
python3 "$work/origin.py" & pids+=($!)
first=""
for bin in "$@"; do
  out="$work/cg.out"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" gateway serve \
    --origin "http://127.0.0.1:$OPORT" --listen "127.0.0.1:$GPORT" ${HIT_ARGS:-} >/dev/null 2>&1 &
  vg=$!
  pids+=("$vg")
  for _ in $(seq 120); do curl -s -o /dev/null "http://127.0.0.1:$GPORT/k/0" && break; sleep 1; done
  curl -s -K "$work/warm.cfg"
  callgrind_control -z "$vg" >/dev/null
  hits=$(wrk -t1 -c8 -d"${SECS}s" -s "$work/keys.lua" "http://127.0.0.1:$GPORT/" | awk '/requests in/ {print $1}')
  callgrind_control -d "$vg" >/dev/null
  kill -INT "$vg"; wait "$vg" || true
  ir=$(for f in "$out".*; do callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'; done | awk '{s += $1} END {print s}')
  rm -f "$out"*
  per=$((ir / hits))
  first=${first:-$per}
  awk -v b="$bin" -v h="$hits" -v p="$per" -v f="$first" 'BEGIN { printf "%s: %d hits, %d instructions a hit, %.3f x the first\n", b, h, p, p / f }'
done
