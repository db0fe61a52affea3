// A session of `paddock mcp` driven by an official TypeScript SDK client, as an agent would
// drive it: create a sandbox, run a command that writes a file, read the file back in a
// second call, run python code, look at the diff, cancel a long sleep and prove its process
// is gone, destroy the sandbox.
//
//   node sdk-session.mjs v1|v2 stdio PADDOCK [ARGS...]
//   node sdk-session.mjs v1|v2 http URL
//
// v1 is @modelcontextprotocol/sdk (the legacy era: initialize, Mcp-Session-Id); v2 is
// @modelcontextprotocol/client pinned to the 2026-07-28 revision (the modern era: no
// initialize, server/discover, _meta on every request). Both come from
// tests/clients/node_modules (package.json, its lock).
//
// Prints one line per check, "ok - DESC" or "not ok - DESC", and "# ..." diagnostics;
// tests/integration/test-mcp-clients.sh numbers them. Exits 0 when every check passed.
import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { loadSdk, toolResult, findProcs, procGone } from './lib.mjs';

const [, , sdkName, transportName, target, ...rest] = process.argv;
let failed = 0;
function check(cond, desc, diag) {
	console.log(`${cond ? 'ok' : 'not ok'} - ${sdkName} ${transportName}: ${desc}`);
	if (!cond) {
		failed++;
		if (diag !== undefined)
			for (const l of String(diag).split('\n').slice(0, 20)) console.log(`#   ${l}`);
	}
	return cond;
}

