// Goal: a rolling upgrade from the previous release to this build, under load, loses nothing
// (docs/decisions/0019-version-gates.md): no workflow fails, no action runs twice, every node
// ends with the same state (equal state digests at equal applied index), and the features this
// build gates become available only once the last node runs it. `slipway upgrade check` tells
// when the next node may be restarted.
// Method: both builds compiled by tsc, the previous release (test/support/previous-release.ts)
// from a temporary git worktree of its commit, this one from the working tree: the upgrade
// replaces one compiled tree by another, as operators deploy them, and every `slipway` the test
// runs starts without tsx's loader (many CLI calls on 2 busy cores). Three nodes start on the
// previous build (plaintext on loopback, a snapshot every 50 entries, so each data directory
// the new build opens holds snapshots the old one wrote), with three workers of the previous
// build (machines keep the agent they booted with) running workflows of three actions, fed
// continuously: each machine keeps two unfinished workflows until the upgrade is done (from then
// on one: a machine has one owner, docs/decisions/0028, and the feeder's second create is refused
// while the queue from before is owned in turn). Each
// action appends a line naming its workflow and action to its machine's file, so the test counts
// executions. Then, node by node: wait until the new build's `slipway upgrade check --member ID`
// exits 0, SIGTERM the node, start the new build on its data directory, wait until it rejoins
// and catches up, and until every machine has finished another workflow. Leadership is moved so
// that each mix runs: a new leader with old followers (one of them, down meanwhile, catches up
// from the new leader's snapshot), an old leader with new followers, the old leader's SIGTERM
// handing over to a new node. While a node runs the previous build, `slipway cluster version`
// says 1 and the gated features are refused. The test
// needs the previous release's commit in the repository's history (not a shallow clone).
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { execFile, spawn } from 'node:child_process';
import { existsSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { ClusterClient } from '../../src/cli/client.js';
import type { StatusResponse } from '../../src/gen/kv.js';
import type { WorkflowRecord } from '../../src/gen/control.js';
import { buildVersion, stateVersionOfThisBuild } from '../../src/state/versions.js';
import {
  buildCommit,
  buildWorkingTree,
  previousRelease,
  type CompiledBuild,
} from '../support/previous-release.js';
import { ProcessCluster, type CliResult, type ProcNode } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';
import { allItems } from '../../src/platform/pages.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const machines = ['hw-0', 'hw-1', 'hw-2'];
const actionsPerWorkflow = 3;
/** Unfinished workflows each machine is kept at while the upgrade goes on. */
const queuedPerMachine = 2;
/** A bound on what the feeder creates, whatever happens. */
const workflowsMax = 400;

let previous: CompiledBuild | undefined;
let current: CompiledBuild | undefined;
let cluster: ProcessCluster | undefined;
const workers: ChildProcess[] = [];

before(async () => {
  // Both at once: on 2 busy cores, two compilers finish sooner than one after the other.
  const [p, c] = await Promise.allSettled([
    buildCommit(repoRoot, previousRelease.commit),
    buildWorkingTree(repoRoot),
  ]);
  if (p.status === 'fulfilled') previous = p.value;
  if (c.status === 'fulfilled') current = c.value;
  if (p.status === 'rejected') throw p.reason;
  if (c.status === 'rejected') throw c.reason;
});

after(async () => {
  for (const w of workers) await stopProcess(w, 'SIGKILL');
  await cluster?.destroy();
  await previous?.remove();
  await current?.remove();
});

/** Runs a build's `slipway ARGS` to its end. */
function runBuild(build: CompiledBuild, args: readonly string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [build.main, ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

/** The new build's CLI against `servers` (default: every node). */
function newCli(
  args: readonly string[],
  servers: readonly ProcNode[] = theCluster().nodes,
): Promise<CliResult> {
  const list = servers.map((n) => n.apiAddr).join(',');
  return runBuild(theBuild(current), ['--server', list, '--timeout', '10000', ...args]);
}

function theCluster(): ProcessCluster {
  assert.ok(cluster !== undefined, 'the cluster has not started');
  return cluster;
}

function theBuild(build: CompiledBuild | undefined): CompiledBuild {
  assert.ok(build !== undefined, 'the build was not made');
  return build;
}

/**
 * The features this build gates, refused while any voter runs the previous release: setting the
 * workflow retention (cluster version 2) and the machine lifecycle (3: a label, a drain). They
 * are new Control methods, so they are sent to the nodes already upgraded (a node of the previous
 * build answers them UNIMPLEMENTED: it has never heard of them). To gate another feature, change
 * these two functions.
 */
async function assertGatedFeatureRefused(upgraded: readonly ProcNode[]): Promise<void> {
  const r = await newCli(['workflow', 'retention', '--finished-max', '5000'], upgraded);
  assert.equal(r.code, 1, `workflow retention mid-upgrade: ${r.stdout}${r.stderr}`);
  assert.match(r.stderr, /needs cluster version 2/);
  for (const args of [
    ['hardware', 'label', 'hw-0', 'rack=a'],
    ['hardware', 'drain', 'hw-0', '--reason', 'mid-upgrade'],
  ]) {
    const fleet = await newCli(args, upgraded);
    assert.equal(fleet.code, 1, `${args.join(' ')} mid-upgrade: ${fleet.stdout}${fleet.stderr}`);
    assert.match(fleet.stderr, /needs cluster version 3/);
  }
}

/**
 * A Kv write through `via` is recorded in the trail once, as the node that served it saw it:
 * by a separate audit.record while any voter runs the previous release (whose builds read
 * records only that way), in the write's own entry once the cluster runs at this build's
 * version (stateVersionAuditInEntry); every node applies both alike (the digests at the end).
 */
async function assertKvWriteAudited(key: string, via: readonly ProcNode[]): Promise<void> {
  const put = await newCli(['kv', 'put', key, 'v'], via);
  assert.equal(put.code, 0, `kv put ${key}: ${put.stdout}${put.stderr}`);
  const trail = await newCli(['-o', 'json', 'audit', 'list', '--kind', 'kv.put', '--limit', '1000']);
  assert.equal(trail.code, 0, trail.stdout + trail.stderr);
  const records = (JSON.parse(trail.stdout) as { entries: { target: string; outcome: string }[] }).entries;
  assert.deepEqual(
    records.filter((e) => e.target === key).map((e) => e.outcome),
    ['ok'],
    `the trail records kv put ${key} once`,
  );
}

/**
 * The same features, accepted once every node runs this build and the cluster is at its version;
 * every machine then has a lifecycle, derived from its workflows.
 */
async function assertGatedFeatureAccepted(): Promise<void> {
  const r = await newCli(['-o', 'json', 'workflow', 'retention', '--finished-max', '5000']);
  assert.equal(r.code, 0, `workflow retention after the upgrade: ${r.stdout}${r.stderr}`);
  assert.equal((JSON.parse(r.stdout) as { finishedMax: number }).finishedMax, 5000);
  const label = await newCli(['hardware', 'label', 'hw-0', 'rack=a']);
  assert.equal(label.code, 0, `hardware label after the upgrade: ${label.stdout}${label.stderr}`);
  const list = await newCli(['-o', 'json', 'hardware', 'list']);
  assert.equal(list.code, 0, list.stderr);
  const docs = (JSON.parse(list.stdout) as { hardware: { id: string; lifecycle?: { state: string } }[] })
    .hardware;
  for (const id of machines) {
    const state = docs.find((d) => d.id === id)?.lifecycle?.state;
    assert.ok(state === 'provisioning' || state === 'deployed', `${id} is ${String(state)}`);
  }
}

interface VersionDoc {
  clusterVersion: number;
  votersSupport: number | null;
  members: { member: string; build: string; stateVersion: number; applied: number }[];
}

/** `slipway cluster version -o json` by the new build's CLI. */
async function clusterVersionShown(): Promise<VersionDoc> {
  const r = await newCli(['-o', 'json', 'cluster', 'version']);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  return JSON.parse(r.stdout) as VersionDoc;
}

/** While `upgraded` run this build and the others the previous one: version 1, builds shown. */
async function assertMidUpgradeVersion(upgraded: readonly ProcNode[]): Promise<void> {
  const doc = await clusterVersionShown();
  const ids = new Set(upgraded.map((n) => n.id));
  assert.equal(doc.clusterVersion, 1, JSON.stringify(doc));
  assert.equal(doc.votersSupport, previousRelease.stateVersion, JSON.stringify(doc));
  assert.deepEqual(
    doc.members.map((m) => [m.member, m.build, m.stateVersion, m.applied]).sort(),
    theCluster()
      .nodes.map((n) =>
        ids.has(n.id)
          ? [n.id, buildVersion, stateVersionOfThisBuild, 1]
          : // A node of the previous build knows no cluster version: it shows none applied.
            [n.id, 'before 0.2.0', previousRelease.stateVersion, 0],
      )
      .sort(),
  );
}

function startWorker(id: string, first: number): ChildProcess {
  const c = theCluster();
  const addrs = c.apiAddrs();
  const servers = [...addrs.slice(first), ...addrs.slice(0, first)].join(',');
  const log = openSync(join(c.dir, `${id}.worker.log`), 'a');
  const args = ['worker', '--id', id, '--server', servers, '--journal-dir', join(c.dir, 'journal', id)];
  const p = spawn(process.execPath, [theBuild(previous).main, ...args, '--work-dir', c.dir], {
    stdio: ['ignore', log, log],
  });
  workers.push(p);
  return p;
}

/** Signals `p` and waits (bounded) until it has exited. */
async function stopProcess(p: ChildProcess, signal: NodeJS.Signals, deadlineMs = 30_000): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => p.once('exit', () => resolve()));
  p.kill(signal);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), deadlineMs);
  });
  const outcome = await Promise.race([exited, late]);
  clearTimeout(timer);
  if (outcome === 'late') {
    p.kill('SIGKILL');
    await exited;
    assert.fail(`process ${String(p.pid)} did not exit within ${deadlineMs} ms of ${signal}`);
  }
}

