// Bounded state (docs/decisions/0020-bounded-state.md): while this node leads, it removes the
// finished workflows that are past the replicated retention, a few batches every few seconds.
// It picks them by its own clock against each workflow's finish time in the state (apply never
// reads a clock), archives them first when the node has an archive (fsynced before anything is
// proposed), then proposes workflow.gc naming exactly those workflows at the finish time it saw.
// Apply deletes those still finished at that time and skips the rest. The default retention,
// while no operator has set one, waits out a grace after the upgrade to state version 2
// (workflow-retention.ts defaultRetentionGraceMs): the collector removes nothing until then, and
// says once when it will start and how to choose now.
import type { Logger } from 'pino';
import type { ControlCommand, ControlResult } from '../state/control/commands.js';
import type { ControlState } from '../state/control/control-state.js';
import type { Workflow } from '../model/records.js';
import {
  defaultRetentionGraceMs,
  pastRetention,
  retentionStartsMs,
} from '../state/control/workflow-retention.js';
import { workflowEventsMax, workflowGcBatchMax, workflowsMax } from '../model/limits.js';
import { stateVersionBoundedState } from '../state/versions.js';
import type { WorkflowArchive } from './workflow-archive.js';
import type { Clock, Cancel } from '../platform/clock.js';

/** How often the leader looks for workflows past the retention. */
export const collectIntervalMsDefault = 3_000;
/** workflow.gc commands per round at most: bounds one round's work (and its archive writes). */
export const collectBatchesPerRound = 4;

export interface WorkflowCollectorOptions {
  readonly control: ControlState;
  /** Whether this node leads now (and is not stopping). */
  readonly isLeader: () => boolean;
  readonly propose: (command: ControlCommand) => Promise<ControlResult>;
  /** Where collected workflows are written first; without it they are only removed. */
  readonly archive?: WorkflowArchive;
  readonly logger: Logger;
  readonly intervalMs?: number;
  /** The leader's clock and timers (src/platform/clock.ts; tests pass their own). */
  readonly clock: Clock;
}

interface Chosen {
  readonly id: string;
  readonly finishedMs: number;
  readonly workflow: Workflow;
}

export class WorkflowCollector {
  readonly #opts: WorkflowCollectorOptions;
  /** Archived by this node, removal not yet applied: not written again while unchanged. */
  readonly #archivedPending = new Map<string, Workflow>();
  #stopTimer: Cancel | undefined;
  #running = false;
  /** The start of the default retention this node last announced, while it waits for it. */
  #announcedStartMs: number | undefined;
  /** Workflows this node wrote to its archive (for metrics). */
  archived = 0;
  /** Workflows removed by this node's workflow.gc commands. */
  collected = 0;

  constructor(opts: WorkflowCollectorOptions) {
    this.#opts = opts;
  }

