// Fans applied workflow events out to the `workflow events --follow` streams of this node.
// Apply calls publish() synchronously, so subscribers only queue; they never block apply.
import type { WorkflowEvent } from '../model/records.js';

export type EventListener = (e: WorkflowEvent) => void;

export class EventHub {
  readonly #byWorkflow = new Map<string, Set<EventListener>>();

  publish(e: WorkflowEvent): void {
    const set = this.#byWorkflow.get(e.workflowId);
    if (set === undefined) return;
    for (const l of set) l(e);
  }

  /** Returns the unsubscribe function. */
  subscribe(workflowId: string, listener: EventListener): () => void {
    let set = this.#byWorkflow.get(workflowId);
    if (set === undefined) {
      set = new Set();
      this.#byWorkflow.set(workflowId, set);
    }
    set.add(listener);
    return () => {
      const s = this.#byWorkflow.get(workflowId);
      if (s === undefined) return;
      s.delete(listener);
      if (s.size === 0) this.#byWorkflow.delete(workflowId);
    };
  }

  get subscriberCount(): number {
    let n = 0;
    for (const s of this.#byWorkflow.values()) n += s.size;
    return n;
  }
}