const templateYaml = (dir: string): string => `version: "0.1"
name: three-steps
global_timeout: 600
tasks:
  - name: provision
    worker: "{{ hardware.id }}"
    actions:
${Array.from(
  { length: actionsPerWorkflow },
  (_, a) => `      - name: step-${String(a + 1)}
        command: ["sh", "-c", "echo \\"$WF step-${String(a + 1)}\\" >> \\"$OUT\\"; sleep 0.3"]
        timeout: 60
        environment:
          WF: "{{ workflow.id }}"
          OUT: "${dir}/{{ hardware.id }}.out"`,
).join('\n')}`;

/**
 * Keeps every machine at `queuedPerMachine` unfinished workflows until stopped (or at
 * workflowsMax). A create that fails (its node stopping under it) is noted and tried again on
 * the next round; the replicated state, not this list, says which workflows exist. Each round
 * feeds every machine, whatever another machine's create answered.
 */
class WorkflowFeeder {
  readonly #client: ClusterClient;
  #stopping = false;
  #done: Promise<void> | undefined;
  created = 0;
  /** Creates refused because the machine's one workflow is still running (state version 3). */
  ownerRefusals = 0;
  readonly failures: string[] = [];

  constructor(client: ClusterClient) {
    this.#client = client;
  }

  start(): void {
    this.#done = this.#run();
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#done;
  }

