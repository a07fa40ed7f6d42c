// `npm run bench -- state [--quick] [--machines N] [--workflows N]`
// Bounded state, in one process and without a cluster: a ReplicatedState is built by applying encoded
// commands exactly as a raft node applies its log (`store.apply(index, encodeCommand(...))`,
// leader-stamped), with N machines and W workflows created and finished over time while the
// retention is on. The leader's collector (src/node/workflow-collector.ts) is emulated: every
// `--gc-every` created workflows, the same pure chooser (`pastRetention`) picks what is past the
// retention and a `workflow.gc` is applied, batch by batch, as the leader would propose it.
// Then it measures the snapshot the node would take (captureSnapshot + encode in slices with a
// setImmediate between them, as src/raft/node.ts does) and the restore of it into a fresh store
// (restoreInSlices, as a follower installs a snapshot from the leader or a node loads its own at
// start), each with the event-loop delay while it runs. One JSON line on stdout; progress on
// stderr.
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { decodeResult, encodeCommand, pastRetention, ReplicatedState } from '../src/state/index.js';
import type { ControlCommand } from '../src/state/index.js';
import type { HardwareInput, RenderedTemplate } from '../src/model/records.js';
import { attemptOutputTailBytesMax, workflowGcBatchMax } from '../src/model/limits.js';
import { nextAction } from '../src/workflow/index.js';
import { applyServerHeapProfile, serverHeapGrowingPercent } from '../src/platform/heap-profile.js';
import { percentile, round } from './stats.js';
import { wholeNumber } from './options.js';

const mb = 1024 * 1024;
const targets = { snapshotBytes: 100 * mb, eldP99Ms: 20, rssMb: 512 } as const;

interface Options {
  readonly machines: number;
  readonly workflows: number;
  /** Every how many created workflows one in `runEvery` runs its actions with output tails. */
  readonly runEvery: number;
  readonly gcEvery: number;
  readonly finishedMax: number;
  readonly finishedDays: number;
  /** Leaves V8's own heap sizing instead of the server's (`slipway server` applies it). */
  readonly v8DefaultHeap: boolean;
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      quick: { type: 'boolean', default: false },
      machines: { type: 'string' },
      workflows: { type: 'string' },
      'run-every': { type: 'string', default: '10' },
      'gc-every': { type: 'string', default: '1000' },
      'finished-max': { type: 'string' },
      'finished-days': { type: 'string', default: '30' },
      'v8-default-heap': { type: 'boolean', default: false },
    },
    strict: true,
  });
  const quick = values.quick;
  return {
    machines: wholeNumber(values.machines ?? (quick ? '1000' : '10000'), 'machines', 1),
    workflows: wholeNumber(values.workflows ?? (quick ? '10000' : '100000'), 'workflows', 1),
    runEvery: wholeNumber(values['run-every'], 'run-every', 1),
    gcEvery: wholeNumber(values['gc-every'], 'gc-every', 1),
    finishedMax: wholeNumber(values['finished-max'] ?? (quick ? '1000' : '10000'), 'finished-max', 1),
    finishedDays: Number(values['finished-days']),
    v8DefaultHeap: values['v8-default-heap'],
  };
}

function log(message: string): void {
  process.stderr.write(`state: ${message}\n`);
}

function machine(n: number): HardwareInput {
  const mac = [2, 0, (n >> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff]
    .map((b) => b.toString(16).padStart(2, '0'))
    .join(':');
  return {
    id: `m${n}`,
    interfaces: [
      {
        mac,
        ip: { address: `10.${(n >> 16) & 0xff}.${(n >> 8) & 0xff}.${n & 0xff}`, prefix: 8 },
        gateway: '10.0.0.1',
        hostname: `node-${n}`,
        dns: ['10.0.0.2'],
        leaseTimeS: 86_400,
      },
    ],
    arch: 'x86_64',
    uefi: true,
    netboot: { allowPXE: true, allowWorkflow: true },
    metadata: { rack: `r${n % 100}`, role: 'worker' },
  };
}

function spec(worker: string, actions: number): RenderedTemplate {
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
        actions: Array.from({ length: actions }, (_, i) => ({
          name: `step-${i}`,
          image: 'quay.io/slipway/actions/image2disk:v1',
          command: ['/bin/sh', '-c', `echo step ${i}`],
          args: [],
          env: { DEST_DISK: '/dev/sda' },
          volumes: [],
          timeoutS: 600,
          retries: 0,
        })),
      },
    ],
  };
}

