/*
 * pkie-verify-openssl: the OpenSSL back end of `pkie verify`.
 *
 * It speaks pkie-verify/1 (docs/formats/notary-and-tools.md, "Verifier helper protocol"):
 * a hello line, then one JSON request per line on standard input and one
 * JSON answer per line on standard output, in order, until end of input.
 * Certificates are verified with libcrypto's X509_verify_cert, the path
 * validator behind libssl, s_client and libcurl's OpenSSL back end.
 *
 * A request line longer than MAX_LINE bytes is answered with an error for
 * id 0 (the id cannot be read without parsing it) and the helper goes on
 * with the next line, so one bad request never costs the others.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "pkie-verify-openssl.h"

#define PROTOCOL "pkie-verify/1"
#define BACKEND "openssl"

/* docs/formats/notary-and-tools.md: a request is at most 16 MiB. */
#define MAX_LINE (16u * 1024u * 1024u)
/* Bounds on the work one request may ask for; a request over them gets an
 * error answer. */
#define MAX_ROOTS 4096
#define MAX_CHAIN 64
/* An answer must stay under 64 KiB; reasons are cut well below that. */
#define MAX_REASON 1024


struct phases {
	int64_t roots_ns, chain_ns, verify_ns, hostname_ns;
};

struct verdict {
	int valid;
	const char *code;
	char reason[MAX_REASON];
	int depth;
	int roots_skipped;
	struct phases ph;
};

int auth_level = 1;

/* auth_level_init reads the security level of a default TLS client context,
 * which is what a client such as curl or s_client verifies at. */
static void auth_level_init(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (ctx != NULL) {
		auth_level = SSL_CTX_get_security_level(ctx);
		SSL_CTX_free(ctx);
	}
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *msg)
{
	fprintf(stderr, "pkie-verify-openssl: %s\n", msg);
	exit(1);
}

/* emit writes obj as one compact line and frees it. A helper that cannot
 * write its answer cannot go on: pkie sees it exit and reports stderr. */
static void emit(json_t *obj)
{
	if (obj == NULL)
		die("out of memory building an answer");
	char *s = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	if (s == NULL)
		die("out of memory encoding an answer");
	if (fputs(s, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) == EOF) {
		free(s);
		die("cannot write to standard output");
	}
	free(s);
}

/*
 * utf8_len returns the length of the well-formed UTF-8 sequence (RFC 3629:
 * no overlong forms, surrogates or code points past U+10FFFF) at s, or 0.
 */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];
	size_t n;
	unsigned int cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* jstr makes a JSON string of s with every byte that is not part of
 * well-formed UTF-8 replaced by '?': a reason cut at MAX_REASON may end
 * inside a character, and no message may turn into a failure to answer. */
static json_t *jstr(const char *s)
{
	size_t n = strlen(s);
	char *t = malloc(n + 1);
	if (t == NULL)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t k = utf8_len((const unsigned char *)s + i);
		if (k == 0) {
			t[i++] = '?';
			continue;
		}
		memcpy(t + i, s + i, k);
		i += k;
	}
	t[n] = '\0';
	json_t *j = json_stringn(t, n);
	free(t);
	return j;
}

/* put sets o[key] = v (stealing v); only memory exhaustion fails it, and
 * an answer missing a field is worse than no answer. */
static void put(json_t *o, const char *key, json_t *v)
{
	if (json_object_set_new(o, key, v) != 0)
		die("out of memory building an answer");
}

static void emit_error(json_int_t id, const char *fmt, ...)
{
	char msg[MAX_REASON];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	json_t *o = json_object();
	if (o == NULL)
		die("out of memory");
	put(o, "id", json_integer(id));
	put(o, "error", jstr(msg));
	emit(o);
}

static void emit_verdict(json_int_t id, const struct verdict *v)
{
	json_t *o = json_object();
	json_t *ph = json_object();
	if (o == NULL || ph == NULL)
		die("out of memory");
	put(o, "id", json_integer(id));
	put(o, "valid", json_boolean(v->valid));
	put(o, "code", jstr(v->code));
	put(o, "reason", jstr(v->reason));
	put(o, "depth", json_integer(v->depth));
	put(o, "roots_skipped", json_integer(v->roots_skipped));
	put(ph, "roots_ns", json_integer(v->ph.roots_ns));
	put(ph, "chain_ns", json_integer(v->ph.chain_ns));
	put(ph, "verify_ns", json_integer(v->ph.verify_ns));
	put(ph, "hostname_ns", json_integer(v->ph.hostname_ns));
	put(o, "phases", ph);
	emit(o);
}

