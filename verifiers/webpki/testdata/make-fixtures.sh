#!/bin/sh
# Regenerates the certificates the integration test (tests/protocol.rs)
# verifies. The PEM files are committed so tests run offline; run this only
# to change them, then update the expectations in tests/protocol.rs.
#
# Dates are fixed (openssl ca -startdate/-enddate), so the outcomes depend
# only on the request's time, not on when this script ran:
#   CAs                  2025-01-01 .. 2045-01-01
#   leaves               2025-01-01 .. 2035-01-01
#   leaf-expired.pem     2025-01-01 .. 2025-06-01
#   leaf-future.pem      2030-01-01 .. 2035-01-01
# The test verifies at 2026-01-01T00:00:00Z (1767225600).
#
# Needs OpenSSL 3 (openssl ca, EC keys). Keys are thrown away.
set -eu
cd "$(dirname "$0")"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

CA_START=20250101000000Z
CA_END=20450101000000Z
EE_START=20250101000000Z
EE_END=20350101000000Z

cat >"$work/ca.cnf" <<CNF
[ ca ]
default_ca = pkie
[ pkie ]
dir = $work
database = $work/index.txt
new_certs_dir = $work/new
serial = $work/serial
default_md = sha256
policy = anything
unique_subject = no
copy_extensions = none
email_in_dn = no
[ anything ]
commonName = supplied
organizationName = optional
[ req ]
distinguished_name = dn
prompt = no
[ dn ]
CN = unused
CNF
mkdir "$work/new"
: >"$work/index.txt"
echo 1000 >"$work/serial"

# key NAME: a P-256 key, or the RSA key of $RSA_BITS bits when that is set.
key() {
	if [ -n "${RSA_BITS:-}" ]; then
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:"$RSA_BITS" -out "$work/$1.key" 2>/dev/null
	else
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/$1.key" 2>/dev/null
	fi
}

# issue NAME SUBJECT ISSUER START END EXTENSIONS: NAME.pem signed by ISSUER's
# key (ISSUER "self" for a self-signed root), with the given extensions.
issue() {
	name=$1 subj=$2 issuer=$3 start=$4 end=$5 ext=$6
	[ -f "$work/$name.key" ] || key "$name"
	printf '[ x ]\n%b\n' "$ext" >"$work/$name.ext"
	openssl req -config "$work/ca.cnf" -new -key "$work/$name.key" -subj "$subj" -out "$work/$name.csr"
	if [ "$issuer" = self ]; then
		openssl ca -config "$work/ca.cnf" -batch -notext -md "${MD:-sha256}" -selfsign -keyfile "$work/$name.key" \
			-in "$work/$name.csr" -out "$name.pem" -startdate "$start" -enddate "$end" \
			-extfile "$work/$name.ext" -extensions x 2>/dev/null
	else
		openssl ca -config "$work/ca.cnf" -batch -notext -md "${MD:-sha256}" -cert "$issuer.pem" -keyfile "$work/$issuer.key" \
			-in "$work/$name.csr" -out "$name.pem" -startdate "$start" -enddate "$end" \
			-extfile "$work/$name.ext" -extensions x 2>/dev/null
	fi
}

CA_KU='keyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash'
CA="basicConstraints=critical,CA:true\n$CA_KU"
SERVER='basicConstraints=critical,CA:false\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth'

issue root '/CN=pkie test root' self $CA_START $CA_END "$CA"
issue other-root '/CN=pkie other root' self $CA_START $CA_END "$CA"
issue int '/CN=pkie test intermediate' root $CA_START $CA_END "$CA"

# Leaves under int.
SAN='subjectAltName=DNS:www.example.com,IP:127.0.0.1'
issue leaf '/CN=www.example.com' int $EE_START $EE_END "$SERVER\n$SAN"
issue leaf-expired '/CN=www.example.com' int $EE_START 20250601000000Z "$SERVER\n$SAN"
issue leaf-future '/CN=www.example.com' int 20300101000000Z $EE_END "$SERVER\n$SAN"
issue leaf-client '/CN=client.example.com' int $EE_START $EE_END \
	"basicConstraints=critical,CA:false\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\nsubjectAltName=DNS:client.example.com"
issue leaf-critext '/CN=www.example.com' int $EE_START $EE_END \
	"$SERVER\n$SAN\n1.3.6.1.4.1.55555.1=critical,ASN1:UTF8String:pkie test"