  async #run(): Promise<void> {
    while (!this.#stopping && this.created < workflowsMax) {
      try {
        const list = await allWorkflows(this.#client);
        // Each machine on its own: a create refused for one must not leave the next unfed.
        for (const hardwareId of machines) await this.#feed(hardwareId, list);
      } catch (err) {
        this.failures.push((err as Error).message);
      }
      // Pacing, not synchronization: the next round looks at the state again.
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /**
   * Tops one machine up to queuedPerMachine unfinished workflows. From state version 3 the
   * machine's owner refuses a second one ("owned by workflow"): that is the answer expected
   * then, not a failure, and the machine is fed again once its workflow ends.
   */
  async #feed(hardwareId: string, list: readonly WorkflowRecord[]): Promise<void> {
    const open = list.filter(
      (w) => w.hardwareId === hardwareId && (w.state === 'PENDING' || w.state === 'RUNNING'),
    ).length;
    for (let k = open; k < queuedPerMachine && this.created < workflowsMax; k++) {
      try {
        await this.#client.control('workflowCreate', {
          template: 'three-steps',
          hardwareId,
          hardwareMap: {},
          netboot: false,
        });
        this.created++;
      } catch (err) {
        const message = (err as Error).message;
        if (/owned by workflow/.test(message)) this.ownerRefusals++;
        else this.failures.push(message);
        return;
      }
    }
  }
}

