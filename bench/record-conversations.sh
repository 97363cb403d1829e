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
# Needs root and the packages below (installed if missing). Usage:
#   bench/record-conversations.sh [OUT_PREFIX]   (default data/traces/conversations)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-data/traces/conversations}"
need=(tcpdump:tcpdump dig:bind9-dnsutils dnsmasq:dnsmasq-base memcached:memcached mosquitto:mosquitto
  mosquitto_pub:mosquitto-clients sshd:openssh-server nginx:nginx-light redis-server:redis-server curl:curl
  vsftpd:vsftpd in.tftpd:tftpd-hpa tftp:tftp-hpa snmpd:snmpd snmpget:snmp chronyd:chrony sntp:sntp
  psql:postgresql-client dovecot:dovecot-imapd /usr/lib/dovecot/pop3:dovecot-pop3d ngircd:ngircd
  microsocks:microsocks stund:stun-server stun:stun-client sipp:sip-tester)
missing=()
for pair in "${need[@]}"; do
  bin="${pair%%:*}"
  command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/sbin/$bin" ] || [ -x "$bin" ] || missing+=("${pair#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
cargo build --release -q -p switchyard
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

# Labels by the server's port, as the conversations were made.
target/release/switchyard inspect "$out.pcap" --workers 1 --results "$work/conns.csv" >/dev/null
python3 - "$work/conns.csv" "$out.csv" <<'EOF'
import csv, sys
by_port = {8080: "http", 8082: "http2", 8443: "tls", 53: "dns", 6379: "redis", 11211: "memcached",
           1883: "mqtt", 2222: "ssh", 2525: "smtp", 2121: "ftp", 69: "tftp", 161: "snmp", 123: "ntp",
           5432: "postgresql", 1143: "imap", 1110: "pop3", 6667: "irc", 9418: "git", 514: "syslog",
           1080: "socks", 3478: "stun", 3479: "stun", 5060: "sip"}
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
echo "record-conversations: $(tcpdump -r "$out.pcap" 2>/dev/null | wc -l) packets in $out.pcap"
