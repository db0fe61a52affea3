/*
 * input.c - the bytes of a layer or a blob: a range of a file, read with
 * pread(), decompressed as its first bytes say (gzip, zstd or none), and
 * digested on both sides (the blob's digest is of what was read, a layer's
 * diff_id of what came out).
 */
#include "common.h"
#include "base.h"
#include "image-internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const unsigned char gzip_magic[] = {0x1f, 0x8b};
static const unsigned char zstd_magic[] = {0x28, 0xb5, 0x2f, 0xfd};

char *pdk__img_sha256_final(EVP_MD_CTX *ctx)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	EVP_MD_CTX *copy = EVP_MD_CTX_new();

	if (copy == NULL || EVP_MD_CTX_copy_ex(copy, ctx) != 1 ||
	    EVP_DigestFinal_ex(copy, md, &len) != 1)
		pdk_oom();
	EVP_MD_CTX_free(copy);
	for (unsigned i = 0; i < len; i++)
		(void)snprintf(hex + 2 * i, 3, "%02x", md[i]);
	hex[2 * len] = '\0';
	return pdk_xasprintf("sha256:%s", hex);
}

static EVP_MD_CTX *sha_new(void)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		pdk_oom();
	return ctx;
}

char *pdk__img_sha256(const void *data, size_t len)
{
	EVP_MD_CTX *ctx = sha_new();
	char *d;

	if (EVP_DigestUpdate(ctx, data, len) != 1)
		pdk_oom();
	d = pdk__img_sha256_final(ctx);
	EVP_MD_CTX_free(ctx);
	return d;
}

