// What the drivers in this folder share: the SDK clients (from tests/clients/node_modules,
// never from anywhere else), and a look at /proc for the processes a test started.
import fs from 'node:fs';

// The modern era's revision that @modelcontextprotocol/client is pinned to.
export const MODERN = '2026-07-28';

// A client and a transport of the SDK `name` (v1: @modelcontextprotocol/sdk, legacy era;
// v2: @modelcontextprotocol/client, pinned to the modern era; v2-legacy: the same client with
// its default negotiation, the legacy era) over `transport` (stdio: `target` is the command
// and `args` its arguments, started with this process's whole environment; http: `target` is
// the URL of the endpoint, `httpOpts` the transport's options, such as
// {requestInit: {headers: {Authorization: ...}}}), declaring `capabilities`.
export async function loadSdk(name, transport, target, args = [], clientName = 'paddock-test', httpOpts = {}, capabilities = {}) {
	const info = { name: `${clientName}-${name}`, version: '1.0.0' };
	if (name === 'v1') {
		const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
		const client = new Client(info, { capabilities });
		if (transport === 'stdio') {
			const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
			return { client, transport: new StdioClientTransport({ command: target, args, env: process.env, stderr: 'inherit' }) };
		}
		const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
		return { client, transport: new StreamableHTTPClientTransport(new URL(target), httpOpts) };
	}
	const sdk = await import('@modelcontextprotocol/client');
	const negotiation = name === 'v2-legacy' ? {} : { versionNegotiation: { mode: { pin: MODERN } } };
	const client = new sdk.Client(info, { capabilities, ...negotiation });
	if (transport === 'stdio') {
		const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');
		return { client, transport: new StdioClientTransport({ command: target, args, env: process.env, stderr: 'inherit' }) };
	}
	return { client, transport: new sdk.StreamableHTTPClientTransport(new URL(target), httpOpts) };
}

// v1's callTool may answer in the pre-2024 shape ({toolResult}); both SDKs otherwise answer
// {content, structuredContent?, isError?}.
export function toolResult(r) {
	return r && r.toolResult !== undefined ? r.toolResult : r;
}

// The cgroup of `pid` that counts its processes: the pids controller's (cgroup v1), or the
// unified hierarchy's (v2). Returns { path, procs } or null.
function cgroupOf(pid) {
	let lines;
	try {
		lines = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n');
	} catch {
		return null;
	}
	const v1 = lines.map((l) => l.split(':')).find((f) => f[1].split(',').includes('pids'));
	if (v1) return { path: v1.slice(2).join(':'), procs: `/sys/fs/cgroup/pids${v1.slice(2).join(':')}/cgroup.procs` };
	const v2 = lines.map((l) => l.split(':')).find((f) => f[0] === '0');
	return v2 ? { path: v2.slice(2).join(':'), procs: `/sys/fs/cgroup${v2.slice(2).join(':')}/cgroup.procs` } : null;
}

function startTime(pid) {
	try {
		const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
		return s.slice(s.lastIndexOf(')') + 2).split(' ')[19];
	} catch {
		return null;
	}
}

// The processes whose argv is exactly `argv`: [{ pid, start, cgroup, procs }].
export function findProcs(argv) {
	const want = argv.join('\0') + '\0';
	const out = [];
	for (const d of fs.readdirSync('/proc')) {
		if (!/^\d+$/.test(d)) continue;
		let cmd;
		try {
			cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'latin1');
		} catch {
			continue;
		}
		if (cmd !== want) continue;
		const cg = cgroupOf(d) || { path: '', procs: '' };
		out.push({ pid: Number(d), start: startTime(d), cgroup: cg.path, procs: cg.procs });
	}
	return out;
}

// True when the process `p` (from findProcs) has ended: its pid is gone, or reaped and
// given to another process (another start time).
export function procGone(p) {
	const st = startTime(p.pid);
	if (st === null || st !== p.start) return true;
	try {
		// A zombie has ended; it waits only for its parent.
		const s = fs.readFileSync(`/proc/${p.pid}/stat`, 'utf8');
		return s.slice(s.lastIndexOf(')') + 2)[0] === 'Z';
	} catch {
		return true;
	}
}
