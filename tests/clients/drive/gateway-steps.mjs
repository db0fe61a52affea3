// One session of an official SDK client with `paddock gateway` (or any MCP server), running
// a list of steps and printing what each got as one JSON line, for the gateway suites to
// check with jq (tests/integration/test-gateway-servers.sh, test-gateway-attacks.sh).
//
//   GW_STEPS='[STEP...]' node gateway-steps.mjs v1|v2 stdio COMMAND [ARGS...]
//   GW_STEPS='[STEP...]' [GW_TOKEN=T] node gateway-steps.mjs v1|v2 http URL
//
// v1 is @modelcontextprotocol/sdk (legacy era), v2 @modelcontextprotocol/client pinned to the
// modern era (lib.mjs). Over HTTP, GW_TOKEN is sent as "Authorization: Bearer T". Steps:
//   {"op": "list", "want": [NAME...], "gone": [NAME...], "within": MS}
//       tools/list (every page). With `want` (or `gone`), asked again every 100 ms until each
//       NAME is listed (or none of `gone` is), for at most `within` ms (default 60000): the
//       gateway lists an upstream's tools once that upstream has started.
//       Prints {"op": "list", "tools": [{name, description}], "waited_ms": N}.
//   {"op": "call", "name": NAME, "args": {...}, "progress": true, "timeout": MS}
//       tools/call; with `progress`, a progress token is sent and the notifications counted.
//       Prints {"op": "call", "name", "result": R, "progress": [{progress, total, message}]},
//       or {"op": "call", "name", "throw": MESSAGE, "code": N} when the SDK throws (a
//       JSON-RPC error).
//   {"op": "sleep", "ms": MS}
//   {"op": "ask", "name": NAME, "args": {...}}
//       SDK v2 (2026-07-28) only: tools/call that hands back an input_required result instead
//       of answering it (the SDK's manual multi round-trip path). Prints {"op": "ask", "result":
//       R, "approval": ID} (ID: the approval request its question names) and keeps R's
//       requestState for the next retry.
//   {"op": "retry", "name": NAME, "args": {...}, "answer": "accept"|"decline", "state": S}
//       SDK v2: tools/call again with inputResponses {approve: the answer} and the kept
//       requestState as is (S "kept", the default), with its signature's last digit changed
//       ("forged"), or another one ("other": the one kept before the last). Prints as "call"
//       does, or the input_required result it got.
//   In "call", "ask" and "retry" args, "@SANDBOX@" is the last sandbox_id a result named (a
//   2026-07-28 client of paddock mcp passes sandbox_create's handle).
//   {"op": "exec", "argv": [...]}
//       Runs a command ("@APPROVAL@" in argv is the last "ask"'s approval id); prints
//       {"op": "exec", "status": N}.
//   {"op": "listening", "within": MS}
//       Over HTTP: waits until the transport's own GET of the endpoint (the stream of the
//       server's notifications, opened by the SDK after initialize) has its answer, for at most
//       `within` ms (default 60000). Prints {"op": "listening", "status": N} (N: its HTTP
//       status, 0 when none came).
//   {"op": "changed", "within": MS}
//       Waits until one more notifications/tools/list_changed than at the last "changed" has
//       come, for at most `within` ms (default 60000). Prints {"op": "changed", "count": N}
//       (N: how many came in the whole session).
// GW_ELICIT (accept, decline, wait; unset: none) declares the elicitation capability and
// answers every elicitation/create so: accept with {approve: true}, decline, or no answer
// until the server cancels it. After the steps, a last line
// {"op": "elicitations", "got": [{message, requestedSchema, cancelled}]} lists what the
// server asked (empty without GW_ELICIT: a client that declared nothing is asked nothing).
// SDK v2-legacy is @modelcontextprotocol/client in the legacy era (lib.mjs).
// A failed connect prints {"op": "connect", "throw": MESSAGE, "code": N} and exits 3; the
// session otherwise exits 0 whatever the steps got (the suite judges them).
import { loadSdk, toolResult } from './lib.mjs';

