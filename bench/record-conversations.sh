#!/usr/bin/env bash
# Records real conversations between Debian's clients and servers into a capture written by
# tcpdump: the test data of `switchyard inspect` on traffic it did not generate (issue 21).
#
# In a network namespace of its own (nothing else on its loopback), it starts nginx (HTTP/1.1,
# h2c, and TLS with a self-signed certificate), dnsmasq, redis-server, memcached, mosquitto,
# sshd, Python's SMTP debugging server, vsftpd, tftpd-hpa, snmpd, chronyd, Dovecot (IMAP and
# POP3), ngIRCd, git daemon and PostgreSQL (where its server is installed), microsocks (SOCKS 5),
# stund (classic STUN, RFC 3489: no magic cookie) and SIPp as a SIP user agent server; runs curl,
# dig, redis-cli, mosquitto_pub, ssh, tftp, snmpget, sntp, psql, git, logger (syslog), curl
# through the SOCKS 5 proxy, stun (RFC 3489's client), SIPp's call (INVITE, ACK, BYE) and Python
# clients against them while tcpdump listens; then labels each connection by
# the server's port (not by its payload) into a CSV that `switchyard inspect --labels` reads.
#
# Then, into a second capture (OUT_PREFIX-more), the protocols of issue 39: DNS over TLS and over
# HTTPS (dig +tls, dig +https against unbound), QUIC versions 1 and 2, drafts 29 and 32 and a
# version negotiation (aioquic 1.x and 0.9 from PyPI, in venvs under target/), Modbus/TCP (pymodbus), OpenVPN in TLS mode over UDP and TCP, and with
# tls-auth and tls-crypt (with --dev null: no tunnel device needed), WireGuard (wireguard-go, userspace), IKEv2 (strongSwan's
# charon and charon-cmd: IKE_SA_INIT and IKE_AUTH, and IKEv1's Main Mode, over UDP 4500; this
# kernel has no ESP, so no CHILD_SA is installed), NFSv4 (nfs-ganesha, userspace, and libnfs's nfs-cat and nfs-ls), and a SIP call
# with RTP (SIPp's uac_pcap playing its G.711 and RFC 2833 captures, the server echoing them)
# and one over TCP.
# Needs root and the packages below (installed if missing). About a minute once installed. Usage:
#   bench/record-conversations.sh [OUT_PREFIX]   (default data/traces/conversations)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-data/traces/conversations}"
need=(tcpdump:tcpdump dig:bind9-dnsutils dnsmasq:dnsmasq-base memcached:memcached mosquitto:mosquitto
  mosquitto_pub:mosquitto-clients sshd:openssh-server nginx:nginx-light redis-server:redis-server curl:curl
  vsftpd:vsftpd in.tftpd:tftpd-hpa tftp:tftp-hpa snmpd:snmpd snmpget:snmp chronyd:chrony sntp:sntp
  psql:postgresql-client dovecot:dovecot-imapd /usr/lib/dovecot/pop3:dovecot-pop3d ngircd:ngircd
  microsocks:microsocks stund:stun-server stun:stun-client sipp:sip-tester
  unbound:unbound openvpn:openvpn wireguard-go:wireguard-go wg:wireguard-tools /usr/lib/ipsec/charon:strongswan-charon
  swanctl:strongswan-swanctl charon-cmd:charon-cmd pki:strongswan-pki
  /usr/lib/ipsec/plugins/libstrongswan-openssl.so:libstrongswan-standard-plugins ganesha.nfsd:nfs-ganesha
  /usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so:nfs-ganesha-vfs nfs-cat:libnfs-utils
  /usr/lib/python3/dist-packages/pymodbus:python3-pymodbus
  /usr/lib/python3/dist-packages/serial_asyncio:python3-serial-asyncio /usr/lib/python3/ensurepip:python3-venv)
