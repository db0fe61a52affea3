// sbx.getHost(port) through `paddock serve --e2b-domain sandbox.test:PORT`
// (tests/integration/test-e2b.sh): a web server the test starts in the sandbox is reached at
// http://<getHost(8000)>/, as a user whose wildcard DNS name *.sandbox.test points at the
// daemon's listener would reach it (here: a lookup that answers 127.0.0.1 for that name).
// The request carries the sandbox's trafficAccessToken, as E2B asks of a restricted port;
// without it, or with another sandbox's, it is refused.
import http from 'node:http';
import { e2b, check } from './lib.mjs';
const { Sandbox } = e2b;
const domain = process.env.E2B_DOMAIN_WANTED;

// The user's wildcard DNS: every name under the domain is the listener's loopback address.
function lookup(host, opts, cb) {
	if (!host.endsWith('.' + domain.replace(/:.*/, ''))) return cb(new Error(`unexpected host ${host}`));
	if (opts && opts.all) return cb(null, [{ address: '127.0.0.1', family: 4 }]);
	return cb(null, '127.0.0.1', 4);
}

function get(target, headers) {
	return new Promise((resolve, reject) => {
		const req = http.get(target, { lookup, headers, agent: false }, (res) => {
			let body = '';
			res.setEncoding('utf8');
			res.on('data', (d) => (body += d));
			res.on('end', () => resolve({ status: res.statusCode, body }));
		});
		req.on('error', reject);
	});
}

const sbx = await Sandbox.create();
const other = await Sandbox.create();
const host = sbx.getHost(8000);
check('getHost(8000) is 8000-ID.DOMAIN of the daemon', host, `8000-${sbx.sandboxId}.${domain}`);
await sbx.files.write('/tmp/www/hello.txt', 'hello through getHost\n');
await sbx.commands.run('python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/www', { background: true });
const auth = { 'e2b-traffic-access-token': sbx.trafficAccessToken };
// The server starts in the background: asked again until it answers (at most 100 times).
let r = { status: 0, body: '' };
for (let i = 0; i < 100 && r.status !== 200; i++) {
	r = await get(`http://${host}/hello.txt`, auth);
	if (r.status !== 200) await new Promise((ok) => setTimeout(ok, 100));
}
check('fetch of http://getHost(8000)/hello.txt: 200', r.status, 200);
check('fetch of http://getHost(8000)/hello.txt: the file the sandbox serves', r.body, 'hello through getHost\n');
r = await get(`http://${host}/hello.txt`, {});
check('the same fetch without the traffic token: 401', r.status, 401);
r = await get(`http://${other.getHost(8000)}/hello.txt`, auth);
check("another sandbox's host with this sandbox's token: 401", r.status, 401);
// The daemon serves its dashboard at /ui/; at a sandbox's host that path is the sandbox's.
await sbx.files.write('/tmp/www/ui/index.html', 'the sandbox\'s own /ui/\n');
r = await get(`http://${host}/ui/`, auth);
check("http://getHost(8000)/ui/ is the sandbox's page, not the daemon's dashboard", r.body,
	"the sandbox's own /ui/\n");
await sbx.files.write('/tmp/www/mcp', 'the sandbox\'s own /mcp\n');
r = await get(`http://${host}/mcp`, auth);
check("http://getHost(8000)/mcp is the sandbox's, not the daemon's MCP endpoint", r.body,
	"the sandbox's own /mcp\n");
await other.kill();
await sbx.kill();
