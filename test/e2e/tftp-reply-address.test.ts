// Goal: TFTP answers from the address the client asked. A read sent to a second address of the
// server's interface (standing in for the VIP) gets every reply (OACK, DATA, ERROR) from that
// address, and a read sent to the node's own address from the node's own address. When the
// second address is removed while a transfer is in flight, that transfer ends at once
// ('addressGone', counted) instead of retransmitting into the void; when it is added again, it
// is served from it again. As a control, a server without the address feed (the old
// behaviour) answers a read sent to the second address from the node's own address: the check
// bites.
// Method: namespaces srv (10.95.0.1/24 on eth0, then 10.95.0.100/24 added) and cli
// (10.95.0.5/24), joined by a veth. The boot services run in srv (TFTP on 0.0.0.0:69 following
// the host's addresses through the link watcher, as a node does; the control on 0.0.0.0:1069
// without). The client is test/support/tftp-read-client.ts in cli, which records the source of
// every packet and, like EDK2, accepts replies only from the address it asked.
import assert from 'node:assert/strict';
import { randomBytes, createHash } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { BootServicesProcess, NetnsLab, requireCommands } from '../support/netns.js';
import type { ReadResult } from '../support/tftp-read-client.js';

const nodeAddress = '10.95.0.1';
const vip = '10.95.0.100';
const clientAddress = '10.95.0.5';
const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const clientScript = path.join(repoRoot, 'test/support/tftp-read-client.ts');
/** A file of several windows of blocks: 40 blocks of 1468 bytes and a short one. */
const file = randomBytes(40 * 1468 + 321);

/** One read by the client in `ns`; its result whether or not the read succeeded. */
async function readVia(
  lab: NetnsLab,
  ns: string,
  server: string,
  port: number,
  name: string,
): Promise<ReadResult> {
  const argv = [process.execPath, '--import', 'tsx', clientScript, server, String(port), name];
  const run = await lab.run(ns, argv, 30_000);
  const line = run.stdout.trim().split('\n').at(-1) ?? '';
  assert.ok(
    line.startsWith('{'),
    `the client printed no result (${run.code ?? run.signal}):\n${run.stdout}${run.stderr}`,
  );
  return JSON.parse(line) as ReadResult;
}

function sources(result: ReadResult): string[] {
  return [...new Set(result.received.map(([address]) => address))];
}

describe('TFTP replies leave from the address the client asked', { concurrency: 1 }, () => {
  it(
    'the VIP and the node address are each answered from themselves, across removal and re-adding',
    { timeout: 180_000 },
    async () => {
      await requireCommands({ ip: 'iproute2' });
      const lab = await NetnsLab.create();
      try {
        const srv = await lab.addNamespace('srv');
        const cli = await lab.addNamespace('cli');
        await lab.connect(
          { ns: srv, ifname: 'eth0', addresses: [`${nodeAddress}/24`] },
          { ns: cli, ifname: 'eth0', addresses: [`${clientAddress}/24`] },
        );
        await lab.check(srv, ['ip', 'addr', 'add', `${vip}/24`, 'dev', 'eth0']);
        const root = path.join(lab.dir, 'root');
        await mkdir(root);
        await writeFile(path.join(root, 'ipxe.efi'), file);
        const want = createHash('sha256').update(file).digest('hex');

        const services = await BootServicesProcess.start(lab, srv, {
          hardware: [],
          httpBaseUrl: `http://${vip}`,
          tftp: { root, host: '0.0.0.0', port: 69, followAddresses: true },
        });
        const listening = (address: string, present: boolean): Promise<unknown> =>
          services.waitFor(
            'tftp-listening',
            (e) => e.addresses.includes(address) === present,
            10_000,
            `listener on ${address} ${present ? 'bound' : 'closed'}`,
          );
        await listening(vip, true);

        // Each address is answered from itself, OACK and DATA alike; an ERROR too.
        for (const address of [vip, nodeAddress]) {
          const read = await readVia(lab, cli, address, 69, 'ipxe.efi');
          assert.equal(read.outcome, 'done', JSON.stringify(read));
          assert.equal(read.sha256, want);
          assert.deepEqual(sources(read), [address], `replies to a read sent to ${address}`);
          assert.deepEqual(new Set(read.received.map(([, type]) => type)), new Set(['oack', 'data']));
          const missing = await readVia(lab, cli, address, 69, 'missing.efi');
          assert.deepEqual([missing.outcome, missing.errorCode, sources(missing)], ['error', 1, [address]]);
        }

        // In flight when the VIP leaves: the transfer ends at once, as 'addressGone'.
        const holding = lab.spawn(cli, [
          process.execPath,
          '--import',
          'tsx',
          clientScript,
          vip,
          '69',
          'ipxe.efi',
          '--stall',
        ]);
        try {
          await holding.waitForOutput((o) => o.includes('"stalled":true'), 30_000, 'the first DATA block');
          await services.waitFor(
            'tftp-start',
            (e) => e.client === clientAddress,
            10_000,
            'the held transfer to start',
          );
          const removedAt = Date.now();
          await lab.check(srv, ['ip', 'addr', 'del', `${vip}/24`, 'dev', 'eth0']);
          await listening(vip, false);
          const ended = await services.waitFor(
            'tftp-end',
            (e) => e.reason === 'addressGone',
            10_000,
            'the held transfer to end',
          );
          // Its retransmissions alone would have gone on for about 31 s.
          assert.ok(Date.now() - removedAt < 10_000);
          assert.deepEqual([ended.outcome, ended.client], ['failed', clientAddress]);
        } finally {
          await holding.stop();
        }

        // The VIP comes back (moved back to this node): served from it again.
        await lab.check(srv, ['ip', 'addr', 'add', `${vip}/24`, 'dev', 'eth0']);
        await listening(vip, true);
        const again = await readVia(lab, cli, vip, 69, 'ipxe.efi');
        assert.deepEqual([again.outcome, again.sha256, sources(again)], ['done', want, [vip]]);
        assert.equal(services.eventsOf('tftp-end').filter((e) => e.reason === 'addressGone').length, 1);
        assert.deepEqual(services.eventsOf('error'), []);
        await services.stop();

        // The control: without the feed, the kernel picks the node's own address as the source,
        // so the client, accepting only the VIP, hears nothing it can use.
        const control = await BootServicesProcess.start(lab, srv, {
          hardware: [],
          httpBaseUrl: `http://${vip}`,
          tftp: { root, host: '0.0.0.0', port: 1069 },
        });
        const blind = await readVia(lab, cli, vip, 1069, 'ipxe.efi');
        assert.equal(blind.outcome, 'timeout', JSON.stringify(blind));
        assert.deepEqual(sources(blind), [nodeAddress]);
        await control.stop();
      } finally {
        await lab.destroy();
      }
    },
  );
});
