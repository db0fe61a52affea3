// A remote MCP server over Streamable HTTP for the gateway-remote suite
// (tests/integration/test-gateway-remote.sh), written for the test: it logs every request it
// gets (method, path, headers, JSON-RPC body) as one JSON line to --log, and misbehaves on
// purpose by path:
//   /mcp        answers tools/call in SSE (progress first), initialize and the rest in JSON;
//               a session id per initialize, 404 for an unknown one, a GET stream for
//               list_changed, DELETE ends a session
//   /json       the same, every answer one JSON body, and no GET stream (405)
//   /hang       reads the request and never answers
//   /malformed  answers initialize with a body that is not JSON-RPC
//   /flood      answers initialize with one SSE event of 5 MiB
//   /err500     answers HTTP 500 with a short body that quotes the Authorization it got
// Each log line: {http: METHOD, path, tls: BOOL, headers, body}.
// Tools: echo {text}, add {a, b} (numbers), slow {ms} (progress every 100 ms), hang {},
// whoami {} (the Authorization and X-Team it got), drop {} (removes tool extra, then
// notifications/tools/list_changed on the GET streams), forget {} (every session is
// forgotten after this answer), forget_quietly {} (the same, and the GET streams end), ask {} (asks sampling/createMessage of the client first),
// extra {}.
//
//   node gw-remote-server.mjs --port P --log FILE [--tls-port Q --cert PEM --key PEM]
// Prints "ready" once every port listens.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';

const opt = {};
for (let i = 2; i < process.argv.length; i += 2) opt[process.argv[i].slice(2)] = process.argv[i + 1];
const log = (o) => fs.appendFileSync(opt.log, JSON.stringify(o) + '\n');

const sessions = new Map(); // id -> {streams: [res]}
let nextSession = 1;
let dropped = false;

const baseTools = [
	{ name: 'echo', description: 'Echoes the text', inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] } },
	{ name: 'add', description: 'Adds two numbers', inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] } },
	{ name: 'slow', description: 'Sleeps, saying how far it got', inputSchema: { type: 'object', properties: { ms: { type: 'number' } } } },
	{ name: 'hang', description: 'Never answers', inputSchema: { type: 'object' } },
	{ name: 'whoami', description: 'Says what credentials it got', inputSchema: { type: 'object' } },
	{ name: 'drop', description: 'Drops the tool extra', inputSchema: { type: 'object' } },
	{ name: 'forget', description: 'Forgets every session', inputSchema: { type: 'object' } },
	{ name: 'forget_quietly', description: 'Forgets every session, ends the streams', inputSchema: { type: 'object' } },
	{ name: 'ask', description: 'Asks the client for sampling', inputSchema: { type: 'object' } },
	{ name: 'extra', description: 'Listed until drop', inputSchema: { type: 'object' } },
];
const tools = () => baseTools.filter((t) => !(dropped && t.name === 'extra'));
const text = (s) => ({ content: [{ type: 'text', text: s }] });

function sse(res) {
	if (!res.headersSent) res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
}
function send(res, mode, msg, end) {
	if (mode === 'json') {
		res.writeHead(200, { 'Content-Type': 'application/json' });
		res.end(JSON.stringify(msg));
		return;
	}
	sse(res);
	res.write('event: message\ndata: ' + JSON.stringify(msg) + '\n\n');
	if (end) res.end();
}

