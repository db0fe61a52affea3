/*
 * http-internal.h - what guard-conn.c (a connection's filter and answers)
 * and conns.c (the listener's connection budget) share. Not a contract:
 * other folders see http.h only.
 */
#ifndef PDK_HTTP_INTERNAL_H
#define PDK_HTTP_INTERNAL_H

#include "common.h"
#include "guard.h"
#include "http.h"

#include <event2/bufferevent.h>

/* A client's address: the key of the per-peer budget. */
struct pdk__peer {
	int family; /* AF_INET, AF_INET6; AF_UNIX (one key for every peer); AF_UNSPEC: unknown */
	unsigned char addr[16];
};

/* One guarded connection (owned by its filter: freed in its free_context). */
struct pdk__conn {
	struct pdk_guard *g;
	struct pdk_http_guards *owner;
	struct pdk__conn *prev, *next;  /* the owner's connections, newest first */
	struct bufferevent *bev, *sock; /* the filter evhttp owns; the socket's (borrowed) */
	struct evbuffer_cb_entry *sock_cb;
	size_t moved;       /* bytes of bev's output already copied to sock's */
	struct event *move; /* copies what was added since (made active once per turn) */
	bool move_due;      /* it is active */
	bool dropping;      /* sock_written is draining bev's output */
	uint64_t delivered; /* requests evhttp handed to the daemon */
	uint64_t completed; /* ... whose answers were written whole */
	/* The budget (conns.c). */
	struct pdk__peer peer;
	uint64_t wait_since_ms;       /* when the wait for a request head began; 0: not waiting */
	bool admitted;                /* the peer's and the listener's caps were checked */
	struct pdk_peer_kept peer_ns; /* a unix peer's namespaces, as base/peer.h keeps them */
	bool dropped; /* closed by the budget; its descriptor goes with its filter */
};

/* A refused connection read and discarded for a while before it is closed (conns.c). */
struct pdk__drain {
	struct pdk_http_guards *owner;
	struct pdk__drain *prev, *next;
	struct pdk__peer peer;
	struct event *ev;
	int fd;
	unsigned wakes;
};

/* What the budget refused since its last log line (conns.c, tally_report). */
struct pdk__tally {
	uint64_t since_ms;
	unsigned per_peer, full, room, timeout, pauses;
	int pause_errno;
	struct pdk__peer last;
};

struct pdk_http_guards {
	struct pdk_http_limits lim;
	struct event_base *base;
	struct pdk__conn *conns;   /* newest first */
	struct pdk__drain *drains; /* newest first */
	unsigned n_conns;          /* connections (each holds a descriptor until freed) */
	unsigned n_live;           /* ... of which not dropped */
	unsigned n_drains;
	struct evconnlistener *listener; /* borrowed; NULL once stopped */
	struct event *admit;  /* checks new connections, once the loop has their socket */
	struct event *sweep;  /* once a second: head deadlines */
	struct event *resume; /* ends an accept pause */
	pdk_http_before_write_cb before_write; /* NULL: none */
	void *before_write_arg;
	bool paused;    /* an accept failed: not accepting until `resume` */
	bool accepting; /* the listener is enabled */
	struct pdk__tally tally;
	struct pdk_http_guards *next_guards; /* every listener's guards (conns.c all_guards) */
};

/* Make `h` create each connection's bufferevent through the guard (guard-conn.c). */
void pdk__guard_bevcb(struct pdk_http_guards *gs, struct evhttp *h);
/* A new connection (linked, counted; admitted on the loop's next turn) and a freed one. */
void pdk__conns_add(struct pdk_http_guards *gs, struct pdk__conn *c);
void pdk__conns_remove(struct pdk_http_guards *gs, struct pdk__conn *c);
/* After input or an answer: start or end the wait for a request head. */
void pdk__conns_watch(struct pdk__conn *c);
/* The connection whose filter is `bev`, or NULL. */
struct pdk__conn *pdk__conns_find(struct pdk_http_guards *gs, struct bufferevent *bev);
/*
 * Read and drop what the client of `fd` (taken) still sends, for a while,
 * then close it; counted as a connection of `peer`.
 */
void pdk__conns_drain(struct pdk_http_guards *gs, int fd, const struct pdk__peer *peer);

#endif