/*
 * b64decode decodes standard base64 (RFC 4648 section 4, padded, no
 * whitespace) into a new buffer. EVP_DecodeBlock alone is too lenient (it
 * trims whitespace) and counts padding as decoded zero bytes, so the input
 * is checked first and the padding subtracted after.
 */
static unsigned char *b64decode(const char *s, size_t n, size_t *outlen)
{
	if (n == 0) {
		/* Zero bytes: decoded, and left to fail as a certificate. */
		*outlen = 0;
		return malloc(1);
	}
	if (n % 4 != 0 || n > INT_MAX)
		return NULL;
	size_t pad = 0;
	if (s[n - 1] == '=')
		pad++;
	if (s[n - 2] == '=')
		pad++;
	for (size_t i = 0; i < n - pad; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9') || c == '+' || c == '/'))
			return NULL;
	}
	unsigned char *out = malloc(n / 4 * 3 + 1);
	if (out == NULL)
		return NULL;
	int got = EVP_DecodeBlock(out, (const unsigned char *)s, (int)n);
	if (got < 0 || (size_t)got < pad) {
		free(out);
		return NULL;
	}
	*outlen = (size_t)got - pad;
	return out;
}

/*
 * parse_der parses exactly one DER certificate: trailing bytes make it
 * unparseable, as they do for crypto/x509 and webpki. On failure it says
 * why in why (unless NULL), in libcrypto's words where it has any.
 */
static X509 *parse_der(const unsigned char *der, size_t n, char *why, size_t whylen)
{
	if (n > LONG_MAX) {
		if (why != NULL)
			snprintf(why, whylen, "too long");
		return NULL;
	}
	ERR_clear_error();
	const unsigned char *p = der;
	X509 *x = d2i_X509(NULL, &p, (long)n);
	if (x == NULL) {
		unsigned long e = ERR_peek_last_error();
		if (why == NULL)
			; /* nobody asked */
		else if (e != 0)
			ERR_error_string_n(e, why, whylen);
		else
			snprintf(why, whylen, "not a certificate");
		ERR_clear_error();
		return NULL;
	}
	if (p != der + n) {
		if (why != NULL)
			snprintf(why, whylen, "%zu bytes after the certificate", (size_t)(der + n - p));
		X509_free(x);
		return NULL;
	}
	return x;
}

/* last_openssl_error describes the newest queued libcrypto error. */
static void last_openssl_error(char *buf, size_t n)
{
	unsigned long e = ERR_peek_last_error();
	if (e == 0)
		snprintf(buf, n, "no error queued");
	else
		ERR_error_string_n(e, buf, n);
}

static const char *code_for(int err)
{
	switch (err) {
	case X509_V_OK:
		return "ok";
	case X509_V_ERR_CERT_HAS_EXPIRED:
		return "expired";
	case X509_V_ERR_CERT_NOT_YET_VALID:
		return "not_yet_valid";
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
	case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
	case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
	case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
	case X509_V_ERR_CERT_UNTRUSTED:
		return "unknown_issuer";
	case X509_V_ERR_CERT_SIGNATURE_FAILURE:
	case X509_V_ERR_UNABLE_TO_DECRYPT_CERT_SIGNATURE:
	case X509_V_ERR_CRL_SIGNATURE_FAILURE:
	case X509_V_ERR_UNABLE_TO_DECRYPT_CRL_SIGNATURE:
		return "bad_signature";
	case X509_V_ERR_PERMITTED_VIOLATION:
	case X509_V_ERR_EXCLUDED_VIOLATION:
	case X509_V_ERR_SUBTREE_MINMAX:
	case X509_V_ERR_UNSUPPORTED_CONSTRAINT_TYPE:
	case X509_V_ERR_UNSUPPORTED_CONSTRAINT_SYNTAX:
	case X509_V_ERR_UNSUPPORTED_NAME_SYNTAX:
#ifdef X509_V_ERR_NAME_CONSTRAINTS_WITHOUT_SANS
	case X509_V_ERR_NAME_CONSTRAINTS_WITHOUT_SANS:
#endif
		return "name_constraints";
	case X509_V_ERR_PATH_LENGTH_EXCEEDED:
		return "path_length";
	case X509_V_ERR_INVALID_CA:
	case X509_V_ERR_KEYUSAGE_NO_CERTSIGN:
		return "not_ca";
	case X509_V_ERR_INVALID_PURPOSE:
		return "bad_usage";
	case X509_V_ERR_CERT_CHAIN_TOO_LONG:
		return "limits";
	case X509_V_ERR_UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY:
	case X509_V_ERR_CA_KEY_TOO_SMALL:
	case X509_V_ERR_EE_KEY_TOO_SMALL:
	case X509_V_ERR_CA_MD_TOO_WEAK:
	case X509_V_ERR_UNSUPPORTED_SIGNATURE_ALGORITHM:
	case X509_V_ERR_UNHANDLED_CRITICAL_EXTENSION:
		return "unsupported";
	default:
		return "other";
	}
}

