// Goal: prove the replicated key-value store's contract: put/get/delete and compare-and-set
// semantics, revisions as fencing tokens, exactly-once client sessions with deterministic
// expiry, refusal of malformed commands without any state change, exact snapshot round trips,
// and deterministic apply.
// Control-plane commands run through the same sessions and snapshots (version 2; version 1
// snapshots still restore, with an empty control state).
// Method: drive KvStore only through encoded commands and apply(), as the raft node will, and
// inspect it through its queries and snapshots. Fast-check properties feed random command
// streams (including garbage bytes, stale sessions and backwards stamps) to twin stores, and to
// a store restored from a mid-stream snapshot, and compare results and snapshots byte for byte.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { BinaryWriter, DecodeError } from '../../src/state/binary.js';
import { crc32c } from '../../src/platform/crc32c.js';
import type { ControlCommand } from '../../src/state/control/commands.js';
import type { HardwareInput } from '../../src/model/records.js';
import {
  decodeResult,
  encodeCommand,
  InvalidCommandError,
  type Command,
  type CommandResult,
  type SessionTag,
} from '../../src/state/store-command.js';
import { KvStore, type ChangeEvent } from '../../src/state/kv-store.js';

const text = new TextEncoder();
const bytes = (s: string): Uint8Array => text.encode(s);

/** A store plus a raft-like index counter, so each test reads as a sequence of commands. */
class Harness {
  readonly store: KvStore;
  index = 0;
  stampMs = 1_000;

  constructor(store = new KvStore()) {
    this.store = store;
  }

  raw(command: Uint8Array): Uint8Array {
    this.index += 1;
    return this.store.apply(this.index, command);
  }

  run(command: Command): CommandResult {
    return decodeResult(this.raw(encodeCommand(command)));
  }

  put(key: string, value: string, extra: { prevRevision?: number; session?: SessionTag; ns?: string } = {}) {
    const { ns = 'default', ...rest } = extra;
    return this.run({ type: 'put', stampMs: this.stampMs, ns, key, value: bytes(value), ...rest });
  }

  del(key: string, extra: { prevRevision?: number; session?: SessionTag; ns?: string } = {}) {
    const { ns = 'default', ...rest } = extra;
    return this.run({ type: 'delete', stampMs: this.stampMs, ns, key, ...rest });
  }

  register(): number {
    const result = this.run({ type: 'registerClient', stampMs: this.stampMs });
    assert.equal(result.type, 'registerClient');
    return result.clientId;
  }

  control(command: ControlCommand, session?: SessionTag): CommandResult {
    return this.run({
      type: 'control',
      stampMs: this.stampMs,
      command,
      ...(session === undefined ? {} : { session }),
    });
  }

  noop(session?: SessionTag): CommandResult {
    return this.run({ type: 'noop', stampMs: this.stampMs, ...(session === undefined ? {} : { session }) });
  }
}

function expectError(result: CommandResult, code: string): string {
  assert.equal(result.type, 'error', `expected ${code}, got ${JSON.stringify(result)}`);
  assert.equal(result.code, code);
  return result.message;
}

function valueOf(store: KvStore, key: string, ns = 'default'): string | undefined {
  const kv = store.get(ns, key);
  return kv === undefined ? undefined : new TextDecoder().decode(kv.value);
}

test('put creates then updates a key with revisions, versions and the previous value', () => {
  const h = new Harness();
  const first = h.put('a', 'one');
  assert.deepEqual(first, { type: 'put', revision: 1 });
  assert.deepEqual(h.store.get('default', 'a'), {
    ns: 'default',
    key: 'a',
    value: bytes('one'),
    createRevision: 1,
    modRevision: 1,
    version: 1,
  });
  const second = h.put('a', 'two');
  assert.equal(second.type, 'put');
  assert.equal(second.revision, 2);
  assert.deepEqual(second.prev, { value: bytes('one'), createRevision: 1, modRevision: 1, version: 1 });
  const now = h.store.get('default', 'a')!;
  assert.equal(valueOf(h.store, 'a'), 'two');
  assert.deepEqual([now.createRevision, now.modRevision, now.version], [1, 2, 2]);
  assert.equal(h.store.revision, 2);
});

test('get returns a copy, so a caller cannot change the stored value', () => {
  const h = new Harness();
  h.put('a', 'abc');
  h.store.get('default', 'a')!.value.fill(0);
  assert.equal(valueOf(h.store, 'a'), 'abc');
});

test('namespaces are independent', () => {
  const h = new Harness();
  h.put('k', 'in-x', { ns: 'x' });
  h.put('k', 'in-y', { ns: 'y' });
  assert.equal(valueOf(h.store, 'k', 'x'), 'in-x');
  assert.equal(valueOf(h.store, 'k', 'y'), 'in-y');
  assert.equal(h.store.get('default', 'k'), undefined);
  assert.deepEqual(h.store.namespaces(), ['x', 'y']);
  assert.equal(h.store.count('x'), 1);
  assert.equal(h.store.count(), 2);
});

