// Goal: every caller that reads a whole list sees all of it, not its first page (issue 27: the
// storm benchmark counted 500 of 1,000 workflows): the shared reader src/platform/pages.ts
// allItems, the storm fleet's workflow reads (bench/storm-fleet.ts, its check and its setup),
// the DHCP benchmark's hardware read (bench/dhcp-admin.ts) and the CLI's lists.
// Method: one real `slipway server` holding one machine and one workflow more than a page of
// the default size (500); a single call returns a page with a continue token, each caller
// returns every item.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ClusterClient } from '../../src/cli/client.js';
import { allItems } from '../../src/platform/pages.js';
import { hardwareOf } from '../../bench/dhcp-admin.js';
import { workflowsOf } from '../../bench/storm-fleet.js';
import { ProcessCluster, runSlipway } from '../support/process-cluster.js';

/** One more than a page of the default size (src/api/pages.ts pageItemsDefault). */
const count = 501;

let cluster: ProcessCluster;
let client: ClusterClient;

const template = `version: "0.1"
name: one-step
global_timeout: 600
tasks:
  - name: t
    worker: "{{ hardware.id }}"
    actions:
      - name: a
        command: ["true"]
        timeout: 60`;

/** Runs `make(i)` for i below `n`, `width` at a time. */
async function each(n: number, width: number, make: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < n) await make(next++);
  };
  await Promise.all(Array.from({ length: width }, lane));
}

before(async () => {
  cluster = new ProcessCluster(1);
  cluster.startAll();
  await cluster.waitForLeader();
  client = new ClusterClient(cluster.apiAddrs(), { timeoutMs: 30_000 });
  await client.control('templateCreate', { source: template, replace: false });
  await each(count, 16, (i) => {
    const mac = `02:00:00:00:${Math.floor(i / 256)
      .toString(16)
      .padStart(2, '0')}:${(i % 256).toString(16).padStart(2, '0')}`;
    const documentJson = JSON.stringify({ id: `m-${String(i).padStart(4, '0')}`, interfaces: [{ mac }] });
    return client.control('hardwareCreate', { documentJson, replace: false });
  });
  await each(count, 16, (i) =>
    client.control('workflowCreate', {
      template: 'one-step',
      hardwareId: `m-${String(i).padStart(4, '0')}`,
      hardwareMap: {},
      netboot: false,
    }),
  );
});

after(async () => {
  client.close();
  await cluster.destroy();
});

test('a single list call answers one page and a token; every caller of a whole list sees every item', async () => {
  const first = await client.control('workflowList', { local: false, hardwareId: '' });
  assert.equal(first.workflows.length, 500, 'one page of the default size');
  assert.notEqual(first.continue, '');

  const workflows = await allItems(
    (token) => client.control('workflowList', { local: false, hardwareId: '', continue: token }),
    (page) => page.workflows,
  );
  assert.equal(new Set(workflows.map((w) => w.id)).size, count, 'allItems: every workflow once');

  assert.equal((await workflowsOf(client)).length, count, "the storm fleet's check");
  assert.equal((await workflowsOf(client, 'm-0007')).length, 1, "the storm fleet's setup, one machine's");
  assert.equal(new Set(await hardwareOf(client)).size, count, "the DHCP benchmark's registration");

  const server = cluster.apiAddrs().join(',');
  for (const [what, field] of [
    ['workflow', 'workflows'],
    ['hardware', 'hardware'],
  ] as const) {
    const listed = await runSlipway(['--server', server, '-o', 'json', what, 'list'], { timeoutMs: 60_000 });
    assert.equal(listed.code, 0, listed.stderr);
    const doc = JSON.parse(listed.stdout) as Record<string, unknown[]>;
    assert.equal(doc[field]?.length, count, `slipway ${what} list`);
  }
});