const [, , sdkName, transportName, target, ...rest] = process.argv;

function out(obj) {
	process.stdout.write(JSON.stringify(obj) + '\n');
}

function thrown(op, e, extra = {}) {
	return { op, ...extra, throw: String(e && e.message), code: e && e.code };
}

async function listAll(client) {
	const tools = [];
	let cursor;
	for (let page = 0; page < 100; page++) {
		const r = await client.listTools(cursor ? { cursor } : undefined);
		tools.push(...r.tools.map((t) => ({ name: t.name, description: t.description })));
		cursor = r.nextCursor;
		if (!cursor) break;
	}
	return tools;
}

async function list(client, step) {
	const want = step.want || [];
	const gone = step.gone || [];
	const t0 = Date.now();
	for (;;) {
		const tools = await listAll(client);
		const names = new Set(tools.map((t) => t.name));
		const done = want.every((n) => names.has(n)) && !gone.some((n) => names.has(n));
		if (done || Date.now() - t0 >= (step.within || 60000))
			return { op: 'list', tools, waited_ms: Date.now() - t0 };
		await new Promise((r) => setTimeout(r, 100));
	}
}

async function call(client, step) {
	const progress = [];
	const opts = { timeout: step.timeout || 120000 };
	if (step.progress) {
		opts.onprogress = (p) => progress.push({ progress: p.progress, total: p.total, message: p.message });
		opts.resetTimeoutOnProgress = true;
	}
	const params = { name: step.name, arguments: subst(step.args) };
	try {
		const r = sdkName === 'v1' ? await client.callTool(params, undefined, opts) : await client.callTool(params, opts);
		return { op: 'call', name: step.name, result: seen(toolResult(r)), progress };
	} catch (e) {
		return thrown('call', e, { name: step.name, progress });
	}
}

// The requestStates kept by "ask" steps (last last), the last approval asked, the last
// sandbox_id a result named.
const states = [];
let approval = '';
let sandbox = '';

function subst(args) {
	return JSON.parse(JSON.stringify(args || {}).replaceAll('@SANDBOX@', sandbox));
}

function seen(r) {
	const id = r && r.structuredContent && r.structuredContent.sandbox_id;
	if (typeof id === 'string') sandbox = id;
	return r;
}

async function ask(client, step) {
	const params = { name: step.name, arguments: subst(step.args) };
	try {
		const r = await client.callTool(params, { timeout: 120000, allowInputRequired: true });
		const msg = r.inputRequests?.approve?.params?.message || '';
		approval = (msg.match(/Approval request ([0-9a-f-]{36})/) || [, ''])[1];
		if (r.requestState) states.push(r.requestState);
		return { op: 'ask', name: step.name, result: r, approval };
	} catch (e) {
		return thrown('ask', e, { name: step.name });
	}
}

function stateOf(which) {
	const kept = states[states.length - 1] || '';
	if (which === 'other') return states[states.length - 2] || '';
	if (which !== 'forged') return kept;
	const last = kept.slice(-1);
	return kept.slice(0, -1) + (last === '0' ? '1' : '0');
}

async function retry(client, step) {
	const content = step.answer === 'accept' ? { action: 'accept', content: { approve: true } } : { action: 'decline' };
	const params = { name: step.name, arguments: subst(step.args), inputResponses: { approve: content }, requestState: stateOf(step.state) };
	try {
		const r = await client.callTool(params, { timeout: 120000, allowInputRequired: true });
		return { op: 'retry', name: step.name, result: seen(toolResult(r)) };
	} catch (e) {
		return thrown('retry', e, { name: step.name });
	}
}

async function exec(step) {
	const { spawnSync } = await import('node:child_process');
	const argv = step.argv.map((a) => a.replace('@APPROVAL@', approval));
	const r = spawnSync(argv[0], argv.slice(1), { stdio: ['ignore', 'ignore', 'inherit'] });
	return { op: 'exec', status: r.status };
}