test('delete removes a key and returns it; deleting an absent key is E_NOT_FOUND and changes nothing', () => {
  const h = new Harness();
  h.put('a', 'one');
  const deleted = h.del('a');
  assert.equal(deleted.type, 'delete');
  assert.equal(deleted.revision, 2);
  assert.deepEqual(deleted.prev.value, bytes('one'));
  assert.equal(h.store.get('default', 'a'), undefined);
  assert.equal(h.store.count(), 0);
  assert.deepEqual(h.store.namespaces(), []);
  expectError(h.del('a'), 'E_NOT_FOUND');
  assert.equal(h.store.revision, 2);
});

test('a deleted and re-created key starts a new life: new createRevision, version 1', () => {
  const h = new Harness();
  h.put('a', '1');
  h.put('a', '2');
  h.del('a');
  h.put('a', '3');
  const kv = h.store.get('default', 'a')!;
  assert.deepEqual([kv.createRevision, kv.modRevision, kv.version], [4, 4, 1]);
});

test('compare-and-set: prevRevision 0 means must not exist, otherwise it must equal modRevision', () => {
  const h = new Harness();
  assert.equal(h.put('lock', 'me', { prevRevision: 0 }).type, 'put');
  const taken = expectError(h.put('lock', 'you', { prevRevision: 0 }), 'E_CAS_FAILED');
  assert.match(taken, /expected to be absent, but it is at modRevision 1/);
  assert.equal(valueOf(h.store, 'lock'), 'me');
  expectError(h.put('lock', 'you', { prevRevision: 7 }), 'E_CAS_FAILED');
  assert.equal(h.put('lock', 'still me', { prevRevision: 1 }).type, 'put');
  expectError(h.del('lock', { prevRevision: 1 }), 'E_CAS_FAILED');
  assert.equal(valueOf(h.store, 'lock'), 'still me');
  expectError(h.put('absent', 'x', { prevRevision: 3 }), 'E_CAS_FAILED');
  assert.equal(h.del('lock', { prevRevision: 2 }).type, 'delete');
  assert.equal(h.store.revision, 3, 'only the three successful writes advance the revision');
});

test('revisions are dense fencing tokens: only successful mutations advance them', () => {
  const h = new Harness();
  const seen: number[] = [];
  for (let i = 0; i < 5; i++) {
    const r = h.put('fence', `holder-${i}`);
    assert.equal(r.type, 'put');
    seen.push(r.revision);
    h.noop();
    h.register();
    expectError(h.del('nothing'), 'E_NOT_FOUND');
  }
  assert.deepEqual(seen, [1, 2, 3, 4, 5]);
  const noop = h.noop();
  assert.deepEqual(noop, { type: 'noop', revision: 5 });
});

test('range returns sorted keys under a prefix, bounded by limit', () => {
  const h = new Harness();
  for (const k of ['b/2', 'a/1', 'b/10', 'b/1', 'c', 'b']) h.put(k, k);
  h.put('b/3', 'other ns', { ns: 'other' });
  const keys = (prefix: string, limit: number) => h.store.range('default', prefix, limit).map((kv) => kv.key);
  assert.deepEqual(keys('b/', 10), ['b/1', 'b/10', 'b/2']);
  assert.deepEqual(keys('b', 2), ['b', 'b/1']);
  assert.deepEqual(keys('', 100), ['a/1', 'b', 'b/1', 'b/10', 'b/2', 'c']);
  assert.deepEqual(keys('zz', 5), []);
  assert.deepEqual(h.store.range('nope', '', 5), []);
  assert.throws(() => h.store.range('default', '', 0), /range limit must be a positive integer, got 0/);
});

test('onChange reports each successful mutation once, after it is visible', () => {
  const h = new Harness();
  const events: ChangeEvent[] = [];
  h.store.onChange = (e) => {
    assert.equal(h.store.revision, e.revision, 'the change is applied before the hook runs');
    events.push(e);
  };
  const client = h.register();
  h.put('a', 'v', { session: { clientId: client, seq: 1, ackedSeq: 0 } });
  h.put('a', 'v', { session: { clientId: client, seq: 1, ackedSeq: 0 } }); // a duplicate
  h.put('a', 'w', { prevRevision: 0 }); // fails
  h.del('a');
  assert.deepEqual(events, [
    { revision: 1, ns: 'default', key: 'a', type: 'put', value: bytes('v') },
    { revision: 2, ns: 'default', key: 'a', type: 'delete' },
  ]);
});

test('registerClient allocates the entry index as clientId', () => {
  const h = new Harness();
  h.noop();
  h.noop();
  assert.equal(h.register(), 3);
  assert.equal(h.register(), 4);
  assert.equal(h.store.sessionCount, 2);
});

