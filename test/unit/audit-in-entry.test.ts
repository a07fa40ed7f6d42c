// Goal: an audited Kv write and its audit record are one raft entry (docs/decisions/0018, state
// version 3): the store command carries who asked, and apply records it with the write's outcome
// at the entry's stamp, refusals included; below cluster version 3 such an entry is refused and
// changes nothing; a membership change carries its record as its configuration entry's
// context, and a change without one keeps the bytes it always had.
// Method: encoded commands applied to ReplicatedState as the raft node applies them; the trail
// read back from its control state; the conf-change codec on its own.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeConfChange, encodeConfChange } from '../../src/raft/core/membership.js';
import type { ConfChange } from '../../src/raft/core/types.js';
import { DecodeError } from '../../src/state/binary.js';
import type { AuditEntry } from '../../src/state/control/audit-log.js';
import { ReplicatedState } from '../../src/state/replicated-state.js';
import {
  decodeCommand,
  decodeResult,
  encodeCommand,
  InvalidCommandError,
  type Command,
  type WriteAudit,
} from '../../src/state/store-command.js';
import { stateVersionAuditInEntry } from '../../src/state/versions.js';

const alice: WriteAudit = {
  user: 'alice',
  role: 'operator',
  address: 'ipv4:10.0.0.5:51234',
  method: 'Kv/Put',
  kind: 'kv.put',
};
const value = new TextEncoder().encode('lab-1');

class Store {
  readonly state = new ReplicatedState();
  #index = 0;

