// Goal: a node never runs half-started. A start that fails at any step it was configured for
// (the API address taken, the raft address taken, a boot service listen address no interface can
// ever hold, the VIP manager's checks, the metrics address taken) ends the process at once,
// non-zero, with the reason on stderr, and leaves nothing listening. A boot service that is
// configured right but cannot serve yet (its address is not on this host) is no failed start: the
// node runs and says, in `cluster status`, grpc.health.v1 (slipway.boot.*) and metrics, what it
// waits for, and its health is not "ok" meanwhile.
// Method: real `slipway server` processes on loopback, one per case; a port is taken by a listener
// the test holds; after the exit every port the node was given is bound again by the test.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { credentials } from '@grpc/grpc-js';
import { HealthCheckResponse_ServingStatus, HealthClient } from '../../src/gen/health.js';
import { nextPort, runSlipway, ProcessCluster } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'slipway-start-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A start that fails must end well within this, tsx's own start included. */
const exitWithinMs = 45_000;

interface Ports {
  readonly raft: number;
  readonly api: number;
  readonly metrics: number;
}

function ports(): Ports {
  return { raft: nextPort(), api: nextPort(), metrics: nextPort() };
}

function serverArgs(id: string, p: Ports, extra: readonly string[] = []): string[] {
  return [
    ...['server', '--id', id, '--data-dir', join(dir, id), '--insecure'],
    ...['--raft-addr', `127.0.0.1:${p.raft}`, '--api-addr', `127.0.0.1:${p.api}`],
    ...['--peers', `${id}=127.0.0.1:${p.raft}`, '--metrics-addr', `127.0.0.1:${p.metrics}`],
    ...extra,
  ];
}

function hold(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(port, '127.0.0.1', () => resolve(s));
  });
}

function release(s: Server): Promise<void> {
  return new Promise((resolve) => s.close(() => resolve()));
}

/** Every port of `p` but `except` can be listened on again: the node left no listener behind. */
async function assertFree(p: Ports, except?: number): Promise<void> {
  for (const port of [p.raft, p.api, p.metrics]) {
    if (port === except) continue;
    const s = await hold(port);
    await release(s);
  }
}

/** Runs a node meant to fail; returns its exit code, stderr and how long it ran. */
async function failedStart(args: readonly string[]): Promise<{ code: number; stderr: string; ms: number }> {
  const t0 = Date.now();
  const r = await runSlipway(args, { timeoutMs: exitWithinMs });
  return { code: r.code, stderr: r.stderr, ms: Date.now() - t0 };
}

describe('a node whose start fails', { concurrency: 1 }, () => {
  it('exits 1 at once when its API address is taken, and releases raft and metrics', async () => {
    const p = ports();
    const taken = await hold(p.api);
    try {
      const r = await failedStart(serverArgs('api1', p));
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, new RegExp(`cannot listen for the API on 127\\.0\\.0\\.1:${p.api}`));
      await assertFree(p, p.api);
    } finally {
      await release(taken);
    }
  });

  it('exits 1 at once when its raft address is taken', async () => {
    const p = ports();
    const taken = await hold(p.raft);
    try {
      const r = await failedStart(serverArgs('raft1', p));
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, new RegExp(`cannot start the raft member on 127\\.0\\.0\\.1:${p.raft}`));
      await assertFree(p, p.raft);
    } finally {
      await release(taken);
    }
  });

  it('exits 1 at once when its metrics address is taken, and releases raft and the API', async () => {
    const p = ports();
    const taken = await hold(p.metrics);
    try {
      const r = await failedStart(serverArgs('metrics1', p));
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, new RegExp(`cannot serve metrics on 127\\.0\\.0\\.1:${p.metrics}`));
      await assertFree(p, p.metrics);
    } finally {
      await release(taken);
    }
  });

  it('exits 2 before starting anything for a boot service address no interface can hold', async () => {
    for (const [flag, addr, why] of [
      ['--tftp-addr', '224.0.0.1:6969', /224\.0\.0\.1 is a multicast address/],
      ['--dhcp-addr', '300.1.2.3:6767', /300\.1\.2\.3 is not an IPv4 address/],
      ['--http-addr', 'boot.example:8080', /boot\.example is not an IPv4 address or a bracketed IPv6/],
    ] as const) {
      const p = ports();
      const r = await failedStart(serverArgs('boot1', p, [flag, addr]));
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, why);
      assert.match(r.stderr, /give 0\.0\.0\.0 \(every address\) or an address of this host/);
      await assertFree(p);
    }
  });

  it("exits 2 before starting anything when the VIP manager's checks fail", async () => {
    const p = ports();
    const r = await failedStart(
      serverArgs('vip1', p, ['--vip', '10.99.0.100', '--vip-interface', 'nosuch0']),
    );
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /--vip-interface nosuch0: no such network interface/);
    await assertFree(p);
  });
});

