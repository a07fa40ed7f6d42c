// Goal: prove bounded state (docs/decisions/0020-bounded-state.md). workflow.retention and
// workflow.gc need state version 2 (refused by the gate before then); the retention is checked,
// audited, and kept in the snapshot only when it is not the default, in format 6 only; workflow.gc
// removes exactly the listed workflows that are finished at the listed time, with their events
// and indexes, and skips any other, the same on every node; the collector's choice (count, age,
// oldest finished first) on tables; output tails kept per workflow stay within their budget
// from version 2 on, oldest cut first, deterministically across a restore; the archive writes
// JSON lines to a file or a directory; the collector archives before it proposes and proposes
// nothing when the archive fails, when it does not lead, or before version 2. The default
// retention, which no admin set, removes nothing for a grace after the upgrade to version 2: the
// stamp of that raise is kept (in the snapshot too, in both layouts, refused where it cannot be),
// a set retention clears it and applies at once, and the collector says once when it starts.
// Method: ControlState through apply() with explicit leader stamps (through the codec, as the log
// carries commands); snapshots compared byte for byte; the pure chooser on tables; the archive
// and the collector against a temporary directory, the collector proposing into a ControlState.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { archiveFileName, archiveTarget, WorkflowArchive } from '../../src/node/workflow-archive.js';
import { WorkflowCollector } from '../../src/node/workflow-collector.js';
import { ConfigError } from '../../src/node/config.js';
import { DecodeError } from '../../src/state/binary.js';
import { decodeResult, encodeCommand } from '../../src/state/store-command.js';
import type { AuditTag } from '../../src/state/control/audit-log.js';
import { decodeControlCommand, encodeControlCommand } from '../../src/state/control/codec.js';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import type { HardwareInput, RenderedTemplate, Workflow, WorkflowEvent } from '../../src/model/records.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { EventLog } from '../../src/state/control/event-log.js';
import { ShapeError } from '../../src/state/control/shape.js';
import { writeSnapshot } from '../../src/state/control/snapshot.js';
import {
  defaultRetentionGraceMs,
  pastRetention,
  retentionStartsMs,
  workflowRetentionDefault,
  type FinishedWorkflow,
} from '../../src/state/control/workflow-retention.js';
import { ReplicatedState } from '../../src/state/replicated-state.js';
import {
  attemptOutputTailBytesMax,
  workflowGcBatchMax,
  workflowOutputTailBytesMax,
} from '../../src/model/limits.js';
import { clusterVersionRefusal, controlCommandVersion } from '../../src/state/versions.js';
import { nextAction } from '../../src/workflow/rules.js';
import { realClock } from '../../src/platform/clock.js';

const day = 24 * 3600 * 1000;

/** A pino line as the collector's tests read it back. */
interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [field: string]: unknown;
}
const admin: AuditTag = {
  user: 'root',
  role: 'admin',
  address: '127.0.0.1:1',
  method: 'Control/WorkflowRetention',
};
const silent = pino({ level: 'silent' });

function machine(id: string, n: number): HardwareInput {
  return {
    id,
    interfaces: [{ mac: `02:00:00:00:00:${n.toString(16).padStart(2, '0')}`, dns: [], leaseTimeS: 3600 }],
    arch: 'x86_64',
    uefi: true,
    netboot: { allowPXE: true, allowWorkflow: true },
    metadata: {},
  };
}

function specOf(actions: number): RenderedTemplate {
  return {
    version: '0.1',
    name: 'provision',
    globalTimeoutS: 7 * 24 * 3600,
    tasks: [
      {
        name: 'os',
        worker: 'm1',
        env: {},
        volumes: [],
        actions: Array.from({ length: actions }, (_, i) => ({
          name: `a${i}`,
          command: ['/bin/true'],
          args: [],
          env: {},
          volumes: [],
          timeoutS: 600,
          retries: 0,
        })),
      },
    ],
  };
}

type Ok<T extends ControlResult['type']> = Extract<ControlResult, { readonly type: T }>;

/** A ControlState with a raft-like index and a leader clock; commands go through the codec. */
class Harness {
  readonly state: ControlState;
  index = 0;
  nowMs = 1_000_000;
  readonly deleted: string[] = [];
  readonly collected: string[][] = [];

  constructor(state = new ControlState()) {
    this.state = state;
    state.changes.on('workflowDeleted', ({ id }) => this.deleted.push(id));
    state.changes.on('workflowsCollected', ({ ids }) => this.collected.push([...ids]));
  }

  run(command: ControlCommand): ControlResult {
    this.index += 1;
    return this.state.apply(this.index, this.nowMs, decodeControlCommand(encodeControlCommand(command)));
  }

  ok<T extends ControlResult['type']>(command: ControlCommand, type: T): Ok<T> {
    const result = this.run(command);
    assert.equal(result.type, type, `${command.type}: ${JSON.stringify(result)}`);
    return result as Ok<T>;
  }

  /** Two machines, a template, and the cluster at version 2 unless `version1`. */
  static ready(version1 = false): Harness {
    const h = new Harness();
    h.ok({ type: 'hardware.put', hardware: machine('m1', 1), workerTokenSha256: 'a'.repeat(64) }, 'hardware');
    h.ok({ type: 'hardware.put', hardware: machine('m2', 2), workerTokenSha256: 'b'.repeat(64) }, 'hardware');
    h.ok({ type: 'template.put', name: 'ubuntu', source: 'version: "0.1"\nname: ubuntu\n' }, 'template');
    if (!version1) h.ok({ type: 'cluster.version', version: 2 }, 'clusterVersion');
    return h;
  }

