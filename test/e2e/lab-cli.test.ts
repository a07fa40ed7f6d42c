// Goal: `slipway lab up --machines N` starts a whole site on this computer and says what to
// type next; what it prints works from an ordinary shell (the host reaches the lab's LAN);
// `slipway lab down` removes all of it: the `lab up` process, its namespaces, the host's veth
// and its record.
// Method: the real CLI as child processes. A stand-in boot OS directory (nothing is booted
// here: test/e2e/provision-vip-qemu.test.ts boots machines) skips the build. From the host: the
// hardware list, a power status through the machine's BMC, the machine's iPXE script through
// the VIP. Then `lab down`, and a look at what is left.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { requireCommands } from '../support/netns.js';
import { ipmiSimMissing } from '../support/ipmi-sim.js';
import { slipwayBin } from '../support/netns-cluster.js';
import { waitFor } from '../support/wait.js';

const run = promisify(execFile);

describe('slipway lab up / lab down', () => {
  let dir = '';
  after(async () => {
    if (dir !== '') {
      // Whatever the test left running is stopped by the command under test; if it failed
      // before that, lab down still cleans up by the record.
      await run(process.execPath, [slipwayBin, 'lab', 'down', '--dir', path.join(dir, 'lab')]).catch(
        () => undefined,
      );
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('starts a site the host can drive and removes all of it', { timeout: 240_000 }, async () => {
    await requireCommands({ ip: 'iproute2', haproxy: 'haproxy', radvd: 'radvd', curl: 'curl' });
    assert.equal(ipmiSimMissing(), undefined);
    dir = await mkdtemp(path.join(tmpdir(), 'slipway-lab-test-'));
    const bootOs = path.join(dir, 'bootos');
    await mkdir(bootOs);
    await writeFile(path.join(bootOs, 'vmlinuz-x86_64'), 'stand-in\n');
    await writeFile(path.join(bootOs, 'initramfs-x86_64'), 'stand-in\n');
    const labDir = path.join(dir, 'lab');
    const up = spawn(
      process.execPath,
      [slipwayBin, 'lab', 'up', '--machines', '1', '--bootos-dir', bootOs, '--dir', labDir],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    up.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
    up.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
    const exited = new Promise<number | null>((resolve) => up.once('exit', (code) => resolve(code)));
    await waitFor(
      'lab up to say what to type next',
      () => output.includes('Next, in another shell:') || up.exitCode !== null,
      150_000,
      200,
    );
    assert.ok(output.includes('Next, in another shell:'), output);
    const servers = /export SLIPWAY_SERVER=(\S+)/.exec(output)?.[1];
    assert.ok(servers !== undefined, output);
    const labId = /Slipway lab (slw-[0-9a-f]{6})/.exec(output)?.[1];
    assert.ok(labId !== undefined, output);
    const cli = async (...args: string[]): Promise<string> =>
      (await run(process.execPath, [slipwayBin, '--server', servers, ...args], { encoding: 'utf8' })).stdout;

    const hardware = JSON.parse(await cli('-o', 'json', 'hardware', 'get', 'm1')) as {
      interfaces?: { mac: string }[];
    };
    const mac = hardware.interfaces?.[0]?.mac;
    assert.equal(mac, '52:54:00:d5:00:01');
    assert.match(await cli('power', 'status', 'm1'), /off/);
    const script = await run('curl', ['-s', '--max-time', '10', `http://10.213.0.100:8080/ipxe/${mac}`], {
      encoding: 'utf8',
    });
    assert.match(script.stdout, /slipway\.server=10\.213\.0\.100:7070 /);

    const down = await run(process.execPath, [slipwayBin, 'lab', 'down', '--dir', labDir], {
      encoding: 'utf8',
    });
    assert.match(down.stdout, new RegExp(`lab ${labId} is down`));
    assert.equal(await exited, 0, output);
    const namespaces = (await run('ip', ['netns', 'list'], { encoding: 'utf8' })).stdout;
    assert.ok(!namespaces.includes(labId), namespaces);
    await assert.rejects(run('ip', ['link', 'show', `${labId}-h`]));
    assert.equal(existsSync(path.join(labDir, 'lab.json')), false);
  });
});
