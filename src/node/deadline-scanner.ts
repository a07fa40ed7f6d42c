// Invariant 4: deadlines live in the replicated state and the leader enforces them. While this
// node leads, it looks for workflows whose earliest deadline (the running attempt's or the
// workflow's) has passed and proposes deadline.expire, and for machines stuck in a transitional
// state (inspecting, provisioning, releasing) past their deadline and proposes hardware.expire
// with that deadline (docs/decisions/0028); apply re-checks each against the leader's stamp, so
// a proposal repeated by a new leader changes nothing. A new leader starts scanning at once, so
// a deadline fires within its time plus one election.
//
// A walk over every active workflow and every machine in transition costs in proportion to them
// (at 10,000 machines provisioning, a tenth of the leader's CPU when it walked ten times a
// second). So it walks again at the earliest deadline it saw, or a second after the last walk,
// whichever comes first: a deadline it has seen fires within a tick of its time, and one that
// appears since (every timeout is a whole number of seconds, counted from when the leader stamps
// the change) within about a second.
import type { Logger } from 'pino';
import type { ControlCommand, ControlResult } from '../state/control/commands.js';
import type { ControlState } from '../state/control/control-state.js';
import type { Workflow } from '../model/records.js';
import { nextDeadline } from '../workflow/rules.js';
import type { Clock, Cancel } from '../platform/clock.js';

export const deadlineScanMs = 100;
/** The longest between two walks. */
export const deadlineWalkMaxMs = 1000;

// Workflow records are immutable (every change makes a new one), so a record's deadline is
// worked out once, not on each walk over every active workflow.
const deadlines = new WeakMap<Workflow, number | undefined>();

function deadlineOf(wf: Workflow): number | undefined {
  if (deadlines.has(wf)) return deadlines.get(wf);
  const due = nextDeadline(wf);
  deadlines.set(wf, due);
  return due;
}

export interface DeadlineScannerOptions {
  readonly control: ControlState;
  /** Whether this node leads now. */
  readonly isLeader: () => boolean;
  /** Proposes through the leader (the leader stamps its time) and resolves with the applied result. */
  readonly propose: (command: ControlCommand) => Promise<ControlResult>;
  readonly logger: Logger;
  /** Its timer and the time it compares deadlines with (src/platform/clock.ts). */
  readonly clock: Clock;
}

export class DeadlineScanner {
  readonly #control: ControlState;
  readonly #isLeader: () => boolean;
  readonly #propose: (command: ControlCommand) => Promise<ControlResult>;
  readonly #logger: Logger;
  readonly #inFlight = new Set<string>();
  readonly #machinesInFlight = new Set<string>();
  readonly #clock: Clock;
  #stopTimer: Cancel | undefined;
  /** When the next walk is due (0: at the next tick). */
  #nextWalkMs = 0;
  /** Walks done so far (the tests read it). */
  walks = 0;
  /** Deadline expiries proposed by this node (for metrics). */
  expired = 0;
  /** Machines this node failed by their transitional deadline. */
  machinesExpired = 0;

  constructor(options: DeadlineScannerOptions) {
    this.#control = options.control;
    this.#isLeader = options.isLeader;
    this.#propose = options.propose;
    this.#logger = options.logger;
    this.#clock = options.clock;
  }

  start(): void {
    this.#stopTimer = this.#clock.every(deadlineScanMs, () => {
      this.scan(this.#clock.now());
    });
  }

  stop(): void {
    this.#stopTimer?.();
    this.#stopTimer = undefined;
  }

  /** Proposes the expiry of every workflow and machine whose deadline is at or before `nowMs`. */
  scan(nowMs: number): void {
    if (!this.#isLeader()) {
      // Leading again, it walks at once: it may have missed changes while it followed.
      this.#nextWalkMs = 0;
      return;
    }
    if (nowMs < this.#nextWalkMs) return;
    this.walks++;
    let earliest = this.#scanMachines(nowMs, nowMs + deadlineWalkMaxMs);
    // Collected first: proposing may change the set (a local apply) while it is walked.
    const due: { id: string; deadlineMs: number }[] = [];
    for (const id of this.#control.activeWorkflowIds()) {
      if (this.#inFlight.has(id)) continue;
      const wf = this.#control.workflow(id);
      if (wf === undefined) continue;
      const deadlineMs = deadlineOf(wf);
      if (deadlineMs === undefined) continue;
      if (deadlineMs <= nowMs) due.push({ id, deadlineMs });
      else if (deadlineMs < earliest) earliest = deadlineMs;
    }
    this.#nextWalkMs = earliest;
    for (const { id, deadlineMs } of due) {
      this.#inFlight.add(id);
      this.#propose({ type: 'deadline.expire', workflowId: id })
        .then(
          (res) => {
            if (res.type !== 'error') {
              this.expired++;
              this.#logger.info({ workflowId: id, deadlineMs }, 'deadline passed');
            }
          },
          (err: unknown) => {
            this.#logger.debug({ err, workflowId: id }, 'proposing a deadline expiry failed');
          },
        )
        .finally(() => this.#settled(this.#inFlight, id));
    }
  }

  /** An expiry settled: the next tick walks again, for an expiry that failed or a new deadline. */
  #settled(inFlight: Set<string>, id: string): void {
    inFlight.delete(id);
    this.#nextWalkMs = 0;
  }

  /**
   * Proposes the expiry of machines past their transitional deadline; returns the earliest
   * deadline not yet passed, or `earliest` when none is sooner.
   */
  #scanMachines(nowMs: number, earliest: number): number {
    const due: { id: string; deadlineMs: number; state: string }[] = [];
    for (const id of this.#control.machinesInTransition()) {
      if (this.#machinesInFlight.has(id)) continue;
      const lifecycle = this.#control.hardware(id)?.lifecycle;
      const deadlineMs = lifecycle?.deadlineMs;
      if (lifecycle === undefined || deadlineMs === undefined) continue;
      if (deadlineMs <= nowMs) due.push({ id, deadlineMs, state: lifecycle.state });
      else if (deadlineMs < earliest) earliest = deadlineMs;
    }
    for (const { id, deadlineMs, state } of due) {
      this.#machinesInFlight.add(id);
      this.#propose({ type: 'hardware.expire', id, deadlineMs })
        .then(
          (res) => {
            if (res.type === 'error') return;
            this.machinesExpired++;
            this.#logger.info({ hardwareId: id, state, deadlineMs }, 'machine deadline passed; it failed');
          },
          (err: unknown) => {
            this.#logger.debug({ err, hardwareId: id }, 'proposing a machine deadline expiry failed');
          },
        )
        .finally(() => this.#settled(this.#machinesInFlight, id));
    }
    return earliest;
  }
}
