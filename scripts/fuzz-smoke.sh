#!/usr/bin/env bash
# Runs every fuzz target in the module briefly (FUZZTIME each, default 5s), so
# that a parser that panics on its own seed corpus or on a quick mutation
# fails the build. Longer campaigns: go test -fuzz=NAME -fuzztime=10m ./pkg
#
# A failure counts only when Go wrote a failing input. Go 1.26's fuzz
# coordinator can end a duration-limited run with a bare "context deadline
# exceeded" and no input at all: the -fuzztime deadline reaches the parent
# context before the workers' child context, and the shutdown escapes the
# filter meant to swallow it (go.dev/issue/75804, fixed in Go 1.27). That is
# the toolchain, not the target; it is reported and the target run once more
# for as many executions as the first run managed, counted rather than timed
# (-fuzztime Nx), which takes no deadline path and so cannot race.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
status=0
count=0
races=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# coordinator_race reports whether a failed run's output is go.dev/issue/75804:
# the deadline message and no failing input written.
coordinator_race() {
  grep -q '^    context deadline exceeded$' "$1" && ! grep -q 'Failing input written to' "$1"
}

while IFS= read -r file; do
  pkg=./$(dirname "$file")
  for name in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+).*/\1/'); do
    count=$((count+1))
    budget=$fuzztime
    for attempt in 1 2; do
      echo "fuzz: $pkg $name ($budget)"
      # Run from the package's directory, so that a target in a module of
      # its own (docs/example) is tested in that module.
      if (cd "$pkg" && go test -run '^$' -fuzz "^${name}\$" -fuzztime "$budget" .) >"$out" 2>&1; then
        break
      fi
      if coordinator_race "$out" && [ "$attempt" = 1 ]; then
        races=$((races+1))
        execs=$(grep -oE 'execs: [0-9]+' "$out" | tail -1 | grep -oE '[0-9]+' || true)
        budget="${execs:-10000}x"
        [ "$budget" = "0x" ] && budget=10000x
        echo "fuzz: $name ended with the Go fuzz coordinator's deadline race (go.dev/issue/75804), no failing input; running it again for $budget executions"
        continue
      fi
      cat "$out"
      status=1
      break
    done
  done
done < <(grep -rlE '^func Fuzz' --include='*_test.go' . | sort)
echo "fuzz: $count targets run, $races coordinator deadline races retried"
exit $status