  create(id: string, actions = 1): Workflow {
    return this.ok(
      {
        type: 'workflow.create',
        id,
        template: 'ubuntu',
        templateVersion: this.state.template('ubuntu')?.version ?? 0,
        hardwareId: 'm1',
        hardwareMap: {},
        spec: specOf(actions),
      },
      'workflow',
    ).workflow;
  }

  cancel(id: string): Workflow {
    this.nowMs += 1_000;
    return this.ok({ type: 'workflow.cancel', id }, 'workflow').workflow;
  }

  /** Runs the workflow's next action to success with `outputTail`. */
  step(id: string, outputTail: string): void {
    const wf = this.state.workflow(id);
    const next = wf === undefined ? null : nextAction(wf);
    assert.ok(next !== null, `${id} has nothing to start`);
    const ref = { workflowId: id, actionIndex: next.index, attempt: next.attempt, workerId: next.workerId };
    this.ok({ type: 'attempt.start', ...ref }, 'attempt');
    this.ok(
      { type: 'attempt.result', ...ref, success: true, exitStatus: 0, message: '', outputTail },
      'attempt',
    );
  }

  gc(...workflows: { id: string; finishedMs: number }[]): Ok<'collected'> {
    return this.ok({ type: 'workflow.gc', workflows }, 'collected');
  }

  finishedAt(id: string): { id: string; finishedMs: number } {
    return { id, finishedMs: this.state.workflow(id)?.finishedMs ?? -1 };
  }
}

function snapshotDoc(state: ControlState): Record<string, unknown> {
  return JSON.parse(new TextDecoder().decode(state.snapshot())) as Record<string, unknown>;
}

const encode = (value: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(value));

function tailBytes(events: readonly WorkflowEvent[]): number {
  return events.reduce((n, e) => n + Buffer.byteLength(e.outputTail ?? '', 'utf8'), 0);
}

describe('version gate', () => {
  it('workflow.retention and workflow.gc need state version 2, and are refused before it', () => {
    const retention: ControlCommand = { type: 'workflow.retention', finishedMax: 5, finishedDays: 1 };
    const gc: ControlCommand = { type: 'workflow.gc', workflows: [] };
    assert.equal(controlCommandVersion(retention), 2);
    assert.equal(controlCommandVersion(gc), 2);
    assert.match(clusterVersionRefusal(retention, 1) ?? '', /workflow\.retention needs cluster version 2/);
    assert.equal(clusterVersionRefusal(gc, 2), undefined);
    // Written at payload version 2, so a build of version 1 stops at it instead of diverging.
    const bytes = encodeCommand({ type: 'control', stampMs: 1_000, command: retention });
    assert.equal(bytes[5], 2);
    const h = Harness.ready(true);
    h.create('w1');
    h.cancel('w1');
    const before = h.state.snapshot();
    for (const command of [retention, { type: 'workflow.gc' as const, workflows: [h.finishedAt('w1')] }]) {
      const r = h.run(command);
      assert.equal(r.type, 'error');
      assert.match(r.type === 'error' ? r.message : '', /needs cluster version 2/);
    }
    assert.ok(h.state.workflow('w1') !== undefined);
    assert.deepEqual(h.state.workflowRetention, workflowRetentionDefault);
    const { appliedIndex: _a, ...was } = JSON.parse(new TextDecoder().decode(before)) as Record<
      string,
      unknown
    >;
    const { appliedIndex: _b, ...now } = snapshotDoc(h.state);
    assert.deepEqual(now, was);
  });

  it('the store applies them once the cluster runs at version 2', () => {
    const store = new ReplicatedState();
    const control = (command: ControlCommand): Uint8Array =>
      encodeCommand({ type: 'control', stampMs: 1_000, command });
    store.apply(1, control({ type: 'cluster.version', version: 2 }));
    const r = decodeResult(
      store.apply(2, control({ type: 'workflow.retention', finishedMax: 7, finishedDays: 0 })),
    );
    assert.deepEqual(r, {
      type: 'control',
      result: { type: 'workflowRetention', retention: { finishedMax: 7, finishedDays: 0 } },
    });
  });
});

describe('workflow.retention', () => {
  it('sets the retention within its limits, audited like audit.retention', () => {
    const h = Harness.ready();
    assert.deepEqual(h.state.workflowRetention, { finishedMax: 10_000, finishedDays: 30 });
    const set = h.ok(
      { type: 'workflow.retention', finishedMax: 2, finishedDays: 0, audit: admin },
      'workflowRetention',
    );
    assert.deepEqual(set.retention, { finishedMax: 2, finishedDays: 0 });
    for (const [finishedMax, finishedDays, why] of [
      [0, 1, /finishedMax: must be 1-100000, got 0/],
      [100_001, 1, /finishedMax: must be 1-100000/],
      [5, -1, /finishedDays: must be 0 \(no age limit\) to 3650, got -1/],
      [5, 3_651, /finishedDays: must be 0 \(no age limit\) to 3650/],
    ] as const) {
      const r = h.run({ type: 'workflow.retention', finishedMax, finishedDays, audit: admin });
      assert.equal(r.type, 'error');
      assert.ok(r.type === 'error' && r.code === 'E_INVALID' && why.test(r.message), JSON.stringify(r));
    }
    assert.deepEqual(h.state.workflowRetention, { finishedMax: 2, finishedDays: 0 });
    const trail = h.state.auditTrail({ limit: 10 }).entries;
    assert.equal(trail.length, 5);
    assert.deepEqual(trail.map((e) => [e.kind, e.target, e.error?.code ?? 'ok']).at(-1), [
      'workflow.retention',
      'finishedMax=2 finishedDays=0',
      'ok',
    ]);
  });
});

