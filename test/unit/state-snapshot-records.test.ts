// Goal: prove the record layout of snapshots (docs/decisions/0023-streamed-snapshots.md). A
// cluster at state version 2 writes the store's snapshot version 3, whose control state is
// records; one at version 1 keeps writing version 2 (one JSON document), which an older build
// reads. Both restore, at once or in slices, to byte-identical snapshots, equal states giving
// equal bytes; every older layout still restores; a corrupted, reordered or non-canonical
// snapshot is refused with an error that names it and changes nothing; a restore in slices lets
// the event loop turn between them and replaces the state only at the end.
// Method: ReplicatedState through apply() with encoded, leader-stamped commands, as the raft node
// applies its log; snapshots compared byte for byte; corruptions built by rewriting one record
// and sealing the result with a fresh checksum, so the decoder (not the checksum) must refuse it;
// the event loop's turns counted by a setImmediate loop, not by timing.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { BinaryReader, BinaryWriter, DecodeError } from '../../src/state/binary.js';
import { decodeResult, encodeCommand } from '../../src/state/store-command.js';
import type { AuditTag } from '../../src/state/control/audit-log.js';
import type { ControlCommand } from '../../src/state/control/commands.js';
import type { HardwareInput, RenderedTemplate } from '../../src/model/records.js';
import { readSnapshotRecords, snapshotRecordSlices } from '../../src/state/control/snapshot-records.js';
import { ReplicatedState } from '../../src/state/replicated-state.js';
import { runAtOnce } from '../../src/state/slices.js';
import { crc32c } from '../../src/platform/crc32c.js';
import { powerStepsOf } from '../../src/state/control/power-jobs.js';

const admin: AuditTag = { user: 'root', role: 'admin', address: '127.0.0.1:1', method: 'Control/Test' };

function machine(n: number): HardwareInput {
  const hex = n.toString(16).padStart(4, '0');
  return {
    id: `m${String(n).padStart(5, '0')}`,
    interfaces: [
      {
        mac: `02:00:00:00:${hex.slice(0, 2)}:${hex.slice(2)}`,
        ip: { address: `10.1.${n >> 8}.${n & 0xff}`, prefix: 16 },
        dns: [],
        leaseTimeS: 3600,
      },
    ],
    arch: 'x86_64',
    uefi: true,
    netboot: { allowPXE: true, allowWorkflow: true },
    metadata: { rack: `r${n % 7}`, note: 'ünïcode ✓' },
    bmc: { address: `ipmi://127.0.0.1:${9000 + n}`, username: 'admin', password: 'pw' },
  };
}

function spec(worker: string): RenderedTemplate {
  return {
    version: '0.1',
    name: 'provision',
    globalTimeoutS: 3600,
    tasks: [
      {
        name: 'os',
        worker,
        env: {},
        volumes: [],
        actions: ['a', 'b'].map((name) => ({
          name,
          command: ['/bin/true'],
          args: [],
          env: {},
          volumes: [],
          timeoutS: 60,
          retries: 0,
        })),
      },
    ],
  };
}

/** A store fed through the codec at increasing indexes, as a raft node applies its log. */
class Node {
  readonly store = new ReplicatedState();
  index = 0;
  nowMs = Date.UTC(2026, 0, 1);

  run(command: ControlCommand): string {
    this.nowMs += 1000;
    const result = decodeResult(
      this.store.apply(++this.index, encodeCommand({ type: 'control', stampMs: this.nowMs, command })),
    );
    assert.equal(result.type, 'control', JSON.stringify(result));
    if (result.type !== 'control') return '';
    assert.notEqual(result.result.type, 'error', `${command.type}: ${JSON.stringify(result.result)}`);
    return result.result.type;
  }

  put(key: string, value: string): void {
    const result = decodeResult(
      this.store.apply(
        ++this.index,
        encodeCommand({
          type: 'put',
          stampMs: this.nowMs,
          ns: 'app',
          key,
          value: new TextEncoder().encode(value),
        }),
      ),
    );
    assert.equal(result.type, 'put');
  }
}

