// The control plane under simulation: an operator registers hardware (each with a BMC) and a
// template, creates workflows and requests power jobs; a simulated worker per machine starts the
// attempts its rules hand out, runs them for a while, and records results (failures are retried
// by the actions' retry budget). A worker may crash and forget what it ran: at its next look it
// reports those attempts lost, as the real agent does. While faults last a worker may also hang
// on an attempt, never reporting it: the leader's deadline scanner (sim-duties.ts) times it out.
// Everything goes through RaftNode.propose as `control` commands of the real ReplicatedState.
// Once faults stop, workers carry on until every workflow has finished (drain()).
//
// The ControlMonitor watches each node's changefeed (ControlState's workflowEvent changes) after every applied
// entry: event seqs on a node are dense (no gap, no duplicate; a snapshot restore moves the
// start), every node sees the same event at each seq, and across the cluster's one history of
// events each attempt is started at most once and its outcome recorded at most once, and a
// deadline takes effect only once it has passed (by the virtual clock): an attempt's own, or its
// workflow's. One deadline firing twice times out the next attempt before its own has passed.
import type { ActionSpec, HardwareInput, RenderedTemplate, WorkflowEvent } from '../../src/model/records.js';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import type { ReplicatedState } from '../../src/state/replicated-state.js';
import { nextAction } from '../../src/workflow/rules.js';
import { powerRequest } from '../../src/state/control/power-jobs.js';
import type { PowerOp } from '../../src/model/records.js';
import type { Prng } from '../../src/platform/prng.js';
import type { Scheduler } from './scheduler.js';

/** Proposes a control command on some node; the callback gets its result, or null when unknown. */
export type ProposeControl = (command: ControlCommand, done: (result: ControlResult | null) => void) => void;
/** A linearizable read of some node's control state; null when it could not be confirmed. */
export type ReadControl = (done: (kv: ReplicatedState | null) => void) => void;

export const machines = ['m1', 'm2'];
const recordedTypes = new Set(['action.succeeded', 'action.failed', 'action.timeout']);
/** Short deadlines (the shortest the state accepts), so that they pass within a run. */
export const actionTimeoutS = 1;
export const globalTimeoutS = 30;
const powerOps: readonly PowerOp[] = ['cycle', 'netboot', 'on', 'off', 'status', 'diskboot'];
const powerJobsMax = 3;

function hardwareInput(id: string, n: number): HardwareInput {
  return {
    id,
    interfaces: [
      {
        mac: `02:00:00:00:00:${n.toString(16).padStart(2, '0')}`,
        ip: { address: `10.0.0.${n}`, prefix: 16 },
        gateway: '10.0.0.1',
        dns: ['10.0.0.2'],
        hostname: id,
        leaseTimeS: 86_400,
      },
    ],
    arch: 'x86_64',
    uefi: true,
    netboot: { allowPXE: true, allowWorkflow: true },
    metadata: {},
    bmc: { address: `ipmi://${id}:623`, username: 'admin', password: 'simulated' },
  };
}

function spec(worker: string): RenderedTemplate {
  const action = (name: string): ActionSpec => ({
    name,
    command: ['/bin/true'],
    args: [],
    env: {},
    volumes: [],
    timeoutS: actionTimeoutS,
    retries: 1,
  });
  return {
    version: '0.1',
    name: 'provision',
    globalTimeoutS,
    tasks: [{ name: 't', worker, env: {}, volumes: [], actions: [action('a1'), action('a2')] }],
  };
}

export interface ControlStats {
  workflowsCreated: number;
  attemptsStarted: number;
  resultsRecorded: number;
  attemptsLost: number;
  attemptsHung: number;
  /** Deadlines that took effect: action.timeout events. */
  timeouts: number;
  powerJobsRequested: number;
  events: number;
}

/** Every count at zero: a workload's, or a monitor's watched without one. */
export function noControlStats(): ControlStats {
  return {
    workflowsCreated: 0,
    attemptsStarted: 0,
    resultsRecorded: 0,
    attemptsLost: 0,
    attemptsHung: 0,
    timeouts: 0,
    powerJobsRequested: 0,
    events: 0,
  };
}

export class ControlWorkload {
  readonly stats: ControlStats = noControlStats();
  private readonly sched: Scheduler;
  private readonly rng: Prng;
  private readonly propose: ProposeControl;
  private readonly read: ReadControl;
  private readonly untilMs: number;
  /** Workers carry on past untilMs until this is false (drain). */
  private working = true;

  /** The chance that a worker hangs on an attempt it starts while faults last. */
  private readonly hangP: number;
  /** The power requests' own stream: they leave the workflows' choices as they were. */
  private readonly powerRng: Prng;
  /** Machines run by a simulated agent over the worker stream (sim-agent.ts), not by worker(). */
  private readonly agents: ReadonlySet<string>;

