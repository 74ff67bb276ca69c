/* Shared between pkie-verify-openssl.c and warmup.c. */
#ifndef PKIE_VERIFY_OPENSSL_H
#define PKIE_VERIFY_OPENSSL_H

/*
 * The authentication level libssl hands X509_verify_cert: a TLS client's
 * security level as this system's libssl sets it by default (the build's
 * OPENSSL_TLS_SECURITY_LEVEL, raised by openssl.cnf where a system does;
 * Debian 12 builds with 2). It rejects keys and signature digests under
 * the level's bits of security (at 2: RSA under 2048 bits, SHA-1, MD5).
 * Without it X509_verify_cert checks no key size or digest at all, which
 * no TLS client built on OpenSSL does. Read once at start (auth_level_init).
 */
extern int auth_level;
#define AUTH_LEVEL auth_level

/* warm_up takes libcrypto once through every step of a request; it
 * returns 0 if any step failed. */
int warm_up(void);

#endif
