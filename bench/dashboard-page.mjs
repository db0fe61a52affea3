// The browser half of bench/dashboard: the operator's page in Chromium (Debian's, driven by
// playwright-core of tests/clients), measured in the page with performance.now() and
// requestAnimationFrame. Prints one JSON object.
//
//   node dashboard-page.mjs URL TOKEN SANDBOXES SESSION SANDBOX_ID EVENTS BURST
import { createRequire } from 'node:module';

const require = createRequire(new URL('../tests/clients/package.json', import.meta.url));
const { chromium } = require('playwright-core');
const [url, token, nSandboxes, session, sandbox, nEvents, burst] = process.argv.slice(2);

async function api(method, p, body) {
  const r = await fetch(url + p, { method, headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' }, body: body && JSON.stringify(body) });
  return r.json();
}

const SCROLL = () => new Promise((resolve) => {
  const box = document.getElementById('tl-list');
  box.scrollTop = 0;
  const d = [];
  let last = performance.now();
  let i = 0;
  function step(t) {
    d.push(t - last);
    last = t;
    box.scrollTop += 80 * 24;
    if (++i < 240) requestAnimationFrame(step);
    else {
      d.sort((a, b) => a - b);
      resolve({ frames: d.length, p50_ms: d[Math.floor(d.length / 2)], p95_ms: d[Math.floor(d.length * 0.95)], max_ms: d[d.length - 1], over_20ms: d.filter((x) => x > 20).length });
    }
  }
  requestAnimationFrame(step);
});

const now = (page) => page.evaluate(() => performance.now());
// The time of the next frame after `cond` holds in the page (polled every frame).
async function frameWhen(page, cond, arg) {
  await page.waitForFunction(cond, arg, { polling: 'raf', timeout: 600000 });
  return page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r(performance.now()))));
}

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-extensions'],
});
const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
await page.goto(url + '/ui/');
await page.fill('#token', token);
const out = {};

// 1. Sign-in to the sandboxes view painted with every sandbox.
let t0 = await now(page);
await page.click('#login-form button[type=submit]');
let t1 = await frameWhen(page, (n) => window.paddockPerf['sandboxes-rendered'] && window.paddockPerf['sandboxes-rendered'].n >= n && document.querySelector('#sb-list .vrow:not([hidden])'), Number(nSandboxes));
out.sandboxes_first_render_ms = t1 - t0;
out.sandboxes_rows_in_dom = await page.$$eval('#sb-list .vrow:not([hidden])', (r) => r.length);
// One refresh of the list (the API's answer and the rows), as every 3 s: the next one.
const before = await page.evaluate(() => window.paddockPerf.marks.filter((m) => m[0] === 'sandboxes-rendered').length);
await frameWhen(page, (b) => window.paddockPerf.marks.filter((m) => m[0] === 'sandboxes-rendered').length > b, before);
out.sandboxes_refresh_ms = await page.evaluate(() => {
  const m = window.paddockPerf.marks;
  const r = m.filter((x) => x[0] === 'sandboxes-rendered').pop();
  const f = m.filter((x) => x[0] === 'sandboxes-fetch' && x[2] <= r[2]).pop();
  return r[2] - f[2];
});

// 2. The session's timeline: first rows, then every stored event replayed.
await page.click('#nav [data-view=timeline]');
await page.fill('#tl-form input[name=session]', session);
t0 = await now(page);
await page.click('#tl-form button[type=submit]');
t1 = await frameWhen(page, () => document.querySelector('#tl-list .vrow:not([hidden])'));
out.timeline_first_rows_ms = t1 - t0;
// The view opens on the session's last 10,000 records (tail): all of them drawn.
const tTail = await frameWhen(page, (n) => window.paddockPerf['timeline-drawn'] && window.paddockPerf['timeline-drawn'].n >= n, Math.min(10000, Number(nEvents)));
out.timeline_tail_ms = tTail - t0;
out.timeline_events = await page.evaluate(() => window.paddockPerf['timeline-drawn'].n);
// "Load every earlier event": the whole session replayed from the start (the daemon
// sends it in pages, at the page's pace).
{
  t0 = await now(page);
  await page.click('#tl-all');
  const tAll = await frameWhen(page, (n) => window.paddockPerf['timeline-drawn'] && window.paddockPerf['timeline-drawn'].n >= n, Number(nEvents));
  out.timeline_all_events_ms = tAll - t0;
  out.timeline_events = await page.evaluate(() => window.paddockPerf['timeline-drawn'].n);
}
out.timeline_rows_in_dom = await page.$$eval('#tl-list .vrow:not([hidden])', (r) => r.length);

