// Goal: prove the audit trail of the replicated control state: a command that carries who asked
// is recorded with its kind, target, stamp and outcome in the same apply; refusals (by apply or
// recorded with audit.record) keep their error; commands without a tag are not recorded;
// secrets in commands never reach an entry; retention by count and by age holds, judged by
// stamps; snapshots keep the trail, and older snapshots restore with none; two states fed the
// same commands hold the same trail.
// Method: drive ControlState through apply() with explicit leader stamps, read the trail with
// auditTrail(), and compare snapshots.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AuditTag } from '../../src/state/control/audit-log.js';
import type { ControlCommand } from '../../src/state/control/commands.js';
import type { HardwareInput } from '../../src/model/records.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { decodeControlCommand, encodeControlCommand } from '../../src/state/control/codec.js';

const alice: AuditTag = {
  user: 'alice',
  role: 'operator',
  address: 'ipv4:10.0.0.5:51234',
  method: 'Control/HardwareCreate',
};
const root: AuditTag = {
  user: 'root',
  role: 'admin',
  address: 'ipv6:[::1]:4000',
  method: 'Control/TokenCreate',
};

const bmcPassword = 'hunter2-bmc-secret';
const workerToken = 'worker-token-secret-0123456789';
const tokenSha = 'ab'.repeat(32);

function machine(id: string, n: number): HardwareInput {
  return {
    id,
    interfaces: [{ mac: `02:00:00:00:00:${n.toString(16).padStart(2, '0')}`, dns: [], leaseTimeS: 3600 }],
    arch: 'x86_64',
    uefi: true,
    netboot: { allowPXE: true, allowWorkflow: true },
    metadata: {},
    bmc: { address: 'ipmi://10.1.0.1:623', username: 'admin', password: bmcPassword },
  };
}

