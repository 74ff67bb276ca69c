#!/usr/bin/env bash
# Regenerates the real-capture fixtures tls-lo.pcap (tcpdump on Linux's lo:
# Ethernet frames), tls-sll.pcap (tcpdump -i any -y LINUX_SLL: Linux
# cooked v1) and, when dumpcap is installed, tls-lo.pcapng (dumpcap's
# pcapng). The traffic: OpenSSL's s_server on port 443 of the loopback
# addresses, and curl clients:
#   https://a.example/, https://b.example/, https://c.example/ (127.0.0.1)
#   https://127.0.0.1/ (an address: curl sends no SNI)
#   https://v6.example/ (::1)
#   a connection refused on 127.0.0.1:9 (not 443)
# Needs root (capture, port 443), tcpdump, curl, openssl; Debian:
#   apt-get install tcpdump curl openssl tshark
# Run from anywhere; writes into this directory. The tests' known counts
# follow the traffic above, not the bytes, so a regenerated capture still
# passes them; make-nfdump-fixtures.sh then remakes the CSVs from it.
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout "$work/key.pem" -out "$work/cert.pem" -days 1 -subj /CN=fixture.example 2>/dev/null

filter='tcp port 443 or tcp port 9'
tcpdump -i lo -U -s 262144 -w "$work/lo.pcap" "$filter" 2>"$work/lo.err" &
tcpdump -i any -y LINUX_SLL -U -s 262144 -w "$work/sll.pcap" "$filter" 2>"$work/sll.err" &
if command -v dumpcap >/dev/null 2>&1; then
  dumpcap -q -n -i lo -w "$work/lo.pcapng" -f "$filter" 2>"$work/ng.err" &
fi
# -www answers each request with a status page and closes; port 443
# takes IPv6 too (dual stack). Its stdin stays open: it stops at end of input.
mkfifo "$work/stdin"
openssl s_server -quiet -accept 443 -cert "$work/cert.pem" -key "$work/key.pem" -www <"$work/stdin" >/dev/null 2>&1 &
exec 3>"$work/stdin"
sleep 2 # the captures and the server start

for name in a.example b.example c.example; do
  curl -sk --http1.1 -o /dev/null --resolve "$name:443:127.0.0.1" "https://$name/"
  sleep 0.2
done
curl -sk --http1.1 -o /dev/null https://127.0.0.1/
sleep 0.2
curl -sk --http1.1 -o /dev/null --resolve 'v6.example:443:[::1]' https://v6.example/
sleep 0.2
curl -s -o /dev/null --connect-timeout 2 http://127.0.0.1:9/ || true
sleep 2 # the last packets reach the captures

kill $(jobs -p) 2>/dev/null || true
wait 2>/dev/null || true
cp "$work/lo.pcap" tls-lo.pcap
cp "$work/sll.pcap" tls-sll.pcap
if [ -f "$work/lo.pcapng" ]; then cp "$work/lo.pcapng" tls-lo.pcapng; chmod 644 tls-lo.pcapng; fi
ls -l tls-lo.pcap tls-sll.pcap tls-lo.pcapng 2>/dev/null || true
