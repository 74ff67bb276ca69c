#!/usr/bin/env bash
# Installs the system packages `make test` needs on Debian or Ubuntu, the
# same ones .ci/run installs: only those missing, with apt-get, as root.
#   scripts/deps.sh              install what is missing
#   scripts/deps.sh --list       print every package make test needs, one a line
#   scripts/deps.sh --tesseract  install TesseraCT's POSIX binary for the
#                                interoperability tests (Go, no root; see below)
set -euo pipefail

# TesseraCT, transparency-dev's static-ct-api log, is software nobody here
# wrote: internal/ctinterop runs pkie's log, follower and mirror against it
# (internal/tesseracttest finds the binary). `go install` names it after
# its package, posix, so it goes into a directory of its own, by version,
# where the harness looks: $(go env GOPATH)/opt/tesseract-<version>/posix.
# It is the invoking user's, not root's: .ci/run runs this as itself.
tesseract_version=v0.1.1
if [ "${1:-}" = "--tesseract" ]; then
  gobin="$(go env GOPATH | cut -d: -f1)/opt/tesseract-${tesseract_version}"
  if [ -x "$gobin/posix" ]; then
    echo "deps: TesseraCT ${tesseract_version} is here: $gobin/posix"
    exit 0
  fi
  echo "deps: installing TesseraCT ${tesseract_version} into $gobin"
  GOBIN="$gobin" go install "github.com/transparency-dev/tesseract/cmd/tesseract/posix@${tesseract_version}"
  exit 0
fi

# Every package, for --list and the README.
all=(openssl curl nfdump libssl-dev libjansson-dev pkg-config gcc libc6-dev postgresql mariadb-server cargo)

if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${all[@]}"
  exit 0
fi
if [ $# -gt 0 ]; then
  echo "usage: $0 [--list | --tesseract]" >&2
  exit 2
fi

need=()
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v curl >/dev/null 2>&1 || need+=(curl)
# internal/replay runs the real nfpcapd and nfdump on a trace it writes.
command -v nfpcapd >/dev/null 2>&1 || need+=(nfdump)
# pkie verify's OpenSSL back end is C against libcrypto, with jansson for JSON.
[ -f /usr/include/openssl/x509_vfy.h ] || need+=(libssl-dev)
[ -f /usr/include/jansson.h ] || need+=(libjansson-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
# The tests of notary replicas sharing one history start a throwaway
# PostgreSQL of their own.
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  need+=(postgresql)
fi
# The log's Tessera MySQL storage is tested against a throwaway MariaDB
# (internal/mysqltest) started from these binaries.
if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
  need+=(mariadb-server)
fi
# pkie verify's webpki back end is Rust; its crates come from crates.io.
# rustup's cargo does as well as Debian's.
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  need+=(cargo)
fi

if [ ! -x "$(go env GOPATH 2>/dev/null | cut -d: -f1)/opt/tesseract-${tesseract_version}/posix" ]; then
  echo "deps: the interoperability tests also need TesseraCT: run scripts/deps.sh --tesseract as yourself (Go, no root)" >&2
fi
if [ ${#need[@]} -eq 0 ]; then
  echo "deps: nothing to install: every package make test needs is here"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "deps: this machine has no apt-get, so I will not install anything." >&2
  echo "deps: make test needs these (Debian names; install your system's equivalents): ${need[*]}" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "deps: installing needs root, so I will not install anything. Run:" >&2
  echo "  sudo apt-get install --no-install-recommends ${need[*]}" >&2
  echo "or: sudo make deps" >&2
  exit 1
fi
echo "deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}"
# Debian starts a cluster on install; tests run their own on free ports.
if [[ " ${need[*]} " == *" postgresql "* ]]; then
  command -v service >/dev/null 2>&1 && service postgresql stop >/dev/null 2>&1 || true
fi
if [[ " ${need[*]} " == *" mariadb-server "* ]]; then
  command -v service >/dev/null 2>&1 && service mariadb stop >/dev/null 2>&1 || true
fi
