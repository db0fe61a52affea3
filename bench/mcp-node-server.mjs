// The unsandboxed MCP server bench/mcp compares `paddock mcp` with: the official TypeScript
// SDK's server (@modelcontextprotocol/sdk, tests/clients/node_modules) with one tool,
// run_command, that runs its argv with Node's child_process on the host, no sandbox at all.
// It is what a "code sandbox MCP server" costs per call before any Docker or VM is added.
//
//   node bench/mcp-node-server.mjs               stdio
//   node bench/mcp-node-server.mjs --listen PORT  Streamable HTTP on 127.0.0.1:PORT/mcp
//
// The tool answers as paddock's does: exit_code, stdout, stderr in structuredContent, and
// the output as text.
import { createRequire } from 'node:module';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '..', 'tests', 'clients', 'package.json'));
const { Server } = require('@modelcontextprotocol/sdk/server/index.js');
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js');
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { ListToolsRequestSchema, CallToolRequestSchema } = require('@modelcontextprotocol/sdk/types.js');

const TOOL = {
	name: 'run_command',
	description: 'Run a command on the host (no sandbox)',
	inputSchema: {
		type: 'object',
		properties: { argv: { type: 'array', items: { type: 'string' }, minItems: 1 } },
		required: ['argv'],
		additionalProperties: false,
	},
};

function run(argv) {
	return new Promise((resolve) => {
		execFile(argv[0], argv.slice(1), { maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
			const code = err ? (typeof err.code === 'number' ? err.code : 127) : 0;
			resolve({
				content: [{ type: 'text', text: stdout + stderr }],
				structuredContent: { exit_code: code, stdout, stderr },
				isError: false,
			});
		});
	});
}

function newServer() {
	const server = new Server({ name: 'node-child-process', version: '1.0.0' }, { capabilities: { tools: {} } });
	server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [TOOL] }));
	server.setRequestHandler(CallToolRequestSchema, async (req) => run(req.params.arguments.argv));
	return server;
}

async function listen(port) {
	const sessions = new Map();
	const httpd = http.createServer(async (req, res) => {
		const sid = req.headers['mcp-session-id'];
		let t = sid && sessions.get(sid);
		if (!t) {
			t = new StreamableHTTPServerTransport({
				sessionIdGenerator: () => randomUUID(),
				onsessioninitialized: (id) => sessions.set(id, t),
			});
			await newServer().connect(t);
		}
		await t.handleRequest(req, res);
	});
	httpd.listen(port, '127.0.0.1');
}

if (process.argv[2] === '--listen') await listen(Number(process.argv[3]));
else await newServer().connect(new StdioServerTransport());