test('a duplicate (clientId, seq) returns the cached result byte for byte and is not applied again', () => {
  const h = new Harness();
  const client = h.register();
  const session = { clientId: client, seq: 1, ackedSeq: 0 };
  const command = encodeCommand({
    type: 'put',
    stampMs: 5_000,
    ns: 'default',
    key: 'vm',
    value: bytes('x'),
    session,
  });
  const first = h.raw(command);
  h.put('vm', 'changed by someone else');
  const retry = h.raw(command);
  assert.deepEqual(retry, first);
  assert.deepEqual(decodeResult(retry), { type: 'put', revision: 1 });
  assert.equal(valueOf(h.store, 'vm'), 'changed by someone else', 'the retry did not overwrite');
  assert.equal(h.store.revision, 2);
  // Errors are cached too: a retried failed CAS must not succeed the second time.
  const cas = { clientId: client, seq: 2, ackedSeq: 1 };
  expectError(h.put('free', 'mine', { prevRevision: 3, session: cas }), 'E_CAS_FAILED');
  h.put('free', 'now at 3');
  expectError(h.put('free', 'mine', { prevRevision: 3, session: cas }), 'E_CAS_FAILED');
  assert.equal(valueOf(h.store, 'free'), 'now at 3');
});

test('acknowledged results are pruned; resending an acknowledged seq is refused, not re-applied', () => {
  const h = new Harness();
  const client = h.register();
  h.put('a', '1', { session: { clientId: client, seq: 1, ackedSeq: 0 } });
  h.put('b', '2', { session: { clientId: client, seq: 2, ackedSeq: 1 } });
  const message = expectError(
    h.put('a', '1', { session: { clientId: client, seq: 1, ackedSeq: 0 } }),
    'E_BAD_COMMAND',
  );
  assert.match(message, /seq 1 of client \d+ was already acknowledged/);
  assert.equal(h.store.revision, 2);
  // seq 2 was not acknowledged yet, so its retry is still answered from the cache.
  assert.deepEqual(h.put('b', '2', { session: { clientId: client, seq: 2, ackedSeq: 1 } }), {
    type: 'put',
    revision: 2,
  });
});

test('a session holding too many unacknowledged results is refused until it acknowledges', () => {
  const h = new Harness(new KvStore({ sessionResultsMax: 2 }));
  const clientId = h.register();
  h.put('a', '1', { session: { clientId, seq: 1, ackedSeq: 0 } });
  h.put('a', '2', { session: { clientId, seq: 2, ackedSeq: 0 } });
  const message = expectError(
    h.put('a', '3', { session: { clientId, seq: 3, ackedSeq: 0 } }),
    'E_BAD_COMMAND',
  );
  assert.match(message, /holds 2 unacknowledged results \(limit 2\)/);
  assert.equal(valueOf(h.store, 'a'), '2');
  assert.equal(h.put('a', '3', { session: { clientId, seq: 3, ackedSeq: 2 } }).type, 'put');
  assert.equal(valueOf(h.store, 'a'), '3');
});

test('an unknown session is E_SESSION_EXPIRED and does not create a session or apply', () => {
  const h = new Harness();
  const message = expectError(
    h.put('a', '1', { session: { clientId: 99, seq: 1, ackedSeq: 0 } }),
    'E_SESSION_EXPIRED',
  );
  assert.match(message, /session 99 is unknown or expired/);
  assert.equal(h.store.get('default', 'a'), undefined);
  assert.equal(h.store.sessionCount, 0);
  assert.equal(h.store.hasSession(99), false);
});

test('sessions expire when a stamp passes their last activity by more than the TTL', () => {
  const h = new Harness(new KvStore({ sessionTtlMs: 1_000 }));
  h.stampMs = 10_000;
  const idle = h.register();
  const busy = h.register();
  h.stampMs = 10_900;
  h.noop({ clientId: busy, seq: 1, ackedSeq: 0 }); // a keep-alive
  h.stampMs = 11_000; // exactly last activity + TTL: still alive
  h.noop();
  assert.equal(h.store.hasSession(idle), true);
  h.stampMs = 11_001; // a plain noop from the leader is enough to expire it
  h.noop();
  assert.equal(h.store.hasSession(idle), false);
  assert.equal(h.store.hasSession(busy), true);
  expectError(h.put('a', '1', { session: { clientId: idle, seq: 1, ackedSeq: 0 } }), 'E_SESSION_EXPIRED');
  h.stampMs = 11_901; // the busy session's own late command finds it expired
  expectError(h.put('a', '1', { session: { clientId: busy, seq: 2, ackedSeq: 1 } }), 'E_SESSION_EXPIRED');
  assert.equal(h.store.count(), 0);
});

test('the clock never runs backwards: an older stamp from a new leader does not revive time', () => {
  const h = new Harness(new KvStore({ sessionTtlMs: 1_000 }));
  h.stampMs = 50_000;
  h.noop();
  h.stampMs = 20_000; // a skewed leader
  const client = h.register();
  assert.equal(h.store.nowMs, 50_000);
  h.stampMs = 50_900;
  assert.equal(h.put('a', '1', { session: { clientId: client, seq: 1, ackedSeq: 0 } }).type, 'put');
});

test('registering beyond sessionsMax evicts the least recently active session', () => {
  const h = new Harness(new KvStore({ sessionsMax: 2 }));
  const a = h.register();
  const b = h.register();
  h.noop({ clientId: a, seq: 1, ackedSeq: 0 }); // a is now more recent than b
  const c = h.register();
  assert.deepEqual(
    [h.store.hasSession(a), h.store.hasSession(b), h.store.hasSession(c)],
    [true, false, true],
  );
});

