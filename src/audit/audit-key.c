/*
 * audit-key.c - the store's Ed25519 signing key: created at first use,
 * kept in the state directory as the raw 32-byte private key (0600) and
 * the public key as PEM (SubjectPublicKeyInfo, 0644), so that any
 * OpenSSL-based tool can check a checkpoint.
 *
 * The private key is raw rather than PEM because every `paddock run` loads
 * it: OpenSSL 3's PEM decoding sets up its decoder framework and loads
 * every cipher and error string, several milliseconds of CPU per run.
 */
#include "common.h"
#include "audit-internal.h"
#include "base.h"

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

/* Create `path` (never replacing one) with `mode`, open for writing. */
static FILE *create_new(const char *path, mode_t mode, struct pdk_error **err)
{
	int fd = TEMP_FAILURE_RETRY(
		open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
	FILE *f;

	if (fd < 0) {
		(void)pdk_error_set(err, errno, "cannot create '%s'", path);
		return NULL;
	}
	f = fdopen(fd, "w");
	if (f == NULL) {
		(void)pdk_error_set(err, errno, "cannot create '%s'", path);
		(void)close(fd);
	}
	return f;
}

static int finish_file(FILE *f, const char *path, bool ok, struct pdk_error **err)
{
	if (!ok || fflush(f) != 0 || fsync(fileno(f)) != 0)
		return pdk_error_setx(err, EIO, "cannot write '%s'", path);
	return 0;
}

/* The raw private key (32 bytes) to a new file, 0600. */
static int write_raw(const char *path, EVP_PKEY *k, struct pdk_error **err)
{
	_cleanup_fclose_ FILE *f = create_new(path, 0600, err);
	unsigned char raw[32];
	size_t len = sizeof(raw);
	bool ok;

	if (f == NULL)
		return -EIO;
	ok = EVP_PKEY_get_raw_private_key(k, raw, &len) == 1 && len == sizeof(raw) &&
	     fwrite(raw, 1, len, f) == len;
	explicit_bzero(raw, sizeof(raw));
	return finish_file(f, path, ok, err);
}

static int write_pub_pem(const char *path, EVP_PKEY *k, struct pdk_error **err)
{
	_cleanup_fclose_ FILE *f = create_new(path, 0644, err);

	if (f == NULL)
		return -EIO;
	return finish_file(f, path, PEM_write_PUBKEY(f, k) == 1, err);
}

static EVP_PKEY *read_raw(const char *path, struct pdk_error **err)
{
	_cleanup_close_ int fd = TEMP_FAILURE_RETRY(open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
	unsigned char raw[33];
	EVP_PKEY *k = NULL;
	ssize_t n;

	if (fd < 0) {
		(void)pdk_error_set(err, errno, "cannot open '%s'", path);
		return NULL;
	}
	n = pdk_read_all(fd, raw, sizeof(raw));
	if (n == 32)
		k = EVP_PKEY_new_raw_private_key_ex(NULL, "ED25519", NULL, raw, 32);
	explicit_bzero(raw, sizeof(raw));
	if (k == NULL)
		(void)pdk_error_setx(err, EINVAL, "'%s' is not a raw 32-byte Ed25519 private key",
				     path);
	return k;
}

static EVP_PKEY *read_pub_pem(const char *path, struct pdk_error **err)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	EVP_PKEY *k;

	if (f == NULL) {
		(void)pdk_error_set(err, errno, "cannot open '%s'", path);
		return NULL;
	}
	k = PEM_read_PUBKEY(f, NULL, NULL, NULL);
	if (k == NULL || EVP_PKEY_get_base_id(k) != EVP_PKEY_ED25519) {
		EVP_PKEY_free(k);
		(void)pdk_error_setx(err, EINVAL, "'%s' is not an Ed25519 PEM public key", path);
		return NULL;
	}
	return k;
}

/*
 * Publish a key file atomically: `fill` writes a temporary name, which is
 * then link()ed to `path`, so of two processes creating it at once one wins
 * (the other's -EEXIST is success: it uses the winner's file).
 */
static int publish(const char *path, EVP_PKEY *k,
		   int (*fill)(const char *path, EVP_PKEY *k, struct pdk_error **err),
		   struct pdk_error **err)
{
	_cleanup_free_ char *tmp = pdk_xasprintf("%s.%d.tmp", path, (int)getpid());
	int rc;

	(void)unlink(tmp); /* a stale one of a crashed process with our pid */
	if (fill(tmp, k, err) < 0)
		return -EIO;
	rc = link(tmp, path) < 0 ? -errno : 0;
	(void)unlink(tmp);
	if (rc < 0 && rc != -EEXIST)
		return pdk_error_set(err, -rc, "cannot create '%s'", path);
	return 0;
}

/* A new pair: its private key published, so a racing process loads the winner's. */
static int create_pair(const char *path, struct pdk_error **err)
{
	_cleanup_pkey_ EVP_PKEY *k = generate();

	if (k == NULL)
		return pdk_error_setx(err, EIO, "cannot generate an Ed25519 key");
	return publish(path, k, write_raw, err);
}

/* The public key file, written from the private key when it is missing. */
static int ensure_pub(const char *state_dir, EVP_PKEY *k, struct pdk_error **err)
{
	_cleanup_free_ char *pub = pdk_xasprintf("%s/%s", state_dir, PDK_AUDIT_PUBKEY);

	if (access(pub, F_OK) == 0)
		return 0;
	return publish(pub, k, write_pub_pem, err);
}

int pdk__audit_load_key(struct pdk_audit *a, struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", a->state_dir, PDK_AUDIT_KEY);
	_cleanup_pkey_ EVP_PKEY *k = NULL;

	if (access(path, F_OK) < 0 && create_pair(path, err) < 0)
		return -EIO;
	k = read_raw(path, err);
	if (k == NULL || key_id_of(k, a->key_id, err) < 0 || ensure_pub(a->state_dir, k, err) < 0)
		return pdk_error_wrap(err, "audit signing key");
	a->key = steal_ptr(&k);
	return 0;
}

int pdk__audit_load_pubkey(const char *state_dir, EVP_PKEY **out, char key_id[PDK_AUDIT_HASH_HEX],
			   struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", state_dir, PDK_AUDIT_PUBKEY);
	_cleanup_pkey_ EVP_PKEY *k = read_pub_pem(path, err);

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