/*
 * is_ip_literal says whether host is an IPv4 or IPv6 literal, also in
 * brackets ("[::1]"), and leaves the bare literal in ip: the same reading
 * as crypto/x509's VerifyHostname, so the back ends differ in matching,
 * not in what they take the host to be.
 */
static int is_ip_literal(const char *host, char *ip, size_t iplen)
{
	size_t n = strlen(host);
	unsigned char addr[16];
	if (n >= 3 && host[0] == '[' && host[n - 1] == ']') {
		host++;
		n -= 2;
	}
	if (n >= iplen)
		return 0;
	memcpy(ip, host, n);
	ip[n] = '\0';
	return inet_pton(AF_INET, ip, addr) == 1 || inet_pton(AF_INET6, ip, addr) == 1;
}

/* request is one decoded request: certificates as DER, not yet parsed. */
struct request {
	json_int_t id;
	size_t nroots, nchain;
	unsigned char **roots, **chain;
	size_t *rootlen, *chainlen;
	const char *host; /* owned by the JSON document */
	size_t hostlen;
	time_t time;
	int purpose;
};

static void request_free(struct request *r)
{
	for (size_t i = 0; i < r->nroots; i++)
		free(r->roots[i]);
	for (size_t i = 0; i < r->nchain; i++)
		free(r->chain[i]);
	free(r->roots);
	free(r->chain);
	free(r->rootlen);
	free(r->chainlen);
}

/*
 * decode_certs decodes a JSON array of base64 strings into r's arrays.
 * It returns NULL on success or a message for an error answer.
 */
static const char *decode_certs(json_t *arr, const char *field, size_t max, size_t *count,
				unsigned char ***ders, size_t **lens, char *msg, size_t msglen)
{
	if (!json_is_array(arr)) {
		snprintf(msg, msglen, "%s: missing or not an array", field);
		return msg;
	}
	size_t n = json_array_size(arr);
	if (n == 0) {
		snprintf(msg, msglen, "%s: empty, at least one certificate is needed", field);
		return msg;
	}
	if (n > max) {
		snprintf(msg, msglen, "%s: %zu certificates, more than the %zu this helper accepts",
			 field, n, max);
		return msg;
	}
	*ders = calloc(n, sizeof **ders);
	*lens = calloc(n, sizeof **lens);
	if (*ders == NULL || *lens == NULL) {
		snprintf(msg, msglen, "out of memory");
		return msg;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(arr, i);
		if (!json_is_string(s)) {
			snprintf(msg, msglen, "%s[%zu]: not a string", field, i);
			return msg;
		}
		(*ders)[i] = b64decode(json_string_value(s), json_string_length(s), &(*lens)[i]);
		if ((*ders)[i] == NULL) {
			snprintf(msg, msglen, "%s[%zu]: not standard padded base64", field, i);
			return msg;
		}
		*count = i + 1;
	}
	return NULL;
}

/* parse_request fills r from doc; it returns NULL or an error message. */
static const char *parse_request(json_t *doc, struct request *r, char *msg, size_t msglen)
{
	json_t *v;
	const char *e;

	if (!json_is_object(doc))
		return "request is not a JSON object";

	v = json_object_get(doc, "id");
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return "id: missing or not an unsigned integer";
	r->id = json_integer_value(v);

	v = json_object_get(doc, "time");
	if (!json_is_integer(v))
		return "time: missing or not an integer (Unix seconds)";
	json_int_t t = json_integer_value(v);
	if ((json_int_t)(time_t)t != t)
		return "time: out of range";
	r->time = (time_t)t;

	v = json_object_get(doc, "purpose");
	if (!json_is_string(v))
		return "purpose: missing or not a string";
	if (strcmp(json_string_value(v), "server") == 0)
		r->purpose = X509_PURPOSE_SSL_SERVER;
	else if (strcmp(json_string_value(v), "client") == 0)
		r->purpose = X509_PURPOSE_SSL_CLIENT;
	else
		return "purpose: not \"server\" or \"client\"";

	/* An absent host is the empty host: no hostname check. */
	v = json_object_get(doc, "host");
	if (v == NULL) {
		r->host = "";
		r->hostlen = 0;
	} else if (json_is_string(v)) {
		r->host = json_string_value(v);
		r->hostlen = json_string_length(v);
		if (strlen(r->host) != r->hostlen)
			return "host: contains a NUL character";
	} else {
		return "host: not a string";
	}

	e = decode_certs(json_object_get(doc, "roots"), "roots", MAX_ROOTS, &r->nroots,
			 &r->roots, &r->rootlen, msg, msglen);
	if (e != NULL)
		return e;
	return decode_certs(json_object_get(doc, "chain"), "chain", MAX_CHAIN, &r->nchain,
			    &r->chain, &r->chainlen, msg, msglen);
}