  start(): void {
    this.#stopTimer = this.#opts.clock.every(
      this.#opts.intervalMs ?? collectIntervalMsDefault,
      () => {
        void this.round();
      },
      { unref: true },
    );
  }

  stop(): void {
    this.#stopTimer?.();
    this.#stopTimer = undefined;
  }

  /** One round: archives and removes up to collectBatchesPerRound batches; returns how many went. */
  async round(): Promise<number> {
    const { control, isLeader, logger } = this.#opts;
    if (this.#running || !isLeader()) return 0;
    // The command is gated anyway; not archiving what could not be removed yet.
    if (control.clusterVersion < stateVersionBoundedState) return 0;
    if (this.#waitingForDefault()) return 0;
    this.#running = true;
    let removed = 0;
    try {
      for (const [id, wf] of this.#archivedPending) {
        if (control.workflow(id) !== wf) this.#archivedPending.delete(id);
      }
      for (let batch = 0; batch < collectBatchesPerRound && isLeader(); batch++) {
        const chosen = this.#choose();
        if (chosen.length === 0) break;
        if (!(await this.#archive(chosen)) || !isLeader()) break;
        const result = await this.#opts.propose({
          type: 'workflow.gc',
          workflows: chosen.map(({ id, finishedMs }) => ({ id, finishedMs })),
        });
        if (result.type !== 'collected') {
          logger.warn({ result }, 'removing finished workflows was refused');
          break;
        }
        for (const c of chosen) this.#archivedPending.delete(c.id);
        removed += result.ids.length;
        this.collected += result.ids.length;
        logger.info(
          {
            removed: result.ids.length,
            skipped: chosen.length - result.ids.length,
            archived: this.#opts.archive !== undefined,
            retention: control.workflowRetention,
          },
          'finished workflows past the retention removed',
        );
        if (chosen.length < workflowGcBatchMax) break;
      }
    } catch (err) {
      // Leadership lost or a proposal timed out: the next round (here or on the new leader) retries.
      logger.debug({ err }, 'removing finished workflows did not complete');
    } finally {
      this.#running = false;
    }
    return removed;
  }

  /**
   * True while the default retention, which no operator has set, waits out its grace after the
   * upgrade: it says so once (per start time), with how many workflows it would remove now and
   * how to choose, and once more when the wait is over.
   */
  #waitingForDefault(): boolean {
    const { control, logger } = this.#opts;
    const startsMs = retentionStartsMs(control.workflowRetentionDefaultSinceMs);
    const now = this.#opts.clock.now();
    if (startsMs === undefined || now >= startsMs) {
      if (this.#announcedStartMs !== undefined && startsMs !== undefined) {
        logger.info(
          { retention: control.workflowRetention },
          'the default workflow retention applies from now: finished workflows past it are removed',
        );
      }
      this.#announcedStartMs = undefined;
      return false;
    }
    if (this.#announcedStartMs === startsMs) return true;
    this.#announcedStartMs = startsMs;
    const { finishedMax, finishedDays } = control.workflowRetention;
    const finished = control.finishedWorkflows().map((wf) => ({ id: wf.id, finishedMs: wf.finishedMs ?? 0 }));
    const pastNow = pastRetention(finished, control.workflowRetention, now, workflowsMax).length;
    const fields = {
      startsAt: new Date(startsMs).toISOString(),
      retention: control.workflowRetention,
      finished: finished.length,
      pastRetentionNow: pastNow,
      graceDays: defaultRetentionGraceMs / (24 * 3600 * 1000),
    };
    const message =
      `the default workflow retention (the newest ${finishedMax} finished workflows, none older than ` +
      `${finishedDays} days) starts to remove finished workflows at ${fields.startsAt}, ` +
      `${fields.graceDays} days after the cluster reached state version 2; until then none is removed ` +
      `(${pastNow} would be now). To keep more, set it before then: \`slipway workflow retention ` +
      '--keep N --max-age Dd` (--max-age 0: no age limit), or start every node with ' +
      '--workflow-archive; to start it now, set it: `slipway workflow retention --keep ' +
      `${finishedMax} --max-age ${finishedDays}d\``;
    if (pastNow > 0) logger.warn(fields, message);
    else logger.info(fields, message);
    return true;
  }

  /** The next batch past the retention, by this node's clock, oldest finished first. */
  #choose(): Chosen[] {
    const { control } = this.#opts;
    const { finishedMax, finishedDays } = control.workflowRetention;
    // Nothing can be past a count-only retention that is not reached: skip the walk.
    if (finishedDays === 0 && control.finishedWorkflowCount <= finishedMax) return [];
    const finished = control
      .finishedWorkflows()
      .map((workflow) => ({ id: workflow.id, finishedMs: workflow.finishedMs ?? 0, workflow }));
    const now = this.#opts.clock.now();
    return pastRetention(finished, control.workflowRetention, now, workflowGcBatchMax);
  }

  /** Writes what this node has not archived yet; false when the archive failed (nothing goes). */
  async #archive(chosen: readonly Chosen[]): Promise<boolean> {
    const { archive, control, logger } = this.#opts;
    if (archive === undefined) return true;
    const fresh = chosen.filter((c) => this.#archivedPending.get(c.id) !== c.workflow);
    if (fresh.length === 0) return true;
    const now = this.#opts.clock.now();
    try {
      await archive.append(
        fresh.map((c) => ({ workflow: c.workflow, events: control.events(c.id, 0, workflowEventsMax) })),
        now,
      );
    } catch (err) {
      logger.error(
        { err, file: archive.fileFor(now), workflows: fresh.length },
        'cannot archive finished workflows: they stay in the state until the archive can be written',
      );
      return false;
    }
    for (const c of fresh) this.#archivedPending.set(c.id, c.workflow);
    this.archived += fresh.length;
    return true;
  }
}
