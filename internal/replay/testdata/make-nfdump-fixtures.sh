#!/usr/bin/env bash
# Regenerates the nfdump CSV fixtures from tls-lo.pcap (see
# make-pcap-fixtures.sh) with the real tools: nfpcapd turns the capture
# into an nfcapd file, nfdump prints it. Tested with Debian 12's nfdump
# 1.7.1 (apt-get install nfdump); nfdump -V names the version.
#   nfdump-1.7.1.csv        nfdump -o csv: one-way flows, header, Summary
#   nfdump-1.7.1-q.csv      nfdump -q -o csv: no header, no Summary
#   nfdump-1.7.1-B.csv      nfdump -B -o csv: bidirectional, the direction
#                           guessed from the ports (client to server)
#   nfdump-1.7.1-tstart.csv nfdump -O tstart -o csv: in order of start
# nfdump prints times in the local zone: TZ=UTC makes them UTC, as pkie
# reads them.
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/flows"
if ! nfpcapd -r tls-lo.pcap -w "$work/flows" >"$work/nfpcapd.log" 2>&1; then
  cat "$work/nfpcapd.log" >&2
  exit 1
fi
export TZ=UTC
nfdump -R "$work/flows" -o csv >nfdump-1.7.1.csv
nfdump -R "$work/flows" -q -o csv >nfdump-1.7.1-q.csv
nfdump -R "$work/flows" -B -o csv >nfdump-1.7.1-B.csv
nfdump -R "$work/flows" -O tstart -o csv >nfdump-1.7.1-tstart.csv
wc -l nfdump-1.7.1*.csv
