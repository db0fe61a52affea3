// E2B's own SDKs (tests/clients/node_modules: e2b, @e2b/code-interpreter) drive envd's
// process.Process and the code interpreter through `paddock serve`, as a user's program
// does: E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY name the daemon (test-e2b-proc.sh).
// Each check is printed as one JSON line {"d": what the user did and expected, "g": got,
// "w": wanted} for the suite to turn into a subtest; argv[2] is tests/clients.
import { createRequire } from 'node:module';

const clients = createRequire(`${process.argv[2]}/package.json`);
const { Sandbox, CommandExitError } = clients('e2b');
const { Sandbox: CodeSandbox } = clients('@e2b/code-interpreter');

function ok(cond, d, detail) {
	const g = cond ? 'ok' : `failed: ${detail === undefined ? '' : String(detail).slice(0, 400)}`;
	process.stdout.write(JSON.stringify({ d, g, w: 'ok' }) + '\n');
}

// Wait until `cond()` holds: the loop's own events, never a timed assertion (the caller's
// timeout bounds the suite).
async function until(cond) {
	while (!cond())
		await new Promise((r) => setTimeout(r, 20));
}

async function commands(sbx) {
	const r = await sbx.commands.run('echo out; echo err >&2');
	ok(r.exitCode === 0 && r.stdout === 'out\n' && r.stderr === 'err\n',
	   'commands.run answers exit code 0, stdout and stderr', JSON.stringify(r));

	let err;
	try {
		await sbx.commands.run('echo partial; exit 3');
	} catch (e) {
		err = e;
	}
	ok(err instanceof CommandExitError && err.exitCode === 3 && err.stdout === 'partial\n',
	   'a non-zero exit raises CommandExitError with its exit code and output',
	   err && `${err.name} ${err.exitCode} ${JSON.stringify(err.stdout)}`);

	const env = await sbx.commands.run('echo $GREETING; pwd', { envs: { GREETING: 'hi' }, cwd: '/tmp' });
	ok(env.stdout === 'hi\n/tmp\n', 'envs and cwd reach the command', JSON.stringify(env.stdout));
}

async function background(sbx) {
	const h = await sbx.commands.run('echo begin; read line; echo "got $line"; sleep 600',
					 { background: true, stdin: true, timeoutMs: 0 });
	ok(h.pid > 0, 'a background command answers its pid at once', h.pid);
	await until(() => h.stdout.includes('begin'));
	await h.disconnect();

	const listed = await sbx.commands.list();
	ok(listed.some((p) => p.pid === h.pid && p.cmd === '/bin/bash'),
	   'commands.list shows the command after its caller disconnected', JSON.stringify(listed));

	const again = await sbx.commands.connect(h.pid, { timeoutMs: 0 });
	await until(() => again.stdout.includes('begin'));
	ok(again.stdout.startsWith('begin\n'), 're-attached by pid, the output since the start comes first',
	   JSON.stringify(again.stdout));

	await sbx.commands.sendStdin(h.pid, 'hello\n');
	await until(() => again.stdout.includes('got hello'));
	ok(again.stdout === 'begin\ngot hello\n', 'stdin sent by pid reaches the command',
	   JSON.stringify(again.stdout));

	ok(await sbx.commands.kill(h.pid) === true, 'commands.kill answers true for a running command');
	let err;
	try {
		await again.wait();
	} catch (e) {
		err = e;
	}
	ok(err instanceof CommandExitError && err.exitCode !== 0,
	   'the killed command ends: wait() raises CommandExitError', err && err.message);
	ok(await sbx.commands.kill(h.pid) === false,
	   'commands.kill of a command that is gone answers false');
	const after = await sbx.commands.list();
	ok(!after.some((p) => p.pid === h.pid), 'commands.list no longer shows it');
}

// CloseStdin on the SDK's wire (process.Process/CloseStdin): the SDK gates it on the envd
// version the create answered, so it is also called as the SDK would send it.
async function closeStdin(sbx) {
	const h = await sbx.commands.run('cat; echo done', { background: true, stdin: true, timeoutMs: 0 });
	await sbx.commands.sendStdin(h.pid, 'abc');
	if (sbx.commands.supportsStdinClose) {
		await sbx.commands.closeStdin(h.pid);
	} else {
		const res = await fetch(`${process.env.E2B_SANDBOX_URL}/process.Process/CloseStdin`, {
			method: 'POST',
			headers: {
				'Content-Type': 'application/json',
				'Connect-Protocol-Version': '1',
				'E2b-Sandbox-Id': sbx.sandboxId,
				'E2b-Sandbox-Port': '49983',
				'X-Access-Token': sbx.envdAccessToken,
			},
			body: JSON.stringify({ process: { pid: h.pid } }),
		});
		ok(res.status === 200, 'CloseStdin on the wire answers 200', await res.text());
	}
	const r = await h.wait();
	ok(r.stdout === 'abcdone\n', 'after CloseStdin the command reads EOF and ends', JSON.stringify(r.stdout));
}

