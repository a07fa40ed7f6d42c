// A ControlState at state version 3 driven as the store drives it (apply with a raft index and a
// leader stamp), for the machine lifecycle's unit and property tests: machines, a template,
// workflows of one action on their machine, and what the hooks saw.
import assert from 'node:assert/strict';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import { ControlState } from '../../src/state/control/control-state.js';
import type { Hardware, HardwareInput, RenderedTemplate, Workflow } from '../../src/model/records.js';
import type { MachineEvent, MachineLifecycle, OperatorVerb } from '../../src/model/machine-lifecycle.js';
import type { AuditTag } from '../../src/state/control/audit-log.js';
import { stateVersionFleet } from '../../src/state/versions.js';
import { nextAction } from '../../src/workflow/rules.js';

export const operator: AuditTag = { user: 'ops', role: 'operator', address: '127.0.0.1:1', method: 'test' };

export function machineInput(id: string, n: number): HardwareInput {
  return {
    id,
    interfaces: [
      {
        mac: `02:00:00:00:00:${n.toString(16).padStart(2, '0')}`,
        ip: { address: `10.0.0.${n}`, prefix: 24 },
        dns: [],
        leaseTimeS: 3600,
      },
    ],
    arch: 'x86_64',
    uefi: false,
    netboot: { allowPXE: true, allowWorkflow: true },
    metadata: {},
  };
}

/** One action on the workflow's own machine. */
export function specFor(hardwareId: string, globalTimeoutS = 600, timeoutS = 60): RenderedTemplate {
  return {
    version: '0.1',
    name: 'provision',
    globalTimeoutS,
    tasks: [
      {
        name: 'os',
        worker: hardwareId,
        env: {},
        volumes: [],
        actions: [
          { name: 'install', command: ['true'], args: [], env: {}, volumes: [], timeoutS, retries: 0 },
        ],
      },
    ],
  };
}

type Ok<T extends ControlResult['type']> = Extract<ControlResult, { readonly type: T }>;

export class LifecycleHarness {
  readonly state: ControlState;
  index = 0;
  nowMs = 1_000_000;
  /** The machineEvent changes the state published, in order. */
  readonly published: { hardwareId: string; event: MachineEvent }[] = [];

  /** At state version 3 unless `version` says otherwise. */
  constructor(version = stateVersionFleet, state = new ControlState()) {
    this.state = state;
    state.changes.on('machineEvent', ({ hardwareId, event }) => this.published.push({ hardwareId, event }));
    if (version > 1) this.run({ type: 'cluster.version', version });
    this.run({ type: 'template.put', name: 'os', source: 'version: "0.1"\nname: os\n' });
  }

  /** Every command applied, with its index and stamp (to replay them). */
  readonly applied: { readonly index: number; readonly nowMs: number; readonly command: ControlCommand }[] =
    [];

  run(command: ControlCommand): ControlResult {
    this.index += 1;
    this.applied.push({ index: this.index, nowMs: this.nowMs, command });
    return this.state.apply(this.index, this.nowMs, command);
  }

  ok<T extends ControlResult['type']>(command: ControlCommand, type: T): Ok<T> {
    const result = this.run(command);
    assert.equal(result.type, type, `${command.type}: ${JSON.stringify(result)}`);
    return result as Ok<T>;
  }

  /** Asserts a result is of `type`. */
  is<T extends ControlResult['type']>(result: ControlResult, type: T): Ok<T> {
    assert.equal(result.type, type, JSON.stringify(result));
    return result as Ok<T>;
  }