/** Every collection of the control state, at cluster version `version`. */
function populated(version: 1 | 2, machines = 12, workflows = 10): Node {
  const n = new Node();
  if (version === 2) {
    n.run({ type: 'cluster.version', version: 2 });
    n.run({ type: 'workflow.retention', finishedMax: 500, finishedDays: 3, audit: admin });
  }
  for (let i = 0; i < machines; i++)
    n.run({
      type: 'hardware.put',
      hardware: machine(i),
      workerTokenSha256: i.toString(16).padStart(64, '0'),
    });
  n.run({ type: 'template.put', name: 'ubuntu', source: 'version: "0.1"\nname: ubuntu\n' });
  n.run({ type: 'template.put', name: 'debian', source: 'version: "0.1"\nname: debian\n' });
  for (let i = 0; i < workflows; i++) {
    const hw = `m${String(i % machines).padStart(5, '0')}`;
    n.run({
      type: 'workflow.create',
      id: `wf-${String(i).padStart(5, '0')}`,
      template: 'ubuntu',
      templateVersion: 1,
      hardwareId: hw,
      hardwareMap: { device_1: hw },
      spec: spec(hw),
    });
    if (i % 2 === 0) n.run({ type: 'workflow.cancel', id: `wf-${String(i).padStart(5, '0')}`, message: 'x' });
  }
  n.run({ type: 'token.put', name: 'ops', role: 'admin', sha256: 'ab'.repeat(32) });
  n.run({ type: 'lease.grant', grants: [{ mac: '02:00:00:ff:00:01', ip: '10.9.0.1', leaseTimeS: 600 }] });
  n.run({
    type: 'power.request',
    jobId: 'job-1',
    hardwareId: 'm00001',
    op: 'on',
    steps: powerStepsOf('on'),
    maxAttempts: 3,
  });
  n.run({ type: 'artifact.put', name: 'debian.raw', sha256: 'cd'.repeat(32), bytes: 1234 });
  n.run({ type: 'audit.retention', entries: 1000, days: 30, audit: admin });
  n.put('k1', 'v1');
  n.put('k2', 'v2');
  return n;
}

/** The store's layout byte: 2 holds the control state as one document, 3 as records. */
function layout(snapshot: Uint8Array): number {
  return snapshot[4] ?? -1;
}

async function restoredInSlices(data: Uint8Array): Promise<ReplicatedState> {
  const store = new ReplicatedState();
  await store.restoreInSlices(data, () => new Promise((resolve) => setImmediate(resolve)));
  return store;
}

/** The snapshot with its checksum recomputed, so only the decoder can refuse what changed. */
function sealed(body: Uint8Array): Uint8Array {
  const out = new Uint8Array(body.length + 4);
  out.set(body);
  new DataView(out.buffer).setUint32(body.length, crc32c(body), true);
  return out;
}

/**
 * The snapshot's control records as texts, and the offset where they start: found by reading
 * the records' own lengths from the end of the KV part (the test's snapshots have one
 * namespace), then re-encoded after `edit` changes them.
 */
function rewriteRecords(snapshot: Uint8Array, edit: (records: string[]) => string[]): Uint8Array {
  const body = snapshot.subarray(0, snapshot.length - 4);
  // Find where the control records start by trying each offset: the only one from which the
  // records read cleanly to the end is the true one (KV values here are short ASCII).
  for (let start = 5; start < body.length; start++) {
    const r = new BinaryReader(body.subarray(start));
    let texts: string[];
    try {
      const head = r.string('head', 1 << 20);
      if (!head.startsWith('{"format":6,')) continue;
      texts = [head];
      for (let s = 0; s < 8; s++) {
        const count = r.uvarint('count');
        texts.push(`#${count}`);
        for (let i = 0; i < count; i++) texts.push(r.string('record', 1 << 24));
      }
      r.end('records');
    } catch {
      continue;
    }
    const w = new BinaryWriter();
    w.raw(body.subarray(0, start));
    for (const t of edit(texts)) {
      if (t.startsWith('#')) w.uvarint(Number(t.slice(1)));
      else w.string(t);
    }
    return sealed(w.finish());
  }
  throw new Error('no control records found');
}

