/*
 * log.h - where the library's messages go.
 *
 * Nothing below a front end prints. A library object that has something to
 * say that is not an error it returns (a downgrade, a store write that
 * failed in the background, a peer that went away) is given a struct
 * pdk_log by whoever created it, and writes through it. The front end
 * (cli/, daemon/) decides what a message becomes: a line on stderr with
 * its own prefix, nothing (`paddock serve --quiet`), or a record.
 */
#ifndef PDK_LOG_H
#define PDK_LOG_H

#include "common.h"

/*
 * A notice is a control the policy marked best-effort that this machine
 * could not apply (no delegated cgroup, no Landlock): the policy allows it,
 * and sandbox.create's attrs record it, so a front end may let its user
 * silence it (`paddock run --quiet`), which it never does for a warning.
 */
enum pdk_log_level {
	PDK_LOG_ERROR = 0, /* something failed and was not returned to anyone */
	PDK_LOG_WARN,      /* a protection weaker than asked, a peer that went away */
	PDK_LOG_NOTICE,    /* a best-effort control not applied, as the policy allows */
	PDK_LOG_INFO,      /* progress a user may want to see */
};

/*
 * A sink: `fn` gets every message, one complete line without its newline
 * (borrowed for the call). `fn` NULL: messages are dropped.
 */
struct pdk_log {
	void (*fn)(void *data, enum pdk_log_level level, const char *msg);
	void *data;
};

/* Format and hand one message to `log` (NULL-safe: dropped). */
void pdk_log(const struct pdk_log *log, enum pdk_log_level level, const char *fmt, ...)
	PDK_PRINTF(3, 4);

/*
 * A rate-limited sink in front of another (caller storage; nothing to
 * release). Hand `log` to whoever writes: at most `burst` lines pass at
 * once, then `per_s` a second. A line over the rate is dropped and
 * counted, and before the next line that passes, "N log lines suppressed"
 * says how many were lost. So a peer that makes a daemon log once per
 * connection cannot fill the disk its log goes to.
 */
struct pdk_log_limit {
	struct pdk_log log;          /* the sink to hand out (points at this limiter) */
	const struct pdk_log *inner; /* where lines that pass go (borrowed) */
	uint64_t burst, per_s;
	uint64_t tokens_milli; /* lines that may pass now, in thousandths */
	uint64_t last_ns;      /* when tokens were last added (monotonic) */
	uint64_t suppressed;   /* lines dropped since the last report */
};

void pdk_log_limit_init(struct pdk_log_limit *l, const struct pdk_log *inner, unsigned burst,
			unsigned per_s);
/* Report lines suppressed so far, when the rate allows a line now (a timer calls it). */
void pdk_log_limit_flush(struct pdk_log_limit *l);

/* "error", "warning", "notice", "info". */
const char *pdk_log_level_name(enum pdk_log_level level);

#endif
