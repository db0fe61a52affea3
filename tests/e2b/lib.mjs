// Shared by the e2b suite's Node programs (tests/integration/test-e2b.sh): the real
// `e2b` SDK from tests/clients/node_modules, and checks printed one JSON line each
// ({"d": description, "g": got, "w": wanted}) for the suite to turn into TAP.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '..', 'clients', 'package.json'));
export const e2b = require('e2b');

export function check(d, g, w) {
	process.stdout.write(JSON.stringify({ d, g: String(g), w: String(w) }) + '\n');
}

// The name of the error `fn` throws ("none" when it does not), and its message.
export async function thrown(fn) {
	try {
		await fn();
		return ['none', ''];
	} catch (e) {
		return [e.constructor.name, String(e.message)];
	}
}

export const url = process.env.E2B_API_URL;
export const key = process.env.E2B_API_KEY;
