// denials.js - the last egress denials, and the tools waiting for re-approval.

import { api } from './api.js';
import { EventFeed } from './sse.js';
import { $, el, clear, fmtTime, short } from './util.js';
import { describe } from './timeline.js';
import { pinDiff } from './approvals.js';

export class DenialsView {
  constructor(app) {
    this.app = app;
  }

  show() {
    this.visible = true;
    this.refresh();
    this.timer = setInterval(() => this.refresh(), 5000);
  }

  hide() {
    this.visible = false;
    clearInterval(this.timer);
  }

  async refresh() {
    await Promise.all([this.denials(), this.drift()]);
  }

  // The stream with follow=0 ends after its replay: read it whole.
  async denials() {
    const box = $('dn-list');
    const evs = [];
    try {
      await new Promise((resolve) => {
        const f = new EventFeed({ kind: 'net.connect', decision: 'deny', tail: 50, follow: 0 }, (b) => evs.push(...b.filter((e) => (e.attrs || {}).decision === 'deny')), (s) => {
          if (s) this.app.say(s);
        });
        f.run().then(resolve);
      });
    } catch (e) {
      this.app.fail(e);
    }
    clear(box);
    for (const ev of evs.slice(-50).reverse()) {
      box.append(el('div', { class: 'row deny', role: 'listitem' },
        el('span', { class: 'ts', title: ev.ts }, fmtTime(ev.ts)),
        el('button', { type: 'button', class: 'link', title: ev.sandbox, 'aria-label': `Timeline of ${ev.sandbox}`, onclick: () => this.app.openTimeline({ sandbox: ev.sandbox }) }, short(ev.sandbox)),
        el('span', {}, describe(ev).text)));
    }
    $('dn-empty').hidden = evs.length > 0;
  }

  async drift() {
    const box = $('drift-list');
    let pins = [];
    try {
      pins = (await api('GET', '/v1/approvals')).approvals.filter((a) => a.state === 'pending' && a.kind === 'tool.pin');
    } catch (e) {
      this.app.fail(e);
    }
    clear(box);
    for (const a of pins) {
      box.append(el('div', { class: 'row', role: 'listitem' },
        el('strong', {}, a.summary), el('span', { class: 'muted' }, ' ' + (a.reason || '')),
        pinDiff(a.detail),
        el('button', { type: 'button', onclick: () => this.app.show('approvals') }, 'Decide in Approvals')));
    }
    $('drift-empty').hidden = pins.length > 0;
  }
}