async function allWorkflows(client: ClusterClient): Promise<WorkflowRecord[]> {
  return allItems(
    (token) => client.control('workflowList', { local: false, hardwareId: '', continue: token }),
    (page) => page.workflows,
  );
}

/** Fails at once on a workflow that failed, timed out or was cancelled. */
function assertNoneFailed(list: readonly WorkflowRecord[]): void {
  const bad = list.filter((w) => w.state === 'FAILED' || w.state === 'TIMEOUT' || w.state === 'CANCELLED');
  assert.deepEqual(
    bad.map((w) => [w.id, w.state, w.message]),
    [],
    'no workflow may fail during the upgrade',
  );
}

/** Workflows finished with SUCCESS, per machine; fails on a workflow that failed. */
async function successesPerMachine(client: ClusterClient): Promise<Map<string, number>> {
  const list = await allWorkflows(client);
  assertNoneFailed(list);
  const done = new Map(machines.map((m) => [m, 0]));
  for (const w of list) if (w.state === 'SUCCESS') done.set(w.hardwareId, (done.get(w.hardwareId) ?? 0) + 1);
  return done;
}

/** Waits until `node`, restarted on `build` (its Status's), follows a leader and has caught up. */
async function waitRejoined(node: ProcNode, build: string): Promise<void> {
  const c = theCluster();
  let seen: StatusResponse | null = null;
  await waitFor(
    `${node.id} to answer on build "${build}" and follow a leader`,
    async () => {
      seen = await c.status(node);
      return seen !== null && seen.build === build && seen.leader !== '';
    },
    90_000,
    200,
  );
  let target = 0;
  await waitFor(
    "the leader's commit index",
    async () => {
      const leader = await c.waitForLeader(60_000);
      target = (await c.status(leader, 5000))?.commit ?? 0;
      return target > 0;
    },
    60_000,
    200,
  );
  await waitFor(
    `${node.id} to apply up to the leader's commit index ${String(target)}`,
    async () => {
      seen = await c.status(node);
      return seen !== null && seen.applied >= target && seen.stopped === '';
    },
    90_000,
    200,
  );
}

/** Workflows finished per machine, asked again while a call is cut short by a node stopping. */
async function successesNow(client: ClusterClient): Promise<Map<string, number>> {
  let now: Map<string, number> | undefined;
  await waitFor(
    'the workflow list',
    async () => {
      now = await successesPerMachine(client).catch((err: unknown) => {
        // A failed workflow fails the test; a failed call is asked again.
        if (err instanceof assert.AssertionError) throw err;
        return undefined;
      });
      return now !== undefined;
    },
    60_000,
    500,
  );
  return now!;
}

/**
 * Waits until every machine has finished `more` workflows beyond those finished now. Timed out,
 * it says what the lagging machines' unfinished workflows and lifecycles show: a stall seen in
 * CI after the last node rejoined left nothing else to go by.
 */
async function waitProgress(client: ClusterClient, more: number, what: string): Promise<void> {
  const before = await successesNow(client);
  const lagging = (now: Map<string, number>): string[] =>
    machines.filter((m) => (now.get(m) ?? 0) < (before.get(m) ?? 0) + more);
  try {
    await waitFor(what, async () => lagging(await successesNow(client)).length === 0, 120_000, 500);
  } catch (err) {
    const seen = await stallSeen(client, lagging(await successesNow(client))).catch(
      (e: unknown) => `(could not read the state: ${String(e)})`,
    );
    throw new Error(`${err instanceof Error ? err.message : String(err)}; ${seen}`, { cause: err });
  }
}