describe('workflow.gc', () => {
  it('removes exactly the listed finished workflows at their finish time, with events and indexes', () => {
    const h = Harness.ready();
    for (const id of ['w1', 'w2', 'w3', 'w4']) h.create(id);
    h.cancel('w1');
    h.cancel('w2');
    h.cancel('w4');
    const w4 = h.finishedAt('w4');
    // w4 finishes again (retried, cancelled) after the collector saw it: it is not the one chosen.
    h.ok({ type: 'workflow.retry', id: 'w4', fromStart: false }, 'workflow');
    h.cancel('w4');
    const eventsBefore = h.state.events('w1', 0, 100).length;
    assert.ok(eventsBefore > 0);
    const r = h.gc(
      h.finishedAt('w1'),
      { id: 'w3', finishedMs: 0 },
      { id: 'ghost', finishedMs: 5 },
      w4,
      h.finishedAt('w2'),
    );
    assert.deepEqual(r.ids, ['w1', 'w2']);
    assert.equal(h.state.workflow('w1'), undefined);
    assert.equal(h.state.workflow('w2'), undefined);
    assert.equal(h.state.workflow('w3')?.state, 'PENDING', 'an active workflow is skipped');
    assert.equal(h.state.workflow('w4')?.state, 'CANCELLED', 'a workflow finished again since is skipped');
    assert.deepEqual(h.state.events('w1', 0, 100), []);
    assert.equal(h.state.finishedWorkflowCount, 1);
    assert.deepEqual(
      h.state.finishedWorkflows().map((w) => w.id),
      ['w4'],
    );
    assert.deepEqual(
      h.state.workflowsForWorker('m1').map((w) => w.id),
      ['w3'],
    );
    assert.deepEqual(h.deleted, ['w1', 'w2']);
    assert.deepEqual(h.collected, [['w1', 'w2']]);
    // Machinery, not a call: nothing in the trail.
    assert.deepEqual(h.state.auditTrail({ limit: 10 }).entries, []);
    // Nothing left to remove: an empty answer, no hook.
    assert.deepEqual(h.gc({ id: 'w3', finishedMs: 0 }).ids, []);
    assert.equal(h.collected.length, 1);
  });

  it('two states fed the same commands, one restored midway, end with the same bytes', () => {
    const stream: { nowMs: number; command: ControlCommand }[] = [];
    const h = Harness.ready();
    // What h applies after its setup, to replay on copies.
    const run = h.run.bind(h);
    h.run = (command) => {
      stream.push({ nowMs: h.nowMs, command });
      return run(command);
    };
    for (const id of ['w1', 'w2', 'w3']) h.create(id, 2);
    h.step('w1', 'x'.repeat(100));
    h.cancel('w1');
    h.cancel('w2');
    h.ok({ type: 'workflow.retention', finishedMax: 1, finishedDays: 3 }, 'workflowRetention');
    h.gc(h.finishedAt('w1'));
    h.cancel('w3');
    // The setup is the same commands at the same stamps: the same state.
    const setup = Harness.ready();
    const replay = (state: ControlState, from: number, entries: typeof stream): void => {
      entries.forEach((e, i) => state.apply(from + i + 1, e.nowMs, e.command));
    };
    const b = new ControlState();
    b.restore(setup.state.snapshot());
    const cut = 4;
    replay(b, setup.index, stream.slice(0, cut));
    const c = new ControlState();
    c.restore(b.snapshot());
    replay(c, setup.index + cut, stream.slice(cut));
    assert.deepEqual(c.snapshot(), h.state.snapshot());
    assert.deepEqual(c.workflowRetention, { finishedMax: 1, finishedDays: 3 });
  });
});

