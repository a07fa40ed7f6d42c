// Goal: prove power jobs in the replicated state: a request becomes a PENDING job; each attempt
// is claimed once (a second claim of the same attempt is refused), its result recorded once
// (duplicates acknowledged, stale claims refused); failures retry behind a backoff up to the
// bound; a claim whose leader died lapses and the next leader takes the step over and finishes
// the job; jobs of one machine run in order; bad input changes nothing; and jobs survive a
// snapshot and restore byte for byte, with hardware passwords kept inside the state.
// Method: drive ControlState only through apply() with explicit leader stamps, as the store does.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import type { HardwareInput, PowerJob } from '../../src/model/records.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { decodeControlCommand, encodeControlCommand } from '../../src/state/control/codec.js';
import { powerRequest, powerRetryBackoffMs, powerStepsOf } from '../../src/state/control/power-jobs.js';
import { DecodeError } from '../../src/state/binary.js';
import { powerJobsKeptPerHardware } from '../../src/model/limits.js';

const leaseMs = 30_000;

function machine(id: string, n: number, bmc = true): HardwareInput {
  return {
    id,
    interfaces: [{ mac: `02:00:00:00:00:${n.toString(16).padStart(2, '0')}`, dns: [], leaseTimeS: 3600 }],
    arch: 'x86_64',
    uefi: false,
    netboot: { allowPXE: true, allowWorkflow: true },
    metadata: {},
    ...(bmc
      ? { bmc: { address: `ipmi://127.0.0.1:${9000 + n}`, username: 'admin', password: 'pw-secret' } }
      : {}),
  };
}

class Cluster {
  readonly state = new ControlState();
  index = 0;
  nowMs = 5_000_000;
  readonly changes: PowerJob[] = [];

  constructor() {
    this.state.changes.on('powerJob', ({ job }) => this.changes.push(job));
  }

  run(command: ControlCommand): ControlResult {
    // Every command goes through the codec, as it does in the log.
    const decoded = decodeControlCommand(encodeControlCommand(command));
    return this.state.apply(++this.index, this.nowMs, decoded);
  }

  job(command: ControlCommand): PowerJob {
    const r = this.run(command);
    assert.equal(r.type, 'powerJob', JSON.stringify(r));
    return r.job;
  }

  refused(command: ControlCommand, code: string, why?: RegExp): void {
    const before = withoutIndex(this.state.snapshot());
    const changes = this.changes.length;
    const r = this.run(command);
    assert.equal(r.type, 'error', `${command.type} should be refused: ${JSON.stringify(r)}`);
    assert.equal(r.code, code, r.message);
    if (why !== undefined) assert.match(r.message, why);
    assert.deepEqual(withoutIndex(this.state.snapshot()), before, 'a refused command changed the state');
    assert.equal(this.changes.length, changes, 'a refused command notified');
  }

  request(
    jobId: string,
    hardwareId = 'm1',
    op: 'on' | 'off' | 'cycle' | 'netboot' | 'status' = 'on',
  ): PowerJob {
    return this.job({
      type: 'power.request',
      jobId,
      hardwareId,
      op,
      steps: powerStepsOf(op),
      maxAttempts: 3,
    });
  }

  claim(job: PowerJob, claimer = 'n1'): Extract<ControlCommand, { type: 'power.claim' }> {
    return {
      type: 'power.claim',
      jobId: job.id,
      stepIndex: job.stepIndex,
      attempt: job.attempt + 1,
      claimer,
      leaseMs,
    };
  }

  step(
    job: PowerJob,
    ok: boolean,
    claimer = 'n1',
    message = ok ? 'done' : 'no answer',
  ): Extract<ControlCommand, { type: 'power.step' }> {
    return {
      type: 'power.step',
      jobId: job.id,
      stepIndex: job.stepIndex,
      attempt: job.attempt,
      claimer,
      ok,
      message,
      ...(ok ? { powerState: 'on' as const } : {}),
    };
  }
}

function withoutIndex(bytes: Uint8Array): unknown {
  const image = JSON.parse(new TextDecoder().decode(bytes)) as Record<string, unknown>;
  delete image['appliedIndex'];
  return image;
}

function setUp(): Cluster {
  const c = new Cluster();
  assert.equal(
    c.run({ type: 'hardware.put', hardware: machine('m1', 1), workerToken: 't1' }).type,
    'hardware',
  );
  assert.equal(
    c.run({ type: 'hardware.put', hardware: machine('m2', 2), workerToken: 't2' }).type,
    'hardware',
  );
  return c;
}