/** The unfinished workflows of `ids` (state, actions, message) and each machine's lifecycle. */
async function stallSeen(client: ClusterClient, ids: readonly string[]): Promise<string> {
  const list = await allWorkflows(client);
  const c = theCluster();
  const status = await c.status(await c.waitForLeader(10_000), 5000);
  const parts = [`cluster version ${String(status?.clusterVersion)}, leader ${String(status?.id)}`];
  for (const id of ids) {
    const open = list
      .filter((w) => w.hardwareId === id && w.state !== 'SUCCESS')
      .map(
        (w) =>
          `${w.id} ${w.state} [${w.actions.map((a) => `${a.state}#${String(a.attempt)}`).join(' ')}] ${w.message}`,
      );
    const { hardwareJson } = await client.control('hardwareGet', { id, local: false });
    const hw = JSON.parse(hardwareJson) as { lifecycle?: { state?: string } };
    parts.push(`${id}: lifecycle ${hw.lifecycle?.state ?? 'none'}; unfinished: ${open.join(', ') || 'none'}`);
  }
  return parts.join('; ');
}

/** Snapshots `node` has written so far, as its log tells (every run of it appends there). */
function snapshotsWritten(node: ProcNode): number {
  const log = readFileSync(join(theCluster().dir, `${node.id}.log`), 'utf8');
  return log.split('\n').filter((l) => l.includes('"msg":"took a snapshot and compacted the log"')).length;
}

/**
 * A follower of the previous build that was down while a leader of this build compacted its log
 * past it catches up from that leader's snapshot (written in the format the cluster's version
 * allows, which the old build reads). The leader snapshots every 50 entries and keeps 5,000
 * behind each snapshot (src/raft/node.ts), so the follower, stopped by SIGTERM, misses a little
 * more than that: puts of a few keys, overwritten. It restarts on the previous build.
 */
async function snapshotToOldFollower(follower: ProcNode, leader: ProcNode): Promise<void> {
  const c = theCluster();
  const p = follower.proc;
  assert.ok(p !== null, `${follower.id} runs`);
  const missed = (await c.status(leader, 5000))?.commit ?? 0;
  const installs = snapshotsInstalled(follower);
  await stopProcess(p, 'SIGTERM');
  follower.proc = null;
  const target = missed + 5_000 + 2 * 50;
  const writer = new ClusterClient([leader.apiAddr], { timeoutMs: 20_000 });
  let filled = false;
  const put = async (lane: number): Promise<void> => {
    for (let i = 0; !filled; i++) {
      const key = `filler-${String(lane)}`;
      await writer.call('put', { key, value: Buffer.from(String(i)), session: undefined });
    }
  };
  const lanes = Array.from({ length: 32 }, (_, lane) => put(lane));
  try {
    await waitFor(
      `${leader.id} to apply entry ${String(target)}, a snapshot past what ${follower.id} missed`,
      async () => ((await c.status(leader, 5000))?.applied ?? 0) >= target,
      180_000,
      200,
    );
  } finally {
    filled = true;
    await Promise.all(lanes);
    writer.close();
  }
  c.start(follower);
  await waitRejoined(follower, previousRelease.build);
  assert.ok(
    snapshotsInstalled(follower) > installs,
    `${follower.id} installed a snapshot from the leader (its log: ${c.dir}/${follower.id}.log)`,
  );
  const sent = readFileSync(join(c.dir, `${leader.id}.log`), 'utf8')
    .split('\n')
    .filter((l) => l.includes('"msg":"sending a snapshot to a lagging follower"'));
  assert.ok(
    sent.some((l) => l.includes(`"to":"${follower.id}"`)),
    `${leader.id}, on the new build, sent ${follower.id} the snapshot (its log: ${c.dir}/${leader.id}.log)`,
  );
}

/** Snapshots `node` has installed from a leader so far, as its log tells. */
function snapshotsInstalled(node: ProcNode): number {
  const log = readFileSync(join(theCluster().dir, `${node.id}.log`), 'utf8');
  return log.split('\n').filter((l) => l.includes('"msg":"installed a snapshot from the leader"')).length;
}