/** Applies control commands as the raft node does: through the codec, at increasing indexes. */
class Applier {
  index = 0;
  nowMs = Date.UTC(2025, 0, 1);
  readonly store: ReplicatedState;
  constructor(store: ReplicatedState) {
    this.store = store;
  }

  run(command: ControlCommand, expect: string): void {
    this.index += 1;
    const bytes = this.store.apply(
      this.index,
      encodeCommand({ type: 'control', stampMs: this.nowMs, command }),
    );
    const result = decodeResult(bytes);
    const got = result.type === 'control' ? result.result.type : result.type;
    if (got !== expect) throw new Error(`${command.type} at ${this.index}: ${JSON.stringify(result)}`);
  }
}

/** The collector's rounds: everything past the retention now, in batches of workflowGcBatchMax. */
function collect(a: Applier): number {
  const control = a.store.control;
  const retention = control.workflowRetention;
  let removed = 0;
  for (;;) {
    if (retention.finishedDays === 0 && control.finishedWorkflowCount <= retention.finishedMax) break;
    const finished = control.finishedWorkflows().map((wf) => ({ id: wf.id, finishedMs: wf.finishedMs ?? 0 }));
    const chosen = pastRetention(finished, retention, a.nowMs, workflowGcBatchMax);
    if (chosen.length === 0) break;
    const before = control.finishedWorkflowCount;
    a.run({ type: 'workflow.gc', workflows: chosen }, 'collected');
    const gone = before - control.finishedWorkflowCount;
    if (gone === 0) throw new Error('workflow.gc removed nothing');
    removed += gone;
  }
  return removed;
}

function memory(): { rss_mb: number; heap_used_mb: number } {
  const m = process.memoryUsage();
  return { rss_mb: round(m.rss / mb, 1), heap_used_mb: round(m.heapUsed / mb, 1) };
}

function build(opts: Options): { store: ReplicatedState; collected: number; ran: number; buildMs: number } {
  const t0 = performance.now();
  const store = new ReplicatedState();
  const a = new Applier(store);
  const control = store.control;
  a.run({ type: 'cluster.version', version: 2 }, 'clusterVersion');
  if (control.clusterVersion !== 2) throw new Error('cluster.version 2 was not applied');
  a.run(
    { type: 'workflow.retention', finishedMax: opts.finishedMax, finishedDays: opts.finishedDays },
    'workflowRetention',
  );
  for (let n = 0; n < opts.machines; n++) {
    a.run(
      { type: 'hardware.put', hardware: machine(n), workerTokenSha256: n.toString(16).padStart(64, '0') },
      'hardware',
    );
  }
  if (control.hardwareList().length !== opts.machines) {
    throw new Error(`${control.hardwareList().length} machines stored, ${opts.machines} put`);
  }
  a.run({ type: 'template.put', name: 'ubuntu', source: 'version: "0.1"\nname: ubuntu\n' }, 'template');
  const templateVersion = control.template('ubuntu')?.version ?? 0;
  const tail = 'x'.repeat(attemptOutputTailBytesMax - 64);
  let collected = 0;
  let ran = 0;
  for (let i = 0; i < opts.workflows; i++) {
    const hardwareId = `m${i % opts.machines}`;
    const id = `wf-${i}`;
    const runs = i % opts.runEvery === 0;
    a.nowMs += 1_000;
    a.run(
      {
        type: 'workflow.create',
        id,
        template: 'ubuntu',
        templateVersion,
        hardwareId,
        hardwareMap: { device_1: hardwareId },
        spec: spec(hardwareId, runs ? 3 : 1),
      },
      'workflow',
    );
    if (control.workflow(id) === undefined) throw new Error(`workflow ${id} was not created`);
    if (runs) {
      ran++;
      for (let step = 0; step < 3; step++) {
        const wf = control.workflow(id);
        const next = wf === undefined ? null : nextAction(wf);
        if (next === null) throw new Error(`${id} has nothing to start`);
        const ref = {
          workflowId: id,
          actionIndex: next.index,
          attempt: next.attempt,
          workerId: next.workerId,
        };
        a.nowMs += 10;
        a.run({ type: 'attempt.start', ...ref }, 'attempt');
        a.nowMs += 1_000;
        a.run(
          {
            type: 'attempt.result',
            ...ref,
            success: true,
            exitStatus: 0,
            message: 'done',
            outputTail: `${id} step ${step}\n${tail}`,
          },
          'attempt',
        );
      }
    } else {
      a.nowMs += 10;
      a.run({ type: 'workflow.cancel', id, message: 'benchmark' }, 'workflow');
    }
    if (control.workflow(id)?.finishedMs === undefined) throw new Error(`workflow ${id} did not finish`);
    if ((i + 1) % opts.gcEvery === 0) collected += collect(a);
    if ((i + 1) % 10_000 === 0) log(`${i + 1} workflows, ${control.finishedWorkflowCount} finished kept`);
  }
  collected += collect(a);
  return { store, collected, ran, buildMs: performance.now() - t0 };
}

function nextTurnOfEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

interface Delays {
  readonly eld_ms: { p50: number; p99: number; max: number; samples: number };
  readonly probe_gap_ms: { p50: number; p99: number; max: number; samples: number };
  /** The garbage collector's pauses meanwhile: they land in the slices and count in the delay. */
  readonly gc_ms: { pauses: number; total: number; max: number };
  /** The highest RSS sampled meanwhile (every 10 ms). */
  readonly peak_rss_mb: number;
}

/**
 * Runs `work` while measuring the event loop: Node's delay histogram, and the gaps between the
 * turns of a 1 ms interval (what a heartbeat timer would see).
 */
async function measured<T>(work: () => Promise<T>): Promise<{ value: T; ms: number; delays: Delays }> {
  const eld = monitorEventLoopDelay({ resolution: 1 });
  const gaps: number[] = [];
  let last = performance.now();
  let peakRss = 0;
  const probe = setInterval(() => {
    const now = performance.now();
    gaps.push(now - last);
    last = now;
    if (gaps.length % 10 === 0) peakRss = Math.max(peakRss, process.memoryUsage.rss());
  }, 1);
  const gcPauses: number[] = [];
  const gc = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcPauses.push(entry.duration);
  });
  await new Promise((resolve) => setTimeout(resolve, 20));
  gaps.length = 0;
  last = performance.now();
  peakRss = process.memoryUsage.rss();
  gc.observe({ entryTypes: ['gc'] });
  eld.enable();
  const t0 = performance.now();
  const value = await work();
  const elapsed = performance.now() - t0;
  eld.disable();
  peakRss = Math.max(peakRss, process.memoryUsage.rss());
  // GC entries are delivered asynchronously: one more turn lets the last ones arrive.
  await new Promise((resolve) => setImmediate(resolve));
  gc.disconnect();
  clearInterval(probe);
  const sorted = gaps.sort((x, y) => x - y);
  const ms = (ns: number): number => round(ns / 1e6, 2);
  return {
    value,
    ms: elapsed,
    delays: {
      eld_ms: {
        p50: ms(eld.percentile(50)),
        p99: ms(eld.percentile(99)),
        max: ms(eld.max),
        samples: eld.count,
      },
      probe_gap_ms: {
        p50: round(percentile(sorted, 0.5), 2),
        p99: round(percentile(sorted, 0.99), 2),
        max: round(sorted.at(-1) ?? 0, 2),
        samples: sorted.length,
      },
      gc_ms: {
        pauses: gcPauses.length,
        total: round(
          gcPauses.reduce((a, b) => a + b, 0),
          1,
        ),
        max: round(Math.max(0, ...gcPauses), 1),
      },
      peak_rss_mb: round(peakRss / mb, 1),
    },
  };
}

