// Goal: every member's API address is in the replicated state (docs/decisions/0038), so that
// through a balancer, whichever node answers, `member list` shows every member's API address on
// every call, the initial members' included (their bootstrap entry holds each node's own alone);
// and every node's own Status, which learns nothing by asking, already names them all. With a
// member killed, `cluster status` lists it once: asked directly, its --server's row is named after
// it (paired by the recorded address); through the balancer, it is unreachable.
// Method: `slipway cluster up` (three `slipway server` processes on loopback, HAProxy in front);
// the CLI runs as a child process, through the balancer and against each node; `cluster down`
// stops everything by the recorded PIDs.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ClusterClient } from '../../src/cli/client.js';
import { memberAddrsBasePort, runSlipway, type CliResult } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';

const cli = (args: string[]): Promise<CliResult> => runSlipway(args, { timeoutMs: 30_000 });

interface LocalNode {
  readonly id: string;
  readonly pid: number;
  readonly apiAddr: string;
  readonly raftAddr: string;
}

const dir = mkdtempSync(join(tmpdir(), 'slipway-member-addrs-'));
const balancerAddr = `127.0.0.1:${memberAddrsBasePort}`;
let nodes: LocalNode[] = [];
let expected: string[] = [];

before(async () => {
  const up = await cli(['cluster', 'up', '--dir', dir, '--base-port', String(memberAddrsBasePort)]);
  assert.equal(up.code, 0, up.stderr);
  assert.ok(up.stdout.includes(`balancer: ${balancerAddr} (HAProxy`), up.stdout);
  nodes = (JSON.parse(readFileSync(join(dir, 'cluster.json'), 'utf8')) as { nodes: LocalNode[] }).nodes;
  expected = nodes.map((n) => `${n.id} ${n.apiAddr}`).sort();
});

after(async () => {
  await cli(['cluster', 'down', '--dir', dir]);
  rmSync(dir, { recursive: true, force: true });
});

/** The members' "ID APIADDR" as `slipway -o json member list` through `server` shows them, sorted. */
async function memberList(server: string): Promise<string[]> {
  const r = await cli(['--server', server, '-o', 'json', 'member', 'list']);
  assert.equal(r.code, 0, r.stderr);
  const members = (JSON.parse(r.stdout) as { members: { id: string; apiAddr: string }[] }).members;
  return members.map((m) => `${m.id} ${m.apiAddr}`).sort();
}

describe("members' API addresses in the replicated state", () => {
  test("every node's own Status names every member's API address", async () => {
    // Status fills in nothing by asking other members: what it names, the state holds.
    const statusMembers = async (node: LocalNode): Promise<string[]> => {
      const client = new ClusterClient([node.apiAddr], 5000);
      try {
        const s = await client.call('status', {});
        return s.members.map((m) => `${m.id} ${m.apiAddr}`).sort();
      } finally {
        client.close();
      }
    };
    for (const node of nodes) {
      await waitFor(
        `${node.id}'s Status to name every API address`,
        async () => JSON.stringify(await statusMembers(node)) === JSON.stringify(expected),
        30_000,
        200,
      );
    }
  });

  test('through the balancer, every call of member list shows every API address', async () => {
    for (let i = 0; i < 12; i++) assert.deepEqual(await memberList(balancerAddr), expected, `call ${i + 1}`);
    for (const node of nodes)
      assert.deepEqual(await memberList(node.apiAddr), expected, `through ${node.id}`);
  });
});

describe('cluster status with a member down', () => {
  interface Row {
    readonly node: string;
    readonly api: string;
    readonly health: string;
  }
  const rowsVia = async (server: string): Promise<Row[]> => {
    const r = await cli(['--server', server, '-o', 'json', 'cluster', 'status']);
    assert.equal(r.code, 0, r.stderr);
    return (JSON.parse(r.stdout) as { nodes: Row[] }).nodes;
  };
  const alive = (pid: number): boolean => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  test('lists a killed member once: paired with its --server when asked directly, unreachable through the balancer', async () => {
    const victim = nodes[1]!;
    process.kill(victim.pid, 'SIGKILL');
    await waitFor(`${victim.id} (pid ${victim.pid}) to end`, () => !alive(victim.pid), 10_000, 50);
    const ids = nodes.map((n) => n.id).sort();

    // Every node named: the --server that did not answer is the victim's, and says so.
    const direct = await rowsVia(nodes.map((n) => n.apiAddr).join(','));
    assert.deepEqual(direct.map((r) => r.node).sort(), ids);
    assert.deepEqual(
      direct
        .filter((r) => r.node === victim.id || r.api === victim.apiAddr)
        .map((r) => `${r.node} ${r.api} ${r.health}`),
      [`${victim.id} ${victim.apiAddr} down`],
    );
    assert.deepEqual(
      direct.filter((r) => r.node !== victim.id).map((r) => r.health),
      ['ok', 'ok'],
    );

    // Through the balancer (once HAProxy has stopped sending calls to the victim).
    let balanced: Row[] = [];
    await waitFor(
      'a status through the balancer from a live node',
      async () => {
        balanced = await rowsVia(balancerAddr);
        return balanced.some((r) => r.health === 'ok');
      },
      20_000,
      200,
    );
    assert.deepEqual(balanced.map((r) => r.node).sort(), ids);
    assert.deepEqual(
      balanced.filter((r) => r.node === victim.id).map((r) => `${r.api} ${r.health}`),
      [`${victim.apiAddr} unreachable`],
    );
  });
});