  constructor(
    sched: Scheduler,
    rng: Prng,
    propose: ProposeControl,
    read: ReadControl,
    untilMs: number,
    hangP: number,
    agents: ReadonlySet<string> = new Set(),
  ) {
    this.agents = agents;
    this.hangP = hangP;
    this.powerRng = rng.fork('power');
    this.sched = sched;
    this.rng = rng;
    this.propose = propose;
    this.read = read;
    this.untilMs = untilMs;
  }

  start(): void {
    this.setup(0);
    this.powerRequests(0);
    for (const m of machines) if (!this.agents.has(m)) this.worker(m, new Map());
  }

  /** Faults have stopped: workers finish what is left until stop(). */
  stop(): void {
    this.working = false;
  }

  /** Every workflow and power job in `kv` has finished. */
  static finished(kv: ReplicatedState): boolean {
    return kv.control.activeWorkflowIds().size === 0 && kv.control.activePowerJobIds().size === 0;
  }

  /** Now and then a power job on some machine, while faults last; each retried until it lands. */
  private powerRequests(k: number): void {
    if (this.sched.now >= this.untilMs || k >= powerJobsMax) return;
    this.sched.after(this.powerRng.uniform(40, 250), () => {
      if (this.sched.now >= this.untilMs) return;
      const command = powerRequest(`p${k}`, this.powerRng.pick(machines), this.powerRng.pick(powerOps));
      this.propose({ ...command, maxAttempts: 3 }, (r) => {
        const done = r?.type === 'powerJob' || (r?.type === 'error' && r.code === 'E_EXISTS');
        if (r?.type === 'powerJob') this.stats.powerJobsRequested++;
        this.powerRequests(done ? k + 1 : k);
      });
    });
  }

  /** Hardware, template, then a workflow now and then; each step retried until it lands. */
  private setup(step: number): void {
    if (this.sched.now >= this.untilMs) return;
    const again = (next: number, delay: number): void => {
      this.sched.after(delay, () => {
        this.setup(next);
      });
    };
    if (step < machines.length) {
      const id = machines[step]!;
      this.propose(
        {
          type: 'hardware.put',
          hardware: hardwareInput(id, step + 1),
          workerTokenSha256: 'a'.repeat(64),
          expectVersion: 0,
        },
        (r) => {
          again(r !== null && (r.type === 'hardware' || r.type === 'error') ? step + 1 : step, 10);
        },
      );
      return;
    }
    if (step === machines.length) {
      this.propose(
        { type: 'template.put', name: 'ubuntu', source: 'version: "0.1"\nname: ubuntu\n', expectVersion: 0 },
        (r) => {
          again(r !== null && (r.type === 'template' || r.type === 'error') ? step + 1 : step, 10);
        },
      );
      return;
    }
    const k = step - machines.length - 1;
    const worker = machines[k % machines.length]!;
    this.propose(
      {
        type: 'workflow.create',
        id: `w${k}`,
        template: 'ubuntu',
        templateVersion: 1,
        hardwareId: worker,
        hardwareMap: {},
        spec: spec(worker),
      },
      (r) => {
        // Created, or already created by an earlier try whose answer was lost.
        const done = r?.type === 'workflow' || (r?.type === 'error' && r.code === 'E_EXISTS');
        if (r?.type === 'workflow') this.stats.workflowsCreated++;
        again(done ? step + 1 : step, done ? this.rng.uniform(30, 120) : 10);
      },
    );
  }

  /** One worker: `running` maps attempt keys it runs to when they finish (lost at a crash). */
  private worker(id: string, running: Map<string, number>): void {
    const faulty = this.sched.now < this.untilMs;
    if (!faulty && !this.working) return;
    let mine = running;
    if (faulty && this.rng.chance(0.01)) mine = new Map(); // the worker restarts and forgets
    const next = (): void => {
      this.sched.after(faulty ? this.rng.uniform(5, 25) : this.rng.uniform(20, 60), () => {
        this.worker(id, mine);
      });
    };
    this.read((kv) => {
      if (kv === null) {
        next();
        return;
      }
      const command = this.decide(id, kv, mine);
      if (command === null) {
        next();
        return;
      }
      this.propose(command, (r) => {
        if (r?.type === 'attempt' && command.type === 'attempt.start') {
          this.stats.attemptsStarted++;
          // While faults last, a worker may hang on an attempt: only its deadline ends it.
          const hangs = faulty && this.hangP > 0 && this.rng.chance(this.hangP);
          if (hangs) this.stats.attemptsHung++;
          mine.set(
            `${command.workflowId}/${command.actionIndex}/${command.attempt}`,
            hangs ? Infinity : this.sched.now + this.rng.uniform(5, 60),
          );
        }
        if (r?.type === 'attempt' && command.type === 'attempt.result') this.stats.resultsRecorded++;
        if (r?.type === 'attempt' && command.type === 'attempt.lost') this.stats.attemptsLost++;
        next();
      });
    });
  }

