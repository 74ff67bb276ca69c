#!/usr/bin/env bash
# Runs every fuzz target in the module briefly (FUZZTIME each, default 5s), so
# that a parser that panics on its own seed corpus or on a quick mutation
# fails the build. Longer campaigns: go test -fuzz=NAME -fuzztime=10m ./pkg
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
status=0
count=0
while IFS= read -r file; do
  pkg=./$(dirname "$file")
  for name in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+).*/\1/'); do
    count=$((count+1))
    echo "fuzz: $pkg $name ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/pkie-fuzz.$$ 2>&1; then
      cat /tmp/pkie-fuzz.$$
      status=1
    fi
  done
done < <(grep -rlE '^func Fuzz' --include='*_test.go' . | sort)
rm -f /tmp/pkie-fuzz.$$
echo "fuzz: $count targets run"
exit $status