missing=()
for pair in "${need[@]}"; do
  bin="${pair%%:*}"
  command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/sbin/$bin" ] || [ -e "$bin" ] || missing+=("${pair#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
cargo build --release -q -p switchyard
# aioquic is not in Debian 12: from PyPI, into a venv of Debian's Python under target/.
venv="$PWD/target/rec-venv"
[ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import aioquic' 2>/dev/null ||
  { /usr/bin/python3 -m venv "$venv" && "$venv/bin/pip" install -q aioquic; }
# aioquic before 1.0 (0.9.25) still speaks the IETF drafts 29–32, which real networks still carry.
venv_draft="$PWD/target/rec-venv-draft"
[ -x "$venv_draft/bin/python" ] && "$venv_draft/bin/python" -c 'import aioquic' 2>/dev/null ||
  { /usr/bin/python3 -m venv "$venv_draft" && "$venv_draft/bin/pip" install -q 'aioquic<1'; }
ns="syrec$$"
work="$(mktemp -d)"
chmod 755 "$work"
pg_bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
cleanup() {
  if [ -n "$pg_bin" ] && [ -d "$work/pg" ]; then
    runuser -u postgres -- "$pg_bin/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true
  fi
  ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
  sleep 0.3
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns"
ip -n "$ns" link set lo up
# An address besides loopback's: servers that look up their address with AI_ADDRCONFIG
# (tftpd-hpa) find none on a namespace with loopback alone, and exit.
ip -n "$ns" link add syrec-a type veth peer name syrec-b
ip -n "$ns" addr add 10.99.0.1/24 dev syrec-a
ip -n "$ns" link set syrec-a up
ip -n "$ns" link set syrec-b up
# stund answers from a second address (RFC 3489 §8.1's CHANGE-REQUEST).
ip -n "$ns" addr add 10.99.0.2/24 dev syrec-b
in_ns() { ip netns exec "$ns" "$@"; }

# Servers.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
mkdir -p "$work/www" && echo "hello from nginx" >"$work/www/index.html"
cat >"$work/nginx.conf" <<EOF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/error.log;
user root;
events { worker_connections 64; }
http {
  access_log off;
  server { listen 127.0.0.1:8080; root $work/www; }
  server { listen 127.0.0.1:8082 http2; root $work/www; }
  server {
    listen 127.0.0.1:8443 ssl http2;
    ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3;
    root $work/www;
  }
}
EOF
in_ns /usr/sbin/nginx -c "$work/nginx.conf"
in_ns /usr/sbin/dnsmasq --port=53 --listen-address=127.0.0.1 --bind-interfaces --no-resolv --no-hosts \
  --address=/example.org/192.0.2.7 --pid-file="$work/dnsmasq.pid" --user=root
in_ns redis-server --port 6379 --save '' --appendonly no --daemonize yes --logfile "$work/redis.log" >/dev/null
in_ns memcached -u root -l 127.0.0.1 -p 11211 -U 0 -d
in_ns /usr/sbin/mosquitto -p 1883 -d
mkdir -p /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$work/hostkey"
in_ns /usr/sbin/sshd -p 2222 -h "$work/hostkey" -o PidFile="$work/sshd.pid" -o ListenAddress=127.0.0.1
in_ns python3 -W ignore -c '
import smtpd, asyncore
smtpd.DebuggingServer(("127.0.0.1", 2525), None)
asyncore.loop()' >/dev/null 2>&1 &
mkdir -p "$work/ftp" /var/run/vsftpd/empty && echo "hello over ftp" >"$work/ftp/hello.txt"
printf '%s\n' listen=YES listen_ipv6=NO listen_address=127.0.0.1 listen_port=2121 anonymous_enable=YES \
  "anon_root=$work/ftp" no_anon_password=YES local_enable=NO background=YES \
  secure_chroot_dir=/var/run/vsftpd/empty >"$work/vsftpd.conf"
in_ns /usr/sbin/vsftpd "$work/vsftpd.conf"
mkdir -p "$work/tftp" && echo "hello over tftp" >"$work/tftp/hello.txt"
in_ns /usr/sbin/in.tftpd --listen --address 127.0.0.1:69 --secure "$work/tftp"
echo "rocommunity public 127.0.0.1" >"$work/snmpd.conf"
in_ns /usr/sbin/snmpd -C -c "$work/snmpd.conf" -Lf /dev/null -p "$work/snmpd.pid" udp:127.0.0.1:161
printf '%s\n' "allow 127.0.0.1" "local stratum 8" "port 123" "cmdport 0" "pidfile $work/chronyd.pid" >"$work/chrony.conf"
in_ns /usr/sbin/chronyd -f "$work/chrony.conf" -x
if [ -n "$pg_bin" ] && [ -x "$pg_bin/initdb" ]; then
  mkdir -p "$work/pg" && chown postgres "$work/pg"
  runuser -u postgres -- "$pg_bin/initdb" -A trust -U postgres -D "$work/pg" >/dev/null
  in_ns runuser -u postgres -- "$pg_bin/pg_ctl" -D "$work/pg" -l "$work/pg/server.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p 5432 -k $work/pg" start >/dev/null
fi
# Dovecot, IMAP on 1143 and POP3 on 1110, one static user whose mail lives in the work
# directory (Dovecot refuses to deliver as root, so as nobody).
mkdir -p "$work/mail/box/Maildir/"{cur,new,tmp} "$work/dovecot"
printf 'From: a@example.org\nSubject: hi\n\nhello\n' >"$work/mail/box/Maildir/new/1.mail"
chown -R nobody "$work/mail"
cat >"$work/dovecot.conf" <<EOF
protocols = imap pop3
listen = 127.0.0.1
base_dir = $work/dovecot
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain
log_path = $work/dovecot.log
passdb {
  driver = static
  args = password=secret
}
userdb {
  driver = static
  args = uid=nobody gid=nogroup home=$work/mail/box
}
mail_location = maildir:~/Maildir
service imap-login {
  inet_listener imap {
    port = 1143
  }
}
service pop3-login {
  inet_listener pop3 {
    port = 1110
  }
}
EOF
in_ns /usr/sbin/dovecot -c "$work/dovecot.conf"
# ngIRCd on 6667.
cat >"$work/ngircd.conf" <<EOF
[Global]
Name = irc.example.org
Info = switchyard recording
Listen = 127.0.0.1
Ports = 6667
PidFile = $work/ngircd.pid
ServerUID = nobody
ServerGID = nogroup
[Options]
Ident = no
PAM = no
DNS = no
EOF
in_ns /usr/sbin/ngircd -f "$work/ngircd.conf"
# git daemon on 9418, serving one repository.
git init -q --bare "$work/git/repo.git"
in_ns git daemon --export-all --base-path="$work/git" --listen=127.0.0.1 --port=9418 --reuseaddr --detach \
  --pid-file="$work/git.pid"
in_ns microsocks -i 127.0.0.1 -p 1080 >/dev/null 2>&1 &
in_ns stund -h 10.99.0.1 -a 10.99.0.2 -b >/dev/null 2>&1
# With -bg, SIPp leaves its server running and exits 99.
in_ns sipp -sn uas -i 127.0.0.1 -p 5060 -bg >/dev/null 2>&1 || true
sleep 1

# The conversations, recorded.
in_ns tcpdump -q -i lo -w "$out.pcap" -U 'tcp or udp' 2>/dev/null &
sleep 1
in_ns curl -s -o /dev/null http://127.0.0.1:8080/
in_ns curl -s -o /dev/null --http2-prior-knowledge http://127.0.0.1:8082/
in_ns curl -sk -o /dev/null https://localhost:8443/
in_ns curl -sk -o /dev/null --tls-max 1.2 --http1.1 https://localhost:8443/
in_ns dig +short @127.0.0.1 example.org A >/dev/null
in_ns dig +short +tcp @127.0.0.1 example.org A >/dev/null
in_ns redis-cli -p 6379 SET greeting hello >/dev/null
in_ns redis-cli -p 6379 GET greeting >/dev/null
in_ns mosquitto_pub -p 1883 -t switchyard/test -m hello
in_ns python3 -c '
import socket
s = socket.create_connection(("127.0.0.1", 11211))
s.sendall(b"set greeting 0 0 5\r\nhello\r\nget greeting\r\n")
s.recv(4096); s.close()'
in_ns ssh -p 2222 -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null nobody@127.0.0.1 true 2>/dev/null || true
in_ns curl -s -o /dev/null ftp://127.0.0.1:2121/hello.txt
(cd "$work" && in_ns tftp 127.0.0.1 69 -c get hello.txt "$work/got.txt")
in_ns snmpget -v2c -c public -On 127.0.0.1:161 1.3.6.1.2.1.1.1.0 >/dev/null
in_ns sntp 127.0.0.1 >/dev/null 2>&1 || true
if [ -n "$pg_bin" ]; then in_ns psql -h 127.0.0.1 -p 5432 -U postgres -c 'select 1' >/dev/null; fi
in_ns python3 -c '
import smtplib
with smtplib.SMTP("127.0.0.1", 2525) as s:
    s.sendmail("a@example.org", ["b@example.org"], "Subject: hi\r\n\r\nhello\r\n")'
in_ns curl -s -o /dev/null -u box:secret 'imap://127.0.0.1:1143/INBOX;UID=1'
in_ns curl -s -o /dev/null -u box:secret pop3://127.0.0.1:1110/1
in_ns python3 -c '
import socket, time
s = socket.create_connection(("127.0.0.1", 6667))
s.sendall(b"NICK switchyard\r\nUSER switchyard 0 * :Switchyard\r\n")
time.sleep(0.5); s.sendall(b"QUIT :bye\r\n"); s.recv(65536); s.close()'
in_ns git ls-remote git://127.0.0.1:9418/repo.git >/dev/null 2>&1 || true
in_ns logger --server 127.0.0.1 --port 514 --udp --rfc5424 "hello from switchyard's recording"
in_ns curl -s -o /dev/null --socks5-hostname 127.0.0.1:1080 http://127.0.0.1:8080/
in_ns curl -s -o /dev/null --socks5 127.0.0.1:1080 http://127.0.0.1:8080/
in_ns timeout 10 stun 10.99.0.1 >/dev/null 2>&1 || true
in_ns timeout 20 sipp -sn uac 127.0.0.1:5060 -i 127.0.0.1 -p 5061 -m 1 -nostdin >/dev/null 2>&1 || true
sleep 1
in_ns pkill -INT tcpdump || true
sleep 0.5

# The protocols of issue 39, into a second capture, with servers of their own.
more="$out-more"
# DNS over TLS (853) and over HTTPS (443), unbound answering from local data.
cat >"$work/unbound.conf" <<UEOF
server:
  interface: 127.0.0.1@853
  interface: 127.0.0.1@443
  tls-port: 853
  https-port: 443
  tls-service-key: "$work/key.pem"
  tls-service-pem: "$work/cert.pem"
  http-notls-downstream: no
  username: ""
  chroot: ""
  directory: "$work"
  pidfile: "$work/unbound.pid"
  use-syslog: no
  logfile: "$work/unbound.log"
  do-daemonize: yes
  access-control: 127.0.0.0/8 allow
  local-zone: "example.org." static
  local-data: "example.org. A 192.0.2.7"
UEOF
in_ns unbound -c "$work/unbound.conf"
# QUIC (aioquic, from PyPI in a venv) on UDP 4433 (versions 1 and 2), and aioquic 0.9 on 4434
# (version 1 and drafts 29–32).
in_ns "$venv/bin/python" "$PWD/bench/quic_peer.py" server 4433 "$work/cert.pem" "$work/key.pem" >"$work/quic.log" 2>&1 &
in_ns "$venv_draft/bin/python" "$PWD/bench/quic_peer.py" server 4434 "$work/cert.pem" "$work/key.pem" >"$work/quic-draft.log" 2>&1 &
# Modbus/TCP (pymodbus) on 502.
in_ns /usr/bin/python3 "$PWD/bench/modbus_peer.py" server 502 >"$work/modbus.log" 2>&1 &
# OpenVPN in TLS mode, peer to peer, with no tunnel device (--dev null): over UDP and TCP on
# 1194, and over UDP with its control channel wrapped, by tls-auth's HMAC on 1195 and by
# tls-crypt on 1196.
openvpn --genkey secret "$work/ta.key"
ovpn=(--dev null --dh none --ca "$work/cert.pem" --cert "$work/cert.pem" --key "$work/key.pem" --verb 1)
for p in "udp 1194" "tcp-server 1194" "udp 1195 --tls-auth $work/ta.key 0" "udp 1196 --tls-crypt $work/ta.key"; do
  set -- $p
  in_ns openvpn "${ovpn[@]}" --proto "$1" --local 127.0.0.1 --lport "$2" --tls-server "${@:3}" \
    --log "$work/openvpn-$1-$2.log" --daemon 2>/dev/null
done
# WireGuard (wireguard-go, userspace: no kernel module needed) on 51820.
wg0="sywg$$a" wg1="sywg$$b"
wg genkey >"$work/wg0.key"; wg genkey >"$work/wg1.key"
in_ns wireguard-go -f "$wg0" >/dev/null 2>&1 &
in_ns wireguard-go -f "$wg1" >/dev/null 2>&1 &
sleep 1
in_ns wg set "$wg0" private-key "$work/wg0.key" listen-port 51820 \
  peer "$(wg pubkey <"$work/wg1.key")" allowed-ips 10.201.0.2/32
in_ns ip link set "$wg0" up
# SIPp answering calls on 5070 and echoing their RTP (media port 6100: the first
# capture's SIPp holds 6000); its uac_pcap scenario
# plays pcap/g711a.pcap and pcap/dtmf_2833_*.pcap from the directory it runs in.
in_ns sipp -sn uas -i 127.0.0.1 -p 5070 -mp 6100 -rtp_echo -bg >/dev/null 2>&1 || true
# And a call over TCP (RFC 3261 §18), without media, on 5072.
in_ns sipp -sn uas -t t1 -i 127.0.0.1 -p 5072 -mp 6200 -bg >/dev/null 2>&1 || true
sleep 1

# IKEv2 (strongSwan): charon answering on 500/4500, charon-cmd initiating from 1500/14500;
# certificates from strongSwan's pki. This kernel has no ESP, so the CHILD_SA is not
# installed: the exchange (IKE_SA_INIT, IKE_AUTH) is what is recorded.
mkdir -p "$work/ike"
pki --gen --type rsa --size 2048 --outform pem >"$work/ike/ca.key"
pki --self --ca --lifetime 2 --in "$work/ike/ca.key" --dn "CN=switchyard ca" --outform pem >"$work/ike/ca.pem"
for who in server client; do
  pki --gen --type rsa --size 2048 --outform pem >"$work/ike/$who.key"
  pki --pub --in "$work/ike/$who.key" | pki --issue --lifetime 2 --cacert "$work/ike/ca.pem" --cakey "$work/ike/ca.key" \
    --dn "CN=$who" --san "$who" --outform pem >"$work/ike/$who.pem"
done
cat >"$work/ike/strongswan.conf" <<IEOF
charon {
  port = 500
  port_nat_t = 4500
  install_routes = no
  # The control sockets of stroke, error-notify and lookip would be left in /var/run.
  plugins {
    vici { socket = unix://$work/ike/charon.vici }
    stroke { load = no }
    error-notify { load = no }
    lookip { load = no }
  }
  filelog { log { path = $work/ike/charon.log  default = 1 } }
}
charon-cmd {
  port = 1500
  port_nat_t = 14500
  install_routes = no
}
IEOF
mkdir -p "$work/ike/swanctl/"{x509,x509ca,private}
cp "$work/ike/ca.pem" "$work/ike/swanctl/x509ca/"; cp "$work/ike/server.pem" "$work/ike/swanctl/x509/"
cp "$work/ike/server.key" "$work/ike/swanctl/private/"
cat >"$work/ike/swanctl/swanctl.conf" <<IEOF
connections {
  rw {
    local { auth = pubkey  certs = server.pem  id = server }
    remote { auth = pubkey }
    children { net { local_ts = 10.202.0.0/24 } }
  }
}
IEOF
in_ns env STRONGSWAN_CONF="$work/ike/strongswan.conf" /usr/lib/ipsec/charon >/dev/null 2>&1 &
sleep 1.5
in_ns env STRONGSWAN_CONF="$work/ike/strongswan.conf" SWANCTL_DIR="$work/ike/swanctl" swanctl --load-all --file "$work/ike/swanctl/swanctl.conf" \
  --uri "unix://$work/ike/charon.vici" >/dev/null 2>&1
# NFSv4 (nfs-ganesha, userspace: no kernel server here) on 2049, exporting a directory through
# its VFS backend; libnfs's nfs-ls and nfs-cat as the client.
mkdir -p "$work/nfs/export" && echo "hello over nfs" >"$work/nfs/export/hello.txt"
cat >"$work/nfs/ganesha.conf" <<NEOF
NFS_CORE_PARAM { Protocols = 4; NFS_Port = 2049; Bind_addr = 127.0.0.1; Enable_NLM = false; Enable_RQUOTA = false; }
NFSV4 { Graceless = true; }
EXPORT_DEFAULTS { Access_Type = RW; Squash = No_Root_Squash; SecType = sys; }
EXPORT { Export_Id = 1; Path = $work/nfs/export; Pseudo = /export; Protocols = 4; Transports = TCP; FSAL { Name = VFS; } }
NEOF
in_ns ganesha.nfsd -F -f "$work/nfs/ganesha.conf" -L "$work/nfs/ganesha.log" -p "$work/nfs/ganesha.pid" >/dev/null 2>&1 &
sleep 3

# The second capture's conversations, recorded.
in_ns tcpdump -q -i lo -w "$more.pcap" -U 'tcp or udp' 2>/dev/null &
sleep 1
in_ns dig +short +tls @127.0.0.1 example.org A >/dev/null || echo "record-conversations: dig +tls failed" >&2
in_ns dig +short +https @127.0.0.1 example.org A >/dev/null || echo "record-conversations: dig +https failed" >&2
in_ns timeout 20 "$venv/bin/python" "$PWD/bench/quic_peer.py" client 4433 - - VERSION_1 VERSION_2 || echo "record-conversations: QUIC client failed" >&2
in_ns timeout 20 "$venv_draft/bin/python" "$PWD/bench/quic_peer.py" client 4434 - - DRAFT_29 DRAFT_32 ||
  echo "record-conversations: QUIC draft client failed" >&2
# Draft 29 to a server of versions 1 and 2 alone: its answer is a Version Negotiation packet
# (RFC 9000 §17.2.1), and the client gives up (ConnectionError, as expected).
in_ns timeout 10 "$venv_draft/bin/python" "$PWD/bench/quic_peer.py" client 4433 - - DRAFT_29 >/dev/null 2>&1 || true
in_ns timeout 20 /usr/bin/python3 "$PWD/bench/modbus_peer.py" client 502 || echo "record-conversations: Modbus client failed" >&2
for p in "udp 1194" "tcp-client 1194" "udp 1195 --tls-auth $work/ta.key 1" "udp 1196 --tls-crypt $work/ta.key"; do
  set -- $p
  in_ns timeout 4 openvpn "${ovpn[@]}" --proto "$1" --remote 127.0.0.1 "$2" --nobind --tls-client "${@:3}" \
    --log "$work/openvpn-client-$1-$2.log" 2>/dev/null || true
done
# The initiator's persistent keepalive opens the handshake as soon as its peer is set.
in_ns wg set "$wg1" private-key "$work/wg1.key" \
  peer "$(wg pubkey <"$work/wg0.key")" allowed-ips 10.201.0.1/32 endpoint 127.0.0.1:51820 persistent-keepalive 1
in_ns ip link set "$wg1" up
sleep 2
mkdir -p "$work/sipp/pcap" && ln -sf /usr/share/sip-tester/*.pcap "$work/sipp/pcap/"
(cd "$work/sipp" && in_ns timeout 30 sipp -sn uac_pcap 127.0.0.1:5070 -i 127.0.0.1 -p 5071 -mp 6010 -m 1 -nostdin >/dev/null 2>&1) || true
in_ns timeout 20 sipp -sn uac -t t1 127.0.0.1:5072 -i 127.0.0.1 -p 5073 -mp 6210 -m 1 -nostdin >/dev/null 2>&1 || true
in_ns env STRONGSWAN_CONF="$work/ike/strongswan.conf" timeout 10 charon-cmd --host 127.0.0.1 --identity client \
  --remote-identity server --cert "$work/ike/ca.pem" --cert "$work/ike/client.pem" --rsa "$work/ike/client.key" \
  --profile ikev2-pub >"$work/ike/cmd.log" 2>&1 || true
# IKEv1's Main Mode, the same way (the server's connection takes either version), from ports
# of its own so that it is a connection of its own.
sed 's/= 1500/= 1501/; s/= 14500/= 14501/' "$work/ike/strongswan.conf" >"$work/ike/strongswan-v1.conf"
in_ns env STRONGSWAN_CONF="$work/ike/strongswan-v1.conf" timeout 10 charon-cmd --host 127.0.0.1 --identity client \
  --remote-identity server --cert "$work/ike/ca.pem" --cert "$work/ike/client.pem" --rsa "$work/ike/client.key" \
  --profile ikev1-pub >"$work/ike/cmd1.log" 2>&1 || true
in_ns timeout 10 nfs-cat 'nfs://127.0.0.1/export/hello.txt?version=4' >/dev/null || echo "record-conversations: nfs-cat failed" >&2
in_ns timeout 10 nfs-ls 'nfs://127.0.0.1/export?version=4' >/dev/null || echo "record-conversations: nfs-ls failed" >&2
sleep 1
in_ns pkill -INT tcpdump || true
sleep 0.5

# Labels by the server's port, as the conversations were made.
label() {
  target/release/switchyard inspect "$1.pcap" --workers 1 --results "$work/conns.csv" >/dev/null
  python3 - "$work/conns.csv" "$1.csv" "$2" <<'EOF'
import csv, json, sys
by_port = {int(k): v for k, v in json.loads(sys.argv[3]).items()}
rows = []
for r in csv.DictReader(open(sys.argv[1])):
    # The end on a server's port is the server, whichever end the inspector took it for: a
    # label names the true client, so a connection turned round is a miss.
    ends = [r["client"], r["server"]]
    servers = [e for e in ends if int(e.rsplit(":", 1)[1]) in by_port]
    if len(servers) != 1:
        continue
    server = servers[0]
    client = ends[1] if server == ends[0] else ends[0]
    rows.append({"id": len(rows), "proto": r["proto"], "client": client, "server": server,
                 "protocol": by_port[int(server.rsplit(":", 1)[1])], "packets": r["packets"], "elephant": "false"})
with open(sys.argv[2], "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=["id", "proto", "client", "server", "protocol", "packets", "elephant"])
    w.writeheader()
    w.writerows(rows)
print(f"record-conversations: {len(rows)} labelled connections in {sys.argv[2]}")
EOF
  echo "record-conversations: $(tcpdump -r "$1.pcap" 2>/dev/null | wc -l) packets in $1.pcap"
}
label "$out" '{"8080": "http", "8082": "http2", "8443": "tls", "53": "dns", "6379": "redis", "11211": "memcached",
  "1883": "mqtt", "2222": "ssh", "2525": "smtp", "2121": "ftp", "69": "tftp", "161": "snmp", "123": "ntp",
  "5432": "postgresql", "1143": "imap", "1110": "pop3", "6667": "irc", "9418": "git", "514": "syslog",
  "1080": "socks", "3478": "stun", "3479": "stun", "5060": "sip"}'
# DNS over TLS and over HTTPS are TLS on the wire (RFC 7858 §3.3, RFC 8484 §5): labelled so.
label "$more" '{"853": "tls", "443": "tls", "4433": "quic", "4434": "quic", "502": "modbus", "1194": "openvpn", "51820": "wireguard",
  "500": "ike", "4500": "ike", "2049": "nfs", "5070": "sip", "6100": "rtp",
  "1195": "openvpn", "1196": "openvpn", "5072": "sip"}'
