// templateID naming an image of the daemon's store (tests/integration/test-e2b.sh imports a
// busybox root as "e2bimg"): the sandbox runs on that image with the default profile, and
// its getInfo names the template it was asked for.
import { e2b, check } from './lib.mjs';
const { Sandbox } = e2b;

const sbx = await Sandbox.create('e2bimg', { timeoutMs: 60_000 });
check("templateID naming an image: the sandbox's root is the image",
	(await sbx.files.read('/etc/image-name')).trim(), 'e2b-image');
check("templateID naming an image: the host's /usr is not there", await sbx.files.exists('/usr/bin'), false);
check('getInfo: the templateID as asked', (await sbx.getInfo()).templateId, 'e2bimg');
await sbx.kill();