export async function runStateBench(argv: readonly string[]): Promise<void> {
  const opts = parseOptions(argv);
  // The process runs as a node does: `slipway server` applies this before it starts.
  if (!opts.v8DefaultHeap) applyServerHeapProfile();
  log(`building: ${opts.machines} machines, ${opts.workflows} workflows`);
  const { store, collected, ran, buildMs } = build(opts);
  const kept = store.control.workflows().length;
  const afterBuild = memory();
  log(`built in ${Math.round(buildMs)} ms: ${kept} workflows kept, ${collected} collected`);

  // The snapshot, as the node takes it: capture, then encode in slices between event-loop turns.
  let captureMs = 0;
  const snapshot = await measured(() => {
    const t0 = performance.now();
    const capture = store.captureSnapshot();
    captureMs = performance.now() - t0;
    return capture.encode(nextTurnOfEventLoop);
  });
  const data = snapshot.value;
  const afterSnapshot = memory();
  log(`snapshot: ${data.length} bytes (layout ${data[4] ?? 0}) in ${Math.round(snapshot.ms)} ms`);

  // The restore, as a follower installs it: in slices between event-loop turns.
  const fresh = new ReplicatedState();
  const restore = await measured(() => fresh.restoreInSlices(data, nextTurnOfEventLoop));
  if (fresh.control.workflows().length !== kept || fresh.control.hardwareList().length !== opts.machines) {
    throw new Error('the restored store differs from the one snapshotted');
  }
  const afterRestore = memory();
  const maxRssMb = round(process.resourceUsage().maxRSS / 1024, 1);
  log(`restored in ${Math.round(restore.ms)} ms`);

  const result = {
    bench: 'state',
    machines: opts.machines,
    workflows_created: opts.workflows,
    workflows_with_output: ran,
    workflows_collected: collected,
    workflows_kept: kept,
    retention: store.control.workflowRetention,
    build_ms: Math.round(buildMs),
    entries_applied: store.appliedIndex,
    snapshot_layout: data[4] ?? 0,
    snapshot_bytes: data.length,
    snapshot_mb: round(data.length / mb, 2),
    snapshot_capture_ms: round(captureMs, 2),
    snapshot_ms: round(snapshot.ms, 1),
    eld_ms: snapshot.delays.eld_ms,
    probe_gap_ms: snapshot.delays.probe_gap_ms,
    snapshot_gc_ms: snapshot.delays.gc_ms,
    snapshot_peak_rss_mb: snapshot.delays.peak_rss_mb,
    restore_ms: round(restore.ms, 1),
    restore_eld_ms: restore.delays.eld_ms,
    restore_probe_gap_ms: restore.delays.probe_gap_ms,
    restore_gc_ms: restore.delays.gc_ms,
    restore_peak_rss_mb: restore.delays.peak_rss_mb,
    memory: { after_build: afterBuild, after_snapshot: afterSnapshot, after_restore: afterRestore },
    max_rss_mb: maxRssMb,
    heap_growing_percent: opts.v8DefaultHeap ? 'v8 default' : serverHeapGrowingPercent,
    pass: {
      snapshot_bytes: data.length <= targets.snapshotBytes,
      eld_p99: snapshot.delays.eld_ms.p99 <= targets.eldP99Ms,
      restore_eld_p99: restore.delays.eld_ms.p99 <= targets.eldP99Ms,
      // The peak over the whole run, the build included (its garbage is collected lazily).
      rss: maxRssMb <= targets.rssMb,
      // While the snapshot is taken, and while it is restored beside the built store.
      rss_snapshot: snapshot.delays.peak_rss_mb <= targets.rssMb,
      rss_restore: restore.delays.peak_rss_mb <= targets.rssMb,
      // One node's state and its snapshot, before a second copy is restored beside them.
      rss_after_snapshot: afterSnapshot.rss_mb <= targets.rssMb,
    },
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