async function pty(sbx) {
	let out = '';
	const dec = new TextDecoder();
	const t = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d); }, timeoutMs: 0 });
	ok(t.pid > 0, 'pty.create starts a shell on a terminal', t.pid);
	const enc = new TextEncoder();
	await sbx.pty.sendInput(t.pid, enc.encode('stty size\n'));
	await until(() => out.includes('24 80'));
	ok(out.includes('24 80'), 'the terminal has the size asked for');
	await sbx.pty.resize(t.pid, { cols: 100, rows: 40 });
	await sbx.pty.sendInput(t.pid, enc.encode('stty size; exit 5\n'));
	let code;
	try {
		await t.wait();
	} catch (e) {
		code = e.exitCode;
	}
	ok(out.includes('40 100'), 'pty.resize changes the terminal size', JSON.stringify(out.slice(-80)));
	ok(code === 5, 'the shell\'s exit status comes back', code);
}

async function interpreter() {
	const sbx = await CodeSandbox.create({ timeoutMs: 600000 }); // E2B's default is 15 s
	try {
		const a = await sbx.runCode('x = 41\nprint("hello")');
		ok(a.logs.stdout.join('') === 'hello\n' && !a.error, 'runCode prints to stdout',
		   JSON.stringify(a.toJSON()));
		const b = await sbx.runCode('x + 1');
		ok(b.text === '42', 'runCode keeps state across calls (x + 1 is 42)', JSON.stringify(b.toJSON()));
		const c = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()');
		const png = c.results.find((r) => r.png);
		ok(png !== undefined && Buffer.from(png.png, 'base64').subarray(1, 4).toString() === 'PNG',
		   'a matplotlib figure comes back as a PNG', JSON.stringify(c.toJSON()).slice(0, 300));
		const d = await sbx.runCode('1/0');
		ok(d.error && d.error.name === "ZeroDivisionError" && d.error.traceback.includes("ZeroDivisionError"),
		   'an exception comes back as an error with its traceback', JSON.stringify(d.error));
		const e = await sbx.runCode('from IPython.display import HTML\nHTML("<b>bold</b>")');
		ok(e.results.some((r) => r.html === '<b>bold</b>'), 'rich output comes back as html',
		   JSON.stringify(e.toJSON()));
		const ctx = await sbx.createCodeContext({ cwd: '/tmp' });
		const f = await sbx.runCode('import os\nos.getcwd()', { context: ctx });
		const g = await sbx.runCode('"x" in dir()', { context: ctx });
		ok(f.text === '/tmp' && g.text === 'False', 'a new context has its own directory and state',
		   `${f.text} ${g.text}`);
		const list = await sbx.listCodeContexts();
		ok(list.some((c2) => c2.id === ctx.id), 'listCodeContexts shows it', JSON.stringify(list));
		await sbx.removeCodeContext(ctx);
		const left = await sbx.listCodeContexts();
		ok(!left.some((c2) => c2.id === ctx.id), 'removeCodeContext removes it');
		let gone;
		try {
			await sbx.removeCodeContext(ctx);
		} catch (e2) {
			gone = e2;
		}
		ok(gone && gone.name === 'NotFoundError', 'removing it again raises NotFoundError (a 404 passed on)',
		   gone && `${gone.name}: ${gone.message}`);
		const big = await sbx.runCode('print("y" * 4000000)');
		ok(big.logs.stdout.join('').length === 4000001,
		   'four megabytes of output come through whole', big.logs.stdout.join('').length);
		const none = await fetch(`${process.env.E2B_SANDBOX_URL}/`, {
			headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '3999',
				   'X-Access-Token': sbx.envdAccessToken },
		});
		ok(none.status === 502, 'a port nothing listens on in the sandbox answers 502', none.status);
		const anon = await fetch(`${process.env.E2B_SANDBOX_URL}/contexts`, {
			headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49999' },
		});
		ok(anon.status === 401, 'a request for the interpreter without the sandbox\'s token is refused (401)',
		   anon.status);
	} finally {
		await sbx.kill();
	}
}

// The cell after one that raised runs. With stop_on_error (Jupyter's default), the kernel
// aborts every execute request that reaches it inside its abort window after an error: the
// interpreter's next runCode, sent as soon as the error's idle status came, was sometimes
// one of them (seen once in CI) and came back with no result and no error. Here the window is
// made 3 s wide (the kernel's config under IPYTHONDIR, written before the interpreter
// starts), so that an interpreter that asks for stop_on_error loses the cell every time.
async function afterAnError() {
	const sbx = await CodeSandbox.create({ timeoutMs: 600000 });
	try {
		await sbx.files.write('/tmp/.paddock/ipython/profile_default/ipython_kernel_config.py',
			'c.Kernel.stop_on_error_timeout = 3.0\n');
		const bad = await sbx.runCode('1/0');
		const next = await sbx.runCode('40 + 2');
		ok(bad.error && bad.error.name === 'ZeroDivisionError' && next.text === '42' && !next.error,
		   'the cell right after one that raised runs (a 3 s abort window in the kernel)',
		   JSON.stringify({ bad: bad.error && bad.error.name, next: next.toJSON() }));
	} finally {
		await sbx.kill();
	}
}

async function main() {
	const sbx = await Sandbox.create({ timeoutMs: 600000 }); // E2B's default is 15 s
	try {
		await commands(sbx);
		await background(sbx);
		await closeStdin(sbx);
		await pty(sbx);
	} finally {
		await sbx.kill();
	}
	await interpreter();
	await afterAnError();
}

main().catch((e) => {
	process.stderr.write(`${e && e.stack || e}\n`);
	process.exit(1);
});