describe('snapshots', () => {
  it('keep a retention other than the default in format 6, and leave the default out', () => {
    const h = Harness.ready();
    assert.equal(snapshotDoc(h.state)['workflowRetention'], undefined);
    h.ok({ type: 'workflow.retention', finishedMax: 50, finishedDays: 7 }, 'workflowRetention');
    const doc = snapshotDoc(h.state);
    assert.equal(doc['format'], 6);
    assert.deepEqual(doc['workflowRetention'], { finishedMax: 50, finishedDays: 7 });
    assert.deepEqual(Object.keys(doc).slice(-2), ['clusterVersion', 'workflowRetention']);
    const copy = new ControlState();
    copy.restore(h.state.snapshot());
    assert.deepEqual(copy.workflowRetention, { finishedMax: 50, finishedDays: 7 });
    assert.deepEqual(copy.snapshot(), h.state.snapshot());
    // Back to the default: left out again.
    h.ok({ type: 'workflow.retention', finishedMax: 10_000, finishedDays: 30 }, 'workflowRetention');
    assert.equal(snapshotDoc(h.state)['workflowRetention'], undefined);
    // An older snapshot restores with the default.
    copy.restore(Harness.ready(true).state.snapshot());
    assert.deepEqual(copy.workflowRetention, workflowRetentionDefault);
  });

  it('refuses a retention where it cannot be: before format 6, the default written, out of range', () => {
    const h = Harness.ready();
    h.ok({ type: 'workflow.retention', finishedMax: 50, finishedDays: 7 }, 'workflowRetention');
    const image = snapshotDoc(h.state);
    const { clusterVersion: _v, ...atOne } = image;
    const cases: [Uint8Array, RegExp][] = [
      [encode({ ...atOne, format: 2 }), /format 2 has no workflow retention/],
      [
        encode({ ...image, workflowRetention: { finishedMax: 10_000, finishedDays: 30 } }),
        /leaves out the default/,
      ],
      [
        encode({ ...image, workflowRetention: { finishedMax: 0, finishedDays: 7 } }),
        /finishedMax: must be in \[1, 100000\]/,
      ],
      [
        encode({ ...image, workflowRetention: { finishedMax: 5, finishedDays: 4_000 } }),
        /finishedDays: must be in \[0, 3650\]/,
      ],
      [encode({ ...image, workflowRetention: { finishedDays: 7, finishedMax: 5 } }), /not in canonical form/],
    ];
    const target = new ControlState();
    const before = target.snapshot();
    for (const [data, why] of cases) {
      assert.throws(
        () => target.restore(data),
        (e: unknown) => e instanceof DecodeError && why.test(e.message),
        String(why),
      );
      assert.deepEqual(target.snapshot(), before);
    }
    // And the writer never makes one: a retention needs the cluster at version 2.
    assert.throws(
      () =>
        writeSnapshot({
          ...h.state.captureImage(),
          clusterVersion: 1,
        }),
      (e: unknown) => e instanceof ShapeError && /workflowRetention/.test(e.message),
    );
  });
});

describe('the default retention waits out a grace after the upgrade', () => {
  it('cluster.version records the stamp that raised the cluster to 2; setting the retention clears it', () => {
    const h = Harness.ready(true);
    assert.equal(h.state.workflowRetentionDefaultSinceMs, undefined, 'nothing at version 1');
    h.nowMs = 5_000_000;
    h.ok({ type: 'cluster.version', version: 2 }, 'clusterVersion');
    assert.equal(h.state.workflowRetentionDefaultSinceMs, 5_000_000);
    // Raised once: a repeat later keeps the first stamp.
    h.nowMs += day;
    h.ok({ type: 'cluster.version', version: 2 }, 'clusterVersion');
    assert.equal(h.state.workflowRetentionDefaultSinceMs, 5_000_000);
    assert.equal(retentionStartsMs(h.state.workflowRetentionDefaultSinceMs), 5_000_000 + 7 * day);
    // A refused setting changes nothing; any accepted one, the default included, is a choice.
    h.run({ type: 'workflow.retention', finishedMax: 0, finishedDays: 30 });
    assert.equal(h.state.workflowRetentionDefaultSinceMs, 5_000_000);
    h.ok({ type: 'workflow.retention', finishedMax: 10_000, finishedDays: 30 }, 'workflowRetention');
    assert.equal(h.state.workflowRetentionDefaultSinceMs, undefined);
    assert.equal(retentionStartsMs(undefined), undefined, 'a set retention applies at once');
    assert.equal(defaultRetentionGraceMs, 7 * day);
  });

  it('snapshots keep the stamp in format 6 while the retention is unset, in both layouts', () => {
    const store = new ReplicatedState();
    const control = (index: number, stampMs: number, command: ControlCommand): void =>
      void store.apply(index, encodeCommand({ type: 'control', stampMs, command }));
    control(1, 7_000, { type: 'cluster.version', version: 2 });
    const doc = snapshotDoc(store.control);
    assert.equal(doc['format'], 6);
    assert.equal(doc['workflowRetentionDefaultSinceMs'], 7_000);
    assert.deepEqual(Object.keys(doc).slice(-2), ['clusterVersion', 'workflowRetentionDefaultSinceMs']);
    const copy = new ControlState();
    copy.restore(store.control.snapshot());
    assert.equal(copy.workflowRetentionDefaultSinceMs, 7_000);
    assert.deepEqual(copy.snapshot(), store.control.snapshot());
    // The store's own snapshot (records, 0023) carries it in its head.
    const restored = new ReplicatedState();
    restored.restore(store.snapshot());
    assert.equal(restored.control.workflowRetentionDefaultSinceMs, 7_000);
    assert.deepEqual(restored.snapshot(), store.snapshot());
    // Set: gone from the snapshot, and a restore has it gone too.
    control(2, 8_000, { type: 'workflow.retention', finishedMax: 10_000, finishedDays: 30 });
    assert.equal(snapshotDoc(store.control)['workflowRetentionDefaultSinceMs'], undefined);
    restored.restore(store.snapshot());
    assert.equal(restored.control.workflowRetentionDefaultSinceMs, undefined);
  });

  it('readers refuse the stamp where it cannot be; the writer never makes one there', () => {
    const h = Harness.ready();
    const image = snapshotDoc(h.state);
    assert.equal(typeof image['workflowRetentionDefaultSinceMs'], 'number');
    const { clusterVersion: _v, ...atOne } = image;
    const retention = { finishedMax: 50, finishedDays: 7 };
    const { workflowRetentionDefaultSinceMs: since, ...withoutSince } = image;
    const { clusterVersion: _w, ...atOneWithoutSince } = withoutSince;
    const cases: [Uint8Array, RegExp][] = [
      [encode({ ...atOne, format: 2 }), /format 2 has no workflowRetentionDefaultSinceMs/],
      [
        encode({ ...withoutSince, workflowRetention: retention, workflowRetentionDefaultSinceMs: since }),
        /workflowRetentionDefaultSinceMs: is cleared when an operator sets the workflow retention/,
      ],
      [encode({ ...image, workflowRetentionDefaultSinceMs: -1 }), /workflowRetentionDefaultSinceMs/],
      [encode({ ...image, workflowRetentionDefaultSinceMs: 1.5 }), /workflowRetentionDefaultSinceMs/],
      [encode({ ...image, workflowRetentionDefaultSinceMs: '7000' }), /workflowRetentionDefaultSinceMs/],
      // Before clusterVersion rather than after it.
      [
        encode({ ...atOneWithoutSince, workflowRetentionDefaultSinceMs: since, clusterVersion: 2 }),
        /canonical form/,
      ],
    ];
    const target = new ControlState();
    const before = target.snapshot();
    for (const [data, why] of cases) {
      assert.throws(
        () => target.restore(data),
        (e: unknown) => e instanceof DecodeError && why.test(e.message),
        String(why),
      );
      assert.deepEqual(target.snapshot(), before);
    }
    for (const [bad, why] of [
      [{ clusterVersion: 1 }, /recorded when the cluster reaches state version 2/],
      [{ workflowRetention: retention }, /cleared when an operator sets/],
    ] as const) {
      assert.throws(
        () => writeSnapshot({ ...h.state.captureImage(), ...bad }),
        (e: unknown) => e instanceof ShapeError && why.test(e.message),
      );
    }
  });
});

