// Goal: an HTTP boot download through the VIP survives its leader's link flapping. A client
// (curl, real) downloads a registered artifact from the VIP; mid-download the leader's
// provisioning link is cut, the VIP moves to a follower that serves, the client gives up on the
// stalled connection and resumes with Range (curl -C -) against the VIP, now the new leader, which
// answers 206 with the rest while the old leader's link comes back; the file's SHA-256 is the
// artifact's. The artifact's ETag is its digest on
// every node, so a resume on another node is a resume of the same bytes.
// Method: two segments, as in boot-leadership.test.ts: management (namespace lan's br0: raft and
// the API on 10.86.0.11-13, the CLI in ops) and provisioning (namespace plan's br0: prov0 on
// 10.87.0.11-13, the VIP 10.87.0.100, HTTP boot on 8080; the client c1 at 10.87.0.50). curl is
// rate-limited (4 MiB/s) so the cut lands mid-download, and gives up on a stalled connection
// after 2 s (--speed-limit/--speed-time), as a boot loader's timeout would; each resume is a new
// curl with -C -. Every wait has a deadline.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, it } from 'node:test';
import { NetnsLab, requireCommands, type LabProcess } from '../support/netns.js';
import {
  addProvisioningLan,
  NetnsCluster,
  setProvisioningLink,
  type NetnsNode,
} from '../support/netns-cluster.js';
import { waitFor } from '../support/wait.js';
import { httpStalledMsDefault } from '../../src/boot/http/server.js';

const ids = ['n1', 'n2', 'n3'] as const;
type Id = (typeof ids)[number];
const mgmt: Record<Id, string> = { n1: '10.86.0.11', n2: '10.86.0.12', n3: '10.86.0.13' };
const prov: Record<Id, string> = { n1: '10.87.0.11', n2: '10.87.0.12', n3: '10.87.0.13' };
const vip = '10.87.0.100';
const client = '10.87.0.50';
const artifact = { name: 'rootfs-resume.img', bytes: 12 * 1024 * 1024 };
const url = `http://${vip}:8080/artifacts/${artifact.name}`;
/** The VIP's move after a cut: the boot leadership round, the handover; a loaded machine. */
const moveMs = 10_000;

let lab: NetnsLab;
let cluster: NetnsCluster;
const ns: Record<string, string> = {};
const content = randomBytes(artifact.bytes);
const sha256 = createHash('sha256').update(content).digest('hex');

before(async () => {
  await requireCommands({ ip: 'iproute2', curl: 'curl' });
  lab = await NetnsLab.create();
  Object.assign(
    ns,
    await lab.addLan({
      ...Object.fromEntries(ids.map((id) => [id, { addresses: [`${mgmt[id]}/24`] }])),
      ops: { addresses: ['10.86.0.5/24'] },
    }),
  );
  Object.assign(
    ns,
    await addProvisioningLan(lab, ns as Record<Id, string>, prov, { addresses: [`${client}/24`] }),
  );
  // A small receive window, as a boot loader's: otherwise the kernel's buffers may hold the whole
  // artifact before the cut, and the first download completes however the link fares.
  await lab.check(ns['c1']!, ['sysctl', '-q', '-w', 'net.ipv4.tcp_rmem=4096 65536 131072']);
  cluster = await NetnsCluster.start(
    lab,
    ids.map((id) => ({
      id,
      ns: ns[id]!,
      address: mgmt[id],
      args: [
        ...['--dhcp-interface', 'prov0', '--vip', vip, '--vip-interface', 'prov0'],
        ...['--http-addr', '0.0.0.0:8080'],
      ],
    })),
  );
});

after(async () => {
  await lab.destroy();
});

async function setLink(id: Id, up: boolean): Promise<void> {
  await setProvisioningLink(lab, ns['plan']!, id, up);
}

async function vipHolder(): Promise<Id | undefined> {
  for (const id of ids) {
    const r = await lab.run(ns[id]!, ['ip', '-4', '-o', 'addr', 'show', 'dev', 'prov0']);
    if (r.stdout.includes(` ${vip}/`)) return id;
  }
  return undefined;
}

const nodeOf = (id: string): NetnsNode => cluster.nodes.find((n) => n.id === id)!;

/** curl from c1 into `file`, resuming from its size (-C -); prints the status code last. */
function curl(file: string): LabProcess {
  return lab.spawn(ns['c1']!, [
    ...['curl', '-sS', '-C', '-', '-o', file, '-w', '\nstatus=%{http_code}\n'],
    ...['--limit-rate', '4M', '--speed-limit', '1', '--speed-time', '2', '--connect-timeout', '3', url],
  ]);
}