  apply(command: Command): ReturnType<typeof decodeResult> {
    return decodeResult(this.state.apply(++this.#index, encodeCommand(command)));
  }

  raise(version: number): void {
    this.apply({ type: 'control', stampMs: 1, command: { type: 'cluster.version', version } });
  }

  trail(): AuditEntry[] {
    return this.state.control.auditTrail({ limit: 100 }).entries.slice().reverse();
  }
}

describe('audit record in the write entry', () => {
  it('an audited put and delete round-trip through the codec; the flag is theirs alone', () => {
    const put: Command = {
      type: 'put',
      stampMs: 7,
      ns: 'kv',
      key: 'k',
      value,
      prevRevision: 3,
      audit: alice,
    };
    assert.deepEqual(decodeCommand(encodeCommand(put)), put);
    const del: Command = {
      type: 'delete',
      stampMs: 8,
      ns: 'kv',
      key: 'k',
      session: { clientId: 4, seq: 2, ackedSeq: 1 },
      audit: { ...alice, role: 'admin', kind: 'kv.delete', user: 'ünïcode' },
    };
    assert.deepEqual(decodeCommand(encodeCommand(del)), del);
    // Without the record, the bytes are those of every earlier build.
    const plain = encodeCommand({ type: 'put', stampMs: 7, ns: 'kv', key: 'k', value });
    assert.equal(plain[3], 0, 'no flags');
    const noop = encodeCommand({ type: 'noop', stampMs: 7 });
    noop[3] = 0b100;
    assert.throws(() => decodeCommand(noop), DecodeError);
    assert.throws(
      () => encodeCommand({ ...put, audit: { ...alice, role: 'root' as never } }),
      (e: unknown) =>
        e instanceof InvalidCommandError && /audit role must be admin, operator or viewer/.test(e.message),
    );
    assert.throws(
      () => encodeCommand({ ...put, audit: { ...alice, user: 'u'.repeat(2000) } }),
      /audit user is 2000 bytes, over the limit of 1024/,
    );
  });

  it('below cluster version 3 an audited write is refused and changes nothing', () => {
    const s = new Store();
    s.raise(2);
    const result = s.apply({ type: 'put', stampMs: 5_000, ns: 'kv', key: 'k', value, audit: alice });
    assert.equal(result.type, 'error');
    assert.match(
      result.type === 'error' ? result.message : '',
      new RegExp(`needs cluster version ${stateVersionAuditInEntry}, and the cluster runs at 2`),
    );
    assert.equal(s.state.get('kv', 'k'), undefined);
    assert.equal(s.state.revision, 0);
    assert.deepEqual(s.trail(), []);
  });

  it('at version 3 the write and its record apply together, with the outcome and the entry stamp', () => {
    const s = new Store();
    s.raise(stateVersionAuditInEntry);
    const put = s.apply({ type: 'put', stampMs: 5_000, ns: 'kv', key: 'site', value, audit: alice });
    assert.deepEqual(put, { type: 'put', revision: 1 });
    const cas = s.apply({
      type: 'put',
      stampMs: 6_000,
      ns: 'kv',
      key: 'site',
      value,
      prevRevision: 9,
      audit: { ...alice, method: 'Kv/CompareAndSet', kind: 'kv.compareAndSet' },
    });
    assert.equal(cas.type === 'error' ? cas.code : cas.type, 'E_CAS_FAILED');
    s.apply({
      type: 'delete',
      stampMs: 7_000,
      ns: 'kv',
      key: 'absent',
      audit: { ...alice, method: 'Kv/Delete', kind: 'kv.delete' },
    });
    // A write without a record (the leader's own, or before version 3) adds none.
    s.apply({ type: 'put', stampMs: 8_000, ns: 'kv', key: 'quiet', value });
    const trail = s.trail();
    assert.deepEqual(
      trail.map((e) => [
        e.seq,
        e.stampMs,
        e.user,
        e.role,
        e.address,
        e.method,
        e.kind,
        e.target,
        e.error?.code,
      ]),
      [
        [1, 5_000, 'alice', 'operator', 'ipv4:10.0.0.5:51234', 'Kv/Put', 'kv.put', 'site', undefined],
        [
          2,
          6_000,
          'alice',
          'operator',
          'ipv4:10.0.0.5:51234',
          'Kv/CompareAndSet',
          'kv.compareAndSet',
          'site',
          'E_CAS_FAILED',
        ],
        [
          3,
          7_000,
          'alice',
          'operator',
          'ipv4:10.0.0.5:51234',
          'Kv/Delete',
          'kv.delete',
          'absent',
          'E_NOT_FOUND',
        ],
      ],
    );
    assert.match(trail[1]?.error?.message ?? '', /expected at modRevision 9, but it is at modRevision 1/);
    assert.equal(s.state.get('kv', 'site')?.modRevision, 1, 'the failed compare changed nothing');
  });

  it('a retried write of a session is recorded per call, with the first outcome; the states agree', () => {
    const a = new Store();
    const b = new Store();
    for (const s of [a, b]) {
      s.raise(stateVersionAuditInEntry);
      const reg = s.apply({ type: 'registerClient', stampMs: 10 });
      const clientId = reg.type === 'registerClient' ? reg.clientId : 0;
      const write: Command = {
        type: 'put',
        stampMs: 20,
        ns: 'kv',
        key: 'k',
        value,
        session: { clientId, seq: 1, ackedSeq: 0 },
        audit: alice,
      };
      assert.deepEqual(s.apply(write), { type: 'put', revision: 1 });
      assert.deepEqual(s.apply({ ...write, stampMs: 30 }), { type: 'put', revision: 1 }, 'the cached result');
    }
    assert.deepEqual(
      a.trail().map((e) => [e.stampMs, e.kind, e.error]),
      [
        [20, 'kv.put', undefined],
        [30, 'kv.put', undefined],
      ],
    );
    assert.equal(a.state.revision, 1);
    assert.deepEqual(a.state.snapshot(), b.state.snapshot());
    const copy = new ReplicatedState();
    copy.restore(a.state.snapshot());
    assert.deepEqual(copy.control.auditTrail({ limit: 10 }), a.state.control.auditTrail({ limit: 10 }));
  });

  it('a membership change carries its record as context; without one its bytes are unchanged', () => {
    const member = { id: 'n4', addr: '127.0.0.1:7041', apiAddr: '127.0.0.1:7040' };
    const plain: ConfChange = { type: 'promote', member };
    assert.deepEqual(encodeConfChange(plain), new TextEncoder().encode(JSON.stringify(plain)));
    const context = Uint8Array.from([0, 1, 2, 250, 255, 128]);
    const withContext: ConfChange = { type: 'remove', member, context };
    assert.deepEqual(decodeConfChange(encodeConfChange(withContext)), withContext);
    assert.deepEqual(decodeConfChange(encodeConfChange(plain)), plain);
    // A build that predates contexts reads the same change (it ignores the field).
    const json = JSON.parse(new TextDecoder().decode(encodeConfChange(withContext))) as Record<
      string,
      unknown
    >;
    assert.deepEqual([json['type'], json['member']], ['remove', member]);
    assert.throws(() =>
      decodeConfChange(new TextEncoder().encode(JSON.stringify({ type: 'remove', member, context: 7 }))),
    );
  });

  it('the context applied at the configuration entry records the change in the trail', () => {
    const s = new Store();
    s.raise(stateVersionAuditInEntry);
    const context = encodeCommand({
      type: 'control',
      stampMs: 9_000,
      command: {
        type: 'audit.record',
        kind: 'member.remove',
        target: 'n4',
        audit: { user: 'root', role: 'admin', address: '127.0.0.1:5000', method: 'Kv/MemberRemove' },
      },
    });
    // The raft node applies it at the configuration entry's index, as any entry.
    s.state.apply(s.state.appliedIndex + 3, context);
    assert.deepEqual(
      s.trail().map((e) => [e.stampMs, e.user, e.kind, e.target, e.error]),
      [[9_000, 'root', 'member.remove', 'n4', undefined]],
    );
  });
});
