// timeline.js - every event of a sandbox or a session, in order, in a
// virtualised list, with the audit chain's state beside it and a diff view.

import { api, query } from './api.js';
import { EventFeed } from './sse.js';
import { $, el, clear, fmtTime, short } from './util.js';
import { VList } from './vlist.js';

const ROW_H = 24;
const CHAIN_MS = 10000;
const PATCH_LINES = 5000;
// A timeline opens on its last TAIL records (read from the end of the store: cheap
// whatever the session's size); "Load every earlier event" replays it from the start.
const TAIL = 10000;

export class TimelineView {
  constructor(app) {
    this.app = app;
    this.events = [];
    this.chain = null;
    this.feed = null;
    this.list = new VList($('tl-list'), ROW_H, (ev, i, row) => this.row(ev, i, row));
    this.list.follow = true;
    this.list.onDrawn = () => this.app.mark('timeline-drawn', this.events.length);
    $('tl-list').addEventListener('click', (e) => {
      const r = e.target.closest('.vrow');
      if (r) this.select(Number(r.dataset.i));
    });
    $('tl-list').addEventListener('keydown', (e) => this.key(e));
    $('tl-follow').addEventListener('change', () => (this.list.follow = $('tl-follow').checked));
    $('tl-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const f = new FormData($('tl-form'));
      const sandbox = (f.get('sandbox') || '').trim();
      const session = (f.get('session') || '').trim();
      if (sandbox || session) this.open(sandbox ? { sandbox } : { session });
    });
    $('tl-all').addEventListener('click', () => this.which && this.open(this.which, true));
    $('tl-diff-open').addEventListener('click', () => this.which && this.which.sandbox && this.diff(this.which.sandbox));
    $('tl-diff-close').addEventListener('click', () => ($('tl-diff').hidden = true));
    setInterval(() => this.visible && this.which && this.loadChain(), CHAIN_MS);
  }

  show() {
    this.visible = true;
    if (this.which) this.loadChain();
  }

  hide() {
    this.visible = false;
  }

  // Show the events of {sandbox: ID} or {session: NAME}: its last TAIL, or all of them.
  open(which, all) {
    if (this.feed) this.feed.stop();
    this.which = which;
    this.events = [];
    this.list.selected = -1;
    this.list.setItems(this.events);
    $('tl-form').elements.sandbox.value = which.sandbox || '';
    $('tl-form').elements.session.value = which.session || '';
    $('tl-which').textContent = which.sandbox ? `sandbox ${which.sandbox}` : `session ${which.session}`;
    $('tl-diff').hidden = true;
    $('tl-diff-open').hidden = !which.sandbox;
    this.detail(null);
    this.count();
    this.loadChain();
    $('tl-all').hidden = true;
    this.all = !!all;
    const from = all ? { since: 0 } : { tail: TAIL };
    this.feed = new EventFeed(Object.assign(from, { follow: 1 }, which), (b) => this.add(b), (s) => s && this.app.say(s)).start();
  }

  add(batch) {
    this.app.mark('timeline-batch', batch.length);
    // The tail was full: older records may exist.
    if (!this.all && this.events.length + batch.length >= TAIL) $('tl-all').hidden = false;
    this.list.append(batch);
    this.count();
  }

  count() {
    $('tl-count').textContent = `${this.events.length} events`;
  }

  async loadChain() {
    try {
      this.chain = await api('GET', '/v1/audit' + query({ max_age: 5 }));
    } catch (e) {
      this.chain = { error: e.message };
    }
    this.renderChain();
    this.list.refresh();
  }

  renderChain() {
    const c = this.chain || {};
    const dl = $('chain');
    clear(dl);
    const add = (k, v, cls) => dl.append(el('dt', {}, k), el('dd', { class: cls || '' }, v === null || v === undefined ? '–' : String(v)));
    if (c.error) return add('state', 'unknown: ' + c.error, 'warn');
    add('state', c.state, c.state === 'ok' ? 'good' : 'bad');
    add('verified up to', c.verified_seq !== undefined ? `#${c.verified_seq} of #${c.head_seq}` : null);
    add('last signed checkpoint', c.signed_seq ? `#${c.signed_seq} at ${c.signed_at}` : 'none yet');
    if (c.broken_seq) add('broken at', `#${c.broken_seq}: ${c.detail || ''}`, 'bad');
    add('not folded yet', c.unfolded_records);
    add('checked at', c.verified_at);
  }

  // The chain mark of record `seq`: verified, not yet, or past the break.
  mark(seq) {
    const c = this.chain;
    if (!c || c.error || c.verified_seq === undefined) return ['?', 'chain state unknown', ''];
    if (c.broken_seq && seq >= c.broken_seq) return ['✗', `after the break at #${c.broken_seq}`, 'bad'];
    if (seq <= c.verified_seq) return ['✓', `verified (chain checked up to #${c.verified_seq})`, 'good'];
    return ['…', 'not verified yet', 'muted'];
  }

  row(ev, i, row) {
    clear(row);
    const [m, title, cls] = this.mark(ev.seq);
    const what = describe(ev);
    row.className = 'vrow grid-tl k-' + (ev.kind || '').replace(/\./g, '-') + (what.cls ? ' ' + what.cls : '');
    row.dataset.i = i;
    row.append(
      el('span', { class: 'num' }, ev.seq),
      el('span', { class: 'ts', title: ev.ts }, fmtTime(ev.ts)),
      el('span', { class: 'kind' }, ev.kind),
      el('span', { class: 'what', title: what.text }, what.text),
      el('span', { class: 'mark ' + cls, title, 'aria-label': title }, m),
    );
  }

  key(e) {
    const n = this.events.length;
    if (!n) return;
    let i = this.list.selected;
    if (e.key === 'ArrowDown') i = Math.min(n - 1, i + 1);
    else if (e.key === 'ArrowUp') i = Math.max(0, i - 1);
    else if (e.key === 'End') i = n - 1;
    else if (e.key === 'Home') i = 0;
    else return;
    e.preventDefault();
    this.select(i);
  }

  select(i) {
    this.list.selected = i;
    this.list.scrollTo(i);
    this.detail(this.events[i]);
  }

  detail(ev) {
    const box = $('tl-detail');
    clear(box);
    if (!ev) return box.append('Select a row (click, or arrow keys in the list).');
    if (ev.sandbox && /^fs\.|^snapshot|^rollback|^commit/.test(ev.kind))
      box.append(el('button', { type: 'button', onclick: () => this.diff(ev.sandbox) }, 'Show the workspace diff'));
    box.append(el('pre', {}, JSON.stringify(ev, null, 2)));
  }

  async diff(sandbox) {
    const files = $('tl-diff-files');
    const pre = $('tl-diff-patch');
    clear(files);
    clear(pre);
    $('tl-diff').hidden = false;
    try {
      const d = await api('GET', `/v1/sandboxes/${encodeURIComponent(sandbox)}/diff?patch=1`);
      for (const c of d.changes) files.append(el('li', { class: c.kind }, `${c.kind} ${c.path}`));
      const lines = (d.patch || '').split('\n');
      for (const l of lines.slice(0, PATCH_LINES)) {
        const cls = l.startsWith('+++') || l.startsWith('---') ? 'file' : l[0] === '+' ? 'add' : l[0] === '-' ? 'del' : l.startsWith('@@') ? 'hunk' : '';
        pre.append(el('span', { class: cls }, l + '\n'));
      }
      if (lines.length > PATCH_LINES || d.patch_truncated) pre.append(el('span', { class: 'muted' }, '[... the diff goes on]\n'));
      if (!d.changes.length) files.append(el('li', { class: 'muted' }, 'no change in the workspace'));
    } catch (e) {
      files.append(el('li', { class: 'bad' }, 'diff: ' + e.message));
    }
  }
}