bool pdk__img_digest_valid(const char *d)
{
	if (d == NULL || strncmp(d, "sha256:", 7) != 0 || strlen(d) != 7 + 64)
		return false;
	for (const char *c = d + 7; *c != '\0'; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return false;
	return true;
}

/* More raw bytes into in->buf (what was not consumed moved to its start). 0 or negative + *err. */
static int fill(struct pdk__img_in *in, struct pdk_error **err)
{
	size_t want;
	ssize_t n;

	if (in->rpos > 0) {
		memmove(in->buf, in->buf + in->rpos, in->rlen - in->rpos);
		in->rlen -= in->rpos;
		in->rpos = 0;
	}
	want = PDK__IMG_INBUF - in->rlen;
	if (in->end != UINT64_MAX && in->end - in->pos < want)
		want = (size_t)(in->end - in->pos);
	if (want == 0) {
		in->eof_in = in->end != UINT64_MAX && in->pos >= in->end;
		return 0;
	}
	do
		n = pread(in->fd, in->buf + in->rlen, want, (off_t)in->pos);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return pdk_error_set(err, errno, "cannot read '%s'", in->label);
	if (n == 0)
		in->eof_in = true;
	if (EVP_DigestUpdate(in->sha_in, in->buf + in->rlen, (size_t)n) != 1)
		pdk_oom();
	in->rlen += (size_t)n;
	in->pos += (uint64_t)n;
	in->bytes_in += (uint64_t)n;
	return 0;
}

int pdk__img_in_open(struct pdk__img_in *in, int fd, uint64_t off, uint64_t len, const char *label,
		     struct pdk_error **err)
{
	memset(in, 0, sizeof(*in));
	in->fd = fd;
	in->pos = off;
	in->end = len == UINT64_MAX ? UINT64_MAX : off + len;
	in->label = label;
	in->buf = pdk_xmalloc(PDK__IMG_INBUF);
	in->sha_in = sha_new();
	in->sha_out = sha_new();
	while (in->rlen < sizeof(zstd_magic) && !in->eof_in)
		if (fill(in, err) < 0)
			return -1;
	if (in->rlen >= 2 && memcmp(in->buf, gzip_magic, 2) == 0) {
		in->codec = PDK__IMG_GZIP;
		if (inflateInit2(&in->z, 16 + MAX_WBITS) != Z_OK)
			return pdk_error_setx(err, ENOMEM, "cannot start gzip for '%s'", label);
		in->z_live = true;
	} else if (in->rlen >= 4 && memcmp(in->buf, zstd_magic, 4) == 0) {
		in->codec = PDK__IMG_ZSTD;
		in->zs = ZSTD_createDStream();
		if (in->zs == NULL || ZSTD_isError(ZSTD_initDStream(in->zs)))
			return pdk_error_setx(err, ENOMEM, "cannot start zstd for '%s'", label);
	}
	return 0;
}

static ssize_t read_raw(struct pdk__img_in *in, void *buf, size_t n, struct pdk_error **err)
{
	size_t k;

	if (in->rpos == in->rlen && !in->eof_in && fill(in, err) < 0)
		return -1;
	k = in->rlen - in->rpos < n ? in->rlen - in->rpos : n;
	memcpy(buf, in->buf + in->rpos, k);
	in->rpos += k;
	return (ssize_t)k;
}

/* gzip: members one after another (pigz, concatenated streams) are one stream. */
static ssize_t read_gzip(struct pdk__img_in *in, void *buf, size_t n, struct pdk_error **err)
{
	for (;;) {
		int zr;

		if (in->rpos == in->rlen && !in->eof_in && fill(in, err) < 0)
			return -1;
		if (in->rpos == in->rlen && in->eof_in)
			return in->frame_done ? 0
					      : pdk_error_setx(err, EIO,
							       "'%s' ends inside its gzip stream",
							       in->label);
		if (in->frame_done) {
			if (inflateReset(&in->z) != Z_OK)
				return pdk_error_setx(err, EIO, "gzip: cannot reset");
			in->frame_done = false;
		}
		in->z.next_in = in->buf + in->rpos;
		in->z.avail_in = (uInt)(in->rlen - in->rpos);
		in->z.next_out = buf;
		in->z.avail_out = (uInt)(n > UINT32_MAX ? UINT32_MAX : n);
		zr = inflate(&in->z, Z_NO_FLUSH);
		in->rpos = in->rlen - in->z.avail_in;
		if (zr == Z_STREAM_END)
			in->frame_done = true;
		else if (zr != Z_OK && zr != Z_BUF_ERROR)
			return pdk_error_setx(err, EINVAL, "'%s' is not valid gzip (at byte %llu)",
					      in->label, (unsigned long long)in->bytes_in);
		if ((size_t)(in->z.next_out - (Bytef *)buf) > 0)
			return (ssize_t)(in->z.next_out - (Bytef *)buf);
	}
}

static ssize_t read_zstd(struct pdk__img_in *in, void *buf, size_t n, struct pdk_error **err)
{
	for (;;) {
		ZSTD_inBuffer ib;
		ZSTD_outBuffer ob = {.dst = buf, .size = n, .pos = 0};
		size_t zr;

		if (in->rpos == in->rlen && !in->eof_in && fill(in, err) < 0)
			return -1;
		if (in->rpos == in->rlen && in->eof_in)
			return in->frame_done
				       ? 0
				       : pdk_error_setx(err, EIO, "'%s' ends inside its zstd frame",
							in->label);
		ib = (ZSTD_inBuffer){.src = in->buf + in->rpos, .size = in->rlen - in->rpos};
		zr = ZSTD_decompressStream(in->zs, &ob, &ib);
		in->rpos += ib.pos;
		if (ZSTD_isError(zr))
			return pdk_error_setx(err, EINVAL, "'%s' is not valid zstd: %s", in->label,
					      ZSTD_getErrorName(zr));
		in->frame_done = zr == 0;
		if (ob.pos > 0)
			return (ssize_t)ob.pos;
	}
}

ssize_t pdk__img_in_read(struct pdk__img_in *in, void *buf, size_t n, struct pdk_error **err)
{
	ssize_t k;

	switch (in->codec) {
	case PDK__IMG_GZIP:
		k = read_gzip(in, buf, n, err);
		break;
	case PDK__IMG_ZSTD:
		k = read_zstd(in, buf, n, err);
		break;
	case PDK__IMG_RAW:
	default:
		k = read_raw(in, buf, n, err);
		break;
	}
	if (k > 0) {
		if (EVP_DigestUpdate(in->sha_out, buf, (size_t)k) != 1)
			pdk_oom();
		in->bytes_out += (uint64_t)k;
	}
	return k;
}

int pdk__img_in_full(struct pdk__img_in *in, void *buf, size_t n, struct pdk_error **err)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = pdk__img_in_read(in, (char *)buf + got, n - got, err);

		if (k < 0)
			return -1;
		if (k == 0)
			return pdk_error_setx(err, EIO, "'%s' ends before its tar archive does",
					      in->label);
		got += (size_t)k;
	}
	return 0;
}

char *pdk__img_in_digest(struct pdk__img_in *in, bool out)
{
	return pdk__img_sha256_final(out ? in->sha_out : in->sha_in);
}

void pdk__img_in_close(struct pdk__img_in *in)
{
	if (in->z_live)
		(void)inflateEnd(&in->z);
	ZSTD_freeDStream(in->zs);
	EVP_MD_CTX_free(in->sha_in);
	EVP_MD_CTX_free(in->sha_out);
	free(in->buf);
	memset(in, 0, sizeof(*in));
}
