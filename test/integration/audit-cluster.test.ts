// Goal: prove the audit trail end to end: operator and admin calls made with named tokens show in
// `slipway audit list -o json` with user, role, address, kind, target and outcome; a call
// refused by role is recorded, an unauthenticated one is not; the filters work; the retention
// is set by an admin call; and a BMC password given with `hardware create
// --bmc-credentials-file` appears nowhere in the audit output, `hardware get` output or logs.
// The state digest of `cluster status --digest` needs an operator: a viewer's ask is refused,
// saying why, and recorded.
// Method: one real `slipway server` process with tokens required, driven only by the `slipway`
// command as an operator would.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ProcessCluster, runSlipway, type CliResult } from '../support/process-cluster.js';

const adminToken = 'admin-token-for-the-audit-test';
const bmcPassword = 'Sw0rdfish-bmc-pw';

interface Entry {
  readonly seq: number;
  readonly time: string;
  readonly user: string;
  readonly role: string;
  readonly address: string;
  readonly method: string;
  readonly kind: string;
  readonly target: string;
  readonly outcome: string;
  readonly message?: string;
}

let cluster: ProcessCluster;

/** `slipway ARGS` against the cluster with the token in `tokenFile`. */
function slipway(tokenFile: string, args: string[]): Promise<CliResult> {
  return runSlipway(['--server', cluster.apiAddrs().join(','), '--token-file', tokenFile, ...args]);
}

function tokenFile(name: string, token: string): string {
  const file = join(cluster.dir, `${name}.token`);
  writeFileSync(file, token);
  return file;
}

async function auditList(file: string, ...filters: string[]): Promise<Entry[]> {
  const res = await slipway(file, ['-o', 'json', 'audit', 'list', ...filters]);
  assert.equal(res.code, 0, res.stderr);
  return (JSON.parse(res.stdout) as { entries: Entry[] }).entries;
}

let adminFile: string;

before(async () => {
  cluster = new ProcessCluster(1);
  cluster.requireToken(adminToken);
  cluster.startAll();
  await cluster.waitForLeader();
  adminFile = tokenFile('admin', adminToken);
});

after(async () => {
  await cluster.destroy();
});