describe('the collector chooses', () => {
  const wf = (id: string, finishedMs: number): FinishedWorkflow => ({ id, finishedMs });
  const now = 100 * day;
  const table: {
    what: string;
    finished: FinishedWorkflow[];
    finishedMax: number;
    finishedDays: number;
    limit?: number;
    want: string[];
  }[] = [
    {
      what: 'nothing past either limit',
      finished: [wf('a', now - day), wf('b', now)],
      finishedMax: 2,
      finishedDays: 30,
      want: [],
    },
    {
      what: 'beyond the count, oldest finished first',
      finished: [wf('c', 30), wf('a', 10), wf('d', 40), wf('b', 20)],
      finishedMax: 2,
      finishedDays: 0,
      want: ['a', 'b'],
    },
    {
      what: 'ties in finish time by id',
      finished: [wf('z', 5), wf('y', 5), wf('x', 9)],
      finishedMax: 1,
      finishedDays: 0,
      want: ['y', 'z'],
    },
    {
      what: 'older than the days',
      finished: [wf('old', now - 31 * day), wf('new', now - 29 * day), wf('older', now - 40 * day)],
      finishedMax: 100,
      finishedDays: 30,
      want: ['older', 'old'],
    },
    {
      what: 'exactly at the age limit stays',
      finished: [wf('edge', now - 30 * day)],
      finishedMax: 100,
      finishedDays: 30,
      want: [],
    },
    {
      what: 'age limit 0 keeps any age',
      finished: [wf('ancient', 0)],
      finishedMax: 100,
      finishedDays: 0,
      want: [],
    },
    {
      what: 'the longer of the two',
      finished: [wf('a', now - 50 * day), wf('b', now - 40 * day), wf('c', now - 1), wf('d', now)],
      finishedMax: 3,
      finishedDays: 30,
      want: ['a', 'b'],
    },
    {
      what: 'count beyond the age',
      finished: [wf('a', now - 50 * day), wf('b', now - 2), wf('c', now - 1), wf('d', now)],
      finishedMax: 1,
      finishedDays: 30,
      want: ['a', 'b', 'c'],
    },
    {
      what: 'at most the limit',
      finished: [wf('a', 1), wf('b', 2), wf('c', 3), wf('d', 4)],
      finishedMax: 1,
      finishedDays: 0,
      limit: 2,
      want: ['a', 'b'],
    },
    { what: 'none finished', finished: [], finishedMax: 1, finishedDays: 1, want: [] },
  ];
  for (const row of table) {
    it(row.what, () => {
      const got = pastRetention(
        row.finished,
        { finishedMax: row.finishedMax, finishedDays: row.finishedDays },
        now,
        row.limit ?? workflowGcBatchMax,
      );
      assert.deepEqual(
        got.map((w) => w.id),
        row.want,
      );
    });
  }
});

