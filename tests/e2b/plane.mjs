// The control plane through the real `e2b` SDK (tests/integration/test-e2b.sh): create with
// metadata, get, list with metadata and state filters and paging, setTimeout, pause and
// connect, kill, SandboxNotFoundError; another key's sandbox; keys of the wrong shape or
// unknown; refused fields; an oversized body. OTHER_KEY is a second key of the same daemon.
import { e2b, check, thrown, url, key } from './lib.mjs';
const { Sandbox, SandboxNotFoundError, AuthenticationError } = e2b;
const other = process.env.OTHER_KEY;
const tag = 'run-' + process.pid;

const sbx = await Sandbox.create({ metadata: { tag, user: 'alice' }, timeoutMs: 60_000 });
check('create answers a sandbox id and envd version', /^[0-9a-f-]{36}$/.test(sbx.sandboxId) &&
	sbx.envdAccessToken !== undefined, true);
let info = await sbx.getInfo();
check('getInfo: metadata as created', JSON.stringify(info.metadata), JSON.stringify({ tag, user: 'alice' }));
check('getInfo: state, template', `${info.state} ${info.templateId}`, 'running base');
const life = info.endAt.getTime() - Date.now();
check('getInfo: endAt is the timeout (60 s) away', life > 30_000 && life <= 61_000, true);

const b = await Sandbox.create({ metadata: { tag, user: 'bob' } });
const c = await Sandbox.create({ metadata: { tag, user: 'carol' } });
let page = await Sandbox.list({ query: { metadata: { tag, user: 'alice' } } }).nextItems();
check('list by metadata: only the matching sandbox', page.map((s) => s.sandboxId).join(), sbx.sandboxId);
const pager = Sandbox.list({ query: { metadata: { tag } }, limit: 2 });
const p1 = await pager.nextItems();
const more = pager.hasNext;
const p2 = await pager.nextItems();
check('list pages: 2, then 1 (X-Next-Token), no more', `${p1.length} ${more} ${p2.length} ${pager.hasNext}`, '2 true 1 false');
check('list pages: newest first, each sandbox once',
	[...p1, ...p2].map((s) => s.sandboxId).join(), [c.sandboxId, b.sandboxId, sbx.sandboxId].join());

await sbx.setTimeout(600_000);
info = await sbx.getInfo();
const life2 = info.endAt.getTime() - Date.now();
check('setTimeout(600 s) moves endAt', life2 > 500_000 && life2 <= 601_000, true);

check('pause answers true', await sbx.pause(), true);
check('getInfo after pause: paused', (await sbx.getInfo()).state, 'paused');
check('a second pause answers false (409)', await sbx.pause(), false);
page = await Sandbox.list({ query: { metadata: { tag }, state: ['paused'] } }).nextItems();
check('list state=paused: the paused one', page.map((s) => s.sandboxId).join(), sbx.sandboxId);
page = await Sandbox.list({ query: { metadata: { tag }, state: ['running'] } }).nextItems();
check('list state=running: the other two', page.length, 2);
const again = await Sandbox.connect(sbx.sandboxId);
check('connect resumes it', (await again.getInfo()).state, 'running');
check('isRunning through envd /health', await again.isRunning(), true);

// Another key: the sandbox is not there for it.
let [err] = await thrown(() => Sandbox.getInfo(sbx.sandboxId, { apiKey: other }));
check("another key's getInfo: SandboxNotFoundError", err, 'SandboxNotFoundError');
check("another key's kill answers false", await Sandbox.kill(sbx.sandboxId, { apiKey: other }), false);
[err] = await thrown(() => Sandbox.connect(sbx.sandboxId, { apiKey: other }));
check("another key's connect: SandboxNotFoundError", err, 'SandboxNotFoundError');
page = await Sandbox.list({ apiKey: other, query: { metadata: { tag } } }).nextItems();
check("another key's list: none of them", page.length, 0);
check('still running after the other key tried', (await sbx.getInfo()).state, 'running');

// Keys of the wrong shape, unknown keys.
let msg;
[err, msg] = await thrown(() => Sandbox.list({ apiKey: 'e2b_not-hex' }).nextItems());
check('a key of the wrong shape: AuthenticationError', err, 'AuthenticationError');
check('... whose message says the shape', /40 lowercase hex/.test(msg), true);
[err, msg] = await thrown(() => Sandbox.list({ apiKey: 'e2b_' + '0'.repeat(40) }).nextItems());
check('an unknown key: AuthenticationError', `${err} ${/unknown/.test(msg)}`, 'AuthenticationError true');

// Refused fields name themselves.
[err, msg] = await thrown(() => Sandbox.create({ network: { denyOut: ['10.0.0.0/8'] } }));
check('network.denyOut of a range: refused with 400, naming the field', `${err} ${/^400: .*denyOut/.test(msg)}`, 'SandboxError true');
[err, msg] = await thrown(() => Sandbox.create('no-such-profile'));
check('an unknown template: refused, naming it', `${err === 'none'} ${/no-such-profile/.test(msg)}`, 'false true');

// An oversized body is refused before it is parsed.
const big = JSON.stringify({ templateID: 'base', metadata: { x: 'y'.repeat(2 << 20) } });
const res = await fetch(`${url}/v2/sandboxes`, { method: 'POST', body: big,
	headers: { 'X-API-KEY': key, 'Content-Type': 'application/json' } });
const body = await res.json();
check('a 2 MiB create body: 413 in E2B\'s error shape', `${res.status} ${body.code}`, '413 413');

for (const s of [sbx, b, c]) check(`kill ${s === sbx ? 'A' : s === b ? 'B' : 'C'}`, await s.kill(), true);
[err] = await thrown(() => Sandbox.getInfo(sbx.sandboxId));
check('getInfo after kill: SandboxNotFoundError', err, 'SandboxNotFoundError');
check('a second kill answers false', await Sandbox.kill(sbx.sandboxId), false);
