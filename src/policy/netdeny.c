/*
 * netdeny.c - the bounded log of refused destinations (netdeny.h).
 */
#include "common.h"
#include "base.h"
#include "netdeny.h"

#include <pthread.h>
#include <string.h>

struct pdk_net_denials {
	pthread_mutex_t lock;
	struct pdk_net_denial v[PDK_NET_DENIALS_MAX];
	size_t n;
	uint64_t seq;      /* refusals recorded */
	uint64_t more;     /* refusals of destinations past the bound */
	uint64_t more_seq; /* the counter at the last of them */
};

struct pdk_net_denials *pdk_net_denials_new(void)
{
	struct pdk_net_denials *d = pdk_xcalloc(1, sizeof(*d));

	(void)pthread_mutex_init(&d->lock, NULL); /* cannot fail with default attributes */
	return d;
}

static void denial_release(struct pdk_net_denial *x)
{
	free(x->dest);
	free(x->why);
	free(x->allow);
}

void pdk_net_denials_free(struct pdk_net_denials *d)
{
	if (d == NULL)
		return;
	for (size_t i = 0; i < d->n; i++)
		denial_release(&d->v[i]);
	(void)pthread_mutex_destroy(&d->lock);
	free(d);
}

char *pdk_net_allow_hint(const char *host, uint16_t port)
{
	bool v6 = strchr(host, ':') != NULL;
	bool ip = v6 || strspn(host, "0123456789.") == strlen(host);

	if (v6)
		return pdk_xasprintf("[%s]:%u", host, port ? port : 443);
	if (port == 0 || ((port == 80 || port == 443) && !ip))
		return pdk_xstrdup(host);
	return pdk_xasprintf("%s:%u", host, port);
}

static char *dest_text(const char *host, uint16_t port)
{
	if (port == 0)
		return pdk_xstrdup(host);
	return strchr(host, ':') != NULL ? pdk_xasprintf("[%s]:%u", host, port)
					 : pdk_xasprintf("%s:%u", host, port);
}

void pdk_net_denials_add(struct pdk_net_denials *d, const char *host, uint16_t port,
			 const char *why)
{
	_cleanup_free_ char *dest = NULL;
	struct pdk_net_denial *x = NULL;

	if (d == NULL || host == NULL)
		return;
	dest = dest_text(host, port);
	(void)pthread_mutex_lock(&d->lock);
	d->seq++;
	for (size_t i = 0; i < d->n && x == NULL; i++)
		if (strcmp(d->v[i].dest, dest) == 0)
			x = &d->v[i];
	if (x == NULL && d->n < PDK_NET_DENIALS_MAX) {
		x = &d->v[d->n++];
		x->dest = steal_ptr(&dest);
		x->why = pdk_xstrdup(why);
		x->allow = pdk_net_allow_hint(host, port);
	}
	if (x != NULL) {
		x->seq = d->seq;
		x->count++;
	} else {
		d->more++;
		d->more_seq = d->seq;
	}
	(void)pthread_mutex_unlock(&d->lock);
}

uint64_t pdk_net_denials_seq(struct pdk_net_denials *d)
{
	uint64_t seq;

	if (d == NULL)
		return 0;
	(void)pthread_mutex_lock(&d->lock);
	seq = d->seq;
	(void)pthread_mutex_unlock(&d->lock);
	return seq;
}

size_t pdk_net_denials_since(struct pdk_net_denials *d, uint64_t since, struct pdk_net_denial **out,
			     uint64_t *more)
{
	size_t n = 0;

	*out = NULL;
	if (more != NULL)
		*more = 0;
	if (d == NULL)
		return 0;
	(void)pthread_mutex_lock(&d->lock);
	*out = d->n ? pdk_xcalloc(d->n, sizeof(**out)) : NULL;
	for (size_t i = 0; i < d->n; i++) {
		const struct pdk_net_denial *x = &d->v[i];

		if (x->seq <= since)
			continue;
		(*out)[n] = (struct pdk_net_denial){pdk_xstrdup(x->dest), pdk_xstrdup(x->why),
						    pdk_xstrdup(x->allow), x->seq, x->count};
		n++;
	}
	/* Refusals past the bound are counted, not told apart: the total, if any is recent. */
	if (more != NULL && d->more_seq > since)
		*more = d->more;
	(void)pthread_mutex_unlock(&d->lock);
	if (n == 0)
		free(steal_ptr(out));
	return n;
}

void pdk_net_denial_list_free(struct pdk_net_denial *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		denial_release(&v[i]);
	free(v);
}