describe('output tails per workflow', () => {
  const tail = (i: number): string =>
    `${String(i).padStart(6, '0')}${'t'.repeat(attemptOutputTailBytesMax - 6)}`;
  // 300 actions × 4 KiB: over the 1 MiB budget.
  const actions = Math.ceil((workflowOutputTailBytesMax * 1.2) / attemptOutputTailBytesMax);

  it('at version 1 every tail is kept, as builds 0.1.x keep them', () => {
    const h = Harness.ready(true);
    h.create('w1', actions);
    for (let i = 0; i < actions; i++) h.step('w1', tail(i));
    assert.equal(tailBytes(h.state.events('w1', 0, 100_000)), actions * attemptOutputTailBytesMax);
  });

  it('from version 2 the events keep at most the budget, the oldest cut first; statuses keep theirs', () => {
    const h = Harness.ready();
    const later = 20;
    h.create('w1', actions + later);
    const seen: WorkflowEvent[] = [];
    h.state.changes.on('workflowEvent', ({ event }) => seen.push(event));
    for (let i = 0; i < actions; i++) h.step('w1', tail(i));
    const events = h.state.events('w1', 0, 100_000);
    const withTail = events.filter((e) => (e.outputTail ?? '') !== '');
    assert.ok(tailBytes(events) <= workflowOutputTailBytesMax, `${tailBytes(events)} bytes kept`);
    assert.equal(withTail.length, Math.floor(workflowOutputTailBytesMax / attemptOutputTailBytesMax));
    // The newest are the ones kept, whole.
    assert.equal(withTail.at(-1)?.outputTail, tail(actions - 1));
    assert.equal(withTail[0]?.outputTail, tail(actions - withTail.length));
    // Hooks saw every tail as it was applied; every action's status keeps its own.
    assert.equal(tailBytes(seen), actions * attemptOutputTailBytesMax);
    assert.ok(
      h.state
        .workflow('w1')
        ?.actions.slice(0, actions)
        .every((s, i) => s.outputTail === tail(i)),
    );
    // A restored copy carries on cutting exactly as the original.
    const copy = new ControlState();
    copy.restore(h.state.snapshot());
    const more = new Harness(copy);
    more.index = h.index;
    more.nowMs = h.nowMs;
    for (let i = actions; i < actions + later; i++) {
      h.step('w1', tail(i));
      more.step('w1', tail(i));
    }
    assert.deepEqual(copy.snapshot(), h.state.snapshot());
    assert.equal(
      h.state
        .events('w1', 0, 100_000)
        .filter((e) => (e.outputTail ?? '') !== '')
        .at(0)?.outputTail,
      tail(actions + later - 256),
    );
  });

  it('EventLog cuts whole tails, oldest first, and counts what it keeps', () => {
    const event = (seq: number, outputTail?: string): WorkflowEvent => ({
      seq,
      workflowId: 'w',
      type: 'action.succeeded',
      stampMs: seq,
      ...(outputTail === undefined ? {} : { outputTail }),
    });
    const log = new EventLog(4, [event(1, 'aaaa'), event(2), event(3, ''), event(4, 'bb')]);
    assert.equal(log.outputTailBytes, 6);
    assert.equal(log.cutOutputTails(6), 0);
    assert.equal(log.cutOutputTails(5), 1);
    assert.deepEqual(
      log.all().map((e) => e.outputTail),
      [undefined, undefined, '', 'bb'],
    );
    log.push(event(5, 'ccc'));
    // Event 1 dropped by count; 'bb' and 'ccc' kept.
    assert.equal(log.outputTailBytes, 5);
    assert.equal(log.cutOutputTails(3), 1);
    assert.deepEqual(
      log.all().map((e) => [e.seq, e.outputTail]),
      [
        [2, undefined],
        [3, ''],
        [4, undefined],
        [5, 'ccc'],
      ],
    );
    assert.equal(log.outputTailBytes, 3);
    // A multi-byte tail counts in UTF-8 bytes.
    const utf = new EventLog(10, [event(1, 'é'.repeat(3))]);
    assert.equal(utf.outputTailBytes, 6);
  });
});