static void set_reason(struct verdict *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->reason, sizeof v->reason, fmt, ap);
	va_end(ap);
}

/*
 * verify runs the four phases on a decoded request and fills v. It returns
 * NULL, or a message when the library failed in a way that is no verdict
 * (memory exhausted, an internal error), which becomes an error answer.
 */
static const char *verify(const struct request *r, struct verdict *v, char *msg, size_t msglen)
{
	const char *fail = NULL;
	X509_STORE *store = NULL;
	X509 **certs = NULL;
	STACK_OF(X509) *untrusted = NULL;
	X509_STORE_CTX *ctx = NULL;
	int64_t t0;

	memset(v, 0, sizeof *v);

	/* Phase roots: the trust store. */
	t0 = now_ns();
	store = X509_STORE_new();
	if (store == NULL) {
		fail = "X509_STORE_new failed";
		goto out;
	}
	for (size_t i = 0; i < r->nroots; i++) {
		X509 *x = parse_der(r->roots[i], r->rootlen[i], NULL, 0);
		if (x == NULL) {
			v->roots_skipped++;
			continue;
		}
		/* The store takes its own reference. */
		int ok = X509_STORE_add_cert(store, x);
		X509_free(x);
		if (!ok) {
			snprintf(msg, msglen, "roots[%zu]: X509_STORE_add_cert failed", i);
			fail = msg;
			goto out;
		}
	}
	v->ph.roots_ns = now_ns() - t0;

	/* Phase chain: the leaf and the untrusted rest. */
	t0 = now_ns();
	certs = calloc(r->nchain, sizeof *certs);
	untrusted = sk_X509_new_null();
	if (certs == NULL || untrusted == NULL) {
		fail = "out of memory";
		goto out;
	}
	for (size_t i = 0; i < r->nchain; i++) {
		char why[256];
		certs[i] = parse_der(r->chain[i], r->chainlen[i], why, sizeof why);
		if (certs[i] == NULL) {
			v->ph.chain_ns = now_ns() - t0;
			v->code = "malformed";
			set_reason(v, "chain[%zu] does not parse as an X.509 certificate: %s", i, why);
			goto out;
		}
		if (i > 0 && !sk_X509_push(untrusted, certs[i])) {
			fail = "out of memory";
			goto out;
		}
	}
	v->ph.chain_ns = now_ns() - t0;

	/* Phase verify: path building, signatures, policy for the purpose at the time. */
	ERR_clear_error();
	t0 = now_ns();
	ctx = X509_STORE_CTX_new();
	if (ctx == NULL || !X509_STORE_CTX_init(ctx, store, certs[0], untrusted)) {
		fail = "X509_STORE_CTX_init failed";
		goto out;
	}
	X509_VERIFY_PARAM *param = X509_STORE_CTX_get0_param(ctx);
	X509_VERIFY_PARAM_set_time(param, r->time);
	X509_VERIFY_PARAM_set_auth_level(param, AUTH_LEVEL);
	/* Every root is a trust anchor (docs/formats/notary-and-tools.md), self-signed or not,
	 * as RFC 5280 section 6.1.1 has it and as libcurl sets it (since
	 * 7.68); without the flag OpenSSL only ends a path at a self-signed
	 * certificate. */
	X509_VERIFY_PARAM_set_flags(param, X509_V_FLAG_PARTIAL_CHAIN);
	if (!X509_STORE_CTX_set_purpose(ctx, r->purpose)) {
		fail = "X509_STORE_CTX_set_purpose failed";
		goto out;
	}
	int ret = X509_verify_cert(ctx);
	v->ph.verify_ns = now_ns() - t0;

	if (ret != 1) {
		int err = X509_STORE_CTX_get_error(ctx);
		if (err == X509_V_OK) {
			/* A negative return with no verification error is the
			 * library failing, not the chain. */
			char e[256];
			last_openssl_error(e, sizeof e);
			snprintf(msg, msglen, "X509_verify_cert failed without a verification error: %s", e);
			fail = msg;
			goto out;
		}
		v->code = code_for(err);
		set_reason(v, "%s (depth %d)", X509_verify_cert_error_string(err),
			   X509_STORE_CTX_get_error_depth(ctx));
		goto out;
	}

	/* Phase hostname: only once the path verified. */
	if (r->hostlen > 0) {
		char ip[64];
		int hit;
		int isip = is_ip_literal(r->host, ip, sizeof ip);
		t0 = now_ns();
		if (isip)
			hit = X509_check_ip_asc(certs[0], ip, 0);
		else
			hit = X509_check_host(certs[0], r->host, r->hostlen, 0, NULL);
		v->ph.hostname_ns = now_ns() - t0;
		if (hit != 1) {
			if (hit == -1) {
				fail = "X509_check_host failed internally";
				goto out;
			}
			v->code = "name_mismatch";
			set_reason(v, "%s: the leaf is not valid for %s %s%s",
				   X509_verify_cert_error_string(isip ? X509_V_ERR_IP_ADDRESS_MISMATCH
								      : X509_V_ERR_HOSTNAME_MISMATCH),
				   isip ? "IP address" : "host", r->host,
				   hit == -2 ? " (malformed)" : "");
			goto out;
		}
	}

	v->valid = 1;
	v->code = "ok";
	v->depth = sk_X509_num(X509_STORE_CTX_get0_chain(ctx));
	set_reason(v, "ok");

out:
	X509_STORE_CTX_free(ctx);
	sk_X509_free(untrusted);
	if (certs != NULL)
		for (size_t i = 0; i < r->nchain; i++)
			X509_free(certs[i]);
	free(certs);
	X509_STORE_free(store);
	return fail;
}

