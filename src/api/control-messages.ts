// Domain records → the operator API's messages. Worker tokens and BMC passwords never leave
// through these.
import type {
  ActionRecord,
  MachineEvent as MachineEventProto,
  PowerJobRecord,
  TemplateRecord,
  WorkflowEvent as EventProto,
  WorkflowRecord,
} from '../gen/control.js';
import type { Hardware, PowerJob, Template, Workflow, WorkflowEvent } from '../model/records.js';
import type { MachineEvent } from '../model/machine-lifecycle.js';
import { actionPositions } from '../workflow/rules.js';
import { raceOutcome } from '../state/control/race.js';

export function hardwareJson(hw: Hardware): string {
  const { workerTokenSha256: _token, reportedWith: _reported, bmc, lifecycle, inspection, ...rest } = hw;
  // The history has its own call (HardwareHistory): a listing shows where each machine stands.
  // An inventory boot's credential shows where and until when it was claimed, not its digest.
  const shown = {
    ...rest,
    ...(inspection === undefined
      ? {}
      : { inspection: { mac: inspection.mac, ip: inspection.ip, expiresMs: inspection.expiresMs } }),
  };
  const visible =
    lifecycle === undefined ? shown : { ...shown, lifecycle: { ...lifecycle, history: undefined } };
  if (bmc === undefined) return JSON.stringify(visible);
  // The password stays in the state; readers learn only whether one is set.
  const { password, ...bmcVisible } = bmc;
  return JSON.stringify({ ...visible, bmc: { ...bmcVisible, passwordSet: password !== undefined } });
}

export function powerJobRecord(job: PowerJob): PowerJobRecord {
  return {
    id: job.id,
    hardwareId: job.hardwareId,
    op: job.op,
    steps: [...job.steps],
    state: job.state,
    stepIndex: job.stepIndex,
    attempt: job.attempt,
    maxAttempts: job.maxAttempts,
    createdMs: job.createdMs,
    updatedMs: job.updatedMs,
    finishedMs: job.finishedMs ?? 0,
    claimedBy: job.claimedBy ?? '',
    powerState: job.powerState ?? '',
    message: job.message ?? '',
  };
}

export function templateRecord(t: Template): TemplateRecord {
  return {
    name: t.name,
    source: t.source,
    version: t.version,
    createdMs: t.createdMs,
    updatedMs: t.updatedMs,
  };
}

/**
 * A workflow as the API gives it; `workflow` looks up others, for a race's lanes (0037): the
 * request keeps the race's record, and either lane shows it.
 */
export function workflowRecord(
  wf: Workflow,
  workflow: (id: string) => Workflow | undefined = () => undefined,
): WorkflowRecord {
  const positions = actionPositions(wf.spec);
  const actions: ActionRecord[] = positions.map((p, i) => {
    const s = wf.actions[i];
    return {
      task: p.task.name,
      name: p.action.name,
      state: s?.state ?? 'PENDING',
      attempt: s?.attempt ?? 0,
      retries: p.action.retries,
      timeoutS: p.action.timeoutS,
      startedMs: s?.startedMs ?? 0,
      stoppedMs: s?.stoppedMs ?? 0,
      deadlineMs: s?.deadlineMs ?? 0,
      notBeforeMs: s?.notBeforeMs ?? 0,
      exitStatus: s?.exitStatus,
      message: s?.message ?? '',
      outputTail: s?.outputTail ?? '',
      workerId: s?.workerId ?? p.task.worker,
      image: p.action.image ?? '',
      command: [...p.action.command, ...p.action.args],
    };
  });
  return {
    id: wf.id,
    template: wf.template,
    hardwareId: wf.hardwareId,
    state: wf.state,
    createdMs: wf.createdMs,
    startedMs: wf.startedMs ?? 0,
    finishedMs: wf.finishedMs ?? 0,
    deadlineMs: wf.deadlineMs ?? 0,
    message: wf.message ?? '',
    actions,
    globalTimeoutS: wf.spec.globalTimeoutS,
    netboot: wf.netboot === true,
    selector: wf.selector ?? '',
    onFailure: wf.race !== undefined ? 'race' : wf.alternate === undefined ? 'retry' : 'alternate',
    attempts: wf.alternate?.attempts ?? 0,
    machinesTried: [...(wf.race?.tried ?? wf.alternate?.tried ?? [])],
    gaveUp: wf.alternate?.gaveUp ?? '',
    ...raceFields(wf, workflow),
  };
}

function raceFields(
  wf: Workflow,
  workflow: (id: string) => Workflow | undefined,
): Pick<WorkflowRecord, 'raceRequest' | 'raceRival' | 'raceWinner' | 'raceWinnerHardwareId' | 'raceOutcome'> {
  const race = wf.race;
  if (race === undefined)
    return { raceRequest: '', raceRival: '', raceWinner: '', raceWinnerHardwareId: '', raceOutcome: '' };
  const request = race.request === wf.id ? wf : workflow(race.request);
  const rival = race.request === wf.id ? workflow(race.rival) : wf;
  const winner = request?.race?.winner ?? '';
  return {
    raceRequest: race.request,
    raceRival: race.rival,
    raceWinner: winner,
    raceWinnerHardwareId: winner === '' ? '' : ((winner === wf.id ? wf : workflow(winner))?.hardwareId ?? ''),
    raceOutcome: request === undefined ? raceOutcome(wf, undefined) : raceOutcome(request, rival),
  };
}

export function eventRecord(e: WorkflowEvent): EventProto {
  return {
    seq: e.seq,
    workflowId: e.workflowId,
    type: e.type,
    stampMs: e.stampMs,
    task: e.task ?? '',
    action: e.action ?? '',
    actionIndex: e.actionIndex,
    attempt: e.attempt ?? 0,
    exitStatus: e.exitStatus,
    message: e.message ?? '',
    outputTail: e.outputTail ?? '',
  };
}

export function machineEventRecord(hardwareId: string, e: MachineEvent): MachineEventProto {
  return {
    seq: e.seq,
    hardwareId,
    stampMs: e.stampMs,
    from: e.from ?? '',
    to: e.to,
    trigger: e.trigger,
    by: e.by,
    reason: e.reason ?? '',
    step: e.step ?? '',
    workflowId: e.workflowId ?? '',
  };
}
