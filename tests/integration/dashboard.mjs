// The operator's dashboard in real Chromium (Debian's, driven by playwright-core of
// tests/clients), as an operator uses it: test-dashboard.sh starts `paddock serve --listen`,
// an admin token and two gateway calls waiting for approval, then runs this script, which
// prints TAP lines without numbers ("ok - WHAT") for tap_run.
//
//   DASH_URL=http://127.0.0.1:PORT DASH_TOKEN=T DASH_TOKEN_NAME=ops DASH_WHO=root \
//   DASH_SHOTS=DIR node dashboard.mjs
//
// Everything the page shows is checked against the API (fetch() here, with the token), never
// against the page itself. The browser reaches nothing but loopback: no download, no update,
// no background networking.
import { createRequire } from 'node:module';
import { createServer } from 'node:http';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

const require = createRequire(new URL('../clients/package.json', import.meta.url));
const { chromium } = require('playwright-core');

const URL_ = process.env.DASH_URL;
const TOKEN = process.env.DASH_TOKEN;
const TOKEN_NAME = process.env.DASH_TOKEN_NAME || 'ops';
const WHO = process.env.DASH_WHO || 'root';
const SHOTS = process.env.DASH_SHOTS;
const BOUND_MS = 60000; // a bound for things to happen, never a timing check

function ok(cond, desc, diag) {
  console.log(`${cond ? 'ok' : 'not ok'} - ${WHO}: ${desc}`);
  if (!cond && diag !== undefined) for (const l of String(typeof diag === 'string' ? diag : JSON.stringify(diag)).split('\n').slice(0, 12)) console.log('#   ' + l);
  return cond;
}

async function api(method, p, body, extra) {
  const h = Object.assign({ Authorization: 'Bearer ' + TOKEN }, extra || {});
  if (body !== undefined) h['Content-Type'] = 'application/json';
  const r = await fetch(URL_ + p, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch (_) { /* not JSON */ }
  return { status: r.status, json, text };
}

// The stored records of an /v1/events query (follow=0: the replay only).
async function events(q) {
  const r = await api('GET', '/v1/events?follow=0&since=0&' + q);
  return r.text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
}

async function until(fn, what) {
  const end = Date.now() + BOUND_MS;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  console.log(`# gave up waiting for ${what}: ${last instanceof Error ? last.message : JSON.stringify(last)}`);
  return null;
}

async function create(labels, extra) {
  const r = await api('POST', '/v1/sandboxes', Object.assign({ labels }, extra || {}));
  if (r.status !== 201) throw new Error(`create: ${r.status} ${r.text}`);
  return r.json.id;
}

async function stateOf(id) {
  const r = await api('GET', '/v1/sandboxes/' + id);
  return r.status === 404 ? 'gone' : r.json.state;
}

async function shot(page, name) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, name + '.png') });
}

const short = (id) => id.slice(-12);

// ---- the views, one function each ----

// The page's script has started when the login field has the focus (the App's constructor, at
// DOMContentLoaded). A module that did not arrive (seen once, on a loaded machine: the click
// then submitted the bare form) is said, with the requests that failed, and the page loaded
// once more; a second miss fails the run.
async function openApp(page) {
  const ready = () => page.waitForFunction(() => document.activeElement && document.activeElement.id === 'token',
    null, { timeout: 20000 }).then(() => true, () => false);
  await page.goto(URL_ + '/ui/');
  if (await ready()) return;
  console.log(`# the page's script did not start within 20 s (failed requests: ${failedRequests.join(', ') || 'none'}); loading it again`);
  await page.reload();
  if (!(await ready())) throw new Error(`the page's script did not start (failed requests: ${failedRequests.join(', ') || 'none'})`);
}

const failedRequests = [];

async function wrongToken(page, ids) {
  await openApp(page);
  await page.fill('#token', 'pdk_adm_not-a-token-of-this-daemon');
  await page.click('#login-form button[type=submit]');
  await page.waitForSelector('#login-error:not([hidden])');
  const msg = await page.textContent('#login-error');
  ok(/refused/.test(msg) && /40[13]/.test(msg), 'a wrong token: the login prompt says the API refused it', msg);
  const html = await page.content();
  ok(ids.every((id) => !html.includes(id) && !html.includes(short(id))), 'a wrong token sees nothing: no sandbox id anywhere in the DOM');
  ok(await page.isHidden('#nav') && await page.isHidden('#view-sandboxes'), 'a wrong token: no view but the login prompt');
  await shot(page, 'login');
}