describe('a node whose boot service waits for its address', () => {
  const cluster = new ProcessCluster(1);
  // 192.0.2.0/24 is for documentation: never an address of this host.
  const httpAddr = `192.0.2.77:${nextPort()}`;
  cluster.extraArgs.push('--http-addr', httpAddr, '--tftp-addr', `127.0.0.1:${nextPort()}`);
  after(async () => {
    for (const n of cluster.nodes) await cluster.kill(n);
    rmSync(cluster.dir, { recursive: true, force: true });
  });

  it('runs, and says what it waits for in status, health and metrics', async () => {
    cluster.startAll();
    const node = cluster.nodes[0]!;
    await cluster.waitForLeader(60_000);
    // The boot services start once raft and the API serve.
    await waitFor(
      'the boot services',
      async () => (await cluster.status(node))?.bootServices.length === 2,
      20_000,
      100,
    );
    const status = await cluster.status(node);
    assert.deepEqual(
      status?.bootServices.map((b) => [b.name, b.state, b.reason]),
      [
        ['tftp', 1, ''],
        ['http', 2, 'address 192.0.2.77 is not on this host (yet)'],
      ],
    );
    const cli = await runSlipway(['-o', 'json', 'cluster', 'status'], {
      env: { SLIPWAY_SERVER: node.apiAddr },
    });
    const row = (JSON.parse(cli.stdout) as { nodes: { health: string; reason: string; boot: string }[] })
      .nodes[0];
    assert.equal(row?.health, 'degraded');
    assert.equal(row?.reason, 'http waiting: address 192.0.2.77 is not on this host (yet)');
    assert.equal(row?.boot, 'tftp serving, http waiting');
    assert.equal(cli.code, 1, 'no node is healthy');

    const health = new HealthClient(node.apiAddr, credentials.createInsecure());
    const check = (service: string): Promise<number> =>
      new Promise((resolve, reject) =>
        health.check({ service }, (err, res) => (err === null ? resolve(res.status) : reject(err))),
      );
    try {
      assert.equal(await check(''), HealthCheckResponse_ServingStatus.SERVING, 'the API serves');
      assert.equal(await check('slipway.boot.tftp'), HealthCheckResponse_ServingStatus.SERVING);
      assert.equal(await check('slipway.boot.http'), HealthCheckResponse_ServingStatus.NOT_SERVING);
      assert.equal(await check('slipway.boot'), HealthCheckResponse_ServingStatus.NOT_SERVING);
      await assert.rejects(check('slipway.boot.dhcp'), /unknown service/, 'DHCP is not configured');
    } finally {
      health.close();
    }
    let text = '';
    await waitFor(
      'the boot gauge',
      async () => {
        text = await (await fetch(`http://${node.metricsAddr}/metrics`)).text();
        return text.includes('slipway_boot_service_state{');
      },
      10_000,
      100,
    );
    assert.match(text, /slipway_boot_service_state\{service="http",state="waiting"\} 1/);
    assert.match(text, /slipway_boot_service_state\{service="tftp",state="serving"\} 1/);
  });
});
