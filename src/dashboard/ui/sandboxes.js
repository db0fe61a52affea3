// sandboxes.js - the live list: state, profile, labels, age, TTL countdown,
// one bar per budget, Timeline / Pause / Resume / Kill per sandbox.

import { api, query } from './api.js';
import { $, el, clear, fmtBytes, fmtNs, fmtSeconds, secondsUntil, short, debounce, splitLabel } from './util.js';
import { VList } from './vlist.js';

const ROW_H = 52;
const REFRESH_MS = 3000;

// The budgets shown, as the API names them in usage / limits / remaining.
const BUDGETS = [
  ['wall', 'wall_ns', fmtNs],
  ['cpu', 'cpu_ns', fmtNs],
  ['mem', 'memory', fmtBytes, 'memory_current'],
  ['cmds', 'commands', String],
  ['egress', 'egress_bytes', fmtBytes],
  ['output', 'output_bytes', fmtBytes],
  ['tools', 'tool_calls', String],
];

export class SandboxesView {
  constructor(app) {
    this.app = app;
    this.filter = {};
    this.list = new VList($('sb-list'), ROW_H, (sb, i, row) => this.row(sb, row));
    this.armed = new Map(); // id -> time the Kill button was armed
    this.refreshSoon = debounce(() => this.refresh(), 250);
    $('sb-filter').addEventListener('submit', (e) => {
      e.preventDefault();
      this.readFilter();
      this.refresh();
    });
    $('sb-filter').addEventListener('reset', () => {
      this.filter = {};
      setTimeout(() => this.refresh(), 0);
    });
    setInterval(() => this.visible && this.list.refresh(), 1000);
    setInterval(() => this.visible && this.refresh(), REFRESH_MS);
  }

  readFilter() {
    const f = new FormData($('sb-filter'));
    this.filter = {};
    for (const k of ['session', 'workflow', 'agent']) if (f.get(k)) this.filter[k] = f.get(k).trim();
    const label = (f.get('label') || '').trim();
    if (label) {
      if (!splitLabel(label)) return this.app.say('label filter: write it as key=value');
      this.filter.label = label;
    }
  }

  show() {
    this.visible = true;
    this.refresh();
  }

  hide() {
    this.visible = false;
  }

  // Events that change what the list shows.
  onEvents(batch) {
    if (!this.visible) return;
    if (batch.some((e) => /^(sandbox\.|kill|process\.|limit\.|exec\.)/.test(e.kind || ''))) this.refreshSoon();
  }

  async refresh() {
    if (this.busy) return;
    this.busy = true;
    this.app.mark('sandboxes-fetch', 0);
    try {
      const r = await api('GET', '/v1/sandboxes' + query(this.filter));
      const now = Date.now();
      for (const s of r.sandboxes) s.fetched_at = now;
      const sbs = r.sandboxes.filter((s) => s.state !== 'ended' && !s.pool_member);
      sbs.sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
      this.list.setItems(sbs);
      $('sb-count').textContent = `(${sbs.length} live)`;
      $('sb-empty').hidden = sbs.length > 0;
      this.app.mark('sandboxes-rendered', sbs.length);
    } catch (e) {
      this.app.fail(e);
    } finally {
      this.busy = false;
    }
  }

  row(sb, row) {
    clear(row);
    row.className = 'vrow grid-sb state-' + sb.state;
    row.dataset.id = sb.id;
    const labels = Object.entries(sb.labels || {}).map(([k, v]) => el('span', { class: 'label' }, `${k}=${v}`));
    const age = (Date.now() - Date.parse(sb.created_at)) / 1000;
    const ttl = ttlOf(sb);
    row.append(
      el('span', { class: 'id', title: sb.id }, el('code', {}, short(sb.id))),
      el('span', { class: 'state' }, el('span', { class: 'pill ' + sb.state }, sb.state)),
      el('span', { class: 'labels' }, el('span', { class: 'profile' }, sb.profile || ''), ...labels),
      el('span', { class: 'num' }, fmtSeconds(age)),
      el('span', { class: 'num' + (ttl < 60 ? ' warn' : ''), title: sb.expires_at ? `expires at ${sb.expires_at}` : 'wall-clock budget left' }, isNaN(ttl) ? '–' : fmtSeconds(ttl)),
      el('span', { class: 'budgets' }, ...BUDGETS.map((b) => budget(sb, b))),
      el('span', { class: 'actions' }, ...this.actions(sb)),
    );
  }

