// kill.js - kill switches by selector, and a guarded "stop everything".

import { api, query } from './api.js';
import { $, splitLabel } from './util.js';

export const STOP_WORD = 'STOP';

export class KillView {
  constructor(app) {
    this.app = app;
    this.body = null;
    $('kill-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.preview();
    });
    $('kill-confirm-yes').addEventListener('click', () => this.run(this.body));
    $('kill-confirm-no').addEventListener('click', () => this.cancel());
    $('stop-word').addEventListener('input', () => {
      $('stop-go').disabled = $('stop-word').value !== STOP_WORD;
    });
    $('stop-form').addEventListener('submit', (e) => {
      e.preventDefault();
      if ($('stop-word').value !== STOP_WORD) return;
      const reason = $('stop-reason').value.trim();
      $('stop-word').value = '';
      $('stop-go').disabled = true;
      this.run(Object.assign({ all: true }, reason ? { reason } : {}));
    });
  }

  show() {}
  hide() {
    this.cancel();
  }

  // The kill request of the form, or null (and a message).
  selector() {
    const kind = $('kill-kind').value;
    const value = $('kill-value').value.trim();
    const reason = $('kill-reason').value.trim();
    const body = reason ? { reason } : {};
    if (kind === 'label') {
      const kv = splitLabel(value);
      if (!kv) return this.app.say('label: write it as key=value'), null;
      body.labels = { [kv[0]]: kv[1] };
    } else if (kind === 'ids') {
      body.ids = value.split(/[\s,]+/).filter(Boolean);
    } else {
      body[kind] = value;
    }
    return body;
  }

  // Say how many live sandboxes the selector matches, and ask to confirm.
  async preview() {
    const body = this.selector();
    if (!body) return;
    let n = '?';
    try {
      const q = {};
      for (const k of ['session', 'workflow', 'agent']) if (body[k]) q[k] = body[k];
      if (body.labels) q.label = Object.entries(body.labels).map(([k, v]) => `${k}=${v}`);
      if (!body.ids) n = (await api('GET', '/v1/sandboxes' + query(q))).sandboxes.filter((s) => s.state !== 'ended' && !s.pool_member).length;
      else n = body.ids.length;
    } catch (e) {
      this.app.fail(e);
    }
    this.body = body;
    $('kill-confirm-text').textContent = `Kill ${n} live sandbox(es) matching ${JSON.stringify(body)}?`;
    $('kill-confirm').hidden = false;
    $('kill-confirm-yes').focus();
  }

  cancel() {
    this.body = null;
    $('kill-confirm').hidden = true;
  }

  async run(body) {
    if (!body) return;
    this.cancel();
    try {
      const r = await api('POST', '/v1/kill', body);
      $('kill-result').textContent = `killed ${r.killed.length}: ${r.killed.join(' ')}`;
      this.app.say(`killed ${r.killed.length} sandbox(es)`);
    } catch (e) {
      $('kill-result').textContent = `refused: ${e.message}`;
      this.app.fail(e);
    }
  }
}
