// approvals.js - the pending requests: what, who asked, redacted arguments,
// a tool's pin diff, a countdown; Approve and Deny with an optional note.

import { api } from './api.js';
import { $, el, clear, fmtSeconds, secondsUntil, short, debounce } from './util.js';

const REFRESH_MS = 2000;

export class ApprovalsView {
  constructor(app) {
    this.app = app;
    this.pending = [];
    this.refreshSoon = debounce(() => this.refresh(), 150);
    setInterval(() => this.refresh(), REFRESH_MS);
    setInterval(() => this.tick(), 1000);
  }

  show() {
    this.visible = true;
    this.refresh();
  }

  hide() {
    this.visible = false;
  }

  onEvents(batch) {
    if (batch.some((e) => /^approval\./.test(e.kind || ''))) this.refreshSoon();
  }

  async refresh() {
    if (!this.app.signedIn()) return;
    try {
      const r = await api('GET', '/v1/approvals');
      this.pending = r.approvals.filter((a) => a.state === 'pending');
      this.app.setPending(this.pending);
      if (this.visible) this.render();
    } catch (e) {
      this.app.fail(e);
    }
  }

  // The cards are rebuilt only when the queue changed: a note being typed stays.
  render() {
    const ids = this.pending.map((a) => a.id).join(',');
    if (ids === this.shown) return;
    this.shown = ids;
    const box = $('ap-list');
    clear(box);
    for (const a of this.pending) box.append(this.card(a));
    $('ap-empty').hidden = this.pending.length > 0;
    this.tick();
  }

  tick() {
    for (const c of document.querySelectorAll('#ap-list [data-timeout]')) {
      const s = secondsUntil(c.dataset.timeout);
      c.textContent = s > 0 ? `times out in ${fmtSeconds(s)}` : 'timed out';
      c.classList.toggle('warn', s < 30);
    }
  }

  card(a) {
    const note = el('input', { type: 'text', class: 'note', 'aria-label': `Note for ${a.summary}`, placeholder: 'note (optional)', maxlength: 4096 });
    const decide = (verb) => this.decide(a, verb, note.value);
    return el('article', { class: 'card', role: 'listitem', 'data-approval': a.id },
      el('header', {},
        el('span', { class: 'pill kind' }, a.kind),
        el('strong', { class: 'summary' }, a.summary),
        el('span', { class: 'countdown', 'data-timeout': a.timeout_at }, '')),
      el('dl', { class: 'kv' },
        el('dt', {}, 'asked by'), el('dd', {}, a.principal),
        a.sandbox ? el('dt', {}, 'sandbox') : null, a.sandbox ? el('dd', {}, el('code', { title: a.sandbox }, short(a.sandbox))) : null,
        a.reason ? el('dt', {}, 'why') : null, a.reason ? el('dd', {}, a.reason) : null,
        el('dt', {}, 'id'), el('dd', {}, el('code', {}, a.id))),
      a.kind === 'tool.pin' ? pinDiff(a.detail) : detail(a.detail),
      el('div', { class: 'decide' }, note,
        el('button', { type: 'button', class: 'ok', 'aria-label': `Approve ${a.summary}`, onclick: () => decide('approve') }, 'Approve'),
        el('button', { type: 'button', class: 'danger', 'aria-label': `Deny ${a.summary}`, onclick: () => decide('deny') }, 'Deny')));
  }

  async decide(a, verb, note) {
    try {
      const r = await api('POST', `/v1/approvals/${encodeURIComponent(a.id)}/${verb}`, note ? { note } : {});
      this.app.say(`${r.state}: ${a.summary} (by ${r.approver})`);
    } catch (e) {
      this.app.fail(e);
    }
    this.shown = null;
    this.refresh();
  }
}

// What the asker attached (arguments redacted by the daemon), as text.
function detail(d) {
  if (d === null || d === undefined) return null;
  return el('details', { class: 'args', open: true }, el('summary', {}, 'arguments / detail'),
    el('pre', {}, JSON.stringify(d, null, 2)));
}

// A tool definition's change: each member before and after.
export function pinDiff(d) {
  if (!d || typeof d !== 'object') return detail(d);
  const out = el('div', { class: 'pin' });
  const diff = d.diff;
  if (!diff || !Object.keys(diff).length) {
    out.append(el('p', { class: 'muted' }, `new tool ${d.server || ''}/${d.tool || ''}: first definition`));
    out.append(detail(d.definition));
  } else {
    out.append(el('p', {}, `definition of ${d.server || ''}/${d.tool || ''} changed:`));
    for (const [k, v] of Object.entries(diff)) {
      out.append(el('div', { class: 'pin-member' }, el('code', {}, k),
        el('pre', { class: 'diff' },
          el('span', { class: 'del' }, '- ' + JSON.stringify(v.before, null, 1).replace(/\n/g, '\n- ') + '\n'),
          el('span', { class: 'add' }, '+ ' + JSON.stringify(v.after, null, 1).replace(/\n/g, '\n+ ')))));
    }
  }
  // What the description scan found (docs/gateway.md, PINNING): one line each, as text.
  if (Array.isArray(d.findings) && d.findings.length) {
    const list = el('ul', { class: 'warn findings', 'aria-label': 'scan findings' });
    for (const f of d.findings)
      list.append(el('li', {}, `${f.shape || 'finding'} in ${f.field || '?'}: `,
        el('q', {}, String(f.excerpt || ''))));
    out.append(el('p', { class: 'warn' }, 'The scan found:'), list);
  }
  return out;
}