  actions(sb) {
    const name = short(sb.id);
    const armed = Date.now() - (this.armed.get(sb.id) || 0) < 5000;
    const out = [
      el('button', { type: 'button', 'aria-label': `Timeline of ${name}`, onclick: () => this.app.openTimeline({ sandbox: sb.id }) }, 'Timeline'),
    ];
    if (sb.state === 'paused')
      out.push(el('button', { type: 'button', 'aria-label': `Resume ${name}`, onclick: () => this.lifecycle(sb, 'resume') }, 'Resume'));
    else
      out.push(el('button', { type: 'button', 'aria-label': `Pause ${name}`, onclick: () => this.lifecycle(sb, 'pause') }, 'Pause'));
    out.push(
      el('button', {
        type: 'button',
        class: 'danger' + (armed ? ' armed' : ''),
        'aria-label': armed ? `Confirm kill of ${name}` : `Kill ${name}`,
        onclick: () => this.kill(sb),
      }, armed ? 'Confirm' : 'Kill'),
    );
    return out;
  }

  async lifecycle(sb, verb) {
    try {
      await api('POST', `/v1/sandboxes/${encodeURIComponent(sb.id)}/${verb}`);
      this.app.say(`${verb}d ${short(sb.id)}`);
    } catch (e) {
      this.app.fail(e);
    }
    this.refresh();
  }

  // Kill asks twice: the first click arms the button for five seconds.
  async kill(sb) {
    if (Date.now() - (this.armed.get(sb.id) || 0) >= 5000) {
      this.armed.set(sb.id, Date.now());
      this.list.refresh();
      setTimeout(() => this.list.refresh(), 5000);
      return;
    }
    this.armed.delete(sb.id);
    try {
      const r = await api('POST', '/v1/kill', { ids: [sb.id], reason: 'dashboard' });
      this.app.say(`killed ${r.killed.length} sandbox(es)`);
    } catch (e) {
      this.app.fail(e);
    }
    this.refresh();
  }
}

// Seconds left: to expires_at, else of the wall-clock budget (counting down between refreshes).
function ttlOf(sb) {
  const t = secondsUntil(sb.expires_at);
  const wall = (sb.remaining || {}).wall_ns;
  if (typeof wall !== 'number' || sb.state === 'paused') return isNaN(t) ? (typeof wall === 'number' ? wall / 1e9 : NaN) : t;
  const w = wall / 1e9 - (Date.now() - sb.fetched_at) / 1000;
  return isNaN(t) ? w : Math.min(t, w);
}

// One budget's bar: used of limit, from usage, limits and remaining.
function budget(sb, [label, key, fmt, usageKey]) {
  const limit = (sb.limits || {})[key] || 0;
  const rem = (sb.remaining || {})[key];
  let used = (sb.usage || {})[usageKey || key];
  if (limit && typeof rem === 'number') used = limit - rem;
  if (!limit) {
    return el('span', { class: 'budget none', title: `${label}: ${used === undefined ? '–' : fmt(used)} (no limit)` },
      el('span', { class: 'bl' }, label), el('meter', { min: 0, max: 1, value: 0, 'aria-label': `${label}: no limit` }));
  }
  const frac = Math.max(0, Math.min(1, (used || 0) / limit));
  const text = `${label}: ${fmt(used || 0)} of ${fmt(limit)} (${fmt(Math.max(0, limit - (used || 0)))} left)`;
  return el('span', { class: 'budget', title: text },
    el('span', { class: 'bl' }, label),
    el('meter', { min: 0, max: 1, low: 0.7, high: 0.9, optimum: 0, value: frac.toFixed(3), 'aria-label': text }));
}