async function call(req, res, mode, m) {
	const name = m.params.name;
	const args = m.params.arguments || {};
	const token = m.params._meta && m.params._meta.progressToken;
	const answer = (r) => send(res, mode, { jsonrpc: '2.0', id: m.id, result: r }, true);
	if (name === 'echo') return answer(text('echo: ' + args.text));
	if (name === 'add') return answer(text(String(args.a + args.b)));
	if (name === 'whoami') return answer(text('authorization=' + (req.headers.authorization || '') + ' team=' + (req.headers['x-team'] || '')));
	if (name === 'extra') return answer(text('extra'));
	if (name === 'hang') return mode === 'json' ? undefined : sse(res);
	if (name === 'forget') {
		answer(text('forgotten'));
		sessions.clear();
		return;
	}
	if (name === 'forget_quietly') {
		answer(text('forgotten'));
		for (const s of sessions.values()) for (const st of s.streams) st.end();
		sessions.clear();
		return;
	}
	if (name === 'drop') {
		dropped = true;
		answer(text('dropped'));
		for (const s of sessions.values())
			for (const st of s.streams) st.write('data: ' + JSON.stringify({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' }) + '\n\n');
		return;
	}
	if (name === 'ask') {
		send(res, 'sse', { jsonrpc: '2.0', id: 'ask-1', method: 'sampling/createMessage', params: { messages: [], maxTokens: 1 } }, false);
		return setTimeout(() => answer(text('asked')), 300);
	}
	if (name === 'slow') {
		const steps = Math.max(1, Math.floor((args.ms || 300) / 100));
		for (let i = 1; i <= steps; i++) {
			await new Promise((r) => setTimeout(r, 100));
			if (token !== undefined && mode !== 'json')
				send(res, mode, { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: i, total: steps } }, false);
		}
		return answer(text('slept ' + args.ms + ' ms'));
	}
	return send(res, mode, { jsonrpc: '2.0', id: m.id, error: { code: -32602, message: 'no tool ' + name } }, true);
}

function post(req, res, mode, m) {
	if (Array.isArray(m) || typeof m !== 'object' || m === null) { res.writeHead(400); return res.end(); }
	if (m.method === 'initialize') {
		const sid = 's-' + nextSession++ + '-' + Math.random().toString(36).slice(2);
		sessions.set(sid, { streams: [] });
		res.setHeader('Mcp-Session-Id', sid);
		res.writeHead(200, { 'Content-Type': 'application/json' });
		return res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: { listChanged: true } }, serverInfo: { name: 'gw-remote-server', version: '1' } } }));
	}
	if (!sessions.has(req.headers['mcp-session-id'])) { res.writeHead(404, { 'Content-Type': 'application/json' }); return res.end('{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}'); }
	if (m.id === undefined || m.method === undefined) { res.writeHead(202); return res.end(); }
	if (m.method === 'tools/list') return send(res, mode, { jsonrpc: '2.0', id: m.id, result: { tools: tools() } }, true);
	if (m.method === 'tools/call') return call(req, res, mode, m);
	if (m.method === 'ping') return send(res, mode, { jsonrpc: '2.0', id: m.id, result: {} }, true);
	return send(res, mode, { jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'no method ' + m.method } }, true);
}

function misbehave(req, res, path) {
	if (path === '/hang') return;
	if (path === '/malformed') {
		res.writeHead(200, { 'Content-Type': 'application/json' });
		return res.end('{"jsonrpc": "2.0", "id": 1, "result": oops not json');
	}
	if (path === '/flood') {
		sse(res);
		res.write('data: {"jsonrpc":"2.0","method":"notifications/message","params":{"data":"');
		const chunk = 'x'.repeat(1 << 16);
		for (let i = 0; i < 80; i++) res.write(chunk);
		return res.end('"}}\n\n');
	}
	res.writeHead(500, { 'Content-Type': 'text/plain' });
	res.end('internal trouble at the remote end (you sent ' + (req.headers.authorization || 'nothing') + ')');
}

function handle(req, res) {
	const path = req.url.split('?')[0];
	const mode = path === '/json' ? 'json' : 'sse';
	let body = '';
	req.on('data', (d) => { body += d; });
	req.on('end', () => {
		let m = null;
		try { m = body ? JSON.parse(body) : null; } catch { m = null; }
		log({ http: req.method, path, tls: Boolean(req.socket.encrypted), headers: req.headers, body: m });
		if (!['/mcp', '/json'].includes(path)) return misbehave(req, res, path);
		const sid = req.headers['mcp-session-id'];
		if (req.method === 'GET' && mode === 'json') { res.writeHead(405); return res.end(); }
		if (req.method === 'GET') {
			if (!sessions.has(sid)) { res.writeHead(404); return res.end(); }
			sse(res);
			res.write(': stream\n\n');
			sessions.get(sid).streams.push(res);
			return;
		}
		if (req.method === 'DELETE') {
			res.writeHead(sessions.delete(sid) ? 200 : 404);
			return res.end();
		}
		if (req.method !== 'POST') { res.writeHead(405); return res.end(); }
		return post(req, res, mode, m);
	});
}

let pending = 1;
const up = () => { if (--pending === 0) process.stdout.write('ready\n'); };
http.createServer(handle).listen(Number(opt.port), '127.0.0.1', up);
if (opt['tls-port']) {
	pending++;
	https.createServer({ cert: fs.readFileSync(opt.cert), key: fs.readFileSync(opt.key) }, handle).listen(Number(opt['tls-port']), '127.0.0.1', up);
}