# Algorithms webpki (with ring) refuses: a SHA-1 signature, and a root whose
# RSA key has 1024 bits (ring verifies RSA signatures from 2048 bits up);
# and a leaf with a 1024-bit RSA key, which webpki accepts.
MD=sha1 issue leaf-sha1 '/CN=www.example.com' int $EE_START $EE_END "$SERVER\n$SAN"
RSA_BITS=1024 issue rsa1024-root '/CN=pkie RSA-1024 root' self $CA_START $CA_END "$CA"
issue rsa1024-leaf '/CN=www.example.com' rsa1024-root $EE_START $EE_END "$SERVER\n$SAN"
# A leaf's own key is not used to verify anything on the path.
RSA_BITS=1024 issue leaf-rsa1024 '/CN=www.example.com' int $EE_START $EE_END "$SERVER\n$SAN"

# The leaf with one bit of its signature flipped: the last byte of the DER
# is the last byte of the ECDSA signature's s.
openssl x509 -in leaf.pem -outform DER -out "$work/leaf.der"
size=$(wc -c <"$work/leaf.der")
head -c $((size - 1)) "$work/leaf.der" >"$work/badsig.der"
last=$(tail -c 1 "$work/leaf.der" | od -An -tu1 | tr -d ' ')
printf "$(printf '\\%03o' $((last ^ 1)))" >>"$work/badsig.der"
openssl x509 -inform DER -in "$work/badsig.der" -out leaf-badsig.pem

# A leaf (CA:false) used as the issuer of another leaf.
issue leaf-by-leaf '/CN=sub.example.com' leaf $EE_START $EE_END "$SERVER\nsubjectAltName=DNS:sub.example.com"

# Name constraints: nc-int may issue only below allowed.example.
issue nc-int '/CN=pkie constrained intermediate' root $CA_START $CA_END \
	"$CA\nnameConstraints=critical,permitted;DNS:allowed.example"
issue nc-leaf-ok '/CN=www.allowed.example' nc-int $EE_START $EE_END "$SERVER\nsubjectAltName=DNS:www.allowed.example"
issue nc-leaf-bad '/CN=www.forbidden.example' nc-int $EE_START $EE_END "$SERVER\nsubjectAltName=DNS:www.forbidden.example"

# Path length: pl-int1 (pathlen 0) issues another CA, pl-int2.
issue pl-int1 '/CN=pkie pathlen0 intermediate' root $CA_START $CA_END "basicConstraints=critical,CA:true,pathlen:0\n$CA_KU"
issue pl-int2 '/CN=pkie pathlen-violating intermediate' pl-int1 $CA_START $CA_END "$CA"
issue pl-leaf '/CN=www.example.com' pl-int2 $EE_START $EE_END "$SERVER\n$SAN"

# Limits: three layers of ten CAs each, every one named like the others of
# its layer and chained by name (leaf <- A <- B <- C <- root), all signed by
# keys no presented certificate holds (junk-*, thrown away). Each of the
# 1000 paths by name reaches the root and fails its first signature check,
# which exhausts webpki's budget of 100 signature checks.
issue junk-root '/CN=pkie test root' self $CA_START $CA_END "$CA"
for layer in A B C; do
	issue "junk-$layer" "/CN=pkie limits $layer" junk-root $CA_START $CA_END "$CA"
done
rm -f limits-*.pem
for i in 0 1 2 3 4 5 6 7 8 9; do
	issue "limits-a$i" '/CN=pkie limits A' junk-B $CA_START $CA_END "$CA"
	issue "limits-b$i" '/CN=pkie limits B' junk-C $CA_START $CA_END "$CA"
	issue "limits-c$i" '/CN=pkie limits C' junk-root $CA_START $CA_END "$CA"
done
issue limits-leaf '/CN=www.example.com' junk-A $EE_START $EE_END "$SERVER\n$SAN"
cat limits-a?.pem limits-b?.pem limits-c?.pem >limits-intermediates.pem
rm -f limits-a?.pem limits-b?.pem limits-c?.pem junk-*.pem

# Mesh: 62 CAs all named "pkie mesh" and issued by that name (signed by a
# key none of them holds), under a leaf issued by "pkie mesh"; about 28 KB
# of DER. No path reaches a root by name, so webpki checks no signature
# and its own budget allows 200,000 build-chain calls, each re-parsing
# every candidate (seconds of CPU). The helper refuses the request before
# path building (src/work.rs).
issue junk-mesh '/CN=pkie mesh' self $CA_START $CA_END "$CA"
rm -f mesh-*.pem
i=0
while [ $i -lt 62 ]; do
	issue "mesh-$i" '/CN=pkie mesh' junk-mesh $CA_START $CA_END "$CA"
	i=$((i + 1))
done
issue mesh-leaf '/CN=www.example.com' junk-mesh $EE_START $EE_END "$SERVER\n$SAN"
i=0
while [ $i -lt 62 ]; do
	cat "mesh-$i.pem"
	rm "mesh-$i.pem"
	i=$((i + 1))
done >mesh-intermediates.pem
rm -f junk-mesh.pem