// One readable line per event kind (never a credential's value).
export function describe(ev) {
  const a = ev.attrs || {};
  const k = ev.kind || '';
  if (k === 'process.exec') return { text: `${a.pid ? 'pid ' + a.pid + ': ' : ''}${argv(a)}` };
  if (k === 'process.exit') return exitText(a);
  if (k === 'exec.request') return { text: `requested: ${argv(a)}` };
  if (k === 'sandbox.create' || k === 'sandbox.adopt' || k === 'sandbox.claim')
    return { text: [a.profile && 'profile ' + a.profile, a.network && 'network ' + a.network, a.labels && labels(a.labels)].filter(Boolean).join(' · ') || k };
  if (k === 'sandbox.destroy' || k === 'sandbox.reap' || k === 'sandbox.ttl') return { text: `${k.slice(8)}${a.reason ? ': ' + a.reason : ''}${a.operator ? ' by ' + a.operator : ''}`, cls: 'deny' };
  if (k === 'sandbox.control') return { text: `${a.op || a.action || ''}${a.operator ? ' by ' + a.operator : ''}` };
  if (k === 'exec.exit') return { text: `exec ${a.exec ?? ''} ended: ${a.end || ''} ${a.exit_code ?? ''}` };
  if (k === 'net.connect')
    return { text: `${a.decision} ${a.method || ''} ${a.host || a.address || ''}${a.port ? ':' + a.port : ''} rule ${a.rule || '–'}${a.reason ? ' (' + a.reason + ')' : ''}`, cls: a.decision === 'deny' ? 'deny' : 'allow' };
  // The record names the secret and the header, never the value (the daemon redacts it).
  if (k === 'net.credential')
    return { text: `${a.decision || ''} secret ${a.secret || '?'} as header ${a.header || '–'} for ${a.host || ''}${a.port ? ':' + a.port : ''}${a.reason ? ' (' + a.reason + ')' : ''}`, cls: a.decision === 'deny' ? 'deny' : '' };
  if (k === 'fs.change') return { text: `${a.kind || a.op || 'changed'} ${a.path || ''}${a.size !== undefined ? ' (' + a.size + ' B)' : ''}` };
  if (k === 'tool.call') return { text: `${a.tool || a.name || ''} → ${a.decision || a.outcome || ''}${a.approver ? ' by ' + a.approver : ''}`, cls: a.decision === 'deny' ? 'deny' : '' };
  if (k.startsWith('approval.')) return { text: `${a.kind || ''} ${a.summary || ''}${a.approver ? ' by ' + a.approver : ''}${a.note ? ' “' + a.note + '”' : ''}` };
  if (k === 'limit.exceeded') return { text: `limit ${a.limit} reached (${a.value})`, cls: 'deny' };
  if (k === 'kill') return { text: `killed by ${a.operator || ev.actor || '?'}${a.reason ? ': ' + a.reason : ''}`, cls: 'deny' };
  const t = JSON.stringify(a);
  return { text: t.length > 240 ? t.slice(0, 240) + '…' : t };
}

function labels(l) {
  return Object.entries(l).map(([k, v]) => `${k}=${v}`).join(' ');
}

function argv(a) {
  if (Array.isArray(a.argv)) return a.argv.join(' ');
  return a.cmd || a.path || a.file || JSON.stringify(a);
}

function exitText(a) {
  if (a.exit_code !== undefined) return { text: `exit ${a.exit_code}`, cls: a.exit_code ? 'deny' : '' };
  const s = a.status;
  if (typeof s !== 'number') return { text: `ended ${a.end || ''}` };
  if ((s & 0x7f) === 0) return { text: `pid ${a.pid}: exit ${(s >> 8) & 0xff}${a.end ? ' (' + a.end + ')' : ''}`, cls: s >> 8 ? 'deny' : '' };
  return { text: `pid ${a.pid}: killed by signal ${s & 0x7f}`, cls: 'deny' };
}

export { short };
