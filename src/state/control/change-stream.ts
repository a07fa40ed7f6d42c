// What the replicated state tells the node as it applies entries: one stream of typed changes,
// each numbered in the order this state published it, with one subscription interface for the
// changefeed, the metrics, the power waiters and the leader duties (issue 25 item 4). Published
// synchronously at the end of an apply, once the command is done and the state is consistent:
// hardware first, then workflows, then workflow events in their seq order, machine events, power
// jobs, artifacts, collected workflows, drains. A restore publishes only `restore`: everything
// may have changed, so a listener reads again. Listeners run inside the raft apply loop: they
// must be quick and must not throw.
import type { MachineEvent } from '../../model/machine-lifecycle.js';
import type { PowerJob, Workflow, WorkflowEvent } from '../../model/records.js';

export type ControlChange =
  /** A workflow's changefeed event. */
  | { readonly kind: 'workflowEvent'; readonly event: WorkflowEvent }
  | { readonly kind: 'workflow'; readonly workflow: Workflow }
  | { readonly kind: 'workflowDeleted'; readonly id: string }
  /** workflow.gc deleted these finished workflows (after their workflowDeleted). */
  | { readonly kind: 'workflowsCollected'; readonly ids: readonly string[] }
  /** Also when the hardware was deleted (hardware(id) is then undefined). */
  | { readonly kind: 'hardware'; readonly id: string }
  /** A machine's lifecycle moved (docs/decisions/0028): its new history event, in seq order. */
  | { readonly kind: 'machineEvent'; readonly hardwareId: string; readonly event: MachineEvent }
  /** A power job was created or changed (not on a duplicate result). */
  | { readonly kind: 'powerJob'; readonly job: PowerJob }
  /** An artifact was registered, replaced or deleted (artifact(name) is then undefined). */
  | { readonly kind: 'artifact'; readonly name: string }
  /** member.drain changed the drained members. */
  | { readonly kind: 'drain' }
  | { readonly kind: 'restore' };

export type ControlChangeKind = ControlChange['kind'];

/** A change with its number: 1, 2, ... in the order this state published them. */
export type NumberedChange = ControlChange & { readonly seq: number };

export type ChangeOf<K extends ControlChangeKind> = Extract<NumberedChange, { readonly kind: K }>;

export type ChangeListener = (change: NumberedChange) => void;

export class ChangeStream {
  #seq = 0;
  readonly #listeners = new Set<ChangeListener>();

  /** The number of the last change published (0 before any). */
  get seq(): number {
    return this.#seq;
  }

  /** Every change from now on; returns the unsubscribe. */
  subscribe(listener: ChangeListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Changes of one kind only. */
  on<K extends ControlChangeKind>(kind: K, listener: (change: ChangeOf<K>) => void): () => void {
    return this.subscribe((change) => {
      if (change.kind === kind) listener(change as ChangeOf<K>);
    });
  }

  publish(change: ControlChange): void {
    this.#seq += 1;
    const numbered = { ...change, seq: this.#seq } as NumberedChange;
    for (const listener of this.#listeners) listener(numbered);
  }
}