test('malformed or invalid command bytes give E_BAD_COMMAND and change nothing but appliedIndex', () => {
  const valid = encodeCommand({ type: 'put', stampMs: 9_999_999, ns: 'n', key: 'k', value: bytes('v') });
  const cases: [string, Uint8Array, RegExp][] = [
    ['empty', new Uint8Array(0), /command version: truncated/],
    ['wrong version', Uint8Array.of(9, 0, 0, 0), /unsupported command codec version 9/],
    ['unknown type', Uint8Array.of(1, 77, 0, 0), /unknown command type 77/],
    ['truncated put', valid.subarray(0, valid.length - 1), /value: truncated/],
    ['trailing bytes', Uint8Array.from([...valid, 0]), /1 unexpected trailing bytes/],
    ['unknown flags', Uint8Array.of(1, 0, 0, 0x80), /unknown command flags 128/],
    ['empty key', Uint8Array.of(1, 2, 0, 0, 1, 0x6e, 0, 0), /key is empty/],
    ['invalid UTF-8 key', Uint8Array.of(1, 2, 0, 0, 1, 0x6e, 1, 0xff, 0), /key: invalid UTF-8/],
    ['overlong varint', Uint8Array.of(1, 0, 0x80, 0x00, 0), /stampMs: overlong varint/],
    [
      'ackedSeq not below seq',
      Uint8Array.of(1, 0, 0, 1, 5, 2, 2),
      /ackedSeq must be an integer in \[0, seq\)/,
    ],
    [
      'session on registerClient',
      Uint8Array.of(1, 1, 0, 1, 5, 1, 0),
      /registerClient cannot carry a session/,
    ],
  ];
  for (const [name, command, why] of cases) {
    const reference = new Harness();
    const probed = new Harness();
    for (const h of [reference, probed]) {
      h.register();
      h.put('k', 'v', { ns: 'n' });
    }
    const result = probed.raw(command);
    const message = expectError(decodeResult(result), 'E_BAD_COMMAND');
    assert.match(message, why, name);
    assert.equal(probed.store.appliedIndex, 3, name);
    // The twin skips index 3; one more shared entry brings both to the same appliedIndex.
    reference.index = 3;
    for (const h of [reference, probed]) h.noop();
    assert.deepEqual(probed.store.snapshot(), reference.store.snapshot(), `${name} changed the state`);
  }
});

test('apply refuses a non-increasing index as a programmer error', () => {
  const store = new KvStore();
  store.apply(5, encodeCommand({ type: 'noop', stampMs: 1 }));
  assert.throws(() => store.apply(5, encodeCommand({ type: 'noop', stampMs: 1 })), /above appliedIndex 5/);
  assert.throws(() => store.apply(4.5, encodeCommand({ type: 'noop', stampMs: 1 })), /must be an integer/);
});

test('encodeCommand refuses invalid commands with a message naming the field', () => {
  const base = { stampMs: 1, ns: 'n', key: 'k', value: bytes('v') };
  assert.throws(() => encodeCommand({ type: 'put', ...base, key: '' }), InvalidCommandError);
  assert.throws(
    () => encodeCommand({ type: 'put', ...base, ns: 'x'.repeat(257) }),
    /ns is 257 bytes, over the limit of 256/,
  );
  assert.throws(() => encodeCommand({ type: 'put', ...base, key: '\ud800' }), /unpaired UTF-16 surrogate/);
  assert.throws(() => encodeCommand({ type: 'put', ...base, stampMs: -1 }), /stampMs must be a non-negative/);
  assert.throws(
    () => encodeCommand({ type: 'delete', stampMs: 1, ns: 'n', key: 'k', prevRevision: 0 }),
    /can never succeed/,
  );
  assert.throws(
    () => encodeCommand({ type: 'noop', stampMs: 1, session: { clientId: 1, seq: 3, ackedSeq: 3 } }),
    /ackedSeq must be an integer in \[0, seq\)/,
  );
});

test('KvStore refuses nonsensical options', () => {
  assert.throws(() => new KvStore({ sessionTtlMs: 0 }), /sessionTtlMs must be a positive integer, got 0/);
  assert.throws(() => new KvStore({ sessionsMax: 1.5 }), /sessionsMax must be a positive integer/);
});

test('snapshot and restore round-trip exactly, then evolve identically', () => {
  const h = new Harness();
  const client = h.register();
  h.put('a', '1', { session: { clientId: client, seq: 1, ackedSeq: 0 } });
  h.put('b', '2', { ns: 'other' });
  h.del('a');
  h.put('a', '3');
  const image = h.store.snapshot();
  const copy = new KvStore();
  copy.restore(image);
  assert.deepEqual(copy.snapshot(), image);
  assert.equal(copy.appliedIndex, h.store.appliedIndex);
  assert.equal(copy.revision, h.store.revision);
  assert.deepEqual(copy.range('default', '', 10), h.store.range('default', '', 10));
  // The cached session result survives the snapshot: the retry is still deduplicated.
  const twin = new Harness(copy);
  twin.index = h.index;
  for (const x of [h, twin]) {
    const retry = x.put('a', '1', { session: { clientId: client, seq: 1, ackedSeq: 0 } });
    assert.deepEqual(retry, { type: 'put', revision: 1 });
    x.put('c', '4', { session: { clientId: client, seq: 2, ackedSeq: 1 } });
  }
  assert.deepEqual(twin.store.snapshot(), h.store.snapshot());
});

