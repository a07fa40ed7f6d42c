// Goal: the follower's driver (lb/haproxy-follower.ts, lb/haproxy-runtime.ts) against a real
// HAProxy: a round adds a new member's server and HAProxy runs it with the options given; a
// command HAProxy refuses is logged with its answer and tried again next round, changing nothing
// else; a round whose membership cannot be read leaves HAProxy as it is, and the loop carries on
// and says when it recovers; a socket where no HAProxy answers is an error naming the path.
// Method: one real HAProxy (lb/haproxy-process.ts) with its runtime socket in front of one
// address where nothing listens (no cluster is needed to change the server list); the
// membership is a function the test controls; logs go to a pino stream the test reads.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import { haproxyBackend, haproxyServerId } from '../../lb/haproxy.js';
import type { Member } from '../../lb/haproxy-membership.js';
import { HaproxyFollower } from '../../lb/haproxy-follower.js';
import type { RunningHaproxy } from '../../lb/haproxy-process.js';
import { findHaproxy, startHaproxy, stopHaproxy } from '../../lb/haproxy-process.js';
import { HaproxyRuntimeError, runtimeCommand } from '../../lb/haproxy-runtime.js';
import { nextPort } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'slipway-lb-runtime-'));
const socket = join(dir, 'haproxy.sock');
const n1 = { id: 'n1', apiAddr: `127.0.0.1:${nextPort()}` };
let haproxy: RunningHaproxy | undefined;
const lines: Record<string, unknown>[] = [];
const logger = pino(
  { level: 'debug' },
  new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  }),
);

function follower(members: () => Promise<readonly Member[]>, serverOptions = 'proto h2'): HaproxyFollower {
  return new HaproxyFollower({
    socketPath: socket,
    backend: haproxyBackend,
    serverOptions,
    serverId: haproxyServerId,
    drainGraceMs: 1000,
    intervalMs: 100,
    members,
    logger,
  });
}

before(async () => {
  const bin = findHaproxy();
  assert.ok(bin !== undefined, 'haproxy is not installed: apt-get install haproxy');
  haproxy = await startHaproxy({
    bin,
    dir,
    detached: false,
    spec: { listenAddr: `127.0.0.1:${nextPort()}`, nodes: [n1], runtimeSocket: socket },
  });
});

after(async () => {
  if (haproxy !== undefined) await stopHaproxy(haproxy.pid, haproxy.configFile);
  rmSync(dir, { recursive: true, force: true });
});

describe('the follower on a real HAProxy', () => {
  const n2 = { id: 'n2', apiAddr: `127.0.0.1:${nextPort()}`, voter: true };
  const both = (): Promise<Member[]> => Promise.resolve([{ ...n1, voter: true }, n2]);

  test('a refused command is logged with its answer and changes nothing; a later round adds the server', async () => {
    const refusing = follower(both, 'proto h2 no-such-keyword');
    const r = await refusing.round();
    assert.deepEqual(r.applied, []);
    assert.equal(r.refused.length, 1);
    assert.match(r.refused[0]!.answer, /no-such-keyword/);
    const warned = lines.find((l) => l['msg'] === 'HAProxy refused a command; trying again next round');
    assert.equal(warned?.['server'], 'n2');
    assert.deepEqual(
      (await refusing.check()).map((s) => s.name),
      ['n1'],
    );

    const good = follower(both);
    const added = await good.round();
    assert.deepEqual(
      added.applied.map((c) => `${c.kind} ${c.server}`),
      ['add n2'],
    );
    const servers = await good.check();
    assert.deepEqual(
      servers.map((s) => [s.name, s.addr, s.admin]),
      [
        ['n1', n1.apiAddr, 'ready'],
        ['n2', n2.apiAddr, 'ready'],
      ],
    );
    const state = await runtimeCommand(socket, `show servers state ${haproxyBackend}`);
    assert.match(
      state,
      new RegExp(`\\n\\d+ ${haproxyBackend} ${haproxyServerId('n2')} n2 `),
      'added with its id',
    );
    assert.deepEqual((await good.round()).applied, [], 'in step: nothing more to do');
  });

  test('a round without the membership leaves HAProxy as it is; the loop recovers by itself', async () => {
    let reachable = false;
    const f = follower(async () => {
      if (!reachable) throw new Error('no node answered MemberList');
      return both();
    });
    await assert.rejects(f.round(), /no node answered MemberList/);
    const stop = new AbortController();
    const running = f.run(stop.signal);
    try {
      await waitFor(
        'the failed round to be logged',
        () => lines.some((l) => l['msg'] === 'a round failed; HAProxy left as it is'),
        15_000,
      );
      assert.deepEqual(
        (await f.check()).map((s) => s.name),
        ['n1', 'n2'],
        'nothing removed while the membership is unknown',
      );
      reachable = true;
      await waitFor(
        'the loop to recover',
        () => lines.some((l) => l['msg'] === 'following the membership again'),
        15_000,
      );
    } finally {
      stop.abort();
      await running;
    }
  });

  test('a member that left is drained, then deleted, through the loop', async () => {
    const f = follower(() => Promise.resolve([{ ...n1, voter: true }]));
    const stop = new AbortController();
    const running = f.run(stop.signal);
    try {
      await waitFor('n2 to be deleted', async () => (await f.check()).every((s) => s.name !== 'n2'), 15_000);
    } finally {
      stop.abort();
      await running;
    }
    const changes = lines
      .filter((l) => l['server'] === 'n2' && l['change'] !== undefined)
      .map((l) => l['change']);
    assert.deepEqual(changes.slice(-2), ['drain', 'delete']);
  });
});

describe('socket problems', () => {
  test('a path with no socket, or a file that is not one, names the path and the fix', async () => {
    const missing = join(dir, 'missing.sock');
    await assert.rejects(
      runtimeCommand(missing, 'show info'),
      (err: unknown) =>
        err instanceof HaproxyRuntimeError &&
        err.message.includes(`no HAProxy runtime socket at ${missing}`) &&
        err.message.includes('stats socket PATH level admin'),
    );
    const plain = join(dir, 'plain-file');
    writeFileSync(plain, '');
    await assert.rejects(runtimeCommand(plain, 'show info'), (err: unknown) => {
      assert.ok(err instanceof HaproxyRuntimeError);
      assert.match(err.message, new RegExp(plain.replace(/[/.-]/g, '\\$&')));
      return true;
    });
  });

  test('a command that would smuggle in a second one is refused before it is sent', async () => {
    await assert.rejects(runtimeCommand(socket, 'show info; shutdown frontend x'), /newline or ';'/);
  });
});
