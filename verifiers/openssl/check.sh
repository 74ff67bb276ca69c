#!/bin/sh
# check.sh builds pkie-verify-openssl and checks it:
#  - its answers to the committed requests (testdata/requests.jsonl: the
#    verdict cases; testdata/errors.jsonl: odd requests, most of which it
#    must refuse) against testdata/expected.jsonl, timings removed;
#  - its bounds (a line over 16 MiB, too many certificates);
#  - mutated hostile requests (testdata/hostile.py): one well-formed answer
#    per line and exit 0, also with AddressSanitizer and UBSan where cc has
#    them;
#  - all of it again under valgrind, when installed: no memory error, no leak.
# Exit status 0 means all of it passed.
#
# Usage: verifiers/openssl/check.sh   (from anywhere; builds with make)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
bin=$top/bin/pkie-verify-openssl
td=$here/testdata
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

make -s -C "$top" bin/pkie-verify-openssl

# normalize drops the timings, which differ from run to run; phases are
# checked for shape separately.
normalize() { sed 's/,"phases":{"roots_ns":[0-9]*,"chain_ns":[0-9]*,"verify_ns":[0-9]*,"hostname_ns":[0-9]*}//'; }

run() { # run [WRAPPER...]: answers to every committed request on stdout
	cat "$td/requests.jsonl" "$td/errors.jsonl" | "$@" "$bin"
}

compare() { # compare LABEL FILE
	label=$1 got=$2
	# Every verdict carries its four phases as non-negative integers.
	if grep '"valid":' "$got" | grep -v '"phases":{"roots_ns":[0-9]*,"chain_ns":[0-9]*,"verify_ns":[0-9]*,"hostname_ns":[0-9]*}}$' >"$tmp/nophases"; then
		echo "FAIL $label: verdicts without well-formed phases:"
		cat "$tmp/nophases"
		fail=1
	fi
	normalize <"$got" >"$tmp/got.norm"
	want=$td/expected.jsonl
	if [ "$(head -n1 "$tmp/got.norm")" != "$(head -n1 "$want")" ]; then
		# Another OpenSSL words its errors differently: compare verdicts
		# without the library's reasons.
		echo "note: $(head -n1 "$tmp/got.norm") differs from the expected hello; comparing without reasons"
		sed '1d; s/"reason":"\([^"\\]\|\\.\)*",//' "$want" >"$tmp/want.norm"
		sed '1d; s/"reason":"\([^"\\]\|\\.\)*",//' "$tmp/got.norm" >"$tmp/got.cmp"
	else
		cp "$want" "$tmp/want.norm"
		cp "$tmp/got.norm" "$tmp/got.cmp"
	fi
	if ! diff -u "$tmp/want.norm" "$tmp/got.cmp"; then
		echo "FAIL $label: answers differ from testdata/expected.jsonl (- expected, + got)"
		fail=1
	fi
}