test('a corrupted or truncated snapshot is refused with a clear error and leaves the state alone', () => {
  const source = new Harness();
  source.put('a', 'from snapshot');
  const image = source.store.snapshot();
  const target = new Harness();
  target.put('mine', 'kept');
  const before = target.store.snapshot();
  const flipped = image.slice();
  flipped[10]! ^= 0x01;
  const badMagic = image.slice();
  badMagic[0] = 0x00;
  const cases: [Uint8Array, RegExp][] = [
    [flipped, /invalid snapshot: checksum mismatch/],
    [image.subarray(0, image.length - 3), /invalid snapshot: checksum mismatch/],
    [new Uint8Array(3), /invalid snapshot: only 3 bytes/],
    [badMagic, /invalid snapshot: missing the SLKV magic/],
  ];
  for (const [data, why] of cases) {
    assert.throws(
      () => target.store.restore(data),
      (e: unknown) => e instanceof DecodeError && why.test(e.message),
    );
    assert.deepEqual(target.store.snapshot(), before);
  }
});

// ---- the control plane inside the store ----

function machine(id: string, n = id === 'm1' ? 1 : 2): HardwareInput {
  return {
    id,
    interfaces: [{ mac: `02:00:00:00:00:0${n}`, dns: [], leaseTimeS: 600 }],
    arch: 'x86_64',
    uefi: false,
    netboot: { allowPXE: true, allowWorkflow: true },
    metadata: {},
  };
}

function oneActionSpec(worker: string) {
  return {
    version: '0.1',
    name: 't',
    globalTimeoutS: 60,
    tasks: [
      {
        name: 'os',
        worker,
        env: {},
        volumes: [],
        actions: [{ name: 'a', command: ['true'], args: [], env: {}, volumes: [], timeoutS: 5, retries: 0 }],
      },
    ],
  };
}

test('control commands apply through the store at its clock, without moving the KV revision', () => {
  const h = new Harness();
  h.put('a', '1');
  h.stampMs = 5_000;
  h.noop();
  h.stampMs = 4_000; // a new leader whose clock is behind: the store clock stays at 5,000
  const result = h.control({ type: 'hardware.put', hardware: machine('m1'), workerToken: 'tok' });
  assert.equal(result.type, 'control');
  assert.equal(result.type === 'control' ? result.result.type : '', 'hardware');
  const stored = h.store.control.hardware('m1');
  assert.equal(stored?.createdMs, 5_000);
  assert.equal(h.store.revision, 1);
  assert.equal(h.store.control.appliedIndex, h.index, 'control sees the raft index');
  const refused = h.control({ type: 'hardware.delete', id: 'nope' });
  assert.deepEqual(refused, {
    type: 'control',
    result: { type: 'error', code: 'E_NOT_FOUND', message: 'hardware "nope" does not exist' },
  });
});

test('a control command retried in its session is applied once and answered with the same bytes', () => {
  const h = new Harness();
  const client = h.register();
  const tag = { clientId: client, seq: 1, ackedSeq: 0 };
  const command: ControlCommand = { type: 'hardware.put', hardware: machine('m1'), workerToken: 'tok' };
  const first = h.raw(encodeCommand({ type: 'control', stampMs: h.stampMs, command, session: tag }));
  const again = h.raw(encodeCommand({ type: 'control', stampMs: h.stampMs, command, session: tag }));
  assert.deepEqual(again, first);
  assert.equal(h.store.control.hardware('m1')?.version, 1, 'not applied twice');
  // Without the session the same command is a second write.
  h.control(command);
  assert.equal(h.store.control.hardware('m1')?.version, 2);
});

