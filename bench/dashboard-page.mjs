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
let t1 = await frameWhen(page, (n) => window.paddockPerf['sandboxes-rendered'] && window.paddockPerf['sandboxes-rendered'].n >= n && document.querySelector('#sb-list .vrow'), Number(nSandboxes));
out.sandboxes_first_render_ms = t1 - t0;
out.sandboxes_rows_in_dom = await page.$$eval('#sb-list .vrow', (r) => r.length);
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
t1 = await frameWhen(page, () => document.querySelector('#tl-list .vrow'));
out.timeline_first_rows_ms = t1 - t0;
const tAll = await frameWhen(page, (n) => window.paddockPerf['timeline-drawn'] && window.paddockPerf['timeline-drawn'].n >= n, Number(nEvents));
out.timeline_all_events_ms = tAll - t0;
out.timeline_events = await page.evaluate(() => window.paddockPerf['timeline-drawn'].n);
out.timeline_rows_in_dom = await page.$$eval('#tl-list .vrow', (r) => r.length);

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
out.scroll = await page.evaluate(() => new Promise((resolve) => {
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
}));
await browser.close();
console.log(JSON.stringify(out));