static void handle(const char *line, size_t n)
{
	json_error_t jerr;
	char msg[MAX_REASON];
	struct request r;
	struct verdict v;

	memset(&r, 0, sizeof r);
	json_t *doc = json_loadb(line, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (doc == NULL) {
		emit_error(0, "bad JSON: %s (column %d)", jerr.text, jerr.column);
		return;
	}
	/* The id first, so even a request rejected for another field is
	 * answered under its own id. */
	json_t *idv = json_is_object(doc) ? json_object_get(doc, "id") : NULL;
	if (json_is_integer(idv) && json_integer_value(idv) >= 0)
		r.id = json_integer_value(idv);

	const char *e = parse_request(doc, &r, msg, sizeof msg);
	if (e != NULL) {
		emit_error(r.id, "%s", e);
	} else {
		e = verify(&r, &v, msg, sizeof msg);
		if (e != NULL)
			emit_error(r.id, "openssl: %s", e);
		else
			emit_verdict(r.id, &v);
	}
	request_free(&r);
	json_decref(doc);
	/* Nothing queued for one request may explain the next. */
	ERR_clear_error();
}

int main(void)
{
	/* libcrypto loads its error strings on first use; loading them now
	 * keeps that one-time cost out of the first malformed request's
	 * chain phase. */
	if (!OPENSSL_init_crypto(OPENSSL_INIT_LOAD_CRYPTO_STRINGS, NULL))
		die("OPENSSL_init_crypto failed");
	auth_level_init();
	/* Likewise the rest of the library's first-use set-up (warmup.c). A
	 * failure only means the first request may be slower. */
	if (!warm_up())
		fprintf(stderr, "pkie-verify-openssl: warm-up failed; the first request's phases include libcrypto's set-up\n");
	ERR_clear_error();
	json_t *hello = json_object();
	if (hello == NULL)
		die("out of memory");
	put(hello, "protocol", json_string(PROTOCOL));
	put(hello, "backend", json_string(BACKEND));
	char lib[256];
	snprintf(lib, sizeof lib, "%s (security level %d)", OpenSSL_version(OPENSSL_VERSION), auth_level);
	put(hello, "library", jstr(lib));
	emit(hello);

	/* One buffer for the longest allowed line, reused for every request. */
	char *buf = malloc(MAX_LINE);
	if (buf == NULL)
		die("out of memory for the request buffer");
	for (;;) {
		size_t n = 0;
		int c, toolong = 0;
		while ((c = getc_unlocked(stdin)) != EOF && c != '\n') {
			if (n < MAX_LINE)
				buf[n++] = (char)c;
			else
				toolong = 1;
		}
		if (ferror(stdin)) {
			free(buf);
			die("cannot read standard input");
		}
		if (c == EOF && n == 0 && !toolong)
			break;
		if (toolong)
			emit_error(0, "request longer than %u bytes", MAX_LINE);
		else
			handle(buf, n);
		if (c == EOF)
			break;
	}
	free(buf);
	return 0;
}
