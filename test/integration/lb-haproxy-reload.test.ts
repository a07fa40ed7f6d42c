// Goal: a reload of HAProxy, done the way an operator does it, loses no member for longer than a
// follower's round and drops no stream (docs/decisions/0013, "Following the membership"). A
// reload starts HAProxy's new process from the file, which lacks the servers `slipway balancer
// follow` added at run time: the follower, at its default interval (1 s), must add them back
// within a few seconds, HAProxy must send new calls to them again, and the streams established
// through the old process before the reload must stay open and still receive (the old process
// serves its connections until they end). Two reloads: `systemctl reload` of Debian's service
// (SIGUSR2 to a master-worker HAProxy) and the hand-over of an HAProxy run without a master
// (`haproxy -x SOCKET -sf PID`, as `cluster up` runs it).
// Method: 3 real `slipway server` processes, n3 joined with `member add` (so the file, rendered
// from n1 and n2, lacks it, as a file rendered before a node joined does); real HAProxy 2.6 on
// the file lb/haproxy.ts renders; the follower as the real `slipway balancer follow` process.
// Streams are WorkflowEvents follows through HAProxy, one or two per node (a worker id lands on
// a node by the hash); a workflow's cancellation is the event each must still receive. Every
// process is stopped by PID at the end, old HAProxy processes included.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { credentials } from '@grpc/grpc-js';
import type { BalancerSpec } from '../../src/model/balancer-spec.js';
import { renderHaproxyConfig } from '../../lb/haproxy.js';
import {
  checkHaproxyConfig,
  findHaproxy,
  isHaproxyRunning,
  startHaproxy,
  stopHaproxy,
} from '../../lb/haproxy-process.js';
import { runtimeCommand } from '../../lb/haproxy-runtime.js';
import { ClusterClient } from '../../src/cli/client.js';
import { ControlClient } from '../../src/gen/control.js';
import { KvClient } from '../../src/gen/kv.js';
import { BalancerStreams, listedServers, waitingTemplateYaml } from '../support/balancer-streams.js';
import { haproxyServerStates } from '../support/haproxy-stats.js';
import type { ProcNode } from '../support/process-cluster.js';
import { nextPort, ProcessCluster, slipwayBin } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';

/** The follower's default interval is 1 s: a lost server is back within a round and its checks. */
const restoreDeadlineMs = 5000;

const cluster = new ProcessCluster(2);
const joiner: ProcNode = {
  id: 'n3',
  raftAddr: `127.0.0.1:${nextPort()}`,
  apiAddr: `127.0.0.1:${nextPort()}`,
  metricsAddr: `127.0.0.1:${nextPort()}`,
  dataDir: join(cluster.dir, 'n3'),
  proc: null,
};
const listenAddr = `127.0.0.1:${nextPort()}`;
const statsAddr = `127.0.0.1:${nextPort()}`;
const socket = join(cluster.dir, 'haproxy.sock');
const configFile = join(cluster.dir, 'haproxy.cfg');
const followLog = join(cluster.dir, 'follow.log');
const haproxyBin = findHaproxy();
/** Every HAProxy PID this file started or saw (masters, workers, old processes), for `after`. */
const haproxyPids = new Set<number>();
let follower: ChildProcess | undefined;
let admin: ClusterClient;
let kv: KvClient;
let control: ControlClient;
let streams: BalancerStreams;

/** The file as rendered before n3 joined: n1 and n2, with the runtime socket. */
const spec: BalancerSpec = {
  listenAddr,
  statsAddr,
  runtimeSocket: socket,
  nodes: cluster.nodes.map((n) => ({ id: n.id, apiAddr: n.apiAddr })),
  healthCheck: { intervalMs: 200, fall: 2, rise: 2 },
};

/** The PID of the HAProxy process answering the runtime socket (the worker, under a master). */
async function socketPid(): Promise<number> {
  const info = await runtimeCommand(socket, 'show info');
  const pid = Number(/^Pid: (\d+)$/m.exec(info)?.[1]);
  assert.ok(Number.isSafeInteger(pid) && pid > 0, `no Pid in "show info": ${info.slice(0, 200)}`);
  haproxyPids.add(pid);
  return pid;
}

/** n3 listed by the process on the socket, and UP there with a passed grpc.health.v1 check. */
async function joinerServing(): Promise<boolean> {
  if (!(await listedServers(socket)).includes('n3')) return false;
  const s = (await haproxyServerStates(statsAddr)).get('n3');
  return s?.status === 'UP' && s.check === 'L7OK';
}

/** How many times the follower has added n3's server. */
function joinerAdds(): number {
  return readFileSync(followLog, 'utf8')
    .split('\n')
    .filter((l) => l.includes('"server":"n3","change":"add"')).length;
}

/**
 * Reloads by `reload`, then checks what a reload must keep: the new process lacks n3 until the
 * follower adds it back (within the deadline), new calls reach n3 again, and the streams opened
 * before, through the old process, stay open and still receive.
 */