async function signIn(page) {
  await page.fill('#token', TOKEN);
  await page.click('#login-form button[type=submit]');
  await page.waitForSelector('#nav:not([hidden])');
  const kept = await page.evaluate(() => [localStorage.length, sessionStorage.length, document.cookie, location.href]);
  ok(kept[0] === 0 && kept[1] === 0 && kept[2] === '' && !kept[3].includes(TOKEN.slice(-8)),
    'the token is kept in memory only: nothing in localStorage, sessionStorage, cookies or the URL', kept);
}

async function sandboxes(page, ids, xss) {
  const t0 = Date.now();
  const seen = await until(async () => {
    const shown = await page.$$eval('#sb-list .vrow:not([hidden])', (rs) => rs.map((r) => r.dataset.id));
    return ids.every((id) => shown.includes(id)) && shown;
  }, 'the sandboxes on the page');
  ok(seen, `the sandboxes created through the API are on the page (${Date.now() - t0} ms)`, seen);
  const row = await page.textContent(`#sb-list .vrow:not([hidden])[data-id="${xss}"]`);
  ok(row && row.includes('<img src=x onerror=') && row.includes('<script>'),
    'a label holding markup is shown as text', row);
  const injected = await page.evaluate(() => [window.__pdkXss, document.querySelectorAll('#sb-list img, #sb-list script').length]);
  ok(injected[0] === undefined && injected[1] === 0, 'and never runs: no element made of it, its script never ran', injected);
  const bars = await page.$$eval(`#sb-list .vrow:not([hidden])[data-id="${ids[0]}"] .budget:not(.none) meter`, (ms) => ms.map((m) => m.getAttribute('aria-label')));
  ok(bars.some((b) => b.startsWith('cmds:')) && bars.some((b) => b.startsWith('wall:')),
    'a sandbox with budgets has a bar per budget (wall, commands, ...)', bars);
  // Filter by session: only that session's sandboxes stay.
  await page.fill('#sb-filter input[name=session]', 'dash-b');
  await page.click('#sb-filter button[type=submit]');
  const filtered = await until(async () => {
    const shown = await page.$$eval('#sb-list .vrow:not([hidden])', (rs) => rs.map((r) => r.dataset.id));
    return shown.length === 1 && shown[0] === ids[1] && shown;
  }, 'the session filter');
  ok(filtered, 'the session filter shows only that session\'s sandboxes', filtered);
  await page.click('#sb-filter button[type=reset]');
  await until(async () => (await page.$$('#sb-list .vrow:not([hidden])')).length >= ids.length, 'the list after the filter is cleared');
  await shot(page, 'sandboxes');
}

async function timeline(page, id) {
  const r = await api('POST', `/v1/sandboxes/${id}/exec`, { argv: ['sh', '-c', 'echo dashboard-was-here > seen.txt; cat seen.txt'] });
  ok(r.status === 200 && r.json.exit_code === 0, 'a command runs in the sandbox (API exec)', r.text);
  await page.click(`#sb-list .vrow:not([hidden])[data-id="${id}"] button:has-text("Timeline")`);
  const row = await until(async () => {
    const rows = await page.$$eval('#tl-list .vrow:not([hidden])', (rs) => rs.map((x) => x.textContent));
    return rows.find((t) => t.includes('process.exec') && t.includes('dashboard-was-here'));
  }, 'the command in the timeline');
  ok(row, 'the command is in the sandbox\'s timeline (process.exec with its argv)', row);
  const exit = await until(async () => (await page.$$eval('#tl-list .vrow:not([hidden])', (rs) => rs.map((x) => x.textContent))).find((t) => t.includes('process.exit') && t.includes('exit 0')), 'the exit');
  ok(exit, 'and its end, with its status (process.exit, exit 0)', exit);
  await page.click('#tl-diff-open');
  const diff = await until(async () => {
    const t = await page.textContent('#tl-diff-patch');
    return t.includes('+dashboard-was-here') && t;
  }, 'the diff');
  ok(diff && (await page.textContent('#tl-diff-files')).includes('seen.txt'), 'the workspace diff view shows the changed file and its lines', diff);
  await page.click('#tl-list .vrow:not([hidden]) >> nth=0');
  await page.keyboard.press('ArrowDown');
  // The selection is drawn in the next frame.
  const sel = await until(async () => {
    const rows = await page.$$eval('#tl-list .vrow:not([hidden]).selected', (rs) => rs.map((r) => r.dataset.i));
    return rows.length === 1 && rows[0] === '1' && rows;
  }, 'the selection on the second row');
  ok(sel && (await page.textContent('#tl-detail')).includes('"seq"'), 'the keyboard moves the selection and the event\'s record is shown', sel);
  const chain = await until(async () => {
    const t = await page.textContent('#chain');
    return /verified up to#\d+/.test(t) && t;
  }, 'the chain state');
  ok(chain, 'the audit chain\'s state is beside the timeline (verified up to, last signed checkpoint)', await page.textContent('#chain'));
  await shot(page, 'timeline');
}