/** Hands leadership to `node` (the new build's `slipway leader transfer`) and waits until it leads. */
async function leadWith(node: ProcNode): Promise<void> {
  const c = theCluster();
  await waitFor(
    `${node.id} to lead`,
    async () => {
      const leader = await c.waitForLeader(60_000);
      if (leader.id === node.id) return true;
      await newCli(['leader', 'transfer', '--to', node.id]);
      return false;
    },
    60_000,
    500,
  );
}

/** Every node's Status with its digest, once all three answer at the same applied index. */
async function convergedDigests(): Promise<StatusResponse[]> {
  const c = theCluster();
  let seen: StatusResponse[] = [];
  await waitFor(
    'every node to reach the same applied index',
    async () => {
      const all = await Promise.all(c.nodes.map((n) => c.status(n, 10_000, true)));
      if (all.some((s) => s === null)) return false;
      seen = all as StatusResponse[];
      return new Set(seen.map((s) => s.applied)).size === 1;
    },
    60_000,
    200,
  );
  return seen;
}

test(
  'a cluster running workflows is upgraded node by node from the previous release: nothing fails, runs twice or diverges',
  { timeout: 900_000 },
  async (t) => {
    const started = Date.now();
    const phase = (what: string): void => t.diagnostic(`${String(Date.now() - started)} ms: ${what}`);
    const old = theBuild(previous);
    const version = await runBuild(old, ['--version']);
    assert.equal(version.stdout.trim(), previousRelease.packageVersion, version.stderr);

    cluster = new ProcessCluster(3, ['--snapshot-entries', '50'], old.main);
    // Upgrades stop each node with SIGTERM: what it runs on its way out is counted.
    cluster.coverage = true;
    const c = cluster;
    c.startAll();
    await c.waitForLeader(60_000);
    phase('3 nodes on the previous release agree on a leader');

    const client = new ClusterClient(c.apiAddrs(), { timeoutMs: 20_000 });
    const feeder = new WorkflowFeeder(client);
    try {
      await client.control('templateCreate', { source: templateYaml(c.dir), replace: false });
      for (const [i, id] of machines.entries()) {
        const mac = `02:00:00:00:01:${String(i).padStart(2, '0')}`;
        const documentJson = JSON.stringify({
          id,
          interfaces: [{ mac, ip: `10.78.0.${String(10 + i)}/24` }],
        });
        await client.control('hardwareCreate', { documentJson, replace: false });
      }
      machines.forEach((id, i) => startWorker(id, i));
      feeder.start();
      await waitProgress(client, 1, 'every machine to finish a workflow on the previous release');
      phase('workers of the previous release run workflows');
      await assertMidUpgradeVersion([]);

      // Who leads once each node has been replaced: first the upgraded node, leading followers
      // and workers of the previous build; then the last node of the previous build, leading
      // upgraded followers (its SIGTERM then hands leadership to one of them).
      const leaders = [c.nodes[0], c.nodes[2]];
      const upgraded: ProcNode[] = [];
      for (const [k, node] of c.nodes.entries()) {
        await waitFor(
          `${node.id} to write a snapshot on the previous build (for the new one to open)`,
          () => snapshotsWritten(node) > 0,
          60_000,
          200,
        );
        await waitFor(
          `slipway upgrade check --member ${node.id} to say it may be restarted`,
          async () => (await newCli(['upgrade', 'check', '--member', node.id])).code === 0,
          90_000,
          500,
        );
        const p = node.proc;
        assert.ok(p !== null, `${node.id} runs`);
        await stopProcess(p, 'SIGTERM');
        node.proc = null;
        c.nodeBins.set(node.id, theBuild(current).main);
        c.start(node);
        await waitRejoined(node, buildVersion);
        upgraded.push(node);
        phase(`${node.id} runs the new build and has caught up`);
        await waitProgress(client, 1, `every machine to finish a workflow after ${node.id} rejoined`);
        const lead = leaders[k];
        if (lead !== undefined) {
          await leadWith(lead);
          await waitProgress(client, 1, `every machine to finish a workflow under ${lead.id}`);
          phase(`every machine finished a workflow under ${lead.id} as leader`);
        }
        if (k === 0) {
          await snapshotToOldFollower(c.nodes[2]!, node);
          phase(`${c.nodes[2]!.id}, on the previous build, caught up from a snapshot of ${node.id}`);
          await waitProgress(client, 1, 'every machine to finish a workflow after the snapshot');
        }
        if (upgraded.length < c.nodes.length) {
          await assertMidUpgradeVersion(upgraded);
          await assertGatedFeatureRefused(upgraded);
          await assertKvWriteAudited(`mid-upgrade-${node.id}`, upgraded);
        }
      }

      // Every voter runs this build: the leader raises the cluster version within seconds.
      await waitFor(
        `every node to apply cluster version ${String(stateVersionOfThisBuild)}`,
        async () =>
          (await Promise.all(c.nodes.map((n) => c.status(n)))).every(
            (s) => s?.clusterVersion === stateVersionOfThisBuild,
          ),
        30_000,
        200,
      );
      const doc = await clusterVersionShown();
      assert.equal(doc.clusterVersion, stateVersionOfThisBuild, JSON.stringify(doc));
      assert.equal(doc.votersSupport, stateVersionOfThisBuild, JSON.stringify(doc));
      for (const m of doc.members) {
        assert.deepEqual(
          [m.build, m.stateVersion, m.applied],
          [buildVersion, stateVersionOfThisBuild, stateVersionOfThisBuild],
          m.member,
        );
      }
      phase(`the cluster runs at version ${String(stateVersionOfThisBuild)}`);
      await assertGatedFeatureAccepted();
      await assertKvWriteAudited('after-upgrade', c.nodes);

      // The end: no new workflows, every one finished, then the nodes compared.
      await feeder.stop();
      const list = await (async () => {
        let last: WorkflowRecord[] = [];
        await waitFor(
          'every workflow to finish',
          async () => {
            last = await allWorkflows(client);
            assertNoneFailed(last);
            return last.every((w) => w.state === 'SUCCESS');
          },
          120_000,
          500,
        );
        return last;
      })();
      phase(
        `${String(list.length)} workflows succeeded; creates that failed and were made again: ` +
          `${String(feeder.failures.length)}; refused while the machine's workflow ran: ${String(feeder.ownerRefusals)}`,
      );
      t.diagnostic(`create failures: ${JSON.stringify(feeder.failures)}`);

      // No action ran twice, none was skipped: each line once, for exactly the listed workflows.
      for (const hardwareId of machines) {
        const file = join(c.dir, `${hardwareId}.out`);
        const lines = existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n') : [];
        const counts = new Map<string, number>();
        for (const l of lines) counts.set(l, (counts.get(l) ?? 0) + 1);
        const expected = new Set<string>();
        for (const w of list.filter((x) => x.hardwareId === hardwareId)) {
          for (let a = 1; a <= actionsPerWorkflow; a++) expected.add(`${w.id} step-${String(a)}`);
          assert.deepEqual(
            w.actions.map((a) => [a.state, a.attempt]),
            Array.from({ length: actionsPerWorkflow }, () => ['SUCCESS', 1]),
            `${w.id} on ${hardwareId}`,
          );
        }
        assert.deepEqual([...counts.keys()].sort(), [...expected].sort(), `${hardwareId} ran every action`);
        for (const [line, n] of counts)
          assert.equal(n, 1, `"${line}" ran ${String(n)} times on ${hardwareId}`);
      }

      // Nothing diverged: the workers idle, the nodes at one applied index hold one state.
      for (const w of workers) await stopProcess(w, 'SIGTERM');
      const statuses = await convergedDigests();
      for (const s of statuses) {
        assert.equal(s.stopped, '', s.id);
        assert.match(s.stateDigest, /^[0-9a-f]{64}$/, s.id);
      }
      assert.equal(
        new Set(statuses.map((s) => s.stateDigest)).size,
        1,
        `state digests at applied index ${String(statuses[0]?.applied)}: ${statuses
          .map((s) => `${s.id} ${s.stateDigest}`)
          .join(', ')}`,
      );
      phase(`equal state digests at applied index ${String(statuses[0]?.applied)}`);
    } finally {
      await feeder.stop();
      client.close();
    }
  },
);
