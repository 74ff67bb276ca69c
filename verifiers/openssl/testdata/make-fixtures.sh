#!/bin/sh
# make-fixtures.sh regenerates the certificates and request lines that
# check.sh feeds to pkie-verify-openssl. The output is committed, so
# check.sh runs offline and with the same verification times every time;
# rerun this only to change the cases (then update expected.jsonl, which
# check.sh prints on a mismatch).
#
# Usage: verifiers/openssl/testdata/make-fixtures.sh
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=$here/pem
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$out"
mkdir -p "$out"
cd "$tmp"

now=$(date +%s)

key() { # key NAME [ALG-OPTIONS]
	name=$1
	shift
	if [ $# -eq 0 ]; then set -- -algorithm EC -pkeyopt ec_paramgen_curve:P-256; fi
	openssl genpkey "$@" -out "$name.key" 2>/dev/null
}

ext() { # ext NAME LINE... : an extension file
	name=$1
	shift
	printf '%s\n' "$@" >"$name.ext"
}

root() { # root NAME [EXT-LINES...]
	name=$1
	shift
	key "$name"
	ext "$name" "basicConstraints=critical,CA:TRUE" "keyUsage=critical,keyCertSign,cRLSign" \
		"subjectKeyIdentifier=hash" "$@"
	openssl req -new -key "$name.key" -subj "/CN=pkie test $name" -config /dev/null \
		-out "$name.csr" 2>/dev/null
	openssl x509 -req -in "$name.csr" -signkey "$name.key" -days 3650 -sha256 \
		-extfile "$name.ext" -set_serial 0x$(openssl rand -hex 8) -out "$name.pem" 2>/dev/null
}

issue() { # issue NAME ISSUER DAYS DIGEST EXT-LINES... (key NAME must exist)
	name=$1 issuer=$2 days=$3 md=$4
	shift 4
	ext "$name" "$@"
	openssl req -new -key "$name.key" -subj "/CN=pkie test $name" -config /dev/null \
		-out "$name.csr" 2>/dev/null
	openssl x509 -req -in "$name.csr" -CA "$issuer.pem" -CAkey "$issuer.key" \
		-days "$days" "-$md" -extfile "$name.ext" -set_serial 0x$(openssl rand -hex 8) \
		-out "$name.pem" 2>/dev/null
}

CA="basicConstraints=critical,CA:TRUE"
CAKU="keyUsage=critical,keyCertSign,cRLSign"
LEAFKU="keyUsage=critical,digitalSignature"
SERVER="extendedKeyUsage=serverAuth"
SAN="subjectAltName=DNS:www.example.com,IP:127.0.0.1,IP:::1"

root root
root otherroot
root root0 "basicConstraints=critical,CA:TRUE,pathlen:0"

key inter
issue inter root 1825 sha256 "$CA" "$CAKU"
key leaf
issue leaf inter 90 sha256 "$LEAFKU" "$SERVER" "$SAN"

# A client certificate: clientAuth only.
key client
issue client inter 90 sha256 "$LEAFKU" "extendedKeyUsage=clientAuth" "subjectAltName=DNS:client.example.com"

# Name constraints: the intermediate may only issue below example.com.
key ncinter
issue ncinter root 1825 sha256 "$CA" "$CAKU" "nameConstraints=critical,permitted;DNS:.example.com"
key ncleaf
issue ncleaf ncinter 90 sha256 "$LEAFKU" "$SERVER" "subjectAltName=DNS:www.evil.test"

# pathlen:0 on the root: no intermediate is allowed below it.
key plinter
issue plinter root0 1825 sha256 "$CA" "$CAKU"
key plleaf
issue plleaf plinter 90 sha256 "$LEAFKU" "$SERVER" "$SAN"

# An "intermediate" that is not a CA.
key notca
issue notca root 1825 sha256 "basicConstraints=critical,CA:FALSE" "$LEAFKU"
key notcaleaf
issue notcaleaf notca 90 sha256 "$LEAFKU" "$SERVER" "$SAN"

# A leaf whose key is too small for OpenSSL's default TLS security level.
key smallleaf -algorithm RSA -pkeyopt rsa_keygen_bits:512
issue smallleaf inter 90 sha256 "$LEAFKU" "$SERVER" "$SAN"

# A leaf signed with MD5 (by an RSA intermediate: ECDSA has no MD5).
key rsainter -algorithm RSA -pkeyopt rsa_keygen_bits:2048
issue rsainter root 1825 sha256 "$CA" "$CAKU"
key md5leaf
issue md5leaf rsainter 90 md5 "$LEAFKU" "$SERVER" "$SAN"

# And one signed with SHA-1.
key sha1leaf
issue sha1leaf rsainter 90 sha1 "$LEAFKU" "$SERVER" "$SAN"

# A wildcard leaf, and a leaf with its name only in the subject's CN (no
# SAN): X509_check_host falls back to the CN, crypto/x509 does not.
key wildleaf
issue wildleaf inter 90 sha256 "$LEAFKU" "$SERVER" "subjectAltName=DNS:*.example.org"
key cnleaf
ext cnleaf "$LEAFKU" "$SERVER"
openssl req -new -key cnleaf.key -subj "/CN=www.cn-only.test" -config /dev/null -out cnleaf.csr 2>/dev/null
openssl x509 -req -in cnleaf.csr -CA inter.pem -CAkey inter.key -days 90 -sha256 -extfile cnleaf.ext \
	-set_serial 0x$(openssl rand -hex 8) -out cnleaf.pem 2>/dev/null

# A self-signed leaf that no root vouches for.
key selfleaf
ext selfleaf "$LEAFKU" "$SERVER" "$SAN"
openssl req -new -key selfleaf.key -subj "/CN=pkie test selfleaf" -config /dev/null -out selfleaf.csr 2>/dev/null
openssl x509 -req -in selfleaf.csr -signkey selfleaf.key -days 90 -sha256 -extfile selfleaf.ext \
	-set_serial 0x$(openssl rand -hex 8) -out selfleaf.pem 2>/dev/null

# The leaf with one bit of its signature flipped (the last byte of the DER
# is inside the signature BIT STRING).
openssl x509 -in leaf.pem -outform DER -out leaf.der
python3 - <<'EOF'
b = bytearray(open("leaf.der", "rb").read())
b[-1] ^= 1
open("badsig.der", "wb").write(bytes(b))
EOF
openssl x509 -inform DER -in badsig.der -out badsig.pem

for f in *.pem; do cp "$f" "$out/$f"; done

b64() { openssl x509 -in "$1.pem" -outform DER | base64 -w0; }
arr() { # arr NAME... : a JSON array of base64 DER
	sep=
	printf '['
	for n in "$@"; do
		printf '%s"%s"' "$sep" "$(b64 "$n")"
		sep=,
	done
	printf ']'
}
req() { # req ID ROOTS CHAIN HOST TIME PURPOSE
	printf '{"id":%s,"roots":%s,"chain":%s,"host":"%s","time":%s,"purpose":"%s"}\n' "$@"
}

day=86400
t=$((now + day))
R=$(arr root)
{
	req 1 "$R" "$(arr leaf inter)" www.example.com $t server
	req 2 "$R" "$(arr leaf inter)" www.example.com $((now + 200 * day)) server
	req 3 "$R" "$(arr leaf inter)" www.example.com $((now - 2 * day)) server
	req 4 "$R" "$(arr leaf inter)" other.example.net $t server
	req 5 "$(arr otherroot)" "$(arr leaf inter)" www.example.com $t server
	req 6 "$R" "$(arr leaf)" www.example.com $t server
	req 7 "$R" "$(arr badsig inter)" www.example.com $t server
	req 8 "$R" "$(arr ncleaf ncinter)" www.evil.test $t server
	req 9 "$(arr root0)" "$(arr plleaf plinter)" www.example.com $t server
	req 10 "$R" "$(arr notcaleaf notca)" www.example.com $t server
	req 11 "$R" "$(arr client inter)" client.example.com $t server
	req 12 "$R" "$(arr client inter)" client.example.com $t client
	req 13 "$R" "$(arr leaf inter)" "" $t server
	req 14 "$R" "$(arr leaf inter)" 127.0.0.1 $t server
	req 15 "$R" "$(arr leaf inter)" 127.0.0.2 $t server
	req 16 "$R" "$(arr leaf inter)" "[::1]" $t server
	req 17 "$R" "$(arr selfleaf)" www.example.com $t server
	req 18 "$R" "$(arr smallleaf inter)" www.example.com $t server
	req 19 "$R" "$(arr md5leaf rsainter)" www.example.com $t server
	req 20 "$R" "$(arr leaf root inter otherroot)" www.example.com $t server
	req 21 "$(arr otherroot root)" "$(arr leaf inter)" WWW.Example.COM $t server
	# A root that does not parse is skipped, not an error.
	req 22 "[\"AAAA\",$(arr root | tr -d '[]')]" "$(arr leaf inter)" www.example.com $t server
	# A chain certificate that does not parse is a verdict: malformed.
	req 23 "$R" "[$(arr leaf | tr -d '[]'),\"MIIBAA==\"]" www.example.com $t server
	# The leaf followed by a byte: not exactly one certificate.
	req 24 "$R" "[\"$( (openssl x509 -in leaf.pem -outform DER; printf 'x') | base64 -w0)\"]" www.example.com $t server
	# A host that is a wildcard pattern matches nothing.
	req 25 "$R" "$(arr leaf inter)" "*.example.com" $t server
	req 26 "$R" "$(arr leaf inter)" ::1 $t server
	req 27 "$R" "$(arr leaf inter)" "[127.0.0.1]" $t server
	req 28 "$R" "$(arr wildleaf inter)" a.example.org $t server
	req 29 "$R" "$(arr wildleaf inter)" a.b.example.org $t server
	req 30 "$R" "$(arr wildleaf inter)" example.org $t server
	req 31 "$R" "$(arr cnleaf inter)" www.cn-only.test $t server
	# The same root many times over: one trust anchor.
	req 32 "$(arr root root root otherroot root)" "$(arr leaf inter inter leaf)" www.example.com $t server
	# Expired and from an unknown root: the path's first failure is named.
	req 33 "$(arr otherroot)" "$(arr leaf inter)" www.example.com $((now + 200 * day)) server
	# A valid path for a leaf that is not valid for the name: the path verified, so the name is checked.
	req 34 "$R" "$(arr client inter)" www.example.com $t client
	# A root that is not self-signed is a trust anchor all the same.
	req 35 "$(arr inter)" "$(arr leaf)" www.example.com $t server
	req 36 "$(arr leaf)" "$(arr leaf)" www.example.com $t server
	req 37 "$R" "$(arr sha1leaf rsainter)" www.example.com $t server
	req 38 "$R" "$(arr leaf inter)" "[www.example.com]" $t server
} >"$here/requests.jsonl"
echo "wrote $here/requests.jsonl and $out/"