/** The `HTTP boot request` records a node logged for the artifact from the client. */
function servedBy(id: string): { status: number; bytes: number }[] {
  return nodeOf(id)
    .logRecords()
    .filter(
      (r) =>
        r.msg === 'HTTP boot request' &&
        r['url'] === `/artifacts/${artifact.name}` &&
        r['remoteAddress'] === client,
    )
    .map((r) => ({ status: Number(r['status']), bytes: Number(r['bytes']) }));
}

it('a download through the VIP resumes with Range on the new leader after the old one is cut', async () => {
  const source = path.join(lab.dir, artifact.name);
  writeFileSync(source, content);
  await cluster.waitForLeader(ns['ops']!, 30_000);
  await cluster.slipwayOk(ns['ops']!, ['artifact', 'add', source]);
  // Every node holds its verified copy before the download starts: each could be the next leader.
  for (const id of ids) {
    await waitFor(
      `${id} serving the artifact`,
      async () => {
        const r = await lab.run(ns['c1']!, [
          ...['curl', '-s', '-o', '/dev/null', '-I', '-w', '%{http_code}'],
          `http://${prov[id]}:8080/artifacts/${artifact.name}`,
        ]);
        return r.stdout === '200';
      },
      30_000,
      200,
    );
  }
  const first = await vipHolder();
  assert.ok(first !== undefined, 'a node holds the VIP');

  const file = path.join(lab.dir, 'download.img');
  const size = (): number => {
    try {
      return statSync(file).size;
    } catch {
      return 0;
    }
  };
  const attempt = curl(file);
  await waitFor('2 MiB downloaded', () => size() >= 2 * 1024 * 1024, 20_000, 20);
  const cutAt = size();
  const t0 = Date.now();
  await setLink(first, false);
  let next: Id | undefined;
  await waitFor(
    'the VIP on another node',
    async () => {
      next = await vipHolder();
      return next !== undefined && next !== first;
    },
    moveMs,
    20,
  );
  const movedMs = Date.now() - t0;
  // The client gives up on the stalled connection, as a boot loader's timeout would.
  const interrupted = await attempt.exited;
  assert.notEqual(interrupted.code, 0, `the first download was cut off:\n${attempt.output}`);
  const partial = size();
  assert.ok(partial > 0 && partial < artifact.bytes, `a part downloaded (${String(partial)} bytes)`);

  const statuses: string[] = [];
  let linkBack = false;
  for (let tries = 0; size() < artifact.bytes; tries++) {
    assert.ok(tries < 5, `the download did not finish in 5 resumes:\n${statuses.join('\n')}`);
    const resumed = curl(file);
    if (!linkBack) {
      // The old leader's link comes back while the resume runs: a flap. Nothing moves back.
      const moving = (): boolean => size() > partial || !resumed.running;
      await waitFor('the resume under way', moving, 10_000, 20);
      await setLink(first, true);
      linkBack = true;
    }
    const { code } = await resumed.exited;
    statuses.push(`exit ${String(code)} ${/status=(\d+)/.exec(resumed.output)?.[1] ?? '?'}`);
  }
  if (!linkBack) await setLink(first, true);
  console.log(
    `cut ${first} at ${String(cutAt)} bytes; the VIP on ${String(next)} after ${String(movedMs)} ms; ` +
      `${String(partial)} bytes before the resume; resumes: ${statuses.join(', ')}`,
  );
  assert.match(statuses[0] ?? '', /^exit 0 206$/, 'the first resume answered 206 with the rest');
  assert.equal(createHash('sha256').update(readFileSync(file)).digest('hex'), sha256);
  await waitFor('the resume logged', () => servedBy(next!).some((r) => r.status === 206), 5000, 50);
  const resume = servedBy(next!).find((r) => r.status === 206)!;
  assert.equal(resume.bytes, artifact.bytes - partial, 'the new leader sent the rest, not the whole');
  // The cut-off download is logged when its connection closes: once the link is back and the
  // client's kernel answers the old leader's retransmission with a reset, or at the latest when
  // the old leader's HTTP server closes it as stalled (src/boot/http/server.ts, 60 s without a
  // byte moving; the old leader's retransmissions, from the VIP it no longer holds, have been
  // seen not to arrive within 30 s).
  await waitFor(
    `the download that began on ${first} logged there`,
    () => servedBy(first).some((r) => r.status === 200),
    httpStalledMsDefault + 15_000,
    50,
  );
  assert.ok(
    servedBy(first).some((r) => r.status === 200),
    `the download began on ${first}, the leader then`,
  );
});