describe('audit trail', () => {
  test('records who did what from where with its outcome, and never a secret', async () => {
    // Named tokens for an operator and a viewer, made by the bootstrap admin.
    const made: Record<string, string> = {};
    for (const [name, role] of [
      ['alice', 'operator'],
      ['victor', 'viewer'],
    ] as const) {
      const res = await slipway(adminFile, ['token', 'create', '--name', name, '--role', role]);
      assert.equal(res.code, 0, res.stderr);
      made[name] = res.stdout.trim();
    }
    const alice = tokenFile('alice', made['alice'] ?? '');
    const victor = tokenFile('victor', made['victor'] ?? '');
    // token list: names, roles and times, never a token or its hash; admins only.
    const listed = await slipway(adminFile, ['-o', 'json', 'token', 'list']);
    assert.equal(listed.code, 0, listed.stderr);
    const tokens = (
      JSON.parse(listed.stdout) as { tokens: { name: string; role: string; created: string }[] }
    ).tokens;
    assert.deepEqual(
      tokens.map((t) => `${t.name} ${t.role}`),
      ['alice operator', 'victor viewer'],
    );
    assert.ok(tokens.every((t) => !Number.isNaN(Date.parse(t.created))));
    for (const secret of Object.values(made)) assert.ok(!listed.stdout.includes(secret));
    assert.equal((await slipway(victor, ['token', 'list'])).code, 1, 'a viewer may not list tokens');
    const credentials = join(cluster.dir, 'bmc.credentials');
    writeFileSync(credentials, `root:${bmcPassword}\n`);

    const created = await slipway(alice, [
      ...['hardware', 'create', '--id', 'm1', '--mac', '02:00:00:00:00:01', '--ip', '10.9.0.11/24'],
      ...['--bmc', 'ipmi://127.0.0.1:6230', '--bmc-credentials-file', credentials],
    ]);
    assert.equal(created.code, 0, created.stderr);
    // Refused by apply (it exists), by role (a viewer), and without a token at all.
    const again = await slipway(alice, [
      'hardware',
      'create',
      '--id',
      'm1',
      '--mac',
      '02:00:00:00:00:01',
      '--ip',
      '10.9.0.11/24',
    ]);
    assert.notEqual(again.code, 0);
    const denied = await slipway(victor, ['hardware', 'delete', 'm1']);
    assert.equal(denied.code, 1, denied.stderr);
    const anonymous = await runSlipway(
      ['--server', cluster.apiAddrs().join(','), 'hardware', 'delete', 'm1'],
      {
        env: { SLIPWAY_TOKEN: '' },
      },
    );
    assert.notEqual(anonymous.code, 0);
    const kv = await slipway(alice, ['kv', 'put', 'site', 'lab-1']);
    assert.equal(kv.code, 0, kv.stderr);

    const entries = await auditList(adminFile);
    const summary = entries.map((e) => `${e.user} ${e.role} ${e.kind} ${e.target} ${e.outcome}`).reverse();
    assert.deepEqual(summary, [
      'bootstrap-admin admin token.put alice (operator) ok',
      'bootstrap-admin admin token.put victor (viewer) ok',
      'victor viewer token.list  PERMISSION_DENIED',
      'alice operator hardware.put m1 ok',
      // Every lifecycle transition is in the trail, with who caused it (docs/decisions/0028).
      'alice operator hardware.transition m1 (new) → enrolled (register) ok',
      'alice operator hardware.put m1 E_EXISTS',
      'victor viewer hardware.delete m1 PERMISSION_DENIED',
      'alice operator kv.put site ok',
    ]);
    for (const e of entries) {
      assert.match(e.address, /^(ipv4:)?127\.0\.0\.1:\d+$/, `address of ${e.kind}: ${e.address}`);
      assert.ok(!Number.isNaN(Date.parse(e.time)));
    }
    assert.equal(entries.find((e) => e.kind === 'hardware.put')?.method, 'Control/HardwareCreate');
    assert.match(entries.find((e) => e.outcome === 'PERMISSION_DENIED')?.message ?? '', /role viewer/);

    // Filters: by user, by kind, by time.
    assert.deepEqual(
      (await auditList(adminFile, '--user', 'alice')).map((e) => e.kind),
      ['kv.put', 'hardware.put', 'hardware.transition', 'hardware.put'],
    );
    assert.equal((await auditList(adminFile, '--kind', 'token.put')).length, 2);
    assert.equal((await auditList(adminFile, '--since', '1h')).length, entries.length);
    assert.equal((await auditList(adminFile, '--until', '2000-01-01')).length, 0);
    const paged = await slipway(adminFile, ['-o', 'json', 'audit', 'list', '--limit', '2']);
    assert.equal((JSON.parse(paged.stdout) as { entries: Entry[]; continue?: string }).entries.length, 2);
    assert.ok((JSON.parse(paged.stdout) as { continue?: string }).continue !== undefined);

    // Bad input is a usage error; the trail is admin only.
    const badTime = await slipway(adminFile, ['audit', 'list', '--since', 'yesterday']);
    assert.equal(badTime.code, 2);
    assert.match(badTime.stderr, /--since must be an ISO 8601 time .* or a duration ago/);
    const notAdmin = await slipway(alice, ['audit', 'list']);
    assert.equal(notAdmin.code, 1);
    assert.match(notAdmin.stderr, /needs admin/);

    // Retention is an audited admin call, and bounds the trail.
    const retention = await slipway(adminFile, ['-o', 'json', 'audit', 'retention', '--keep', '3']);
    assert.equal(retention.code, 0, retention.stderr);
    assert.deepEqual(JSON.parse(retention.stdout), { entries: 3, days: 0 });
    // The names before --keep and --max-age still set it, to the same document.
    const old = await slipway(adminFile, [
      '-o',
      'json',
      'audit',
      'retention',
      '--entries',
      '3',
      '--days',
      '0',
    ]);
    assert.deepEqual(JSON.parse(old.stdout), { entries: 3, days: 0 }, old.stderr);
    const kept = await auditList(adminFile);
    assert.equal(kept.length, 3);
    assert.equal(kept[0]?.kind, 'audit.retention');

    // The BMC password is nowhere: not in the trail (tables too), `hardware get`, or the log.
    const everything = [
      (await slipway(adminFile, ['-o', 'json', 'audit', 'list', '--limit', '1000'])).stdout,
      (await slipway(adminFile, ['audit', 'list'])).stdout,
      (await slipway(adminFile, ['-o', 'json', 'hardware', 'get', 'm1'])).stdout,
      readFileSync(join(cluster.dir, 'n1.log'), 'utf8'),
    ];
    for (const text of everything) assert.ok(!text.includes(bmcPassword), 'the BMC password leaked');
    assert.ok(!JSON.stringify(entries).includes(made['alice'] ?? 'x'), 'a token leaked');
  });

  test('cluster status --digest: a viewer is refused, naming the role and why; an operator gets it', async () => {
    const made: Record<string, string> = {};
    for (const [name, role] of [
      ['olga', 'operator'],
      ['vera', 'viewer'],
    ] as const) {
      const res = await slipway(adminFile, ['token', 'create', '--name', name, '--role', role]);
      assert.equal(res.code, 0, res.stderr);
      made[name] = res.stdout.trim();
    }
    const olga = tokenFile('olga', made['olga'] ?? '');
    const vera = tokenFile('vera', made['vera'] ?? '');

    const plain = await slipway(vera, ['-o', 'json', 'cluster', 'status']);
    assert.equal(plain.code, 0, plain.stderr);
    const denied = await slipway(vera, ['cluster', 'status', '--digest']);
    assert.equal(denied.code, 1, denied.stdout + denied.stderr);
    assert.match(denied.stderr, /has role viewer; this needs operator or higher: the state digest/);
    assert.equal(denied.stdout, '', 'a refusal is not shown as a node down');

    const shown = await slipway(olga, ['-o', 'json', 'cluster', 'status', '--digest']);
    assert.equal(shown.code, 0, shown.stderr);
    const rows = (JSON.parse(shown.stdout) as { nodes: { node: string; digest: string }[] }).nodes;
    assert.equal(rows.length, 1);
    assert.match(rows[0]?.digest ?? '', /^[0-9a-f]{64}$/);

    const refused = await auditList(adminFile, '--kind', 'kv.status');
    assert.deepEqual(
      refused.map((e) => `${e.user} ${e.role} ${e.method} ${e.outcome}`),
      ['vera viewer Kv/Status PERMISSION_DENIED'],
    );
  });
});