async function approvals(page, approve, deny) {
  await page.click('#nav [data-view=approvals]');
  const cards = await until(async () => {
    const got = await page.$$eval('#ap-list [data-approval]', (cs) => cs.map((c) => c.dataset.approval));
    return got.includes(approve) && got.includes(deny) && got;
  }, 'the pending approvals');
  ok(cards, 'the pending gateway calls are in the approvals queue', cards);
  const text = await page.textContent(`[data-approval="${approve}"]`);
  ok(text.includes('tool.call') && text.includes('approve-me') && /times out in/.test(text),
    'a request shows its kind, its arguments and a countdown', text);
  await shot(page, 'approvals');
  await page.fill(`[data-approval="${approve}"] input.note`, 'looks fine');
  await page.click(`[data-approval="${approve}"] button:has-text("Approve")`);
  await page.click(`[data-approval="${deny}"] button:has-text("Deny")`);
  const a = await until(async () => {
    const r = await api('GET', '/v1/approvals/' + approve);
    return r.json && r.json.state !== 'pending' && r.json;
  }, 'the approval decided');
  ok(a && a.state === 'approved' && a.approver === TOKEN_NAME && a.note === 'looks fine',
    'Approve: the request is approved, the approver is the token\'s name, the note kept', a);
  const d = await until(async () => {
    const r = await api('GET', '/v1/approvals/' + deny);
    return r.json && r.json.state !== 'pending' && r.json;
  }, 'the denial decided');
  ok(d && d.state === 'denied' && d.approver === TOKEN_NAME, 'Deny: the request is denied by the token\'s name', d);
}

async function killOne(page, id) {
  await page.click('#nav [data-view=sandboxes]');
  const btn = `#sb-list .vrow:not([hidden])[data-id="${id}"] button.danger`;
  await page.waitForSelector(btn);
  await page.click(btn);
  await page.waitForSelector(`${btn}.armed`);
  await page.click(btn);
  const st = await until(async () => ['ended', 'gone'].includes(await stateOf(id)) && (await stateOf(id)), 'the kill');
  ok(st, 'Kill (asked twice): the sandbox ended', st);
  const k = await until(async () => (await events('kind=kill&sandbox=' + id)).find((e) => e.kind === 'kill'), 'the kill record');
  ok(k && k.attrs && k.attrs.operator === TOKEN_NAME, `a kill event was recorded with the operator (attrs.operator ${TOKEN_NAME})`, k);
  const gone = await until(async () => !(await page.$(`#sb-list .vrow:not([hidden])[data-id="${id}"]`)), 'the row gone');
  ok(gone, 'the killed sandbox leaves the live list');
}

async function pauseResume(page, id) {
  await page.click('#nav [data-view=sandboxes]');
  await page.click(`#sb-list .vrow:not([hidden])[data-id="${id}"] button:has-text("Pause")`);
  ok(await until(async () => (await stateOf(id)) === 'paused', 'paused'), 'Pause: the sandbox is paused');
  await page.click(`#sb-list .vrow:not([hidden])[data-id="${id}"] button:has-text("Resume")`);
  ok(await until(async () => (await stateOf(id)) === 'running', 'running'), 'Resume: it runs again');
}

async function killSwitches(page, bySession, all) {
  await page.click('#nav [data-view=kill]');
  await page.selectOption('#kill-kind', 'session');
  await page.fill('#kill-value', 'dash-c');
  await page.click('#kill-form button[type=submit]');
  await page.waitForSelector('#kill-confirm:not([hidden])');
  ok((await page.textContent('#kill-confirm-text')).includes('Kill 1 live'), 'a session kill switch says how many sandboxes it matches and asks to confirm');
  await page.click('#kill-confirm-yes');
  ok(await until(async () => ['ended', 'gone'].includes(await stateOf(bySession)), 'the session kill'), 'the session\'s sandbox ended');
  await page.fill('#stop-word', 'stop');
  ok(await page.isDisabled('#stop-go'), '"stop everything" stays disarmed until the confirmation word is typed');
  await page.fill('#stop-word', 'STOP');
  ok(await page.isEnabled('#stop-go'), 'the confirmation word arms it');
  await shot(page, 'kill');
  await page.click('#stop-go');
  const left = await until(async () => {
    const st = await Promise.all(all.map(stateOf));
    return st.every((s) => s === 'ended' || s === 'gone') && st;
  }, 'stop everything');
  ok(left, 'stop everything: every live sandbox ended', left);
}

