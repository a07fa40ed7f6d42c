// What the command being applied changed, gathered as the appliers (apply-*.ts) make the changes
// and published on the change stream (change-stream.ts) once the command is done, in the order
// that stream promises.
import type { MachineEvent } from '../../model/machine-lifecycle.js';
import type { PowerJob, Workflow, WorkflowEvent } from '../../model/records.js';
import type { ChangeStream } from './change-stream.js';

export class AppliedChanges {
  readonly hardware = new Set<string>();
  /** Workflow id → the workflow as stored, or undefined when it was deleted. */
  readonly workflows = new Map<string, Workflow | undefined>();
  events: WorkflowEvent[] = [];
  powerJobs: PowerJob[] = [];
  artifacts: string[] = [];
  collected: string[] = [];
  drainChanged = false;

  /** Publishes what changed, then forgets it: the next command starts with nothing changed. */
  publish(
    changes: ChangeStream,
    machineEvents: readonly { readonly hardwareId: string; readonly event: MachineEvent }[],
  ): void {
    const hardware = [...this.hardware];
    const workflows = [...this.workflows];
    const { events, powerJobs, artifacts, collected, drainChanged } = this;
    this.artifacts = [];
    this.collected = [];
    this.hardware.clear();
    this.workflows.clear();
    this.events = [];
    this.powerJobs = [];
    this.drainChanged = false;
    for (const id of hardware) changes.publish({ kind: 'hardware', id });
    for (const [id, workflow] of workflows) {
      changes.publish(
        workflow === undefined ? { kind: 'workflowDeleted', id } : { kind: 'workflow', workflow },
      );
    }
    for (const event of events) changes.publish({ kind: 'workflowEvent', event });
    for (const { hardwareId, event } of machineEvents)
      changes.publish({ kind: 'machineEvent', hardwareId, event });
    for (const job of powerJobs) changes.publish({ kind: 'powerJob', job });
    for (const name of artifacts) changes.publish({ kind: 'artifact', name });
    if (collected.length > 0) changes.publish({ kind: 'workflowsCollected', ids: collected });
    if (drainChanged) changes.publish({ kind: 'drain' });
  }
}
