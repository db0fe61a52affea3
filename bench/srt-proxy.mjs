// sandbox-runtime's HTTP proxy, standalone, for bench/egress: SandboxManager.initialize()
// starts the same proxy `srt` runs on the host for a sandboxed command (CONNECT tunnels and
// plain HTTP, its domain allowlist, a per-run proxy password). Nothing is sandboxed here:
// only the proxy is used. Prints "srt-proxy URL" (URL with the password), then serves until
// killed; on failure prints the error and exits 1.
//   node bench/srt-proxy.mjs ALLOWED_HOST...
import { SandboxManager } from '@anthropic-ai/sandbox-runtime';

const config = {
	network: { allowedDomains: process.argv.slice(2), deniedDomains: [] },
	filesystem: { denyRead: [], allowWrite: [], denyWrite: [] },
};
try {
	await SandboxManager.initialize(config);
} catch (e) {
	console.log(`srt-error ${e.message}`);
	process.exit(1);
}
const token = SandboxManager.getProxyAuthToken();
const auth = token ? `srt:${token}@` : '';
console.log(`srt-proxy http://${auth}127.0.0.1:${SandboxManager.getProxyPort()}`);
setInterval(() => {}, 1 << 30);