async function denials(page) {
  await page.click('#nav [data-view=denials]');
  const row = await until(async () => {
    const t = await page.textContent('#dn-list');
    return t.includes('denied.test') && t;
  }, 'the egress denial');
  ok(row, 'the egress denial is in "Denials and drift", with its host', row);
  // The rug pull: rug__echo's description changed after it was pinned.
  const drift = await until(async () => {
    const t = await page.textContent('#drift-list');
    return t.includes('changed tool rug__echo') && t.includes('id_rsa') && t;
  }, 'the changed tool');
  ok(drift, 'the tool changed after its pin waits in "Denials and drift", with its diff', drift);
  await shot(page, 'denials');
}

// A page of another origin (another loopback port) posts to the API: refused.
async function otherOrigin(browser, victim) {
  const srv = createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end(`<!doctype html><script>
      fetch(${JSON.stringify(URL_ + '/v1/kill')}, {method: 'POST', mode: 'no-cors',
        headers: {'Content-Type': 'text/plain'}, body: JSON.stringify({ids: [${JSON.stringify(victim)}]})})
        .then(() => document.title = 'sent', () => document.title = 'failed');
    </script>`);
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const other = `http://127.0.0.1:${srv.address().port}`;
  const p = await browser.newPage();
  await p.goto(other + '/');
  await until(async () => (await p.title()) !== '', 'the other page\'s post');
  await p.close();
  srv.close();
  ok((await stateOf(victim)) === 'running', 'a page of another origin posting to /v1/kill kills nothing');
  const r = await api('POST', '/v1/kill', { ids: [victim] }, { Origin: other });
  ok(r.status === 403 && r.json && r.json.error.code === 'forbidden' && r.json.error.field === 'Origin',
    'a mutating request with another Origin, even with the admin token, is refused 403 naming Origin', r.text);
  ok((await stateOf(victim)) === 'running', 'and the sandbox still runs');
}

async function main() {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update',
      '--disable-default-apps', '--disable-sync', '--no-first-run', '--disable-extensions',
      '--disable-features=Translate,OptimizationHints,MediaRouter', '--metrics-recording-only'],
  });
  const limits = { overrides: { limits: { wall: '10m', cpu_time: '60s', memory: '256M', commands: 50, output: '10M' } } };
  const a = await create({ session: 'dash-a', workflow: 'wf', agent: 'bot' }, limits);
  const b = await create({ session: 'dash-b', agent: 'bot' });
  const c = await create({ session: 'dash-c', agent: 'other' });
  const x = await create({ session: 'dash-x', note: '<img src=x onerror="window.__pdkXss=1">', s: '<script>window.__pdkXss=2</script>' });
  const n = await create({ session: 'dash-net' }, { overrides: { network: { mode: 'allowlist', allow: ['allowed.test'] } } });
  await api('POST', `/v1/sandboxes/${n}/exec`, { argv: ['sh', '-c', 'curl -sS -m 10 http://denied.test/ || true'] });
  const page = await browser.newPage({ viewport: { width: 1400, height: 820 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && !/status of 40[134]/.test(m.text()) && errors.push(m.text()));
  page.on('requestfailed', (r) => failedRequests.push(`${r.url()} (${r.failure() ? r.failure().errorText : '?'})`));
  await wrongToken(page, [a, b, c, x, n]);
  await signIn(page);
  await sandboxes(page, [a, b, c, x, n], x);
  await timeline(page, a);
  await approvals(page, process.env.DASH_APPROVE, process.env.DASH_DENY);
  await pauseResume(page, a);
  await otherOrigin(browser, b);
  await killOne(page, b);
  await denials(page);
  await killSwitches(page, c, [a, x, n]);
  ok(errors.length === 0, 'the page ran without a script error or a CSP violation',
    [...errors, ...failedRequests.map((r) => 'failed request: ' + r)].join('\n'));
  await browser.close();
}

main().catch((e) => {
  // TAP: the first line is the result, the stack and the requests that failed are comments.
  const [first, ...rest] = String(e.stack).split('\n');
  console.log(`not ok - ${WHO}: the dashboard driver failed: ${first}`);
  for (const l of [...rest, ...failedRequests.map((r) => 'failed request: ' + r)]) console.log('#   ' + l);
  process.exit(1);
});
