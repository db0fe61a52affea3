/*
 * telemetry.h - what happens in a sandbox, as events: the normalized event
 * stream and its sinks (events.h), the redaction of secrets from every
 * event before any sink sees it (redact.h), and the OpenTelemetry export
 * (otlp.h). Stands on base/ only.
 *
 * Contract: an event that cannot be written is reported to the emitter as
 * an error (never dropped in silence); no sink sees a registered secret.
 * Other layers include this header.
 */
#ifndef PDK_TELEMETRY_H
#define PDK_TELEMETRY_H

#include "common.h"
#include "events.h"
#include "otlp.h"
#include "redact.h"

#endif
