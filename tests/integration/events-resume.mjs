// events-resume.mjs URL TOKEN OUT STOP: the `eventsource` package (an EventSource nobody
// here wrote) follows URL/v1/events?kind=sandbox. with an admin token, and appends one line
// per event to OUT: "ID KIND SANDBOX". It reconnects on its own when the daemon goes away;
// the daemon must take the Last-Event-ID it then sends as `since`. Ends when the file STOP
// exists (or after 60 s). Prints "open" each time the stream opens.
import { createRequire } from 'node:module';
import { appendFileSync, existsSync } from 'node:fs';

// The package comes from tests/clients (npm ci, the committed lock file).
const require = createRequire(new URL('../clients/package.json', import.meta.url));
const { EventSource } = require('eventsource');

const [url, token, out, stop] = process.argv.slice(2);
// Every kind of sandbox.* record the daemon writes (src/control): one listener each.
const KINDS = ['sandbox.create', 'sandbox.create_failed', 'sandbox.claim', 'sandbox.adopt',
  'sandbox.reap', 'sandbox.control', 'sandbox.ttl', 'sandbox.destroy'];
const es = new EventSource(`${url}/v1/events?kind=sandbox.`, {
  fetch: (input, init) => fetch(input, { ...init, headers: { ...init.headers, Authorization: `Bearer ${token}` } }),
});
es.onopen = () => console.log('open');
for (const k of KINDS) {
  es.addEventListener(k, (e) => {
    const d = JSON.parse(e.data);
    appendFileSync(out, `${e.lastEventId} ${e.type} ${d.sandbox}\n`);
  });
}
const t0 = Date.now();
const timer = setInterval(() => {
  if (existsSync(stop) || Date.now() - t0 > 60000) {
    clearInterval(timer);
    es.close();
  }
}, 50);