describe('archive', () => {
  const temp = (): string => mkdtempSync(join(tmpdir(), 'slipway-archive-'));

  function entry(id: string): { workflow: Workflow; events: WorkflowEvent[] } {
    const h = Harness.ready();
    h.create(id);
    const workflow = h.cancel(id);
    return { workflow, events: h.state.events(id, 0, 100) };
  }

  it('appends JSON lines to a file, after a torn line on a line of their own', async () => {
    const dir = temp();
    try {
      const file = join(dir, 'archive.jsonl');
      const target = archiveTarget(file);
      assert.deepEqual(target, { kind: 'file', path: file });
      const archive = new WorkflowArchive(target, 'n1');
      assert.equal(await archive.append([entry('w1'), entry('w2')], 5 * day), file);
      writeFileSync(file, `${readFileSync(file, 'utf8')}{"torn`);
      await archive.append([entry('w3')], 6 * day);
      const lines = readFileSync(file, 'utf8').split('\n');
      assert.equal(lines.at(-1), '', 'ends with a newline');
      assert.equal(lines[2], '{"torn');
      const parsed = [lines[0], lines[1], lines[3]].map(
        (l) =>
          JSON.parse(l ?? '') as {
            workflow: Workflow;
            events: WorkflowEvent[];
            archivedMs: number;
            archivedBy: string;
          },
      );
      assert.deepEqual(
        parsed.map((p) => [p.workflow.id, p.workflow.state, p.events.length > 0, p.archivedMs, p.archivedBy]),
        [
          ['w1', 'CANCELLED', true, 5 * day, 'n1'],
          ['w2', 'CANCELLED', true, 5 * day, 'n1'],
          ['w3', 'CANCELLED', true, 6 * day, 'n1'],
        ],
      );
      assert.deepEqual(parsed[0]?.events, entry('w1').events);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('writes a file per UTC day into a directory, made when the path ends in /', async () => {
    const dir = temp();
    try {
      const target = archiveTarget(`${join(dir, 'made')}/`);
      assert.equal(target.kind, 'directory');
      const archive = new WorkflowArchive(target, 'n2');
      const t1 = Date.parse('2026-03-01T23:59:59Z');
      const t2 = Date.parse('2026-03-02T00:00:01Z');
      await archive.append([entry('w1')], t1);
      await archive.append([entry('w2')], t2);
      await archive.append([entry('w3')], t2);
      assert.equal(archiveFileName(t1), 'workflows-2026-03-01.jsonl');
      assert.deepEqual(readdirSync(join(dir, 'made')).sort(), [
        'workflows-2026-03-01.jsonl',
        'workflows-2026-03-02.jsonl',
      ]);
      const second = readFileSync(join(dir, 'made', 'workflows-2026-03-02.jsonl'), 'utf8')
        .trim()
        .split('\n');
      assert.deepEqual(
        second.map((l) => (JSON.parse(l) as { workflow: Workflow }).workflow.id),
        ['w2', 'w3'],
      );
      // An existing directory is one too.
      assert.equal(archiveTarget(dir).kind, 'directory');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses at start a path it could not write', () => {
    assert.throws(
      () => archiveTarget('/nonexistent-dir-for-slipway/archive.jsonl'),
      (e: unknown) =>
        e instanceof ConfigError &&
        /--workflow-archive .*: the directory \/nonexistent-dir-for-slipway does not exist/.test(e.message),
    );
    assert.throws(
      () => archiveTarget('/dev/null'),
      (e: unknown) => e instanceof ConfigError && /must be a regular file or a directory/.test(e.message),
    );
  });
});

describe('collector', () => {
  /** The collector proposing into a harness's state, as the leader's proposer would. */
  function collectorOn(
    h: Harness,
    opts: { archive?: WorkflowArchive; leader?: () => boolean; logger?: pino.Logger } = {},
  ): { collector: WorkflowCollector; proposed: ControlCommand[] } {
    const proposed: ControlCommand[] = [];
    const collector = new WorkflowCollector({
      control: h.state,
      isLeader: opts.leader ?? (() => true),
      propose: (command) => {
        proposed.push(command);
        return Promise.resolve(h.run(command));
      },
      ...(opts.archive === undefined ? {} : { archive: opts.archive }),
      logger: opts.logger ?? silent,
      clock: { ...realClock, now: () => h.nowMs },
    });
    return { collector, proposed };
  }

  it('archives the workflows past the retention, then removes them; the newest stay', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'slipway-collector-'));
    try {
      const h = Harness.ready();
      for (const id of ['w1', 'w2', 'w3', 'w4', 'w5']) h.create(id);
      h.create('active');
      for (const id of ['w3', 'w1', 'w5', 'w2', 'w4']) h.cancel(id);
      h.ok({ type: 'workflow.retention', finishedMax: 2, finishedDays: 0 }, 'workflowRetention');
      const file = join(dir, 'a.jsonl');
      const { collector, proposed } = collectorOn(h, {
        archive: new WorkflowArchive(archiveTarget(file), 'n1'),
      });
      assert.equal(await collector.round(), 3);
      assert.deepEqual(
        h.state
          .workflows()
          .map((w) => w.id)
          .sort(),
        ['active', 'w2', 'w4'],
      );
      assert.deepEqual(
        proposed.map((c) => (c.type === 'workflow.gc' ? c.workflows.map((w) => w.id) : [])),
        [['w3', 'w1', 'w5']],
      );
      const lines = readFileSync(file, 'utf8').trim().split('\n');
      assert.deepEqual(
        lines.map((l) => (JSON.parse(l) as { workflow: Workflow }).workflow.id),
        ['w3', 'w1', 'w5'],
      );
      assert.equal(collector.archived, 3);
      assert.equal(collector.collected, 3);
      // Nothing more past it: no proposal.
      assert.equal(await collector.round(), 0);
      assert.equal(proposed.length, 1);
      // By age too, by the leader's clock.
      h.ok({ type: 'workflow.retention', finishedMax: 100, finishedDays: 1 }, 'workflowRetention');
      h.nowMs += day + 10_000;
      assert.equal(await collector.round(), 2);
      assert.deepEqual(
        h.state.workflows().map((w) => w.id),
        ['active'],
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('proposes nothing when the archive fails, when not leading, or before version 2', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'slipway-collector-'));
    try {
      const h = Harness.ready();
      h.create('w1');
      h.create('w2');
      h.cancel('w1');
      h.cancel('w2');
      h.ok({ type: 'workflow.retention', finishedMax: 1, finishedDays: 0 }, 'workflowRetention');
      const target = archiveTarget(`${join(dir, 'archive')}/`);
      // The directory goes away after the start's check (a disk unmounted, say): writes fail.
      rmSync(target.path, { recursive: true });
      const broken = collectorOn(h, { archive: new WorkflowArchive(target, 'n1') });
      assert.equal(await broken.collector.round(), 0);
      assert.deepEqual(broken.proposed, []);
      assert.ok(h.state.workflow('w1') !== undefined);
      assert.equal(broken.collector.archived, 0);
      mkdirSync(target.path);
      const follower = collectorOn(h, { leader: () => false });
      assert.equal(await follower.collector.round(), 0);
      assert.deepEqual(follower.proposed, []);
      const old = Harness.ready(true);
      old.create('w1');
      old.cancel('w1');
      old.create('w2');
      old.cancel('w2');
      const early = collectorOn(old);
      // Version 1 keeps every finished workflow: the default count is not even reached, and the
      // collector does not look before the cluster runs at version 2 anyway.
      old.nowMs += 365 * day;
      assert.equal(await early.collector.round(), 0);
      assert.deepEqual(early.proposed, []);
      // Once the archive can be written, the round goes through.
      const healed = collectorOn(h, { archive: new WorkflowArchive(target, 'n1') });
      assert.equal(await healed.collector.round(), 1);
      assert.deepEqual(
        h.state.workflows().map((w) => w.id),
        ['w2'],
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  /** A logger whose lines the test reads back. */
  function captured(): { logger: pino.Logger; lines: () => LogLine[] } {
    const out: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void out.push(line) });
    return { logger, lines: () => out.map((l) => JSON.parse(l) as LogLine) };
  }

  /** Three workflows finished 40 days before the upgrade to version 2, one still pending. */
  function upgradedWithOldWorkflows(): { h: Harness; upgradedMs: number } {
    const h = Harness.ready(true);
    for (const id of ['w1', 'w2', 'w3']) h.create(id);
    for (const id of ['w1', 'w2', 'w3']) h.cancel(id);
    h.create('active');
    h.nowMs += 40 * day;
    h.ok({ type: 'cluster.version', version: 2 }, 'clusterVersion');
    return { h, upgradedMs: h.nowMs };
  }

  it('the default waits out its grace after the upgrade, saying once when it starts and how to choose', async () => {
    const { h, upgradedMs } = upgradedWithOldWorkflows();
    const log = captured();
    const { collector, proposed } = collectorOn(h, { logger: log.logger });
    h.nowMs += 3_600_000;
    assert.equal(await collector.round(), 0);
    h.nowMs = upgradedMs + defaultRetentionGraceMs - 1;
    assert.equal(await collector.round(), 0);
    assert.deepEqual(proposed, [], 'nothing removed during the grace');
    assert.equal(h.state.workflows().length, 4);
    const told = log.lines().filter((l) => l.msg.includes('starts to remove finished workflows'));
    assert.equal(told.length, 1, 'said once');
    const [line] = told;
    assert.equal(line?.level, 40, 'at warn: workflows are past it already');
    assert.equal(line?.['startsAt'], new Date(upgradedMs + 7 * day).toISOString());
    assert.equal(line?.['pastRetentionNow'], 3);
    assert.match(
      line?.msg ?? '',
      /7 days after the cluster reached state version 2; until then none is removed/,
    );
    assert.match(
      line?.msg ?? '',
      /To keep more, set it before then: `slipway workflow retention --keep N --max-age Dd`/,
    );
    assert.match(
      line?.msg ?? '',
      /to start it now, set it: `slipway workflow retention --keep 10000 --max-age 30d`/,
    );
    // Once the grace has passed, by the leader's clock: removed, and said.
    h.nowMs = upgradedMs + defaultRetentionGraceMs;
    assert.equal(await collector.round(), 3);
    assert.deepEqual(
      h.state.workflows().map((w) => w.id),
      ['active'],
    );
    assert.equal(log.lines().filter((l) => l.msg.includes('applies from now')).length, 1);
  });

  it('a retention an admin sets applies at once, the default included; nothing past it is said at info', async () => {
    const { h } = upgradedWithOldWorkflows();
    const fresh = Harness.ready();
    const log = captured();
    assert.equal(await collectorOn(fresh, { logger: log.logger }).collector.round(), 0);
    assert.deepEqual(
      log.lines().map((l) => [l.level, l['pastRetentionNow']]),
      [[30, 0]],
    );
    const { collector } = collectorOn(h);
    h.nowMs += 3_600_000;
    assert.equal(await collector.round(), 0);
    h.ok({ type: 'workflow.retention', finishedMax: 10_000, finishedDays: 30 }, 'workflowRetention');
    assert.equal(await collector.round(), 3);
  });

  it('removes at most a batch per command, oldest first, over several commands in one round', async () => {
    const h = Harness.ready();
    const n = workflowGcBatchMax + 10;
    for (let i = 0; i < n; i++) {
      const id = `w${String(i).padStart(4, '0')}`;
      h.create(id);
      h.cancel(id);
    }
    h.ok({ type: 'workflow.retention', finishedMax: 5, finishedDays: 0 }, 'workflowRetention');
    const { collector, proposed } = collectorOn(h);
    assert.equal(await collector.round(), n - 5);
    assert.deepEqual(
      proposed.map((c) => (c.type === 'workflow.gc' ? c.workflows.length : -1)),
      [workflowGcBatchMax, 5],
    );
    assert.deepEqual(
      h.state.workflows().map((w) => w.id),
      Array.from({ length: 5 }, (_, i) => `w${String(n - 5 + i).padStart(4, '0')}`),
    );
  });
});
