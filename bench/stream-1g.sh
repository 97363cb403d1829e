#!/usr/bin/env bash
# A 1 GiB download through the gateway (issue 38: a body over --max-object-size is carried
# straight through, not read whole): a local origin (Python) makes the body lazily, 1 MiB
# blocks each unlike the others, public for an hour; curl reads it through
# `switchyard gateway serve --origin` and its SHA-256 is checked against the origin's. Prints
# the gateway's resident memory (VmRSS) before, its peak (VmHWM) after, the most /metrics
# showed in flight, and the time, for each body: one with Content-Length, one chunked.
#
#   bench/stream-1g.sh                          # target/release/switchyard
#   SWITCHYARD=/path/to/switchyard bench/stream-1g.sh
#   STREAM_MIB=256 bench/stream-1g.sh           # a smaller body
#
# Needs python3 and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${SWITCHYARD:-target/release/switchyard}
MIB=${STREAM_MIB:-1024}
OPORT=${STREAM_ORIGIN_PORT:-18710}
GPORT=${STREAM_GATEWAY_PORT:-18711}
case ${1:-} in -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac

python3 - "$OPORT" "$MIB" <<'EOF' &
import hashlib, http.server, sys
port, mib = int(sys.argv[1]), int(sys.argv[2])
base = bytes(range(256)) * 4096
def block(i):
    return i.to_bytes(8, "little") + base[8:]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path == "/sha256":
            h = hashlib.sha256()
            for i in range(mib):
                h.update(block(i))
            body = h.hexdigest().encode()
            self.send_response(200); self.send_header("content-length", str(len(body))); self.end_headers()
            self.wfile.write(body); return
        chunked = self.path.startswith("/chunked")
        self.send_response(200)
        self.send_header("cache-control", "public, max-age=3600")
        if chunked:
            self.send_header("transfer-encoding", "chunked")
        else:
            self.send_header("content-length", str(mib << 20))
        self.end_headers()
        for i in range(mib):
            b = block(i)
            if chunked:
                self.wfile.write(b"%x\r\n" % len(b) + b + b"\r\n")
            else:
                self.wfile.write(b)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
EOF
ORIGIN=$!
"$BIN" gateway serve --listen "127.0.0.1:$GPORT" --origin "http://127.0.0.1:$OPORT" --max-memory 256MiB 2>/dev/null &
GW=$!
trap 'kill $ORIGIN $GW 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$GPORT/metrics" >/dev/null 2>&1 && curl -sf "http://127.0.0.1:$OPORT/sha256" >/dev/null 2>&1 && break
  sleep 0.1
done
want=$(curl -sf "http://127.0.0.1:$OPORT/sha256")
kib() { awk -v f="$1" '$1 == f":" {print $2}' "/proc/$GW/status"; }
inflight() {
  curl -sf "http://127.0.0.1:$GPORT/metrics" | awk '$1 == "gateway_streamed_bytes" || $1 == "gateway_buffered_bytes" {s += $2} END {print s + 0}'
}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary: $BIN; body: $MIB MiB"
for path in /big /chunked; do
  before=$(kib VmRSS)
  most=0
  ( while kill -0 $GW 2>/dev/null; do inflight; sleep 0.2; done ) >"/tmp/stream-1g-inflight.$$" 2>/dev/null &
  SAMPLER=$!
  start=$(date +%s.%N)
  got=$(curl -sS --fail "http://127.0.0.1:$GPORT$path" | sha256sum | cut -d' ' -f1) || got="curl failed"
  took=$(echo "$(date +%s.%N) - $start" | bc)
  kill $SAMPLER 2>/dev/null || true
  wait $SAMPLER 2>/dev/null || true
  most=$(sort -n "/tmp/stream-1g-inflight.$$" | tail -1)
  rm -f "/tmp/stream-1g-inflight.$$"
  ok=$([ "$got" = "$want" ] && echo "sha256 matches" || echo "sha256 DIFFERS ($got)")
  printf '%-9s %s; VmRSS before %s MiB, VmHWM after %s MiB; most in flight (/metrics) %s KiB; %.1f s (load %s)\n' \
    "$path" "$ok" "$((before / 1024))" "$(($(kib VmHWM) / 1024))" "$((${most:-0} / 1024))" "$took" "$(cut -d' ' -f1 /proc/loadavg)"
done