test('snapshots carry the control state; a version-1 snapshot restores with an empty one', () => {
  const h = new Harness();
  h.put('k', 'v');
  h.control({ type: 'hardware.put', hardware: machine('m1'), workerToken: 'tok' });
  h.control({ type: 'template.put', name: 't', source: 'a' });
  h.control({
    type: 'workflow.create',
    id: 'w1',
    template: 't',
    templateVersion: 1,
    hardwareId: 'm1',
    hardwareMap: {},
    spec: oneActionSpec('m1'),
  });
  const image = h.store.snapshot();
  assert.equal(image[4], 2, 'snapshot version 2');
  const copy = new KvStore();
  copy.restore(image);
  assert.deepEqual(copy.snapshot(), image);
  assert.equal(copy.control.workflow('w1')?.state, 'PENDING');
  const twin = new Harness(copy);
  twin.index = h.index;
  for (const x of [h, twin]) x.control({ type: 'workflow.cancel', id: 'w1' });
  assert.deepEqual(twin.store.snapshot(), h.store.snapshot());

  // Version 1, written out from its documented layout: one key, no sessions, no control state.
  const w = new BinaryWriter().raw(Uint8Array.of(0x53, 0x4c, 0x4b, 0x56)).u8(1);
  w.uvarint(9).uvarint(1).uvarint(777).uvarint(0);
  w.uvarint(1)
    .string('default')
    .uvarint(1)
    .string('old')
    .bytes(bytes('value'))
    .uvarint(1)
    .uvarint(1)
    .uvarint(1);
  const body = w.finish();
  const v1 = new BinaryWriter().raw(body).u32(crc32c(body)).finish();
  const restored = new KvStore();
  restored.restore(image);
  restored.restore(v1);
  assert.equal(valueOf(restored, 'old'), 'value');
  assert.equal(restored.appliedIndex, 9);
  assert.equal(restored.control.workflow('w1'), undefined, 'the control state is empty');
  assert.deepEqual(restored.control.hardwareList(), []);
  assert.equal(restored.snapshot()[4], 2);
});

test('a snapshot whose control state is invalid is refused and changes nothing', () => {
  const h = new Harness();
  h.control({ type: 'hardware.put', hardware: machine('m1'), workerToken: 'tok' });
  const target = new Harness();
  target.put('mine', 'kept');
  target.control({ type: 'hardware.put', hardware: machine('m2'), workerToken: 'tok' });
  const before = target.store.snapshot();
  // A well-framed, correctly checksummed snapshot whose control JSON is not canonical.
  const w = new BinaryWriter().raw(Uint8Array.of(0x53, 0x4c, 0x4b, 0x56)).u8(2);
  w.uvarint(3).uvarint(0).uvarint(0).uvarint(0).uvarint(0);
  w.bytes(bytes(' {}'));
  const body = w.finish();
  const bad = new BinaryWriter().raw(body).u32(crc32c(body)).finish();
  assert.throws(
    () => target.store.restore(bad),
    (e: unknown) => e instanceof DecodeError && /^invalid snapshot: control snapshot/.test(e.message),
  );
  assert.deepEqual(target.store.snapshot(), before);
  assert.equal(target.store.control.hardware('m2')?.id, 'm2');
});

// ---- properties over random command streams ----

/** A session by slot: 0 is a client that was never registered, n picks the nth most recent one. */
interface SlotTag {
  readonly slot: number;
  readonly seq: number;
  readonly ackedSeq: number;
}

/** One generated entry, before its stamp and client id are resolved against the stream so far. */
type Step =
  | { readonly kind: 'garbage'; readonly bytes: Uint8Array }
  | {
      readonly kind: 'control';
      readonly advanceMs: number;
      readonly tag: SlotTag | undefined;
      readonly command: ControlCommand;
    }
  | { readonly kind: 'registerClient'; readonly advanceMs: number }
  | { readonly kind: 'noop'; readonly advanceMs: number; readonly tag: SlotTag | undefined }
  | {
      readonly kind: 'put' | 'delete';
      readonly advanceMs: number;
      readonly tag: SlotTag | undefined;
      readonly ns: string;
      readonly key: string;
      readonly value: Uint8Array;
      readonly prevRevision: number | undefined;
    };

/**
 * Streams that reach every path: live, expired and unknown sessions, duplicates, acknowledged
 * and overflowing result caches, CAS hits and misses, stamps that sometimes go backwards.
 */
function stepArbitrary(): fc.Arbitrary<Step> {
  const advanceMs = fc.integer({ min: -100, max: 300 });
  const tag = fc.option(
    fc
      .tuple(fc.nat({ max: 2 }), fc.integer({ min: 1, max: 5 }), fc.oneof(fc.constant(0), fc.nat({ max: 5 })))
      .map(([slot, seq, acked]) => ({ slot, seq, ackedSeq: Math.min(acked, seq - 1) })),
    { nil: undefined, freq: 3 },
  );
  const write = fc.record({
    kind: fc.constantFrom('put' as const, 'delete' as const),
    advanceMs,
    tag,
    ns: fc.constantFrom('a', 'b'),
    key: fc.constantFrom('k1', 'k2', 'k3', 'k1/x', 'k2/y'),
    value: fc.uint8Array({ maxLength: 4 }),
    prevRevision: fc.option(fc.nat({ max: 12 }), { nil: undefined }),
  });
  const control = fc.record({
    kind: fc.constant('control' as const),
    advanceMs,
    tag,
    command: fc.oneof(
      fc
        .constantFrom('m1', 'm2')
        .map((id): ControlCommand => ({ type: 'hardware.put', hardware: machine(id), workerToken: id })),
      fc.constantFrom('m1', 'm2').map((id): ControlCommand => ({ type: 'hardware.delete', id })),
      fc
        .constantFrom('a', 'b')
        .map((source): ControlCommand => ({ type: 'template.put', name: 't', source })),
      fc.constantFrom('w1', 'w2').map((id): ControlCommand => ({ type: 'workflow.cancel', id })),
      fc.constantFrom('w1', 'w2').map((id): ControlCommand => ({
        type: 'workflow.create',
        id,
        template: 't',
        templateVersion: 1,
        hardwareId: 'm1',
        hardwareMap: {},
        spec: oneActionSpec('m1'),
      })),
    ),
  });
  return fc.oneof(
    { weight: 8, arbitrary: write },
    { weight: 2, arbitrary: control },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('registerClient' as const), advanceMs }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('noop' as const), advanceMs, tag }) },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('garbage' as const),
        bytes: fc.uint8Array({ maxLength: 12 }),
      }),
    },
  );
}

