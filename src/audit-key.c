/*
 * audit-key.c - the store's Ed25519 signing key: created at the first
 * checkpoint, kept in the state directory as PEM (PKCS#8 private key,
 * 0600; SubjectPublicKeyInfo public key beside it, 0644), so that any
 * OpenSSL-based tool can check a checkpoint.
 */
#include "common.h"
#include "audit-internal.h"
#include "util.h"

#include <fcntl.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void cleanup_pkey(EVP_PKEY **k)
{
	EVP_PKEY_free(*k);
}
#define _cleanup_pkey_ __attribute__((cleanup(cleanup_pkey)))

/* key_id = hex SHA-256 of the 32-byte raw public key. */
static int key_id_of(EVP_PKEY *k, char key_id[PDK_AUDIT_HASH_HEX], struct pdk_error **err)
{
	unsigned char raw[32];
	unsigned char h[32];
	size_t len = sizeof(raw);
	unsigned int hlen = 0;

	if (EVP_PKEY_get_raw_public_key(k, raw, &len) != 1 || len != sizeof(raw))
		return pdk_error_setx(err, EINVAL, "the audit key is not an Ed25519 key");
	if (EVP_Digest(raw, len, h, &hlen, EVP_sha256(), NULL) != 1)
		return pdk_error_setx(err, EIO, "sha-256 failed");
	pdk__audit_hex(h, 32, key_id);
	return 0;
}

static EVP_PKEY *generate(void)
{
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "ED25519", NULL);
	EVP_PKEY *k = NULL;

	if (ctx == NULL || EVP_PKEY_keygen_init(ctx) != 1 || EVP_PKEY_keygen(ctx, &k) != 1)
		k = NULL;
	EVP_PKEY_CTX_free(ctx);
	return k;
}

/* Write `k` (private or public half) to a new file `path` with `mode`; never replaces one. */
static int write_pem(const char *path, EVP_PKEY *k, bool private, mode_t mode,
		     struct pdk_error **err)
{
	int fd = TEMP_FAILURE_RETRY(
		open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
	_cleanup_fclose_ FILE *f = NULL;
	int ok;

	if (fd < 0)
		return pdk_error_set(err, errno, "cannot create '%s'", path);
	f = fdopen(fd, "w");
	if (f == NULL) {
		(void)close(fd);
		return pdk_error_set(err, errno, "cannot create '%s'", path);
	}
	ok = private ? PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL)
		     : PEM_write_PUBKEY(f, k);
	if (ok != 1 || fflush(f) != 0 || fsync(fd) != 0)
		return pdk_error_setx(err, EIO, "cannot write '%s'", path);
	return 0;
}

static EVP_PKEY *read_pem(const char *path, bool private, struct pdk_error **err)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	EVP_PKEY *k;

	if (f == NULL) {
		(void)pdk_error_set(err, errno, "cannot open '%s'", path);
		return NULL;
	}
	k = private ? PEM_read_PrivateKey(f, NULL, NULL, NULL)
		    : PEM_read_PUBKEY(f, NULL, NULL, NULL);
	if (k == NULL || EVP_PKEY_get_base_id(k) != EVP_PKEY_ED25519) {
		EVP_PKEY_free(k);
		(void)pdk_error_setx(err, EINVAL, "'%s' is not an Ed25519 PEM key", path);
		return NULL;
	}
	return k;
}

/*
 * A new pair, published atomically: the private key is written to a
 * temporary name and link()ed to its place, so of two processes creating
 * it at once one wins and the other loads the winner's.
 */
static int create_pair(const char *path, struct pdk_error **err)
{
	_cleanup_pkey_ EVP_PKEY *k = generate();
	_cleanup_free_ char *tmp = pdk_xasprintf("%s.%d.tmp", path, (int)getpid());
	int rc;

	if (k == NULL)
		return pdk_error_setx(err, EIO, "cannot generate an Ed25519 key");
	(void)unlink(tmp); /* a stale one of a crashed process with our pid */
	if (write_pem(tmp, k, true, 0600, err) < 0)
		return -EIO;
	rc = link(tmp, path) < 0 ? -errno : 0;
	(void)unlink(tmp);
	if (rc < 0 && rc != -EEXIST)
		return pdk_error_set(err, -rc, "cannot create '%s'", path);
	return 0;
}

/* The public key file, written from the private key when it is missing. */
static int ensure_pub(const char *state_dir, EVP_PKEY *k, struct pdk_error **err)
{
	_cleanup_free_ char *pub = pdk_xasprintf("%s/%s", state_dir, PDK_AUDIT_PUBKEY);
	_cleanup_free_ char *tmp = pdk_xasprintf("%s.%d.tmp", pub, (int)getpid());
	int rc;

	if (access(pub, F_OK) == 0)
		return 0;
	(void)unlink(tmp);
	if (write_pem(tmp, k, false, 0644, err) < 0)
		return -EIO;
	rc = link(tmp, pub) < 0 ? -errno : 0;
	(void)unlink(tmp);
	if (rc < 0 && rc != -EEXIST)
		return pdk_error_set(err, -rc, "cannot create '%s'", pub);
	return 0;
}

int pdk__audit_load_key(struct pdk_audit *a, struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", a->state_dir, PDK_AUDIT_KEY);
	_cleanup_pkey_ EVP_PKEY *k = NULL;

	if (access(path, F_OK) < 0 && create_pair(path, err) < 0)
		return -EIO;
	k = read_pem(path, true, err);
	if (k == NULL || key_id_of(k, a->key_id, err) < 0 || ensure_pub(a->state_dir, k, err) < 0)
		return pdk_error_wrap(err, "audit signing key");
	a->key = steal_ptr(&k);
	return 0;
}

int pdk__audit_load_pubkey(const char *state_dir, EVP_PKEY **out, char key_id[PDK_AUDIT_HASH_HEX],
			   struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", state_dir, PDK_AUDIT_PUBKEY);
	_cleanup_pkey_ EVP_PKEY *k = read_pem(path, false, err);

	if (k == NULL || key_id_of(k, key_id, err) < 0)
		return -EINVAL;
	*out = steal_ptr(&k);
	return 0;
}

int pdk__audit_sign(struct pdk_audit *a, const char *msg, size_t n,
		    unsigned char sig[PDK_AUDIT_SIG_LEN], struct pdk_error **err)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	size_t len = PDK_AUDIT_SIG_LEN;
	int ok;

	ok = ctx != NULL && EVP_DigestSignInit_ex(ctx, NULL, NULL, NULL, NULL, a->key, NULL) == 1 &&
	     EVP_DigestSign(ctx, sig, &len, (const unsigned char *)msg, n) == 1 &&
	     len == PDK_AUDIT_SIG_LEN;
	EVP_MD_CTX_free(ctx);
	if (!ok)
		return pdk_error_setx(err, EIO, "cannot sign an audit checkpoint");
	return 0;
}

bool pdk__audit_sig_ok(EVP_PKEY *pk, const char *msg, size_t n, const unsigned char *sig,
		       size_t sig_len)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	bool ok;

	ok = ctx != NULL && EVP_DigestVerifyInit_ex(ctx, NULL, NULL, NULL, NULL, pk, NULL) == 1 &&
	     EVP_DigestVerify(ctx, sig, sig_len, (const unsigned char *)msg, n) == 1;
	EVP_MD_CTX_free(ctx);
	return ok;
}