describe('power jobs', () => {
  it('a request asks for its op as idempotent steps, with the default attempts per step', () => {
    const steps = (op: Parameters<typeof powerRequest>[2]) => powerRequest('j', 'm1', op).steps;
    assert.deepEqual(powerRequest('j1', 'm1', 'netboot'), {
      type: 'power.request',
      jobId: 'j1',
      hardwareId: 'm1',
      op: 'netboot',
      steps: ['bootdev-pxe', 'off', 'on'],
      maxAttempts: 3,
    });
    assert.deepEqual(
      [steps('on'), steps('off'), steps('cycle'), steps('status'), steps('diskboot')],
      [['on'], ['off'], ['off', 'on'], ['status'], ['bootdev-disk']],
    );
    const job = setUp().job(powerRequest('j2', 'm1', 'cycle'));
    assert.deepEqual([job.state, job.steps, job.maxAttempts], ['PENDING', ['off', 'on'], 3]);
  });

  it('a request runs its steps in order, one claim per attempt, to SUCCEEDED', () => {
    const c = setUp();
    let job = c.request('j1', 'm1', 'cycle');
    assert.deepEqual([job.state, job.steps, job.stepIndex, job.attempt], ['PENDING', ['off', 'on'], 0, 0]);
    const claim = c.claim(job);
    job = c.job(claim);
    assert.deepEqual(
      [job.state, job.attempt, job.claimedBy, job.claimExpiresMs],
      ['RUNNING', 1, 'n1', c.nowMs + leaseMs],
    );
    // The same claim again (a retried proposal, or a second node) is refused: at most once.
    c.refused(claim, 'E_STALE_ATTEMPT', /the next is attempt 2/);
    c.refused({ ...c.claim(job, 'n2') }, 'E_NOT_DUE', /"n1" holds it/);
    const first = c.step(job, true);
    job = c.job(first);
    assert.deepEqual([job.state, job.stepIndex, job.attempt, job.powerState], ['PENDING', 1, 0, 'on']);
    // The first step's result again is a duplicate: acknowledged, nothing changes.
    assert.equal(c.run(first).type, 'powerJobDuplicate');
    job = c.job(c.claim(job));
    job = c.job(c.step(job, true, 'n1', 'Chassis Power Control: Up/On'));
    assert.deepEqual(
      [job.state, job.stepIndex, job.finishedMs, job.message],
      ['SUCCEEDED', 2, c.nowMs, 'Chassis Power Control: Up/On'],
    );
    assert.deepEqual([...c.state.activePowerJobIds()], []);
    assert.equal(c.run(c.step({ ...job, stepIndex: 1, attempt: 1 }, true)).type, 'powerJobDuplicate');
  });

  it('a failed attempt retries behind a backoff, and gives up after maxAttempts', () => {
    const c = setUp();
    let job = c.request('j1');
    for (let attempt = 1; attempt <= 3; attempt++) {
      job = c.job(c.claim(job));
      job = c.job(c.step(job, false, 'n1', `timeout ${attempt}`));
      if (attempt < 3) {
        assert.deepEqual([job.state, job.notBeforeMs], ['PENDING', c.nowMs + powerRetryBackoffMs(attempt)]);
        c.refused(c.claim(job), 'E_NOT_DUE', /the retry waits/);
        c.nowMs = job.notBeforeMs ?? c.nowMs;
      }
    }
    assert.equal(job.state, 'FAILED');
    assert.match(job.message ?? '', /step 0 \(on\) gave up after 3 attempts: timeout 3/);
    c.refused(c.claim(job), 'E_STALE_ATTEMPT', /the job is FAILED/);
  });

  it('a leader change mid-job: the claim lapses, the next leader takes the step over and finishes', () => {
    const c = setUp();
    let job = c.request('j1', 'm1', 'netboot');
    job = c.job(c.claim(job, 'n1'));
    job = c.job(c.step(job, true, 'n1'));
    const orphan = c.job(c.claim(job, 'n1')); // n1 dies holding step 1
    c.refused(c.claim(orphan, 'n2'), 'E_NOT_DUE');
    c.nowMs += leaseMs;
    job = c.job(c.claim(orphan, 'n2'));
    assert.deepEqual([job.stepIndex, job.attempt, job.claimedBy], [1, 2, 'n2']);
    // The dead leader's late result is stale: it answers a superseded claim.
    c.refused(c.step(orphan, true, 'n1'), 'E_STALE_ATTEMPT');
    job = c.job(c.step(job, true, 'n2'));
    job = c.job(c.claim(job, 'n2'));
    job = c.job(c.step(job, true, 'n2'));
    assert.equal(job.state, 'SUCCEEDED');
  });

  it('a lapsed claim on the last allowed attempt fails the job instead of leaving it RUNNING', () => {
    const c = setUp();
    let job = c.request('j1');
    for (let i = 0; i < 3; i++) {
      job = c.job(c.claim(job, `n${i}`));
      c.nowMs += leaseMs;
    }
    job = c.job(c.claim(job, 'n9'));
    assert.equal(job.state, 'FAILED');
    assert.match(job.message ?? '', /claim of node "n2" lapsed/);
  });

  it('jobs of one machine run one at a time, oldest first; other machines are independent', () => {
    const c = setUp();
    const a = c.request('a', 'm1');
    const b = c.request('b', 'm1', 'off');
    const other = c.request('x', 'm2');
    c.refused(c.claim(b), 'E_NOT_DUE', /an older job of hardware "m1" runs first/);
    c.job(c.claim(other));
    const running = c.job(c.claim(a));
    c.job(c.step(running, true));
    assert.equal(c.job(c.claim(b)).state, 'RUNNING');
    assert.equal(c.state.firstActivePowerJob('m1')?.id, 'b');
  });

  it('refuses bad requests, claims and results, changing nothing', () => {
    const c = setUp();
    c.run({ type: 'hardware.put', hardware: machine('bare', 3, false), workerToken: 't3' });
    const base = {
      type: 'power.request',
      jobId: 'j',
      hardwareId: 'm1',
      op: 'on',
      steps: ['on'],
      maxAttempts: 3,
    } as const;
    c.refused({ ...base, hardwareId: 'nope' }, 'E_NOT_FOUND');
    c.refused({ ...base, hardwareId: 'bare' }, 'E_CONFLICT', /has no BMC; add one/);
    c.refused({ ...base, jobId: 'bad id!' }, 'E_INVALID', /^jobId:/);
    c.refused({ ...base, steps: [] }, 'E_INVALID', /^steps:/);
    c.refused({ ...base, maxAttempts: 0 }, 'E_INVALID', /^maxAttempts:/);
    c.refused({ ...base, maxAttempts: 11 }, 'E_INVALID', /^maxAttempts:/);
    const job = c.request('j');
    c.refused(base, 'E_EXISTS');
    c.refused({ ...c.claim(job), leaseMs: 5 }, 'E_INVALID', /^leaseMs:/);
    c.refused({ ...c.claim(job), claimer: '' }, 'E_INVALID', /^claimer:/);
    c.refused({ ...c.claim(job), stepIndex: 1 }, 'E_STALE_ATTEMPT');
    c.refused({ ...c.claim(job), jobId: 'nope' }, 'E_NOT_FOUND');
    c.refused(c.step({ ...job, attempt: 1 }, true), 'E_STALE_ATTEMPT', /not the running attempt/);
    const running = c.job(c.claim(job));
    c.refused(c.step(running, true, 'n2'), 'E_STALE_ATTEMPT', /claimed by "n1", not "n2"/);
    c.refused({ type: 'hardware.delete', id: 'm1' }, 'E_CONFLICT', /power job "j"; wait for it/);
    // The readers refuse what is not a command at all.
    assert.throws(
      () => decodeControlCommand(JSON.stringify({ ...base, op: 'explode' })),
      /op: must be one of on, off, cycle, status, netboot/,
    );
    assert.throws(() => decodeControlCommand(JSON.stringify({ ...base, steps: ['reboot'] })), /steps\[0\]/);
  });

  it('keeps a bounded number of finished jobs per machine, dropping the oldest', () => {
    const c = setUp();
    for (let i = 0; i < powerJobsKeptPerHardware + 5; i++) {
      let job = c.request(`j${String(i).padStart(3, '0')}`, 'm1', 'status');
      job = c.job(c.claim(job));
      c.job(c.step(job, true));
      c.nowMs += 1;
    }
    const kept = c.state.powerJobs('m1');
    assert.equal(kept.length, powerJobsKeptPerHardware);
    assert.equal(kept[0]?.id, 'j005');
  });

  it('jobs survive snapshot and restore byte for byte; hardware delete drops finished jobs', () => {
    const c = setUp();
    let job = c.request('j1', 'm1', 'cycle');
    job = c.job(c.claim(job));
    c.request('j2', 'm2');
    const bytes = c.state.snapshot();
    assert.match(new TextDecoder().decode(bytes), /^\{"format":3,/);
    const copy = new ControlState();
    copy.restore(bytes);
    assert.deepEqual(copy.snapshot(), bytes);
    assert.deepEqual(copy.powerJob('j1'), job);
    assert.deepEqual([...copy.activePowerJobIds()].sort(), ['j1', 'j2']);
    assert.equal(copy.hardware('m1')?.bmc?.password, 'pw-secret');
    // The copy goes on exactly as the original.
    const next = c.step(job, true);
    c.nowMs += 1;
    const r1 = c.run(next);
    const r2 = copy.apply(c.index, c.nowMs, next);
    assert.deepEqual(r2, r1);
    assert.deepEqual(copy.snapshot(), c.state.snapshot());
    // A job whose machine is missing is an inconsistent snapshot.
    const image = JSON.parse(new TextDecoder().decode(bytes)) as { hardware: unknown[] };
    image.hardware = image.hardware.slice(1);
    assert.throws(
      () => new ControlState().restore(new TextEncoder().encode(JSON.stringify(image))),
      (e: unknown) => e instanceof DecodeError && /power job "j1" is for hardware "m1"/.test(e.message),
    );
    // Without jobs, the snapshot keeps format 2.
    const empty = new ControlState();
    empty.apply(1, 1, { type: 'hardware.put', hardware: machine('m1', 1), workerToken: 't' });
    assert.match(new TextDecoder().decode(empty.snapshot()), /^\{"format":2,/);
    // Deleting a machine takes its finished jobs with it.
    job = c.job(c.claim(c.state.powerJob('j1') ?? job));
    c.job(c.step(job, true));
    assert.equal(c.run({ type: 'hardware.delete', id: 'm1' }).type, 'deleted');
    assert.deepEqual(c.state.powerJobs('m1'), []);
  });
});

describe('a workflow that netboots its machine', () => {
  const spec = {
    version: '0.1',
    name: 'install',
    globalTimeoutS: 600,
    tasks: [
      {
        name: 't',
        worker: 'm1',
        env: {},
        volumes: [],
        actions: [
          { name: 'a', command: ['/bin/true'], args: [], env: {}, volumes: [], timeoutS: 60, retries: 0 },
        ],
      },
    ],
  };
  const create = (c: Cluster, id: string, hardwareId = 'm1'): ControlResult => {
    const templateVersion = c.state.template('install')?.version ?? 0;
    return c.run({
      type: 'workflow.create',
      id,
      template: 'install',
      templateVersion,
      hardwareId,
      hardwareMap: {},
      spec: { ...spec, tasks: [{ ...spec.tasks[0]!, worker: hardwareId }] },
      netboot: true,
    });
  };
  const withTemplate = (c: Cluster): void => {
    assert.equal(c.run({ type: 'template.put', name: 'install', source: 'x' }).type, 'template');
  };

  it('makes its netboot job in the same entry, and a disk-boot job when it succeeds', () => {
    const c = setUp();
    withTemplate(c);
    const created = create(c, 'wf1');
    assert.equal(created.type, 'workflow', JSON.stringify(created));
    assert.equal(created.type === 'workflow' && created.workflow.netboot, true);
    const netboot = c.state.powerJob('wf1-netboot');
    assert.deepEqual(
      [netboot?.op, netboot?.steps, netboot?.state],
      ['netboot', ['bootdev-pxe', 'off', 'on'], 'PENDING'],
    );
    assert.equal(
      c.run({ type: 'attempt.start', workflowId: 'wf1', actionIndex: 0, attempt: 1, workerId: 'm1' }).type,
      'attempt',
    );
    const done = c.run({
      type: 'attempt.result',
      workflowId: 'wf1',
      actionIndex: 0,
      attempt: 1,
      workerId: 'm1',
      success: true,
      exitStatus: 0,
      message: '',
      outputTail: '',
    });
    assert.equal(done.type, 'attempt');
    assert.equal(c.state.workflow('wf1')?.state, 'SUCCESS');
    const diskboot = c.state.powerJob('wf1-diskboot');
    assert.deepEqual([diskboot?.op, diskboot?.steps], ['diskboot', ['bootdev-disk']]);
    assert.equal(c.state.hardware('m1')?.netboot.allowPXE, false);
  });

  it('is refused whole, changing nothing, when its machine has no BMC', () => {
    const c = setUp();
    withTemplate(c);
    assert.equal(
      c.run({ type: 'hardware.put', hardware: machine('m3', 3, false), workerToken: 't3' }).type,
      'hardware',
    );
    const before = withoutIndex(c.state.snapshot());
    const refused = create(c, 'wf3', 'm3');
    assert.equal(refused.type, 'error');
    assert.match(
      refused.type === 'error' ? refused.message : '',
      /^cannot netboot the machine: hardware "m3" has no BMC/,
    );
    assert.deepEqual(withoutIndex(c.state.snapshot()), before);
    assert.equal(c.state.workflow('wf3'), undefined);
  });
});