// The text of a result's content blocks, joined.
function textOf(res) {
	return (res.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// One tools/call. A protocol error (the SDK throws) is a result with isError and the error's
// message, so that one missing tool fails its checks and the session goes on.
// A stream of run_command's structured result: a string, or {text, bytes, dropped_bytes, ...}.
function streamText(v) {
	return v !== null && typeof v === 'object' ? v.text : v;
}

async function call(client, name, args, opts) {
	const a = Object.fromEntries(Object.entries(args).filter(([, v]) => v !== undefined));
	try {
		return toolResult(sdkName === 'v1' ? await client.callTool({ name, arguments: a }, undefined, opts)
			: await client.callTool({ name, arguments: a }, opts));
	} catch (e) {
		if (opts && opts.signal && opts.signal.aborted) throw e;
		return { isError: true, protocolError: true, content: [{ type: 'text', text: String(e && e.message) }] };
	}
}

async function session(client) {
	const tools = (await client.listTools()).tools;
	const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
	const want = ['sandbox_create', 'sandbox_destroy', 'run_command', 'run_code', 'file_read', 'workspace_diff'];
	check(want.every((n) => byName[n]), `tools/list offers ${want.join(', ')}`, Object.keys(byName).join(' '));
	const rc = byName.run_command;
	check(rc && rc.inputSchema.additionalProperties === false, 'run_command has a strict inputSchema');

	const created = await call(client, 'sandbox_create', {});
	const id = created.structuredContent && created.structuredContent.sandbox_id;
	check(!created.isError && typeof id === 'string' && id.length >= 16,
		'sandbox_create returns a sandbox_id handle', JSON.stringify(created));

	const token = randomBytes(8).toString('hex');
	const wrote = await call(client, 'run_command', {
		sandbox_id: id, command: `printf 'hello %s\\n' ${token} > note.txt && echo written`,
	});
	const ws = wrote.structuredContent || {};
	check(!wrote.isError && ws.exit_code === 0 && /^written\n$/.test(streamText(ws.stdout)),
		'run_command writes a file (exit 0, its stdout)', JSON.stringify(wrote));

	const read = await call(client, 'file_read', { sandbox_id: id, path: 'note.txt' });
	check(!read.isError && textOf(read).includes(`hello ${token}`) ||
		(read.structuredContent && String(read.structuredContent.content).includes(`hello ${token}`)),
		'file_read in a second call reads what the command wrote', JSON.stringify(read));

	const py = await call(client, 'run_code', { sandbox_id: id, language: 'python', code: 'print(6 * 7)' });
	const pys = py.structuredContent || {};
	check(!py.isError && pys.exit_code === 0 && /^42\n$/.test(streamText(pys.stdout)),
		'run_code runs python (print(6 * 7) prints 42)', JSON.stringify(py));

	const diff = await call(client, 'workspace_diff', { sandbox_id: id, patch: true });
	const ds = diff.structuredContent || {};
	check(!diff.isError && (ds.changes || []).some((c) => c.path === 'note.txt') &&
		String(ds.patch).includes(`+hello ${token}`),
		'workspace_diff lists note.txt and its patch adds the line', JSON.stringify(diff));
	// The workspace overlays the directory the server was given: the host's copy is unchanged
	// until a human commits the change set.
	const host = process.env.MCP_TEST_WORKSPACE;
	check(host && fs.existsSync(host) && !fs.existsSync(`${host}/note.txt`),
		`the host directory (${host}) is unchanged`);

	await cancelSleep(client, id);

	const after = await call(client, 'run_command', { sandbox_id: id, command: 'echo still-here' });
	check(!after.isError && /still-here/.test(JSON.stringify(after)),
		'the sandbox still runs commands after the cancel', JSON.stringify(after));

	const bad = await call(client, 'run_command', { sandbox_id: id, command: 'true', no_such_field: 1 });
	check(bad.isError === true && !bad.protocolError && /no_such_field/.test(textOf(bad)),
		'an unknown argument is an isError result naming the field', JSON.stringify(bad));

	const gone = await call(client, 'sandbox_destroy', { sandbox_id: id });
	check(!gone.isError, 'sandbox_destroy ends the sandbox', JSON.stringify(gone));
	const again = await call(client, 'run_command', { sandbox_id: id, command: 'true' });
	check(again.isError === true && !again.protocolError, 'a destroyed handle is refused (an isError result)',
		JSON.stringify(again));
}

// Start `sleep` with a duration no other process has, find it in the host's /proc (the suite
// runs in a pid namespace of its own, so what it sees is what it started), cancel the call
// through the SDK (AbortSignal: notifications/cancelled, or the stream closed), and wait
// until the process is gone. A bound on the wait is no timing assertion: a process that
// outlives the cancel by 30 s is a process the cancel did not kill.
async function cancelSleep(client, id) {
	const marker = `${300 + (randomBytes(2).readUInt16BE() % 600)}.${randomBytes(3).readUIntBE(0, 3)}`;
	const ac = new AbortController();
	const pending = call(client, 'run_command', { sandbox_id: id, command: `sleep ${marker}` },
		{ signal: ac.signal, timeout: 600000 }).then((r) => ({ r }), (e) => ({ e }));
	let procs = [];
	for (let i = 0; i < 600 && procs.length === 0; i++) {
		procs = findProcs(['sleep', marker]);
		if (procs.length === 0) await new Promise((r) => setTimeout(r, 50));
	}
	if (!check(procs.length === 1, `the long sleep runs (found by its argv in /proc: ${procs.map((p) => p.pid)})`))
		return;
	const p = procs[0];
	console.log(`# sleep ${marker}: pid ${p.pid}, cgroup ${p.cgroup}`);
	const parent = process.env.PADDOCK_CGROUP_PARENT || '/';
	check(p.cgroup.startsWith(parent) && p.cgroup !== parent,
		`the sleep runs in a cgroup of its sandbox, under ${parent}`, p.cgroup);
	ac.abort('the test cancels the sleep');
	const outcome = await pending;
	check(outcome.e !== undefined, 'the cancelled call settles as cancelled on the client', JSON.stringify(outcome.r));
	let gone = false;
	for (let i = 0; i < 600 && !gone; i++) {
		gone = procGone(p);
		if (!gone) await new Promise((r) => setTimeout(r, 50));
	}
	check(gone, `the cancelled sleep's process (pid ${p.pid}) is gone`);
	let still = '';
	try {
		still = fs.readFileSync(p.procs, 'utf8');
	} catch {
		/* the cgroup was removed with its last process */
	}
	check(!still.split('\n').includes(String(p.pid)), "its sandbox's cgroup no longer holds it", still);
}

const { client, transport } = await loadSdk(sdkName, transportName, target, rest);
try {
	await client.connect(transport);
	check(true, 'connects');
	await session(client);
} catch (e) {
	check(false, 'the session ran to its end', e && e.stack);
} finally {
	await client.close().catch(() => {});
}
process.exit(failed ? 1 : 0);
