// Invariant 4: deadlines live in the replicated state and the leader enforces them. While this
// node leads, it looks for workflows whose earliest deadline (the running attempt's or the
// workflow's) has passed and proposes deadline.expire; apply re-checks the deadline against
// the leader's stamp. A new leader starts scanning at once, so a deadline fires within its
// time plus one election.
import type { Logger } from 'pino';
import type { RaftNode } from '../raft/node.js';
import type { ControlState } from '../state/control/control-state.js';
import type { Workflow } from '../model/records.js';
import { nextDeadline } from '../workflow/rules.js';
import type { Proposer } from '../api/proposer.js';

export const deadlineScanMs = 100;

// Workflow records are immutable (every change makes a new one), so a record's deadline is
// worked out once, not on each of the ten scans a second over every active workflow.
const deadlines = new WeakMap<Workflow, number | undefined>();

function deadlineOf(wf: Workflow): number | undefined {
  if (deadlines.has(wf)) return deadlines.get(wf);
  const due = nextDeadline(wf);
  deadlines.set(wf, due);
  return due;
}

export class DeadlineScanner {
  readonly #node: RaftNode;
  readonly #control: ControlState;
  readonly #proposer: Proposer;
  readonly #logger: Logger;
  readonly #inFlight = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  /** Deadline expiries proposed by this node (for metrics). */
  expired = 0;

  constructor(node: RaftNode, control: ControlState, proposer: Proposer, logger: Logger) {
    this.#node = node;
    this.#control = control;
    this.#proposer = proposer;
    this.#logger = logger;
  }

  start(): void {
    this.#timer = setInterval(() => {
      this.scan(Date.now());
    }, deadlineScanMs);
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Proposes the expiry of every workflow whose deadline is at or before `nowMs`. */
  scan(nowMs: number): void {
    if (this.#node.softState().role !== 'leader') return;
    // Collected first: proposing may change the set (a local apply) while it is walked.
    const due: { id: string; deadlineMs: number }[] = [];
    for (const id of this.#control.activeWorkflowIds()) {
      if (this.#inFlight.has(id)) continue;
      const wf = this.#control.workflow(id);
      if (wf === undefined) continue;
      const deadlineMs = deadlineOf(wf);
      if (deadlineMs !== undefined && deadlineMs <= nowMs) due.push({ id, deadlineMs });
    }
    for (const { id, deadlineMs } of due) {
      this.#inFlight.add(id);
      this.#proposer
        .proposeControl({ type: 'deadline.expire', workflowId: id })
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
        .finally(() => this.#inFlight.delete(id));
    }
  }
}
