// sse.js - the daemon's event stream, read with fetch() and a stream reader.
//
// SECURITY: an EventSource cannot send the Authorization header, so the
// stream is a fetch() whose body is parsed here (Server-Sent Events: "id:",
// "event:", "data:" lines, a blank line ends an event, ":" a comment).

import { openStream, query } from './api.js';

// Feed the events of `text` to `onEvent`; return the unfinished tail.
export function parseChunk(state, text, onEvent) {
  let start = 0;
  for (;;) {
    const nl = text.indexOf('\n', start);
    if (nl < 0) return text.slice(start);
    let line = text.slice(start, nl);
    start = nl + 1;
    if (line.endsWith('\r')) line = line.slice(0, -1);
    if (line === '') {
      if (state.data.length) onEvent({ id: state.id, event: state.event, data: state.data.join('\n') });
      state.data = [];
      state.event = 'message';
      continue;
    }
    if (line[0] === ':') continue;
    const c = line.indexOf(':');
    const field = c < 0 ? line : line.slice(0, c);
    let value = c < 0 ? '' : line.slice(c + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'data') state.data.push(value);
    else if (field === 'event') state.event = value;
    else if (field === 'id') state.id = value;
  }
}

// One stream of /v1/events with `params`, reconnecting after a drop with
// since = the last id seen. onEvents(list) gets parsed records in batches
// (one per network chunk); onState(text) the connection's state.
export class EventFeed {
  constructor(params, onEvents, onState) {
    this.params = Object.assign({}, params);
    this.onEvents = onEvents;
    this.onState = onState || (() => {});
    this.lastId = params.since !== undefined ? String(params.since) : null;
    this.ctl = null;
    this.stopped = false;
    this.delay = 500;
  }

  start() {
    this.run();
    return this;
  }

  stop() {
    this.stopped = true;
    if (this.ctl) this.ctl.abort();
  }

  async run() {
    while (!this.stopped) {
      try {
        await this.once();
        this.delay = 500;
        if (this.params.follow === 0) return;
      } catch (e) {
        if (this.stopped) return;
        this.onState('event stream: ' + e.message + '; reconnecting');
        if (e.status === 401 || e.status === 403 || e.status === 400) return;
      }
      await new Promise((r) => setTimeout(r, this.delay));
      this.delay = Math.min(this.delay * 2, 8000);
    }
  }

  async once() {
    this.ctl = new AbortController();
    const p = Object.assign({}, this.params);
    if (this.lastId !== null) {
      p.since = this.lastId;
      delete p.tail;
    }
    const r = await openStream('/v1/events' + query(p), this.ctl.signal);
    this.onState('');
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    const state = { id: null, event: 'message', data: [] };
    let rest = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const batch = [];
      rest = parseChunk(state, rest + dec.decode(value, { stream: true }), (ev) => {
        try {
          const rec = JSON.parse(ev.data);
          if (ev.id !== null) this.lastId = ev.id;
          batch.push(rec);
        } catch (_) {
          /* a line that is not a record: skipped */
        }
      });
      if (batch.length) this.onEvents(batch);
    }
  }
}