  /** Asserts the command is refused with `code` and changes nothing but the applied index and trail. */
  refused(command: ControlCommand, code: string, why?: RegExp): string {
    const before = this.#comparable();
    const published = this.published.length;
    const result = this.run(command);
    assert.equal(result.type, 'error', `${command.type} should be refused: ${JSON.stringify(result)}`);
    assert.equal(result.code, code, result.message);
    if (why !== undefined) assert.match(result.message, why);
    assert.deepEqual(this.#comparable(), before, 'a refused command changed the state');
    assert.equal(this.published.length, published, 'a refused command published a transition');
    return result.message;
  }

  machine(id: string, n: number, audit: AuditTag | undefined = operator): Hardware {
    return this.ok(
      {
        type: 'hardware.put',
        hardware: machineInput(id, n),
        workerTokenSha256: 'a'.repeat(64),
        ...(audit === undefined ? {} : { audit }),
      },
      'hardware',
    ).hardware;
  }

  lifecycle(id: string): MachineLifecycle {
    const lc = this.state.hardware(id)?.lifecycle;
    assert.ok(lc !== undefined, `hardware ${id} has a lifecycle`);
    return lc;
  }

  verbCommand(
    id: string,
    verb: OperatorVerb,
    extra: { now?: boolean; timeoutS?: number; reason?: string } = {},
  ): Extract<ControlCommand, { readonly type: 'hardware.lifecycle' }> {
    const { reason = `test ${verb}`, ...rest } = extra;
    return { type: 'hardware.lifecycle', id, verb, reason, ...rest, audit: operator };
  }

  verb(
    id: string,
    verb: OperatorVerb,
    extra: { now?: boolean; timeoutS?: number; reason?: string } = {},
  ): ControlResult {
    return this.run(this.verbCommand(id, verb, extra));
  }

  createCommand(id: string, hardwareId: string, spec = specFor(hardwareId)): ControlCommand {
    return {
      type: 'workflow.create',
      id,
      template: 'os',
      templateVersion: this.state.template('os')?.version ?? 0,
      hardwareId,
      hardwareMap: {},
      spec,
      audit: operator,
    };
  }

  create(id: string, hardwareId: string, spec = specFor(hardwareId)): ControlResult {
    return this.run(this.createCommand(id, hardwareId, spec));
  }

  /** Starts the workflow's next action on its worker. */
  start(workflowId: string): ControlResult {
    const wf = this.state.workflow(workflowId);
    const next = wf === undefined ? null : nextAction(wf);
    if (next === null) return { type: 'error', code: 'E_STALE_ATTEMPT', message: 'nothing to start' };
    return this.run({
      type: 'attempt.start',
      workflowId,
      actionIndex: next.index,
      attempt: next.attempt,
      workerId: next.workerId,
    });
  }

  /** The running action's result. */
  finish(workflowId: string, success: boolean): ControlResult {
    const wf = this.state.workflow(workflowId);
    const i = wf?.actions.findIndex((s) => s.state === 'RUNNING') ?? -1;
    const status = i < 0 ? undefined : wf?.actions[i];
    if (status === undefined) return { type: 'error', code: 'E_STALE_ATTEMPT', message: 'nothing running' };
    return this.run({
      type: 'attempt.result',
      workflowId,
      actionIndex: i,
      attempt: status.attempt,
      workerId: status.workerId ?? '',
      success,
      exitStatus: success ? 0 : 1,
      message: success ? '' : 'exited with status 1',
      outputTail: '',
    });
  }

  /** Runs a fresh workflow on the machine to its end. */
  provision(workflowId: string, hardwareId: string, success = true): Workflow {
    this.ok(this.createCommand(workflowId, hardwareId), 'workflow');
    this.ok(this.#startOf(workflowId), 'attempt');
    this.finish(workflowId, success);
    const wf = this.state.workflow(workflowId);
    assert.ok(wf !== undefined);
    return wf;
  }

  /** The leader's expiry of the machine's current deadline, at its deadline. */
  expire(id: string): ControlResult {
    const deadlineMs = this.state.hardware(id)?.lifecycle?.deadlineMs ?? 0;
    this.nowMs = Math.max(this.nowMs, deadlineMs);
    return this.run({ type: 'hardware.expire', id, deadlineMs });
  }

  #startOf(workflowId: string): ControlCommand {
    const next = nextAction(this.state.workflow(workflowId)!);
    assert.ok(next !== null);
    return {
      type: 'attempt.start',
      workflowId,
      actionIndex: next.index,
      attempt: next.attempt,
      workerId: next.workerId,
    };
  }

  /** The state without what every command moves (the applied index, the audit trail). */
  #comparable(): unknown {
    const {
      appliedIndex: _i,
      audit: _a,
      ...rest
    } = JSON.parse(new TextDecoder().decode(this.state.snapshot())) as Record<string, unknown>;
    return rest;
  }
}
