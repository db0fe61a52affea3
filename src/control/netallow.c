/*
 * netallow.c - a running sandbox's network allowlist widened by one entry
 * (docs/egress.md, "Widening a running sandbox"): the entry judged in the
 * profile's grammar, the sandbox's supervisor told to add it to its egress
 * proxy's live rules and its policy, the sandbox's facts taken from the
 * answer, and the widening recorded (net.allow.added) with who did it and
 * on which approval.
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"
#include "policy.h"

#include <string.h>

/* The network mode the supervisor last told (its facts), or NULL. */
static const char *net_mode(const struct pdk_ctl_sb *sb)
{
	return json_string_value(json_object_get(json_object_get(sb->facts, "network"), "mode"));
}

/* Why a sandbox of network mode `mode` has no allowlist to widen. */
static int no_allowlist(const char *mode, struct pdk_error **err)
{
	if (strcmp(mode, "host") == 0)
		return pdk_error_set_field(err, ENOTSUP, "network.mode",
					   "the sandbox's network.mode is host: it reaches every "
					   "destination already, there is no allowlist to widen");
	return pdk_error_set_field(err, ENOTSUP, "network.mode",
				   "the sandbox's network.mode is %s: it has no egress proxy whose "
				   "allowlist could be widened; create a sandbox with network.mode "
				   "allowlist (--allow HOST) to reach chosen hosts",
				   mode);
}

int pdk_ctl_egress_allow_check(const struct pdk_ctl_sb *sb, const char *host, char **canonical,
			       unsigned *port, struct pdk_error **err)
{
	_cleanup_free_ char *why = NULL;
	const char *mode = net_mode(sb);
	struct pdk_net_rule r = {0};

	/* The supervisor judges again: it holds the policy, these facts are its last word. */
	if (mode != NULL && strcmp(mode, "allowlist") != 0)
		return no_allowlist(mode, err);
	if (host == NULL || host[0] == '\0')
		return pdk_error_set_field(err, EINVAL, "host",
					   "'host' names the destination to allow: a host name, "
					   "*.suffix or an IP literal, with an optional :port");
	/* SECURITY: the profile's grammar and no other (wildcards only as "*.suffix"). */
	if (pdk_net_rule_parse(host, &r, &why) < 0)
		return pdk_error_set_field(err, EINVAL, "host", "network.allow entry '%s': %s",
					   host, why);
	*canonical = pdk_xstrdup(r.text);
	if (port != NULL)
		*port = r.port;
	pdk_net_rule_release(&r);
	return 0;
}

struct widen {
	pdk_ctl_doc_cb cb;
	void *ctx;
	char *actor;
	char *approval_id;
};

static void widen_free(struct widen *w)
{
	free(w->actor);
	free(w->approval_id);
	free(w);
}

/* net.allow.added: what was added, by whom, on which approval. */
static void record(struct pdk_ctl_sb *sb, const struct widen *w, const json_t *reply)
{
	pdk_ctl_event(sb->c, sb->row.id, sb->labels, "net.allow.added",
		      json_pack("{s:O, s:s, s:s?}", "allow", json_object_get(reply, "allow"),
				"actor", w->actor, "approval_id", w->approval_id));
}

static void widened(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *doc = NULL;
	struct widen *w = ctx;

	pdk__close_fds(fds, nfds);
	if (pdk__svc_failed(reply)) {
		(void)pdk_ctl_svc_error(reply, &err);
		w->cb(w->ctx, NULL, err);
		widen_free(w);
		return;
	}
	if (json_is_object(json_object_get(reply, "facts"))) {
		json_decref(sb->facts);
		sb->facts = json_incref(json_object_get(reply, "facts"));
	}
	if (json_is_true(json_object_get(reply, "added")))
		record(sb, w, reply);
	doc = json_pack("{s:O?, s:O?, s:O?}", "allow", json_object_get(reply, "allow"), "added",
			json_object_get(reply, "added"), "network",
			json_object_get(sb->facts, "network"));
	w->cb(w->ctx, doc, NULL);
	widen_free(w);
}

int pdk_ctl_egress_allow(struct pdk_ctl_sb *sb, const struct pdk_ctl_egress_allow_req *r,
			 pdk_ctl_doc_cb cb, void *ctx, struct pdk_error **err)
{
	_cleanup_free_ char *entry = NULL;
	struct widen *w;
	int rc;

	if (pdk_ctl_egress_allow_check(sb, r->host, &entry, NULL, err) < 0)
		return -(*err)->status;
	w = pdk_xcalloc(1, sizeof(*w));
	w->cb = cb;
	w->ctx = ctx;
	w->actor = pdk_xstrdup(r->actor != NULL ? r->actor : "?");
	w->approval_id = r->approval_id != NULL ? pdk_xstrdup(r->approval_id) : NULL;
	rc = pdk__sb_call(sb, json_pack("{s:s, s:s}", "op", "egress_allow", "host", entry), NULL, 0,
			  widened, w);
	if (rc < 0) {
		widen_free(w);
		return pdk_error_setx(err, rc == -ENOTCONN ? ENOTCONN : EIO,
				      "cannot reach the sandbox's supervisor");
	}
	return 0;
}