describe('snapshot record layout', () => {
  it('is written at cluster version 2, round-trips at once and in slices, equal states equal bytes', async () => {
    const a = populated(2);
    const bytes = a.store.snapshot();
    assert.equal(layout(bytes), 3);
    const once = new ReplicatedState();
    once.restore(bytes);
    assert.deepEqual(once.snapshot(), bytes);
    const sliced = await restoredInSlices(bytes);
    assert.deepEqual(sliced.snapshot(), bytes);
    assert.equal(sliced.appliedIndex, a.store.appliedIndex);
    assert.equal(sliced.control.workflows().length, 10);
    assert.equal(sliced.control.powerJob('job-1')?.hardwareId, 'm00001');
    assert.equal(sliced.control.artifact('debian.raw')?.bytes, 1234);
    assert.equal(sliced.get('app', 'k2')?.version, 1);
    // The sliced encoding gives the same bytes, and a twin fed the same log the same ones.
    assert.deepEqual(await a.store.captureSnapshot().encode(() => Promise.resolve()), bytes);
    assert.deepEqual(populated(2).store.snapshot(), bytes);
    // The restored store goes on like the original: the same next entry, the same bytes.
    const resumed = new Node();
    resumed.store.restore(bytes);
    resumed.index = a.index;
    resumed.nowMs = a.nowMs;
    a.run({ type: 'workflow.cancel', id: 'wf-00001', message: 'later' });
    resumed.run({ type: 'workflow.cancel', id: 'wf-00001', message: 'later' });
    assert.deepEqual(resumed.store.snapshot(), a.store.snapshot());
  });

  it('keeps the document layout (store version 2) while the cluster runs at version 1', async () => {
    const n = populated(1);
    const bytes = n.store.snapshot();
    assert.equal(layout(bytes), 2);
    assert.deepEqual((await restoredInSlices(bytes)).snapshot(), bytes);
    // Moving to version 2 moves the next snapshot to records; the state reads back the same.
    n.run({ type: 'cluster.version', version: 2 });
    const after = n.store.snapshot();
    assert.equal(layout(after), 3);
    assert.deepEqual((await restoredInSlices(after)).snapshot(), after);
  });

  it('still restores store version 1 (no control state), in slices too', async () => {
    // Written out from its documented layout: appliedIndex 7, revision 1, nowMs 777, no
    // sessions, one namespace with one key, no control state.
    const v1 = new BinaryWriter().raw(Uint8Array.of(0x53, 0x4c, 0x4b, 0x56)).u8(1);
    v1.uvarint(7).uvarint(1).uvarint(777).uvarint(0);
    v1.uvarint(1).string('default').uvarint(1).string('old');
    v1.bytes(new TextEncoder().encode('value')).uvarint(1).uvarint(1).uvarint(1);
    const data = sealed(v1.finish());
    const store = await restoredInSlices(data);
    assert.equal(store.appliedIndex, 7);
    assert.equal(store.get('default', 'old')?.modRevision, 1);
    assert.equal(store.control.workflows().length, 0);
    assert.equal(layout(store.snapshot()), 2);
  });

  it('refuses a corrupted snapshot with a clear error and changes nothing', async () => {
    const good = populated(2).store.snapshot();
    const target = populated(1, 3, 2).store;
    const before = target.snapshot();
    const cases: [string, Uint8Array, RegExp][] = [
      ['a flipped byte', flip(good, Math.floor(good.length / 2)), /invalid snapshot: checksum mismatch/],
      ['cut short', good.subarray(0, good.length - 100), /invalid snapshot: checksum mismatch/],
      [
        'a record that is not canonical',
        rewriteRecords(good, (t) =>
          t.map((x) => (x.startsWith('{"id":"m00003"') ? x.replace(':', ': ') : x)),
        ),
        /invalid snapshot: control snapshot: hardware\[3\] is not in canonical form/,
      ],
      [
        'a record that is not JSON',
        rewriteRecords(good, (t) => t.map((x) => (x.startsWith('{"id":"m00003"') ? x.slice(1) : x))),
        /invalid snapshot: control snapshot: hardware\[3\] is not JSON/,
      ],
      [
        'records out of order',
        rewriteRecords(good, (t) => {
          const i = t.findIndex((x) => x.startsWith('{"id":"m00003"'));
          return [...t.slice(0, i), t[i + 1]!, t[i]!, ...t.slice(i + 2)];
        }),
        /invalid snapshot: control snapshot: hardware: "m00003" is out of order or repeated/,
      ],
      [
        'a record its reader refuses',
        rewriteRecords(good, (t) =>
          t.map((x) => (x.startsWith('{"id":"m00003"') ? x.replace('"arch":"x86_64"', '"arch":"mips"') : x)),
        ),
        /invalid snapshot: control snapshot: hardware\[3\]\.arch/,
      ],
      [
        'a count past the records',
        rewriteRecords(good, (t) => {
          const last = t.findLastIndex((x) => x.startsWith('#'));
          return t.map((x, i) => (i === last ? `#${Number(x.slice(1)) + 1}` : x));
        }),
        /invalid snapshot: .*truncated/,
      ],
      [
        'a head that holds a record its reader refuses',
        rewriteRecords(good, (t) => [t[0]!.replace('"templates":[]', '"templates":[{}]'), ...t.slice(1)]),
        /invalid snapshot: control snapshot: templates\[0\]/,
      ],
      [
        'a head that holds a record',
        rewriteRecords(good, (t) => {
          const template = t.find((x) => x.startsWith('{"name":"debian"'))!;
          return [t[0]!.replace('"templates":[]', `"templates":[${template}]`), ...t.slice(1)];
        }),
        /invalid snapshot: control snapshot: the head holds templates/,
      ],
      [
        'a count over the limit',
        rewriteRecords(good, (t) => {
          const templates = t.findIndex(
            (x, i) => i > 0 && x.startsWith('#') && t[i + 1]?.startsWith('{"name"'),
          );
          return t.map((x, i) => (i === templates ? '#1000000000' : x));
        }),
        /invalid snapshot: control snapshot: templates has 1000000000 items, over the limit of \d+/,
      ],
      [
        'audit entries under a head without a trail',
        rewriteRecords(good, (t) => [
          t[0]!.replace(/,"audit":\{"retention":\{[^}]*\},"lastSeq":\d+,"entries":\[\]\}/, ''),
          ...t.slice(1),
        ]),
        /invalid snapshot: control snapshot: audit entries without an audit trail/,
      ],
      [
        'records under a head of format 2',
        rewriteRecords(good, (t) => [
          new TextDecoder().decode(
            new TextEncoder().encode(t[0]!.replace('"format":6', '"format":2').replace(/,"audit".*$/, '}')),
          ),
          ...t.slice(1),
        ]),
        /invalid snapshot: control snapshot: the record layout needs a head of format 6/,
      ],
      [
        'an unknown layout',
        sealed(withByte(good.subarray(0, good.length - 4), 4, 9)),
        /unsupported snapshot version 9/,
      ],
    ];
    for (const [what, data, why] of cases) {
      assert.throws(
        () => target.restore(data),
        (e: unknown) => e instanceof DecodeError && why.test(e.message),
        what,
      );
      await assert.rejects(
        target.restoreInSlices(data, () => new Promise((resolve) => setImmediate(resolve))),
        (e: unknown) => e instanceof DecodeError && why.test(e.message),
        what,
      );
      assert.deepEqual(target.snapshot(), before, `${what} changed the state`);
    }
  });

  it('restores in slices between which the event loop turns, and replaces the state only at the end', async () => {
    const big = populated(2, 400, 1500);
    const bytes = big.store.snapshot();
    const target = populated(2, 2, 1);
    const before = target.store.snapshot();
    let turns = 0;
    let unchangedMeanwhile = true;
    let running = true;
    const spin = (): void => {
      if (!running) return;
      turns++;
      if (target.store.control.workflows().length !== 1) unchangedMeanwhile = false;
      setImmediate(spin);
    };
    setImmediate(spin);
    let pauses = 0;
    await target.store.restoreInSlices(bytes, () => {
      pauses++;
      return new Promise((resolve) => setImmediate(resolve));
    });
    running = false;
    assert.ok(pauses >= 10, `restore paused ${pauses} times`);
    assert.ok(turns >= 10, `the event loop turned ${turns} times during the restore`);
    assert.ok(unchangedMeanwhile, 'the state changed before the restore ended');
    assert.notDeepEqual(before, bytes);
    assert.deepEqual(target.store.snapshot(), bytes);
    assert.equal(target.store.control.workflows().length, 1500);
  });

  it('the record writer refuses a state of a cluster at version 1, and reads back what it wrote', () => {
    const v1 = populated(1, 2, 1).store.control.captureImage();
    assert.throws(
      () => runAtOnce(snapshotRecordSlices(v1)),
      /records are written only by a cluster at version 2/,
    );
    const image = populated(2, 3, 2).store.control.captureImage();
    const pieces = runAtOnce(snapshotRecordSlices(image));
    const w = new BinaryWriter();
    for (const p of pieces) w.raw(p);
    const read = runAtOnce(readSnapshotRecords(new BinaryReader(w.finish())));
    assert.equal(read.hardware.length, 3);
    assert.deepEqual(
      read.workflows.map((x) => x.workflow.id),
      ['wf-00000', 'wf-00001'],
    );
    assert.equal(read.audit?.entries.length, image.audit?.entries.length);
    assert.ok(Object.isFrozen(read.hardware[0]));
  });
});

function flip(data: Uint8Array, at: number): Uint8Array {
  return withByte(data, at, (data[at] ?? 0) ^ 0x40);
}

function withByte(data: Uint8Array, at: number, value: number): Uint8Array {
  const copy = data.slice();
  copy[at] = value;
  return copy;
}