// The HTTP status of the transport's GET stream (0: none yet), and the list_changed count.
let getStatus = 0;
let changed = 0;
let changedSeen = 0;

// The transport's fetch, unchanged, but for noting the answer to its GET.
async function watchedFetch(url, init) {
	const r = await fetch(url, init);
	if (init && init.method === 'GET') getStatus = r.status;
	return r;
}

// Until `cond()` holds, looked at every 50 ms, for at most `within` ms.
async function until(cond, within) {
	const t0 = Date.now();
	while (!cond() && Date.now() - t0 < within) await new Promise((r) => setTimeout(r, 50));
}

async function onChanged(client) {
	const count = () => {
		changed++;
	};
	if (sdkName === 'v1') {
		const { ToolListChangedNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');
		client.setNotificationHandler(ToolListChangedNotificationSchema, count);
		return;
	}
	try {
		client.setNotificationHandler('notifications/tools/list_changed', count);
	} catch {
		// A client that takes no handler for it: "changed" then counts nothing.
	}
}

async function run(client, step) {
	if (step.op === 'listening') {
		await until(() => getStatus !== 0, step.within || 60000);
		return { op: 'listening', status: getStatus };
	}
	if (step.op === 'changed') {
		await until(() => changed > changedSeen, step.within || 60000);
		changedSeen = changed;
		return { op: 'changed', count: changed };
	}
	if (step.op === 'ask') return ask(client, step);
	if (step.op === 'retry') return retry(client, step);
	if (step.op === 'exec') return exec(step);
	if (step.op === 'list') return list(client, step).catch((e) => thrown('list', e));
	if (step.op === 'call') return call(client, step);
	if (step.op === 'sleep') {
		await new Promise((r) => setTimeout(r, step.ms));
		return { op: 'sleep' };
	}
	return { op: step.op, throw: `unknown step ${step.op}` };
}

// The elicitation/create requests the server sent, as GW_ELICIT answers them.
const elicited = [];

function answer(params, signal) {
	const got = { message: params.message, requestedSchema: params.requestedSchema, cancelled: false };
	elicited.push(got);
	const mode = process.env.GW_ELICIT;
	if (mode === 'accept') return { action: 'accept', content: { approve: true } };
	if (mode === 'decline') return { action: 'decline' };
	return new Promise((resolve) => {
		signal.addEventListener('abort', () => {
			got.cancelled = true;
			resolve({ action: 'cancel' });
		});
	});
}

async function handleElicitation(client) {
	if (sdkName === 'v1') {
		const { ElicitRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
		client.setRequestHandler(ElicitRequestSchema, (req, extra) => answer(req.params, extra.signal));
	} else {
		client.setRequestHandler('elicitation/create', (req, ctx) =>
			answer(req.params, (ctx && (ctx.signal || (ctx.mcpReq && ctx.mcpReq.signal))) || new AbortController().signal));
	}
}

async function main() {
	const steps = JSON.parse(process.env.GW_STEPS || '[]');
	const token = process.env.GW_TOKEN;
	const httpOpts = { fetch: watchedFetch, ...(token ? { requestInit: { headers: { Authorization: `Bearer ${token}` } } } : {}) };
	const caps = process.env.GW_ELICIT ? { elicitation: {} } : {};
	const { client, transport } = await loadSdk(sdkName, transportName, target, rest, 'paddock-gateway-test', httpOpts, caps);
	if (process.env.GW_ELICIT) await handleElicitation(client);
	await onChanged(client);
	try {
		await client.connect(transport);
	} catch (e) {
		out(thrown('connect', e));
		process.exit(3);
	}
	for (const step of steps) out(await run(client, step));
	out({ op: 'elicitations', got: elicited });
	await client.close().catch(() => {});
}

main().then(() => process.exit(0), (e) => {
	out(thrown('driver', e));
	process.exit(4);
});
