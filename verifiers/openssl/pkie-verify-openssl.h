/* Shared between pkie-verify-openssl.c and warmup.c. */
#ifndef PKIE_VERIFY_OPENSSL_H
#define PKIE_VERIFY_OPENSSL_H

/*
 * OpenSSL 3.0's built-in TLS security level (OPENSSL_TLS_SECURITY_LEVEL):
 * libssl hands it to X509_verify_cert as the authentication level, which
 * rejects keys and signature digests under 80 bits of security (RSA under
 * 1024 bits, MD5, SHA-1). Without it, X509_verify_cert checks no key size
 * or digest at all, which no TLS client built on OpenSSL does.
 */
#define AUTH_LEVEL 1

/* warm_up takes libcrypto once through every step of a request; it
 * returns 0 if any step failed. */
int warm_up(void);

#endif