# The bounds: a line over 16 MiB is refused as id 0 and the helper goes on;
# 65 chain certificates and 4097 roots are refused under their ids.
bounds() { # bounds [WRAPPER...]
	{
		printf '{"id":1,"pad":"'
		head -c 16777216 /dev/zero | tr '\0' x
		printf '"}\n{"id":2,"roots":["AAAA"],"chain":["AAAA"'
		i=1
		while [ $i -lt 65 ]; do printf ',"AAAA"'; i=$((i + 1)); done
		printf '],"time":1,"purpose":"server"}\n{"id":3,"roots":["AAAA"'
		i=1
		while [ $i -lt 4097 ]; do printf ',"AAAA"'; i=$((i + 1)); done
		# The last line has no newline: it is a request all the same.
		printf '],"chain":["AAAA"],"time":1,"purpose":"server"}\n{"id":4,"roots":["AAAA"],"chain":["AAAA"],"time":1,"purpose":"server"}'
	} >"$tmp/bounds.in"
	"$@" "$bin" <"$tmp/bounds.in" | normalize >"$tmp/bounds.out"
	cat >"$tmp/bounds.want" <<'EOF'
{"id":0,"error":"request longer than 16777216 bytes"}
{"id":2,"error":"chain: 65 certificates, more than the 64 this helper accepts"}
{"id":3,"error":"roots: 4097 certificates, more than the 4096 this helper accepts"}
{"id":4,"valid":false,"code":"malformed","reason":"chain[0] does not parse as an X.509 certificate: error:0688010A:asn1 encoding routines::nested asn1 error","depth":0,"roots_skipped":1}
EOF
	sed -i 's/"reason":"[^"]*",//' "$tmp/bounds.want"
	sed '1d; s/"reason":"[^"]*",//' "$tmp/bounds.out" >"$tmp/bounds.cmp"
	if ! diff -u "$tmp/bounds.want" "$tmp/bounds.cmp"; then
		echo "FAIL bounds: answers differ (- expected, + got)"
		fail=1
	fi
}

# hostile SEED COUNT [WRAPPER...]: mutated requests (testdata/hostile.py)
# must each get one well-formed answer, and the helper must exit 0.
hostile() {
	seed=$1 count=$2
	shift 2
	if ! command -v python3 >/dev/null 2>&1; then
		echo "note: python3 not installed; hostile requests (seed $seed) skipped"
		return
	fi
	python3 "$td/hostile.py" gen "$seed" "$count" "$td/requests.jsonl" >"$tmp/hostile.in"
	if ! "$@" "$bin" <"$tmp/hostile.in" >"$tmp/hostile.out" 2>"$tmp/hostile.err"; then
		echo "FAIL hostile (seed $seed): the helper exited non-zero:"
		tail -n 30 "$tmp/hostile.err"
		fail=1
	elif [ -s "$tmp/hostile.err" ]; then
		echo "FAIL hostile (seed $seed): the helper wrote to standard error:"
		tail -n 30 "$tmp/hostile.err"
		fail=1
	fi
	python3 "$td/hostile.py" check "$tmp/hostile.in" "$tmp/hostile.out" || fail=1
}

run >"$tmp/plain.out"
compare plain "$tmp/plain.out"
bounds
hostile 1 2000

# The same hostile requests against a build with AddressSanitizer and
# UndefinedBehaviorSanitizer, where the compiler has them.
if ${CC:-cc} -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -std=c11 \
	$(pkg-config --cflags libcrypto jansson 2>/dev/null) -o "$tmp/asan" "$here"/*.c \
	$(pkg-config --libs libcrypto jansson 2>/dev/null || echo -lcrypto -ljansson) 2>/dev/null; then
	bin_plain=$bin
	bin=$tmp/asan
	hostile 2 3000
	bin=$bin_plain
else
	echo "note: no -fsanitize=address,undefined here; sanitizer run skipped"
fi

if command -v valgrind >/dev/null 2>&1; then
	vg="valgrind -q --leak-check=full --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99"
	# shellcheck disable=SC2086
	if ! run $vg >"$tmp/vg.out" 2>"$tmp/vg.err"; then
		echo "FAIL valgrind:"
		cat "$tmp/vg.err"
		fail=1
	fi
	compare valgrind "$tmp/vg.out"
	# shellcheck disable=SC2086
	if ! bounds $vg 2>"$tmp/vgb.err" || [ -s "$tmp/vgb.err" ]; then
		echo "FAIL valgrind (bounds):"
		cat "$tmp/vgb.err"
		fail=1
	fi
	# shellcheck disable=SC2086
	hostile 3 200 $vg
else
	echo "note: valgrind not installed; memory checks skipped"
fi

if [ $fail -ne 0 ]; then
	exit 1
fi
echo "ok: pkie-verify-openssl answered $(($(wc -l <"$tmp/plain.out") - 1)) requests as expected"
