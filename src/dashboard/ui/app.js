// app.js - the page: login, the views, the one live event stream, status.
//
// SECURITY: until a token is accepted by the API (an admin call succeeds),
// the page shows the login prompt and nothing else; a token the API refuses
// later (revoked, expired) puts the page back there, its views emptied.

import { api, setToken, signedIn } from './api.js';
import { EventFeed } from './sse.js';
import { $, clear } from './util.js';
import { SandboxesView } from './sandboxes.js';
import { ApprovalsView } from './approvals.js';
import { KillView } from './kill.js';
import { TimelineView } from './timeline.js';
import { DenialsView } from './denials.js';

// Figures the page measures itself (first render, event bursts): read by the tests and bench/.
const perf = { marks: [] };
window.paddockPerf = perf;

class App {
  constructor() {
    this.views = {};
    this.current = null;
    this.feed = null;
    $('login-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.signIn($('token').value.trim());
    });
    $('logout').addEventListener('click', () => this.signOut());
    for (const b of document.querySelectorAll('#nav [data-view]')) b.addEventListener('click', () => this.show(b.dataset.view));
    $('token').focus();
  }

  signedIn() {
    return signedIn();
  }

  async signIn(token) {
    $('login-error').hidden = true;
    if (!token) return;
    setToken(token);
    try {
      // An admin-only call: a sandbox token or a wrong one is refused here.
      await api('GET', '/v1/approvals');
    } catch (e) {
      setToken(null);
      $('login-error').textContent = `The API refused this token: ${e.message}${e.status ? ' (' + e.status + ')' : ''}`;
      $('login-error').hidden = false;
      return;
    }
    $('token').value = '';
    this.start();
  }

  start() {
    perf.signedIn = performance.now();
    this.views = {
      sandboxes: this.views.sandboxes || new SandboxesView(this),
      approvals: this.views.approvals || new ApprovalsView(this),
      kill: this.views.kill || new KillView(this),
      timeline: this.views.timeline || new TimelineView(this),
      denials: this.views.denials || new DenialsView(this),
    };
    // bench/dashboard: records handed to the open timeline as if they had come from the
    // stream (the page's own cost at 100,000 rows, apart from the daemon's replay).
    perf.inject = (batch) => this.views.timeline.add(batch);
    $('login').hidden = true;
    $('nav').hidden = false;
    $('logout').hidden = false;
    // The live stream: new events only (no since), reconnecting with since = the last id.
    this.feed = new EventFeed({ follow: 1 }, (b) => this.onEvents(b), (s) => this.say(s)).start();
    this.views.approvals.refresh();
    this.show('sandboxes');
  }

  signOut() {
    setToken(null);
    if (this.feed) this.feed.stop();
    if (this.views.timeline && this.views.timeline.feed) this.views.timeline.feed.stop();
    // Everything the API gave the page goes with the token.
    location.reload();
  }

  onEvents(batch) {
    perf.lastEvent = performance.now();
    for (const v of Object.values(this.views)) if (v.onEvents) v.onEvents(batch);
  }

  show(name) {
    if (!signedIn()) return;
    for (const [k, v] of Object.entries(this.views)) {
      const on = k === name;
      $('view-' + k).hidden = !on;
      if (!on && v.visible) v.hide();
    }
    for (const b of document.querySelectorAll('#nav [data-view]'))
      if (b.dataset.view === name) b.setAttribute('aria-current', 'page');
      else b.removeAttribute('aria-current');
    this.current = name;
    this.views[name].show();
  }

  openTimeline(which) {
    this.show('timeline');
    this.views.timeline.open(which);
  }

  setPending(list) {
    const b = $('approvals-count');
    b.textContent = String(list.length);
    b.hidden = list.length === 0;
  }

  say(text) {
    $('status').textContent = text || '';
  }

  // An API error: a refused token ends the session; others are said.
  fail(e) {
    if (e && e.status === 401) return this.expired(e);
    this.say(e && e.message ? e.message : String(e));
  }

  expired(e) {
    setToken(null);
    if (this.feed) this.feed.stop();
    for (const v of document.querySelectorAll('main .view')) v.hidden = v.id !== 'login';
    for (const id of ['sb-list', 'ap-list', 'tl-list', 'dn-list', 'drift-list', 'tl-detail', 'chain']) clear($(id));
    $('nav').hidden = true;
    $('logout').hidden = true;
    $('login-form').hidden = true;
    $('login-error').textContent = `Signed out: the API refused the token (${e.message}). Reload the page to sign in again.`;
    $('login-error').hidden = false;
  }

  mark(name, n) {
    perf.marks.push([name, n, performance.now()]);
    if (perf.marks.length > 2000) perf.marks.splice(0, 1000);
    perf[name] = { n, t: performance.now() };
  }
}

window.addEventListener('DOMContentLoaded', () => new App());