  /** What the worker does next, seen through one node's state: report, report lost, or start. */
  private decide(id: string, kv: ReplicatedState, mine: Map<string, number>): ControlCommand | null {
    for (const wf of kv.control.workflowsForWorker(id)) {
      for (const [actionIndex, a] of wf.actions.entries()) {
        if (a.state !== 'RUNNING') continue;
        const key = `${wf.id}/${actionIndex}/${a.attempt}`;
        const doneAt = mine.get(key);
        const base = { workflowId: wf.id, actionIndex, attempt: a.attempt, workerId: id };
        if (doneAt === undefined) return { type: 'attempt.lost', ...base, message: 'the worker restarted' };
        if (doneAt > this.sched.now) continue;
        const success = this.sched.now >= this.untilMs || this.rng.chance(0.7);
        return {
          type: 'attempt.result',
          ...base,
          success,
          exitStatus: success ? 0 : 1,
          message: '',
          outputTail: '',
        };
      }
      const n = nextAction(wf);
      if (n !== null && n.workerId === id && (n.notBeforeMs ?? 0) <= this.sched.now)
        return {
          type: 'attempt.start',
          workflowId: wf.id,
          actionIndex: n.index,
          attempt: n.attempt,
          workerId: id,
        };
    }
    return null;
  }
}

/** The changefeed, attempt and deadline invariants, over every node's ControlState events. */
export class ControlMonitor {
  private readonly bySeq = new Map<number, string>();
  private readonly once = new Map<string, number>();
  /** When each attempt started, and each workflow (its first attempt): their deadlines follow. */
  private readonly startedMs = new Map<string, number>();
  private readonly runningMs = new Map<string, number>();
  /** Each workflow's last action.timeout, by seq: a workflow.timeout right after it is its end. */
  private readonly actionTimeoutSeq = new Map<string, number>();
  private readonly fail: (msg: string) => void;
  private readonly now: () => number;

  /** `now` is the virtual time: a deadline takes effect only once it has passed by it. */
  constructor(fail: (msg: string) => void, now: () => number) {
    this.fail = fail;
    this.now = now;
  }

  /** Some node has applied (so the cluster committed) an outcome for the attempt `wf/index/attempt`. */
  recorded(attempt: string): boolean {
    return this.once.has(`${attempt} recorded`);
  }

  /** Watches one node incarnation's store; returns the hook for its snapshot restores. */
  watch(nodeId: string, kv: ReplicatedState, stats: ControlStats): () => void {
    let last = kv.control.lastEventSeq;
    kv.control.changes.on('workflowEvent', ({ event: e }) => {
      stats.events++;
      if (e.seq !== last + 1) this.fail(`${nodeId}'s changefeed went from seq ${last} to ${e.seq}`);
      last = e.seq;
      this.observe(nodeId, e, stats);
    });
    return () => {
      last = kv.control.lastEventSeq;
    };
  }

  private observe(nodeId: string, e: WorkflowEvent, stats: ControlStats): void {
    const text = JSON.stringify(e);
    const seen = this.bySeq.get(e.seq);
    if (seen !== undefined) {
      if (seen !== text) this.fail(`${nodeId} has event ${text} at seq ${e.seq}, another node ${seen}`);
      return;
    }
    this.bySeq.set(e.seq, text);
    this.checkDeadline(e, stats);
    const what = e.type === 'action.started' ? 'started' : recordedTypes.has(e.type) ? 'recorded' : null;
    if (what === null) return;
    const key = `${e.workflowId}/${e.actionIndex ?? -1}/${e.attempt ?? -1} ${what}`;
    const other = this.once.get(key);
    if (other !== undefined) this.fail(`attempt ${key} at seq ${other} and again at seq ${e.seq}`);
    this.once.set(key, e.seq);
  }

  /** A timeout only once its deadline passed: the attempt's own or its workflow's. */
  private checkDeadline(e: WorkflowEvent, stats: ControlStats): void {
    const attempt = `${e.workflowId}/${e.actionIndex ?? -1}/${e.attempt ?? -1}`;
    if (e.type === 'workflow.running') this.runningMs.set(e.workflowId, e.stampMs);
    if (e.type === 'action.started') this.startedMs.set(attempt, e.stampMs);
    if (e.type !== 'action.timeout' && e.type !== 'workflow.timeout') return;
    if (e.type === 'action.timeout') this.actionTimeoutSeq.set(e.workflowId, e.seq);
    // The last attempt timed out with no retry left: the workflow ends with it.
    else if (this.actionTimeoutSeq.get(e.workflowId) === e.seq - 1) return;
    const running = this.runningMs.get(e.workflowId);
    const started = this.startedMs.get(attempt);
    const workflowDue = running === undefined ? Infinity : running + globalTimeoutS * 1000;
    const attemptDue =
      e.type === 'action.timeout' && started !== undefined ? started + actionTimeoutS * 1000 : Infinity;
    const due = Math.min(workflowDue, attemptDue);
    if (e.type === 'action.timeout') stats.timeouts++;
    if (this.now() < due) {
      const what = e.type === 'action.timeout' ? `attempt ${attempt}` : `workflow ${e.workflowId}`;
      this.fail(`${what} timed out at ${this.now().toFixed(1)} ms, before its deadline at ${due} ms`);
    }
  }
}