class Harness {
  readonly state = new ControlState();
  #index = 0;
  apply(command: ControlCommand, stampMs = 1_000 + this.#index): ReturnType<ControlState['apply']> {
    // Through the codec, as the log carries it: the audit tag must survive encoding.
    return this.state.apply(++this.#index, stampMs, decodeControlCommand(encodeControlCommand(command)));
  }
  trail(): ReturnType<ControlState['auditTrail']>['entries'] {
    return this.state.auditTrail({ limit: 1_000 }).entries;
  }
}

function putHardware(id: string, n: number, audit?: AuditTag): ControlCommand {
  return {
    type: 'hardware.put',
    hardware: machine(id, n),
    workerToken,
    expectVersion: 0,
    ...(audit === undefined ? {} : { audit }),
  };
}

describe('audit trail', () => {
  it('records an audited change with who, what, when and its outcome; untagged commands are not recorded', () => {
    const h = new Harness();
    assert.equal(h.apply(putHardware('m1', 1, alice), 5_000).type, 'hardware');
    h.apply(putHardware('m2', 2)); // the leader's own or a worker's: no tag, no entry
    h.apply({ type: 'token.put', name: 'bob', role: 'viewer', sha256: tokenSha, audit: root }, 6_000);
    const entries = h.trail();
    assert.deepEqual(entries, [
      {
        seq: 2,
        stampMs: 6_000,
        user: 'root',
        role: 'admin',
        address: 'ipv6:[::1]:4000',
        method: 'Control/TokenCreate',
        kind: 'token.put',
        target: 'bob (viewer)',
      },
      {
        seq: 1,
        stampMs: 5_000,
        user: 'alice',
        role: 'operator',
        address: 'ipv4:10.0.0.5:51234',
        method: 'Control/HardwareCreate',
        kind: 'hardware.put',
        target: 'm1',
      },
    ]);
  });

  it('records a refused command with its error code and message, and a refusal before proposing', () => {
    const h = new Harness();
    h.apply(putHardware('m1', 1, alice));
    const refused = h.apply(putHardware('m1', 1, alice));
    assert.equal(refused.type, 'error');
    h.apply({
      type: 'audit.record',
      kind: 'token.put',
      target: 'eve',
      error: { code: 'PERMISSION_DENIED', message: 'token "alice" has role operator; this needs admin' },
      audit: { ...alice, method: 'Control/TokenCreate' },
    });
    const [denied, exists] = h.trail();
    assert.deepEqual(exists?.error, {
      code: 'E_EXISTS',
      message: 'hardware "m1" already exists (version 1)',
    });
    assert.equal(exists?.kind, 'hardware.put');
    assert.equal(denied?.kind, 'token.put');
    assert.equal(denied?.error?.code, 'PERMISSION_DENIED');
    // An audit.record must say who: without a tag it is refused and records nothing.
    assert.equal(h.apply({ type: 'audit.record', kind: 'x', target: 'y' }).type, 'error');
    assert.equal(h.trail().length, 3);
  });

  it('never records a secret the command carries', () => {
    const h = new Harness();
    h.apply(putHardware('m1', 1, alice));
    h.apply({ type: 'token.put', name: 'ops', role: 'operator', sha256: tokenSha, audit: root });
    const text = JSON.stringify(h.trail());
    for (const secret of [bmcPassword, workerToken, tokenSha]) assert.ok(!text.includes(secret), secret);
  });

  it('filters by user, kind and time, newest first, with pages that continue where they stopped', () => {
    const h = new Harness();
    for (let i = 1; i <= 5; i++) h.apply(putHardware(`m${i}`, i, i % 2 === 0 ? root : alice), i * 1_000);
    h.apply({ type: 'hardware.delete', id: 'm1', audit: alice }, 6_000);
    const ids = (q: Parameters<ControlState['auditTrail']>[0]): string[] =>
      h.state.auditTrail(q).entries.map((e) => e.target);
    assert.deepEqual(ids({ user: 'alice', limit: 10 }), ['m1', 'm5', 'm3', 'm1']);
    assert.deepEqual(ids({ kind: 'hardware.delete', limit: 10 }), ['m1']);
    assert.deepEqual(ids({ sinceMs: 2_000, untilMs: 4_000, limit: 10 }), ['m4', 'm3', 'm2']);
    const first = h.state.auditTrail({ limit: 4 });
    assert.deepEqual(
      first.entries.map((e) => e.seq),
      [6, 5, 4, 3],
    );
    assert.equal(first.continueBefore, 3);
    const rest = h.state.auditTrail({ limit: 4, beforeSeq: first.continueBefore ?? 0 });
    assert.deepEqual(
      rest.entries.map((e) => e.seq),
      [2, 1],
    );
    assert.equal(rest.continueBefore, undefined);
  });

  it('keeps the newest entries by the replicated retention, by count and by age of the stamps', () => {
    const h = new Harness();
    assert.equal(
      h.apply({ type: 'audit.retention', entries: 3, days: 0, audit: root }).type,
      'auditRetention',
    );
    for (let i = 1; i <= 5; i++) h.apply(putHardware(`m${i}`, i, alice));
    assert.deepEqual(
      h.trail().map((e) => e.target),
      ['m5', 'm4', 'm3'],
    );
    const day = 24 * 3600 * 1000;
    h.apply({ type: 'audit.retention', entries: 100, days: 1, audit: root }, 10 * day);
    h.apply({ type: 'hardware.delete', id: 'm1', audit: alice }, 10 * day + 1);
    // Everything stamped before day 9 went when the stamp of day 10 arrived.
    assert.deepEqual(
      h.trail().map((e) => e.kind),
      ['hardware.delete', 'audit.retention'],
    );
    const bad = h.apply({ type: 'audit.retention', entries: 0, days: 0, audit: root });
    assert.equal(bad.type, 'error');
    assert.deepEqual(h.state.auditRetention, { entries: 100, days: 1 });
  });

  it('keeps the trail and its retention across a snapshot; a snapshot without one restores empty', () => {
    const h = new Harness();
    const empty = new ControlState().snapshot();
    assert.ok(!new TextDecoder().decode(empty).includes('audit'), 'an unused trail keeps the older bytes');
    h.apply({ type: 'audit.retention', entries: 50, days: 7, audit: root });
    h.apply(putHardware('m1', 1, alice));
    const copy = new ControlState();
    copy.restore(h.state.snapshot());
    assert.deepEqual(copy.snapshot(), h.state.snapshot());
    assert.deepEqual(copy.auditTrail({ limit: 10 }), h.state.auditTrail({ limit: 10 }));
    assert.deepEqual(copy.auditRetention, { entries: 50, days: 7 });
    copy.restore(empty);
    assert.deepEqual(copy.auditTrail({ limit: 10 }).entries, []);
    assert.deepEqual(copy.auditRetention, { entries: 10_000, days: 0 });
  });

  it('is deterministic: two states fed the same commands hold the same trail', () => {
    const [a, b] = [new Harness(), new Harness()];
    for (const h of [a, b]) {
      h.apply({ type: 'audit.retention', entries: 4, days: 0, audit: root }, 100);
      for (let i = 1; i <= 6; i++) h.apply(putHardware(`m${i % 3}`, i % 3, alice), 200 + i);
    }
    assert.deepEqual(a.trail(), b.trail());
    assert.deepEqual(a.state.snapshot(), b.state.snapshot());
  });
});
