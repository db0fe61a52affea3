// envd's files through the real `e2b` SDK (tests/integration/test-e2b.sh): write, read (text,
// bytes, gzip), exists, list (depth), getInfo, makeDir, rename, remove, an upload of a
// directory (writeFiles of every file under UPLOAD_DIR), a gzip upload; paths that try to
// leave the sandbox (HOST_SECRET is a file on the host the sandbox must not reach).
import fs from 'node:fs';
import path from 'node:path';
import { e2b, check, thrown } from './lib.mjs';
const { Sandbox } = e2b;

const sbx = await Sandbox.create({ timeoutMs: 120_000 });
const f = sbx.files;
const w = await f.write('/tmp/w/hello.txt', 'hello world\n');
check('write answers the entry', `${w.name} ${w.path} ${w.type}`, 'hello.txt /tmp/w/hello.txt file');
check('read (text)', await f.read('/tmp/w/hello.txt'), 'hello world\n');
check('read (bytes)', Buffer.from(await f.read('/tmp/w/hello.txt', { format: 'bytes' })).toString(), 'hello world\n');
check('read (gzip)', await f.read('/tmp/w/hello.txt', { gzip: true }), 'hello world\n');
check('exists: a file, a missing path', `${await f.exists('/tmp/w/hello.txt')} ${await f.exists('/tmp/w/nope')}`, 'true false');
let [err] = await thrown(() => f.read('/tmp/w/nope'));
check('read of a missing file: FileNotFoundError', err, 'FileNotFoundError');

check('makeDir: made, then already there', `${await f.makeDir('/tmp/w/d/e')} ${await f.makeDir('/tmp/w/d/e')}`, 'true false');
const moved = await f.rename('/tmp/w/hello.txt', '/tmp/w/d/moved.txt');
check('rename answers the new entry', `${moved.path} ${moved.type}`, '/tmp/w/d/moved.txt file');
check('rename: the old path is gone', await f.exists('/tmp/w/hello.txt'), false);
[err] = await thrown(() => f.rename('/tmp/w/nope', '/tmp/w/x'));
check('rename of a missing path: FileNotFoundError', err, 'FileNotFoundError');
let list = await f.list('/tmp/w');
check('list depth 1', list.map((e) => `${e.name}:${e.type}`).sort().join(), 'd:dir');
list = await f.list('/tmp/w', { depth: 3 });
check('list depth 3', list.map((e) => `${e.path}:${e.type}`).sort().join(),
	'/tmp/w/d/e:dir,/tmp/w/d/moved.txt:file,/tmp/w/d:dir');
const info = await f.getInfo('/tmp/w/d/moved.txt');
check('getInfo: size, permissions', `${info.size} ${info.permissions}`, '12 -rw-r--r--');

// An upload of a directory: every file under UPLOAD_DIR, one request.
const dir = process.env.UPLOAD_DIR;
const files = [];
for (const rel of fs.readdirSync(dir, { recursive: true })) {
	const p = path.join(dir, rel);
	if (fs.statSync(p).isFile()) files.push({ path: `/tmp/up/${rel}`, data: fs.readFileSync(p) });
}
const up = await f.write(files);
check('upload of a directory: an entry per file', up.length, files.length);
let same = 0;
for (const x of files) same += Buffer.from(await f.read(x.path, { format: 'bytes' })).equals(x.data) ? 1 : 0;
check('upload of a directory: every file reads back the same', same, files.length);
list = await f.list('/tmp/up', { depth: 10 });
check('upload of a directory: the tree', list.filter((e) => e.type === 'file').length, files.length);
await f.write('/tmp/gz.txt', 'zipped upload', { gzip: true });
check('a gzip upload reads back', await f.read('/tmp/gz.txt'), 'zipped upload');

await f.remove('/tmp/w');
check('remove: a directory with what it holds', await f.exists('/tmp/w/d/moved.txt'), false);

// Paths that try to leave the sandbox find the sandbox's own root, never the host's.
const secret = process.env.HOST_SECRET;
for (const p of [secret, `/../../../..${secret}`, `../../../../../..${secret}`]) {
	const [e, m] = await thrown(() => f.read(p));
	check(`read '${p.replace(secret, 'HOST_SECRET')}': not the host's file`, `${e} ${/host-secret/.test(m)}`, 'FileNotFoundError false');
}
await f.write('/tmp/w2/in.txt', 'inside');
await f.rename('/tmp/w2/in.txt', '/tmp/w2/renamed.txt');
check('rename inside the sandbox', await f.read('/tmp/w2/renamed.txt'), 'inside');
// watchDir: inotify in the sandbox, events as the SDK sees them.
async function until(pred) {
	for (let i = 0; i < 600 && !pred(); i++) await new Promise((r) => setTimeout(r, 50));
}
await f.makeDir('/tmp/watch');
const events = [];
const h = await f.watchDir('/tmp/watch', (ev) => events.push(`${ev.type}:${ev.name}`), { recursive: true });
await f.write('/tmp/watch/a.txt', 'x');
await f.makeDir('/tmp/watch/sub');
await until(() => events.includes('create:sub'));
await f.write('/tmp/watch/sub/b.txt', 'y');
await f.rename('/tmp/watch/a.txt', '/tmp/watch/c.txt');
await f.remove('/tmp/watch/c.txt');
await until(() => events.includes('remove:c.txt'));
await h.stop();
check('watchDir (recursive): create, write, a new directory, a file in it, rename, remove',
	['create:a.txt', 'write:a.txt', 'create:sub', 'create:sub/b.txt', 'write:sub/b.txt',
		'rename:a.txt', 'create:c.txt', 'remove:c.txt'].every((e) => events.includes(e)), true);
const n = events.length;
await f.write('/tmp/watch/after-stop.txt', 'z');
check('no event after stop()', events.length, n);
[err] = await thrown(() => f.watchDir('/tmp/watch-nope', () => {}));
check('watchDir of a missing directory: FileNotFoundError', err, 'FileNotFoundError');
await sbx.kill();