// 3. A burst: BURST/2 short commands in the sandbox (a process.exec and a process.exit
//    each), from the first event's arrival to the frame that drew the last one.
const base = out.timeline_events;
const tFire = await now(page);
const done = api('POST', `/v1/sandboxes/${sandbox}/exec`, { argv: ['sh', '-c', `i=0; while [ $i -lt ${Math.floor(burst / 2)} ]; do /bin/true; i=$((i+1)); done`] });
await frameWhen(page, (n) => window.paddockPerf['timeline-drawn'].n >= n, base + Number(burst));
await done;
out.burst = await page.evaluate(([tf, base, burst]) => {
  const m = window.paddockPerf.marks;
  const first = m.find((x) => x[0] === 'timeline-batch' && x[2] > tf);
  const last = m.find((x) => x[0] === 'timeline-drawn' && x[1] >= base + burst);
  const batches = m.filter((x) => x[0] === 'timeline-batch' && x[2] > tf).length;
  // Each batch: from its arrival to the first frame drawn after it (the page's own lag).
  let lag = 0;
  for (const b of m.filter((x) => x[0] === 'timeline-batch' && x[2] > tf)) {
    const d = m.find((x) => x[0] === 'timeline-drawn' && x[2] >= b[2]);
    if (d) lag = Math.max(lag, d[2] - b[2]);
  }
  return { first_arrival_ms: first[2] - tf, arrival_to_painted_ms: last[2] - first[2], batches, max_batch_lag_ms: lag };
}, [tFire, base, Number(burst)]);
// The page's own work per event of the burst: the frames' busy time while it came in.
out.js_heap_mb = await page.evaluate(() => (performance.memory ? performance.memory.usedJSHeapSize / 1048576 : null));

// 4. Scrolling the whole timeline: 240 frames, 80 rows a frame, frame times.
out.scroll = await page.evaluate(SCROLL);
// 5. The page alone at 100,000 rows: copies of the session's records (new seq numbers)
//    handed to the open timeline in batches of 1,000, one batch a frame, as the stream's
//    reader does; then the same scroll.
out.inject = await page.evaluate((total) => new Promise((resolve) => {
  const start = performance.now();
  let seq = 10000000;
  let sent = 0;
  const proto = { actor: 'paddock-supervise', kind: 'process.exec', sandbox: 'x', session: 'bench-events', ts: new Date().toISOString(), attrs: { argv: ['/bin/true'], pid: 2 } };
  const frames = [];
  let last = start;
  function step(t) {
    frames.push(t - last);
    last = t;
    if (sent >= total) {
      frames.sort((a, b) => a - b);
      resolve({ rows: total, ms: performance.now() - start, frame_p95_ms: frames[Math.floor(frames.length * 0.95)], frame_max_ms: frames[frames.length - 1] });
      return;
    }
    const batch = [];
    for (let i = 0; i < 1000; i++) batch.push(Object.assign({}, proto, { seq: seq++, kind: i % 2 ? 'process.exit' : 'process.exec', attrs: i % 2 ? { exit_code: 0, pid: 2 } : proto.attrs }));
    sent += batch.length;
    window.paddockPerf.inject(batch);
    requestAnimationFrame(step);
  }
  requestAnimationFrame(step);
}), 100000);
out.inject.rows_total = await page.evaluate(() => window.paddockPerf['timeline-drawn'].n);
out.inject.js_heap_mb = await page.evaluate(() => (performance.memory ? performance.memory.usedJSHeapSize / 1048576 : null));
out.scroll_injected = await page.evaluate(SCROLL);
await browser.close();
console.log(JSON.stringify(out));