/** Entry i of the result is applied at raft index i + 1; `command` is absent for garbage. */
function materialize(steps: readonly Step[]): { bytes: Uint8Array; command?: Command }[] {
  const registered: number[] = [];
  let clockMs = 100_000;
  return steps.map((step, i) => {
    if (step.kind === 'garbage') return { bytes: step.bytes };
    clockMs += step.advanceMs;
    const stampMs = clockMs;
    let command: Command;
    if (step.kind === 'registerClient') {
      registered.push(i + 1);
      command = { type: 'registerClient', stampMs };
    } else {
      const t = step.tag;
      const clientId =
        t === undefined
          ? 0
          : t.slot === 0 || registered.length === 0
            ? 999_999
            : registered.at(-1 - ((t.slot - 1) % registered.length))!;
      const session = t === undefined ? {} : { session: { clientId, seq: t.seq, ackedSeq: t.ackedSeq } };
      if (step.kind === 'noop') command = { type: 'noop', stampMs, ...session };
      else if (step.kind === 'control')
        command = { type: 'control', stampMs, command: step.command, ...session };
      else {
        const { ns, key, value } = step;
        const prev = step.prevRevision;
        command =
          step.kind === 'put'
            ? {
                type: 'put',
                stampMs,
                ns,
                key,
                value,
                ...session,
                ...(prev === undefined ? {} : { prevRevision: prev }),
              }
            : {
                type: 'delete',
                stampMs,
                ns,
                key,
                ...session,
                ...(prev === undefined || prev === 0 ? {} : { prevRevision: prev }),
              };
      }
    }
    return { bytes: encodeCommand(command), command };
  });
}

const streamOptions = { sessionTtlMs: 1_000, sessionsMax: 4, sessionResultsMax: 2 };

test('property: a store restored from any mid-stream snapshot continues byte-identically', () => {
  fc.assert(
    fc.property(fc.array(stepArbitrary(), { maxLength: 80 }), fc.nat(), (steps, cut) => {
      const entries = materialize(steps);
      const whole = new KvStore(streamOptions);
      const results = entries.map((e, i) => whole.apply(i + 1, e.bytes));
      const split = cut % (entries.length + 1);
      const first = new KvStore(streamOptions);
      entries.slice(0, split).forEach((e, i) => first.apply(i + 1, e.bytes));
      const image = first.snapshot();
      const resumed = new KvStore(streamOptions);
      resumed.restore(image);
      assert.deepEqual(resumed.snapshot(), image);
      for (let i = split; i < entries.length; i++) {
        assert.deepEqual(resumed.apply(i + 1, entries[i]!.bytes), results[i], `entry ${i + 1} differs`);
      }
      assert.deepEqual(resumed.snapshot(), whole.snapshot());
      const twin = new KvStore(streamOptions);
      entries.forEach((e, i) => twin.apply(i + 1, e.bytes));
      assert.deepEqual(twin.snapshot(), whole.snapshot());
    }),
    { numRuns: 200 },
  );
});

test('the stream generator reaches every session path (fixed seed, so this guard never flakes)', () => {
  const seen = new Set<string>();
  for (const steps of fc.sample(fc.array(stepArbitrary(), { maxLength: 80 }), {
    seed: 20_251_121,
    numRuns: 200,
  })) {
    const entries = materialize(steps);
    const store = new KvStore(streamOptions);
    const results = entries.map((e, i) => store.apply(i + 1, e.bytes));
    results.forEach((_, i) => seen.add(outcome(entries, results, i)));
  }
  for (const path of [
    'duplicate',
    'E_SESSION_EXPIRED',
    'acknowledged',
    'full',
    'E_CAS_FAILED',
    'session write',
  ]) {
    assert.ok(seen.has(path), `no generated stream reached ${path}; saw ${[...seen].join(', ')}`);
  }
});

/**
 * Names the path entry i took, for the coverage check above. A duplicate is a session command
 * answered with exactly the bytes an earlier command with the same (clientId, seq) got.
 */
