// Fans applied changes out to the streams that follow them on this node: workflow events to
// `workflow events --follow`, machine transitions to `hardware history --follow`. Apply calls
// publish() synchronously, so subscribers only queue; they never block apply.
import type { WorkflowEvent } from '../model/records.js';
import type { MachineEvent } from '../model/machine-lifecycle.js';

/** Listeners by key (a workflow's id, a machine's id). */
export class Fanout<E> {
  readonly #byKey = new Map<string, Set<(e: E) => void>>();

  publish(key: string, e: E): void {
    const set = this.#byKey.get(key);
    if (set === undefined) return;
    for (const l of set) l(e);
  }

  /** Returns the unsubscribe function. */
  subscribe(key: string, listener: (e: E) => void): () => void {
    let set = this.#byKey.get(key);
    if (set === undefined) {
      set = new Set();
      this.#byKey.set(key, set);
    }
    set.add(listener);
    return () => {
      const s = this.#byKey.get(key);
      if (s === undefined) return;
      s.delete(listener);
      if (s.size === 0) this.#byKey.delete(key);
    };
  }

  get subscriberCount(): number {
    let n = 0;
    for (const s of this.#byKey.values()) n += s.size;
    return n;
  }
}

export type EventListener = (e: WorkflowEvent) => void;

/** Workflow events, by workflow. */
export class EventHub extends Fanout<WorkflowEvent> {
  publishEvent(e: WorkflowEvent): void {
    this.publish(e.workflowId, e);
  }
}

/** Machine transitions, by machine; 'deleted' ends the machine's followers. */
export class MachineEventHub extends Fanout<MachineEvent | 'deleted'> {}