async function reloadKeepsMembersAndStreams(prefix: string, reload: () => void): Promise<number> {
  await waitFor('HAProxy to serve n3, added at run time', joinerServing, 20_000);
  const hw = `hw-${prefix}`;
  const n = prefix === 'mw' ? 1 : 2;
  const workflowId = await streams.createWorkflow(hw, `02:00:00:00:04:0${n}`, `10.79.4.${n}/24`);
  const held = await streams.onEveryNode(workflowId, prefix, ['n1', 'n2', 'n3'], 1);
  const oldPid = await socketPid();
  const addsBefore = joinerAdds();

  const reloaded = Date.now();
  reload();
  await waitFor('a new HAProxy process to answer the runtime socket', async () => {
    const pid = await socketPid().catch(() => oldPid);
    return pid !== oldPid;
  });
  await waitFor('the follower to add n3 to the new process, UP', joinerServing, restoreDeadlineMs);
  const restoredMs = Date.now() - reloaded;
  // The new process started from the file, without n3: the follower added it again.
  assert.equal(joinerAdds(), addsBefore + 1, 'the follower added n3 once more');
  const toJoiner = await streams.workerOn('n3', `${prefix}-new`);
  assert.ok(toJoiner !== undefined, 'no worker id of 60 reached n3 through the reloaded HAProxy');

  // The old process still serves the streams opened through it, n3's included.
  assert.ok(isHaproxyRunning(oldPid, configFile), 'the old HAProxy process left with streams open');
  streams.assertOpen(held, 'by the reload');
  await streams.assertStillReceiving(held, workflowId);
  assert.ok(restoredMs < restoreDeadlineMs, `n3 was back after ${restoredMs} ms`);
  // Its streams done, the old process leaves: HAProxy asked the clients to move (GOAWAY).
  await waitFor('the old HAProxy process to exit', () => !isHaproxyRunning(oldPid, configFile), 10_000);
  return restoredMs;
}

before(async () => {
  assert.ok(haproxyBin !== undefined, 'haproxy is not installed: apt-get install haproxy');
  cluster.startAll();
  await cluster.waitForLeader(60_000);
  cluster.nodeArgs.set('n3', ['--join']);
  cluster.start(joiner);
  cluster.nodes.push(joiner);
  admin = new ClusterClient(cluster.apiAddrs(), 20_000);
  await admin.call('memberAdd', {
    id: 'n3',
    raftAddr: joiner.raftAddr,
    apiAddr: joiner.apiAddr,
    learner: false,
  });
  await admin.control('templateCreate', { source: waitingTemplateYaml, replace: true });
  kv = new KvClient(listenAddr, credentials.createInsecure());
  control = new ControlClient(listenAddr, credentials.createInsecure());
  streams = new BalancerStreams({ kv, control, admin });
});

/** Starts `slipway balancer follow` on the socket, at its default interval. */
async function startFollower(): Promise<void> {
  const log = openSync(followLog, 'a');
  follower = spawn(
    process.execPath,
    [
      slipwayBin,
      '--server',
      cluster.apiAddrs().join(','),
      'balancer',
      'follow',
      '--haproxy-socket',
      socket,
      '--drain-grace',
      '3000',
      '--check-interval',
      '200',
    ],
    { stdio: ['ignore', log, log] },
  );
  await waitFor(
    'the follower to start',
    () => readFileSync(followLog, 'utf8').includes('following the membership'),
    20_000,
    50,
  );
}

async function stopFollower(): Promise<void> {
  if (follower === undefined || follower.exitCode !== null || follower.signalCode !== null) return;
  const exited = new Promise((resolve) => follower?.once('exit', resolve));
  follower.kill('SIGTERM');
  await exited;
}

after(async () => {
  streams?.close();
  kv?.close();
  control?.close();
  admin?.close();
  await stopFollower();
  for (const pid of haproxyPids) await stopHaproxy(pid, configFile);
  await cluster.destroy();
});

describe('HAProxy reloaded while `balancer follow` runs', () => {
  test('systemctl reload (SIGUSR2 to the master): n3 is back within seconds; no stream is dropped', async (t) => {
    // As Debian's haproxy.service runs it (-Ws there; -W without systemd's notify socket).
    writeFileSync(configFile, renderHaproxyConfig(spec));
    await checkHaproxyConfig(haproxyBin!, configFile);
    const log = openSync(join(cluster.dir, 'haproxy.log'), 'a');
    const master = spawn(haproxyBin!, ['-W', '-db', '-f', configFile], { stdio: ['ignore', log, log] });
    assert.ok(master.pid !== undefined);
    const masterPid = master.pid;
    haproxyPids.add(masterPid);
    await waitFor('the master-worker HAProxy to answer its runtime socket', () =>
      socketPid().then(
        (pid) => pid !== masterPid,
        () => false,
      ),
    );
    try {
      await startFollower();
      // ExecReload=/bin/kill -USR2 $MAINPID
      const ms = await reloadKeepsMembersAndStreams('mw', () => process.kill(masterPid, 'SIGUSR2'));
      t.diagnostic(`n3 back in HAProxy ${ms} ms after the reload`);
    } finally {
      await stopFollower();
      for (const pid of haproxyPids) await stopHaproxy(pid, configFile);
      haproxyPids.clear();
    }
  });

  test('hand-over to a new process (haproxy -x SOCKET -sf PID): n3 is back within seconds; no stream is dropped', async (t) => {
    const running = await startHaproxy({ bin: haproxyBin!, dir: cluster.dir, detached: false, spec });
    haproxyPids.add(running.pid);
    await startFollower();
    const ms = await reloadKeepsMembersAndStreams('sf', () => {
      // The new process takes the listening sockets over the runtime socket (expose-fd
      // listeners), then tells the old one to finish (-sf): it stops listening, serves on.
      const log = openSync(join(cluster.dir, 'haproxy.log'), 'a');
      const next = spawn(haproxyBin!, ['-db', '-f', configFile, '-x', socket, '-sf', String(running.pid)], {
        stdio: ['ignore', log, log],
      });
      assert.ok(next.pid !== undefined);
      haproxyPids.add(next.pid);
    });
    t.diagnostic(`n3 back in HAProxy ${ms} ms after the hand-over`);
  });
});