function outcome(
  entries: readonly { command?: Command }[],
  results: readonly Uint8Array[],
  i: number,
): string {
  const command = entries[i]!.command;
  if (command === undefined) return 'garbage';
  const result = decodeResult(results[i]!);
  const tag = command.type === 'registerClient' ? undefined : command.session;
  if (result.type === 'error') {
    if (result.message.includes('already acknowledged')) return 'acknowledged';
    if (result.message.includes('unacknowledged results')) return 'full';
    if (result.code === 'E_SESSION_EXPIRED') return result.code;
  }
  if (tag === undefined) return result.type === 'error' ? result.code : result.type;
  const repeated = entries.slice(0, i).some((earlier, j) => {
    const c = earlier.command;
    const t = c === undefined || c.type === 'registerClient' ? undefined : c.session;
    return t?.clientId === tag.clientId && t.seq === tag.seq && equalBytes(results[j]!, results[i]!);
  });
  return repeated ? 'duplicate' : 'session write';
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, j) => x === b[j]);
}

test('property: without sessions the store matches a plain map model of put, delete and CAS', () => {
  type Entry = { value: Uint8Array; createRevision: number; modRevision: number; version: number };
  const expectCode = (result: CommandResult, code: string) =>
    assert.equal(result.type === 'error' ? result.code : result.type, code);
  fc.assert(
    fc.property(fc.array(stepArbitrary(), { maxLength: 80 }), (steps) => {
      const store = new KvStore();
      const model = new Map<string, Entry>();
      let revision = 0;
      materialize(steps).forEach((entry, i) => {
        const c = entry.command;
        if (c === undefined || (c.type !== 'put' && c.type !== 'delete')) return;
        const { session: _session, ...command } = c;
        const result = decodeResult(store.apply(i + 1, encodeCommand(command)));
        const id = `${command.ns}\u0000${command.key}`;
        const existing = model.get(id);
        const expected = command.prevRevision;
        const casOk = expected === undefined || (existing?.modRevision ?? 0) === expected;
        if (command.type === 'delete' && existing === undefined) return expectCode(result, 'E_NOT_FOUND');
        if (!casOk) return expectCode(result, 'E_CAS_FAILED');
        revision++;
        if (command.type === 'delete') {
          model.delete(id);
          return assert.deepEqual(result, { type: 'delete', revision, prev: existing });
        }
        model.set(id, {
          value: command.value,
          createRevision: existing?.createRevision ?? revision,
          modRevision: revision,
          version: (existing?.version ?? 0) + 1,
        });
        return assert.deepEqual(result, { type: 'put', revision, ...(existing ? { prev: existing } : {}) });
      });
      assert.equal(store.revision, revision);
      const listed = ['a', 'b'].flatMap((ns) =>
        store.range(ns, '', 100).map(({ ns, key, ...stored }) => [`${ns}\u0000${key}`, stored] as const),
      );
      assert.deepEqual(
        listed,
        [...model.entries()].sort(([x], [y]) => (x < y ? -1 : 1)),
      );
    }),
    { numRuns: 150 },
  );
});

test('a captured snapshot, encoded in slices while applies go on, has the bytes of the state at capture', async () => {
  const h = new Harness();
  // Enough keys and records for several slices of each part (2,048 keys, 64 records a slice).
  for (let i = 0; i < 5000; i++) h.put(`k${String(i).padStart(5, '0')}`, `v${i}`, { ns: `ns${i % 3}` });
  for (let i = 0; i < 150; i++) {
    const mac = `02:00:00:00:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}`;
    const hardware = { ...machine(`m${i}`), interfaces: [{ mac, dns: [], leaseTimeS: 600 }] };
    const put = h.control({ type: 'hardware.put', hardware, workerToken: `tok${i}` });
    assert.equal(put.type === 'control' ? put.result.type : put.type, 'hardware');
  }
  h.control({ type: 'template.put', name: 't', source: 'a' });
  for (let i = 0; i < 100; i++) {
    const created = h.control({
      type: 'workflow.create',
      id: `w${i}`,
      template: 't',
      templateVersion: 1,
      hardwareId: `m${i}`,
      hardwareMap: {},
      spec: oneActionSpec(`m${i}`),
    });
    assert.equal(created.type === 'control' ? created.result.type : created.type, 'workflow');
  }
  const atCapture = h.store.snapshot();
  const capture = h.store.captureSnapshot();
  assert.equal(capture.appliedIndex, h.index);

  // Between slices: overwrite, delete and add keys, and change the control state.
  let pauses = 0;
  const encoded = await capture.encode(() => {
    pauses++;
    h.put(`k${String(pauses).padStart(5, '0')}`, 'changed', { ns: `ns${pauses % 3}` });
    h.del(`k${String(pauses + 2500).padStart(5, '0')}`, { ns: `ns${(pauses + 2500) % 3}` });
    h.put(`new${pauses}`, 'x');
    h.control({ type: 'workflow.cancel', id: `w${pauses % 100}` });
    return Promise.resolve();
  });
  assert.ok(pauses >= 6, `expected several slices, got ${pauses} pauses`);
  assert.deepEqual(encoded, atCapture);
  assert.notDeepEqual(h.store.snapshot(), atCapture, 'the state did move on meanwhile');

  const copy = new KvStore();
  copy.restore(encoded);
  assert.equal(copy.appliedIndex, capture.appliedIndex);
  assert.deepEqual(copy.snapshot(), atCapture);
});
