// The operator API of the control plane (proto/control.proto). Writes become control commands
// applied through the leader; reads are linearizable unless `local` is set. Everything random
// (workflow ids, worker tokens) and the template rendering happen here, on the proposing node,
// so the replicated apply stays pure.
import { randomBytes, randomUUID } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import type {
  handleClientStreamingCall,
  handleServerStreamingCall,
  Metadata,
  sendUnaryData,
  ServerReadableStream,
  ServerUnaryCall,
  ServerWritableStream,
  ServiceError,
} from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type {
  ArtifactAddRequest,
  ArtifactAddResponse,
  ControlServer,
  WorkflowCreateRequest,
  WorkflowCreateResponse,
  WorkflowEventsRequest,
  WorkflowEventsResponse,
  WorkflowRetentionRequest,
  WorkflowRetentionResponse,
  HardwareQuarantinePolicyRequest,
  HardwareQuarantinePolicyResponse,
  HardwareAcceptRuleRequest,
  HardwareAcceptRuleResponse,
  TokenListRequest,
  TokenListResponse,
} from '../gen/control.js';
import {
  ArtifactRecord,
  PoolRecord,
  PowerJobRecord,
  TemplateRecord,
  WorkflowRecord,
} from '../gen/control.js';
import { poolRecord } from './pool-view.js';
import { heldWhy, poolFailurePolicies, type Pool, type PoolRetryPolicy } from '../fleet/pool.js';
import type { RaftNode } from '../raft/node.js';
import type { ControlCommand, ControlResult } from '../state/control/commands.js';
import type { ControlState } from '../state/control/control-state.js';
import type {
  Artifact,
  Hardware,
  PowerOp,
  RenderedTemplate,
  Role,
  Template,
  Workflow,
  WorkflowEvent,
} from '../model/records.js';
import { isTerminal } from '../model/records.js';
import type { ContentState } from '../artifacts/fetcher.js';
import type { ContentStore } from '../artifacts/content-store.js';
import { receiveArtifact } from './artifact-upload.js';
import { PowerJobWaiters } from '../power/waiters.js';
import { isFinishedPowerJob, powerRequest } from '../state/control/power-jobs.js';
import { retentionStartsMs } from '../state/control/workflow-retention.js';
import { parseHardwareDocument } from '../workflow/hardware-doc.js';
import { TemplateError, validateTemplateSource } from '../workflow/template.js';
import { TurnQueue } from '../platform/turn-queue.js';
import type { Authenticator } from './auth.js';
import { sha256Hex } from './auth.js';
import { CallAuditor, type AuditedCall } from './audit-calls.js';
import type { AuditTag } from '../state/control/audit-log.js';
import {
  eventRecord,
  hardwareJson,
  powerJobRecord,
  templateRecord,
  workflowRecord,
} from './control-messages.js';
import { ApiError, controlErrorStatus, toServiceError } from './errors.js';
import { pageOf } from './pages.js';
import { ipValue } from '../state/control/leases.js';
import { MachineEventHub, type EventHub } from './event-hub.js';
import { hardwareHistoryHandler } from './hardware-history.js';
import { explainMachines, selectedBy, selectorArgument } from './hardware-selection.js';
import { noMachineMessage, tallyOf } from '../fleet/allocation.js';
import { awaitsAlternate, raceNeedsTwoMessage } from '../state/control/allocation.js';
import { formatSelector } from '../fleet/selector-terms.js';
import {
  allocationRoundsMax,
  failurePolicy,
  type FailurePolicy,
  offerMachines,
  renderForMachine,
} from './allocation-offer.js';
import { machineStates, operatorVerbs, type MachineState } from '../model/machine-lifecycle.js';
import { stateVersionFleet, versionRefusal } from '../state/versions.js';
import type { Proposer } from './proposer.js';
import { realClock } from '../platform/clock.js';

export interface ControlServiceContext {
  readonly node: RaftNode;
  readonly control: ControlState;
  readonly proposer: Proposer;
  readonly auth: Authenticator;
  readonly events: EventHub;
  /** Machine transitions for `hardware history --follow`; one is made here when absent. */
  readonly machines?: MachineEventHub;
  readonly logger: Logger;
  /** Wakes power requests when their job finishes (fed by ControlState's powerJob changes). */
  readonly powerWaiters?: PowerJobWaiters;
  /** Puts operator calls into the audit trail; one is made here when absent. */
  readonly auditor?: CallAuditor;
  /** This node's artifact content; without it ArtifactAdd is UNIMPLEMENTED. */
  readonly artifacts?: ArtifactContext;
}

export interface ArtifactContext {
  readonly store: ContentStore;
  /** This node's copy of a registered artifact's content (src/artifacts/catalogue.ts). */
  local(artifact: Artifact): ContentState;
}

type Handler<Req, Res> = (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => void;

/** An audited call's caller, and the mark it sets just before it proposes (audit-calls.ts). */
interface Proposal {
  readonly audit: AuditTag;
  readonly proposing: () => void;
}

const eventBatch = 1000;
/** How long a power request waits for its job by default, and at most. */
const powerWaitMsDefault = 60_000;
const powerWaitMsMax = 10 * 60_000;
const powerChangeOps: readonly PowerOp[] = ['on', 'off', 'cycle', 'netboot'];
const roles: readonly Role[] = ['admin', 'operator', 'viewer'];

export class ControlService {
  readonly #ctx: ControlServiceContext;
  /** Template renders, one per event-loop turn, so a burst of creates does not stall the node. */
  readonly #renders = new TurnQueue();
  readonly #powerWaiters: PowerJobWaiters;
  readonly #auditor: CallAuditor;
  readonly #machines: MachineEventHub;

  constructor(ctx: ControlServiceContext) {
    this.#ctx = ctx;
    this.#machines = ctx.machines ?? new MachineEventHub();
    this.#powerWaiters = ctx.powerWaiters ?? new PowerJobWaiters(realClock);
    this.#auditor =
      ctx.auditor ?? new CallAuditor(ctx.auth, (command) => ctx.proposer.proposeControl(command), ctx.logger);
  }

  handlers(): ControlServer {
    return {
      ...this.#hardwareHandlers(),
      ...this.#lifecycleHandlers(),
      ...this.#templateHandlers(),
      ...this.#workflowHandlers(),
      ...this.#memberHandlers(),
      ...this.#tokenHandlers(),
      ...this.#powerHandlers(),
      ...this.#artifactHandlers(),
      ...this.#poolHandlers(),
    };
  }

  /** The handlers of hardware records, their tokens and DHCP leases. */
  #hardwareHandlers() {
    const c = this.#ctx.control;
    return {
      hardwareCreate: this.#change(
        'operator',
        'HardwareCreate',
        'hardware.put',
        (req) => documentId(req.documentJson),
        async (req, p) => {
          const input = wrapInput(() => parseHardwareDocument(req.documentJson));
          const hw = expectType(
            await this.#apply(p, {
              type: 'hardware.put',
              hardware: input,
              // Nobody learns this token: an agent run by hand needs `hardware token`, which mints one.
              workerTokenSha256: sha256Hex(randomBytes(32).toString('base64url')),
              ...(req.replace ? {} : { expectVersion: 0 }),
            }),
            'hardware',
          ).hardware;
          return { hardwareJson: hardwareJson(hw) };
        },
      ),
      hardwareGet: this.#unary('viewer', async (req) => {
        await this.#read(req.local);
        return { hardwareJson: hardwareJson(this.#hardware(req.id)) };
      }),
      hardwareList: this.#unary('viewer', async (req) => {
        const states = this.#statesFilter(req.states ?? '');
        selectorArgument(req.selector ?? '');
        await this.#read(req.local);
        const inStates =
          states === undefined
            ? c.hardwareList()
            : c.hardwareList().filter((hw) => states.has(hw.lifecycle?.state ?? 'enrolled'));
        const page = pageOf(
          selectedBy(req.selector ?? '', inStates),
          req,
          (hw) => [hw.id],
          (hw) => jsonBytes(hardwareJson(hw)),
        );
        return { hardwareJson: page.items.map(hardwareJson), continue: page.continue };
      }),
      hardwareExplain: this.#unary('viewer', async (req) => {
        selectorArgument(req.selector);
        await this.#read(req.local);
        return explainMachines(req, c.hardwareList());
      }),
      leaseList: this.#unary('viewer', async (req) => {
        await this.#read(req.local);
        const page = pageOf(
          c.leases(),
          req,
          (lease) => [ipValue(lease.ip)],
          (lease) => jsonBytes(JSON.stringify(lease)),
        );
        return {
          leaseJson: page.items.map((lease) => JSON.stringify(lease)),
          nowMs: Date.now(),
          continue: page.continue,
        };
      }),
      hardwareDelete: this.#change(
        'operator',
        'HardwareDelete',
        'hardware.delete',
        (req) => req.id,
        async (req, p) => {
          expectType(await this.#apply(p, { type: 'hardware.delete', id: req.id }), 'deleted');
          return {};
        },
      ),
      // Who minted which machine's token goes into the trail (never the token).
      hardwareToken: this.#change(
        'admin',
        'HardwareToken',
        'hardware.token',
        (req) => req.id,
        async (req, p) => {
          // Only the digest is stored, so the token is minted here and shown this once; the
          // previous one stops working when this is committed.
          const token = randomBytes(32).toString('base64url');
          expectType(
            await this.#apply(p, { type: 'hardware.token', id: req.id, workerTokenSha256: sha256Hex(token) }),
            'hardware',
          );
          return { token };
        },
      ),
    } satisfies Partial<ControlServer>;
  }

  /** The machine lifecycle's verbs, labels and history (docs/decisions/0028). */
  #lifecycleHandlers() {
    return {
      hardwareTransition: this.#change(
        'operator',
        'HardwareTransition',
        'hardware.lifecycle',
        (req) => `${req.id} (${req.verb})`,
        async (req, p) => {
          const verb = operatorVerbs.find((v) => v === req.verb);
          if (verb === undefined) {
            throw new ApiError(
              status.INVALID_ARGUMENT,
              `verb must be one of ${operatorVerbs.join(', ')}, got "${req.verb}"`,
            );
          }
          if (req.reason.trim() === '') {
            throw new ApiError(status.INVALID_ARGUMENT, 'a reason is required: say why (--reason TEXT)');
          }
          const command = {
            type: 'hardware.lifecycle',
            id: req.id,
            verb,
            reason: req.reason,
            ...(req.now ? { now: true } : {}),
            ...(req.timeoutS === 0 ? {} : { timeoutS: req.timeoutS }),
          } as const;
          const hw = expectType(await this.#apply(p, command), 'hardware').hardware;
          return { hardwareJson: hardwareJson(hw) };
        },
      ),
      hardwareLabel: this.#change(
        'operator',
        'HardwareLabel',
        'hardware.label',
        (req) =>
          `${req.id} (${[...Object.entries(req.set).map(([k, v]) => `${k}=${v}`), ...req.remove.map((k) => `${k}-`)].join(' ')})`,
        async (req, p) => {
          const command = { type: 'hardware.label', id: req.id, set: req.set, remove: req.remove } as const;
          const hw = expectType(await this.#apply(p, command), 'hardware').hardware;
          return { hardwareJson: hardwareJson(hw) };
        },
      ),
      hardwareHistory: hardwareHistoryHandler({
        control: this.#ctx.control,
        auth: this.#ctx.auth,
        machines: this.#machines,
        catchUp: () => this.#read(false),
      }),
    } satisfies Partial<ControlServer>;
  }

  /**
   * The lifecycle states a listing asks for, or undefined for all. An unknown state is bad input;
   * any state before the cluster tracks them (state version 3) is refused as the gate refuses.
   */
  #statesFilter(list: string): ReadonlySet<MachineState> | undefined {
    const names = list
      .split(',')
      .map((n) => n.trim())
      .filter((n) => n !== '');
    if (names.length === 0) return undefined;
    const unknown = names.find((n) => !(machineStates as readonly string[]).includes(n));
    if (unknown !== undefined) {
      throw new ApiError(
        status.INVALID_ARGUMENT,
        `unknown machine state "${unknown}"; the states are ${machineStates.join(', ')}`,
      );
    }
    if (this.#ctx.control.clusterVersion < stateVersionFleet) {
      throw new ApiError(
        status.FAILED_PRECONDITION,
        versionRefusal('--state (machine states)', stateVersionFleet, this.#ctx.control.clusterVersion),
      );
    }
    return new Set(names as MachineState[]);
  }

  /** The handlers of templates. */
  #templateHandlers() {
    const c = this.#ctx.control;
    return {
      templateCreate: this.#change(
        'operator',
        'TemplateCreate',
        'template.put',
        () => '',
        async (req, p) => {
          const { name } = wrapInput(() => validateTemplateSource(req.source));
          const t = expectType(
            await this.#apply(p, {
              type: 'template.put',
              name,
              source: req.source,
              ...(req.replace ? {} : { expectVersion: 0 }),
            }),
            'template',
          ).template;
          return { template: templateRecord(t) };
        },
      ),
      templateGet: this.#unary('viewer', async (req) => {
        await this.#read(req.local);
        return { template: templateRecord(this.#template(req.name)) };
      }),
      templateList: this.#unary('viewer', async (req) => {
        await this.#read(req.local);
        const page = pageOf(
          c.templates(),
          req,
          (t) => [t.name],
          (t) => TemplateRecord.encode(templateRecord(t)).finish().length,
        );
        return { templates: page.items.map(templateRecord), continue: page.continue };
      }),
      templateDelete: this.#change(
        'operator',
        'TemplateDelete',
        'template.delete',
        (req) => req.name,
        async (req, p) => {
          expectType(await this.#apply(p, { type: 'template.delete', name: req.name }), 'deleted');
          return {};
        },
      ),
    } satisfies Partial<ControlServer>;
  }

  /** The handlers of workflows, their events and their retention. */
  #workflowHandlers() {
    const c = this.#ctx.control;
    return {
      workflowCreate: this.#change(
        'operator',
        'WorkflowCreate',
        'workflow.create',
        (req) =>
          `template ${req.template}, ${req.selector ? `selector ${req.selector}` : `hardware ${req.hardwareId}`}`,
        (req, p) => this.#createWorkflow(req, p),
      ),
      workflowGet: this.#unary('viewer', async (req) => {
        await this.#read(req.local);
        return { workflow: workflowRecord(this.#workflow(req.id), (id) => c.workflow(id)) };
      }),
      workflowList: this.#unary('viewer', async (req) => {
        await this.#read(req.local);
        const all = req.hardwareId === '' ? c.workflows() : c.workflowsOfMachine(req.hardwareId);
        const page = pageOf(
          all,
          req,
          (wf) => [wf.createdMs, wf.id],
          (wf) => WorkflowRecord.encode(workflowRecord(wf, (id) => c.workflow(id))).finish().length,
        );
        return {
          workflows: page.items.map((wf) => workflowRecord(wf, (id) => c.workflow(id))),
          continue: page.continue,
        };
      }),
      workflowCancel: this.#change(
        'operator',
        'WorkflowCancel',
        'workflow.cancel',
        (req) => req.id,
        async (req, p) => {
          const wf = expectType(
            await this.#apply(p, { type: 'workflow.cancel', id: req.id }),
            'workflow',
          ).workflow;
          return { workflow: workflowRecord(wf) };
        },
      ),
      workflowRetry: this.#change(
        'operator',
        'WorkflowRetry',
        'workflow.retry',
        (req) => req.id,
        async (req, p) => {
          const wf = expectType(
            await this.#apply(p, { type: 'workflow.retry', id: req.id, fromStart: req.fromStart }),
            'workflow',
          ).workflow;
          return { workflow: workflowRecord(wf) };
        },
      ),
      workflowDelete: this.#change(
        'operator',
        'WorkflowDelete',
        'workflow.delete',
        (req) => req.id,
        async (req, p) => {
          expectType(await this.#apply(p, { type: 'workflow.delete', id: req.id }), 'deleted');
          return {};
        },
      ),
      workflowEvents: this.#eventsHandler(),
      workflowRetention: (call, callback) => {
        this.#workflowRetention(call).then(
          (res) => callback(null, res),
          (err: unknown) => callback(toServiceError(err) as ServiceError, null),
        );
      },
      hardwareQuarantinePolicy: (call, callback) => {
        this.#quarantinePolicy(call).then(
          (res) => callback(null, res),
          (err: unknown) => callback(toServiceError(err) as ServiceError, null),
        );
      },
      hardwareAcceptRule: (call, callback) => {
        this.#acceptRule(call).then(
          (res) => callback(null, res),
          (err: unknown) => callback(toServiceError(err) as ServiceError, null),
        );
      },
      // As member and leader changes (Kv.MemberAdd, Kv.LeaderTransfer): admin.
    } satisfies Partial<ControlServer>;
  }

  /** The handlers of draining members. */
  #memberHandlers() {
    return {
      nodeDrain: this.#change(
        'admin',
        'NodeDrain',
        'member.drain',
        (req) => `${req.id} (${req.drained ? 'drain' : 'undrain'})`,
        async (req, p) => {
          await this.#read(false);
          this.#checkDrainTarget(req.id, req.drained);
          const r = expectType(
            await this.#apply(p, { type: 'member.drain', id: req.id, drained: req.drained }),
            'drainedMembers',
          );
          return { id: req.id, drained: req.drained, drainedMembers: [...r.ids] };
        },
      ),
    } satisfies Partial<ControlServer>;
  }

  /** The handlers of operator tokens. */
  #tokenHandlers() {
    return {
      tokenCreate: this.#change(
        'admin',
        'TokenCreate',
        'token.put',
        (req) => `${req.name} (${req.role})`,
        async (req, p) => {
          if (!(roles as readonly string[]).includes(req.role)) {
            throw new ApiError(
              status.INVALID_ARGUMENT,
              `role must be one of ${roles.join(', ')}, got "${req.role}"`,
            );
          }
          const token = randomBytes(32).toString('base64url');
          expectType(
            await this.#apply(p, {
              type: 'token.put',
              name: req.name,
              role: req.role as Role,
              sha256: sha256Hex(token),
            }),
            'token',
          );
          return { token };
        },
      ),
      tokenList: (call, callback) => {
        this.#tokenList(call).then(
          (res) => callback(null, res),
          (err: unknown) => callback(toServiceError(err) as ServiceError, null),
        );
      },
      tokenDelete: this.#change(
        'admin',
        'TokenDelete',
        'token.delete',
        (req) => req.name,
        async (req, p) => {
          expectType(await this.#apply(p, { type: 'token.delete', name: req.name }), 'deleted');
          return {};
        },
      ),
    } satisfies Partial<ControlServer>;
  }

  /** The handlers of power jobs. */
  #powerHandlers() {
    const c = this.#ctx.control;
    return {
      powerChange: this.#change(
        'operator',
        'PowerChange',
        'power.request',
        (req) => `${req.hardwareId} (${req.op})`,
        async (req, p) => {
          const op = powerChangeOps.find((o) => o === req.op);
          if (op === undefined) {
            throw new ApiError(
              status.INVALID_ARGUMENT,
              `op must be one of ${powerChangeOps.join(', ')}, got "${req.op}" (use PowerStatus for status)`,
            );
          }
          return this.#power(req.hardwareId, op, req.waitMs, p);
        },
      ),
      // A status query is a power job in the state, so it is audited like the changes.
      powerStatus: this.#change(
        'viewer',
        'PowerStatus',
        'power.request',
        (req) => `${req.hardwareId} (status)`,
        (req, p) => this.#power(req.hardwareId, 'status', req.waitMs, p),
      ),
      powerJobGet: this.#unary('viewer', async (req) => {
        await this.#read(req.local);
        const job = c.powerJob(req.id);
        if (job === undefined) throw new ApiError(status.NOT_FOUND, `power job "${req.id}" not found`);
        return { job: powerJobRecord(job) };
      }),
      powerJobList: this.#unary('viewer', async (req) => {
        await this.#read(req.local);
        if (req.hardwareId !== '') this.#hardware(req.hardwareId);
        const jobs = c.powerJobs(req.hardwareId === '' ? undefined : req.hardwareId);
        const page = pageOf(
          jobs,
          req,
          (job) => [job.createdMs, job.id],
          (job) => PowerJobRecord.encode(powerJobRecord(job)).finish().length,
        );
        return { jobs: page.items.map(powerJobRecord), continue: page.continue };
      }),
    } satisfies Partial<ControlServer>;
  }

  /** The handlers of boot artifacts. */
  /** The handlers of pools (docs/decisions/0035, 0036): operators change them, viewers read them. */
  #poolHandlers() {
    const c = this.#ctx.control;
    const view = (pool: Pool): PoolRecord =>
      poolRecord(pool, c.hardwareList(), (id) => c.workflow(id)?.race?.request);
    const changed = async (p: Proposal, command: ControlCommand): Promise<PoolRecord> =>
      view(expectType(await this.#apply(p, command), 'pool').pool);
    return {
      poolCreate: this.#change(
        'operator',
        'PoolCreate',
        'pool.create',
        (req) => `${req.name} (template ${req.template}, selector ${req.selector}, size ${req.size})`,
        async (req, p) => {
          const command = {
            type: 'pool.create',
            name: req.name,
            selector: req.selector,
            template: req.template,
            size: req.size,
            spares: req.spares,
            ...(req.spreadBy === '' ? {} : { spreadBy: req.spreadBy }),
            ...(req.releaseTemplate === '' ? {} : { releaseTemplate: req.releaseTemplate }),
            ...(req.image === '' ? {} : { image: req.image }),
            ...(req.maxUnavailable === undefined ? {} : { maxUnavailable: req.maxUnavailable }),
            ...poolFailurePolicy(req.onFailure, req.attempts),
          } as const;
          return { pool: await changed(p, command) };
        },
      ),
      poolGet: this.#unary('viewer', async (req) => {
        await this.#read(req.local);
        return { pool: view(this.#pool(req.name)) };
      }),
      poolList: this.#unary('viewer', async (req) => {
        await this.#read(req.local);
        const page = pageOf(
          c.pools(),
          req,
          (pool) => [pool.name],
          (pool) => PoolRecord.encode(view(pool)).finish().length,
        );
        return { pools: page.items.map(view), continue: page.continue };
      }),
      poolScale: this.#change(
        'operator',
        'PoolScale',
        'pool.scale',
        (req) => `${req.name} (size ${req.size})`,
        async (req, p) => ({
          pool: await changed(p, { type: 'pool.scale', name: req.name, size: req.size }),
        }),
      ),
      poolTaint: this.#change(
        'operator',
        'PoolTaint',
        'pool.taint',
        (req) => req.name,
        async (req, p) => ({ pool: await changed(p, { type: 'pool.taint', name: req.name }) }),
      ),
      poolResume: this.#change(
        'operator',
        'PoolResume',
        'pool.resume',
        (req) => req.name,
        async (req, p) => {
          const wasHeld = heldWhy(this.#pool(req.name)) !== undefined;
          return { pool: await changed(p, { type: 'pool.resume', name: req.name }), wasHeld };
        },
      ),
      poolDelete: this.#change(
        'operator',
        'PoolDelete',
        'pool.delete',
        (req) => req.name,
        async (req, p) => {
          const r = await this.#apply(p, { type: 'pool.delete', name: req.name });
          return r.type === 'pool' ? { deleting: true, pool: view(r.pool) } : { deleting: false };
        },
      ),
    } satisfies Partial<ControlServer>;
  }

  #pool(name: string): Pool {
    const pool = this.#ctx.control.pool(name);
    if (pool === undefined) throw new ApiError(status.NOT_FOUND, `pool "${name}" not found`);
    return pool;
  }

  #artifactHandlers() {
    const c = this.#ctx.control;
    return {
      artifactAdd: this.#artifactAdd(),
      artifactList: this.#unary('viewer', async (req) => {
        await this.#read(req.local);
        const page = pageOf(
          c.artifacts(),
          req,
          (a) => [a.name],
          (a) => ArtifactRecord.encode(this.#artifactRecord(a)).finish().length,
        );
        return {
          artifacts: page.items.map((a) => this.#artifactRecord(a)),
          nodeId: this.#ctx.node.id,
          continue: page.continue,
        };
      }),
      artifactDelete: this.#change(
        'operator',
        'ArtifactDelete',
        'artifact.delete',
        (req) => req.name,
        async (req, p) => {
          expectType(await this.#apply(p, { type: 'artifact.delete', name: req.name }), 'deleted');
          return {};
        },
      ),
    } satisfies Partial<ControlServer>;
  }

  /**
   * Sets (or with `show`, or no value, reads) how long finished workflows stay; admin only, to
   * read as well, as the audit retention (docs/decisions/0020). A value left out keeps its
   * current one. The command needs state version 2: the proposer refuses it before then.
   */
  async #workflowRetention(
    call: ServerUnaryCall<WorkflowRetentionRequest, WorkflowRetentionResponse>,
  ): Promise<WorkflowRetentionResponse> {
    const req = call.request;
    const audited: AuditedCall = {
      metadata: call.metadata,
      peer: call.getPeer(),
      method: 'Control/WorkflowRetention',
      kind: 'workflow.retention',
    };
    if (req.show || (req.finishedMax === undefined && req.finishedDays === undefined)) {
      await this.#auditor.authorize(audited, 'admin', () => 'show');
      await this.#read(false);
      const control = this.#ctx.control;
      // The default waiting out its grace after the upgrade (0020): say from when it applies.
      const startsMs = retentionStartsMs(control.workflowRetentionDefaultSinceMs);
      const waiting = startsMs !== undefined && Date.now() < startsMs;
      return { ...control.workflowRetention, ...(waiting ? { defaultStartsMs: startsMs } : {}) };
    }
    const given = (v: number | undefined): string => (v === undefined ? '(as is)' : String(v));
    return this.#auditor.run(
      audited,
      'admin',
      () => `finishedMax=${given(req.finishedMax)} finishedDays=${given(req.finishedDays)}`,
      async (audit, proposing) => {
        if (req.finishedMax === undefined || req.finishedDays === undefined) await this.#read(false);
        const current = this.#ctx.control.workflowRetention;
        const r = expectType(
          await this.#apply(
            { audit, proposing },
            {
              type: 'workflow.retention',
              finishedMax: req.finishedMax ?? current.finishedMax,
              finishedDays: req.finishedDays ?? current.finishedDays,
            },
          ),
          'workflowRetention',
        );
        return { ...r.retention };
      },
    );
  }

  /** The operator tokens, without a secret; admin only, a refusal recorded as the audit trail's. */
  async #tokenList(call: ServerUnaryCall<TokenListRequest, TokenListResponse>): Promise<TokenListResponse> {
    const audited: AuditedCall = {
      metadata: call.metadata,
      peer: call.getPeer(),
      method: 'Control/TokenList',
      kind: 'token.list',
    };
    await this.#auditor.authorize(audited, 'admin', () => '');
    const req = call.request;
    await this.#read(req.local);
    const page = pageOf(
      this.#ctx.control.tokens(),
      req,
      (t) => [t.name],
      (t) => t.name.length + t.role.length + 16,
    );
    const tokens = page.items.map((t) => ({ name: t.name, role: t.role, createdMs: t.createdMs }));
    return { tokens, continue: page.continue };
  }

  /**
   * Sets (or with `show`, or no value, reads) when repeated failures quarantine a machine; admin
   * only, to read as well, as the workflow retention. A value left out keeps its current one. The
   * command needs state version 3: the proposer refuses it before then.
   */
  async #quarantinePolicy(
    call: ServerUnaryCall<HardwareQuarantinePolicyRequest, HardwareQuarantinePolicyResponse>,
  ): Promise<HardwareQuarantinePolicyResponse> {
    const req = call.request;
    const audited: AuditedCall = {
      metadata: call.metadata,
      peer: call.getPeer(),
      method: 'Control/HardwareQuarantinePolicy',
      kind: 'hardware.quarantinePolicy',
    };
    if (req.show || (req.failures === undefined && req.windowS === undefined)) {
      await this.#auditor.authorize(audited, 'admin', () => 'show');
      await this.#read(false);
      return { ...this.#ctx.control.quarantinePolicy };
    }
    const given = (v: number | undefined): string => (v === undefined ? '(as is)' : String(v));
    return this.#auditor.run(
      audited,
      'admin',
      () => `failures=${given(req.failures)} windowS=${given(req.windowS)}`,
      async (audit, proposing) => {
        if (req.failures === undefined || req.windowS === undefined) await this.#read(false);
        const current = this.#ctx.control.quarantinePolicy;
        const r = expectType(
          await this.#apply(
            { audit, proposing },
            {
              type: 'hardware.quarantinePolicy',
              failures: req.failures ?? current.failures,
              windowS: req.windowS ?? current.windowS,
            },
          ),
          'quarantinePolicy',
        );
        return { ...r.policy };
      },
    );
  }

  /**
   * Sets, clears or (neither asked) reads the auto-accept rule (docs/decisions/0037); admin only,
   * to read as well, as the quarantine policy. A selector that does not parse is INVALID_ARGUMENT.
   * The command needs state version 3: the proposer refuses it before then.
   */
  async #acceptRule(
    call: ServerUnaryCall<HardwareAcceptRuleRequest, HardwareAcceptRuleResponse>,
  ): Promise<HardwareAcceptRuleResponse> {
    const req = call.request;
    const audited: AuditedCall = {
      metadata: call.metadata,
      peer: call.getPeer(),
      method: 'Control/HardwareAcceptRule',
      kind: 'hardware.acceptRule',
    };
    if (!req.clear && req.selector === undefined) {
      await this.#auditor.authorize(audited, 'admin', () => 'show');
      await this.#read(false);
      return { selector: this.#ctx.control.acceptRule ?? '' };
    }
    if (req.clear && req.selector !== undefined)
      throw new ApiError(status.INVALID_ARGUMENT, 'set a selector or clear the rule, not both');
    return this.#auditor.run(
      audited,
      'admin',
      () => (req.clear ? '(cleared)' : (req.selector ?? '')),
      async (audit, proposing) => {
        const r = expectType(
          await this.#apply(
            { audit, proposing },
            {
              type: 'hardware.acceptRule',
              ...(req.clear ? {} : { selector: formatSelector(selectorArgument(req.selector ?? '')) }),
            },
          ),
          'acceptRule',
        );
        return { selector: r.selector ?? '' };
      },
    );
  }

  /**
   * An upload: authenticated before any content is read, stored and verified here, then
   * registered through the leader; answers once artifact.put is committed and applied.
   */
  #artifactAdd(): handleClientStreamingCall<ArtifactAddRequest, ArtifactAddResponse> {
    return (
      call: ServerReadableStream<ArtifactAddRequest, ArtifactAddResponse>,
      callback: sendUnaryData<ArtifactAddResponse>,
    ) => {
      const audited: AuditedCall = {
        metadata: call.metadata,
        peer: call.getPeer(),
        method: 'Control/ArtifactAdd',
        kind: 'artifact.put',
      };
      const run = (audit: AuditTag, proposing: () => void): Promise<ArtifactAddResponse> =>
        this.#addArtifact(call, { audit, proposing });
      this.#auditor
        .run(audited, 'operator', () => '', run)
        .then(
          (res) => callback(null, res),
          (err: unknown) => callback(toServiceError(err) as ServiceError, null),
        );
    };
  }

  async #addArtifact(
    call: ServerReadableStream<ArtifactAddRequest, ArtifactAddResponse>,
    p: Proposal,
  ): Promise<ArtifactAddResponse> {
    const artifacts = this.#ctx.artifacts;
    if (artifacts === undefined) throw new ApiError(status.UNIMPLEMENTED, 'this node stores no artifacts');
    const received = await receiveArtifact(call, artifacts.store);
    const stored = expectType(
      await this.#apply(p, {
        type: 'artifact.put',
        name: received.name,
        sha256: received.sha256,
        bytes: received.bytes,
        ...(received.expectVersion === 0 ? {} : { expectVersion: received.expectVersion }),
      }),
      'artifact',
    ).artifact;
    this.#ctx.logger.info(
      { name: stored.name, sha256: stored.sha256, bytes: stored.bytes, version: stored.version },
      'artifact registered',
    );
    return { artifact: this.#artifactRecord(stored) };
  }

  #artifactRecord(a: Artifact): ArtifactRecord {
    const local = this.#ctx.artifacts?.local(a) ?? {
      kind: 'missing',
      error: 'this node stores no artifacts',
    };
    return {
      name: a.name,
      sha256: a.sha256,
      bytes: a.bytes,
      version: a.version,
      createdMs: a.createdMs,
      updatedMs: a.updatedMs,
      local: local.kind,
      localError: local.kind === 'missing' ? local.error : '',
    };
  }

  /** Enqueues a power job and waits (up to waitMs) for it to finish on this node. */
  async #power(
    hardwareId: string,
    op: PowerOp,
    waitMs: number,
    p: Proposal,
  ): Promise<{ job: ReturnType<typeof powerJobRecord>; finished: boolean }> {
    if (hardwareId === '') throw new ApiError(status.INVALID_ARGUMENT, 'the hardware id is required');
    const wait = Math.min(waitMs === 0 ? powerWaitMsDefault : waitMs, powerWaitMsMax);
    // Any node may propose it; the leader's executor (src/power/executor.ts) carries the job out.
    const request = powerRequest(randomUUID(), hardwareId, op);
    const queued = expectType(await this.#apply(p, request), 'powerJob').job;
    const job =
      (await this.#powerWaiters.wait(queued.id, wait, () => this.#ctx.control.powerJob(queued.id))) ?? queued;
    return { job: powerJobRecord(job), finished: isFinishedPowerJob(job) };
  }

  /** A call that changes the state: audited, refusals included (audit-calls.ts). */
  #change<Req, Res>(
    need: Role,
    method: string,
    kind: string,
    target: (req: Req) => string,
    work: (req: Req, p: Proposal) => Promise<Res>,
  ): Handler<Req, Res> {
    return (call, callback) => {
      const audited: AuditedCall = {
        metadata: call.metadata,
        peer: call.getPeer(),
        method: `Control/${method}`,
        kind,
      };
      this.#auditor
        .run(
          audited,
          need,
          () => target(call.request),
          (audit, proposing) => work(call.request, { audit, proposing }),
        )
        .then(
          (res) => callback(null, res),
          (err: unknown) => callback(toServiceError(err) as ServiceError, null),
        );
    };
  }

  #unary<Req, Res>(need: Role, work: (req: Req, md: Metadata) => Promise<Res>): Handler<Req, Res> {
    return (call, callback) => {
      const run = async (): Promise<Res> => {
        await this.#ctx.auth.operator(call, need);
        return work(call.request, call.metadata);
      };
      run().then(
        (res) => callback(null, res),
        (err: unknown) => callback(toServiceError(err) as ServiceError, null),
      );
    };
  }

  /** Backlog from the replicated events, then live ones; `seq` makes the join exact. */
  #eventsHandler(): handleServerStreamingCall<WorkflowEventsRequest, WorkflowEventsResponse> {
    return (call: ServerWritableStream<WorkflowEventsRequest, WorkflowEventsResponse>) => {
      const req = call.request;
      let next = Math.max(req.fromSeq, 0);
      let unsubscribe: (() => void) | undefined;
      const queued: WorkflowEvent[] = [];
      let done = false;
      let backlogSent = false;
      const finish = (err?: unknown): void => {
        if (done) return;
        done = true;
        unsubscribe?.();
        if (err === undefined) call.end();
        else call.emit('error', toServiceError(err));
      };
      const send = (e: WorkflowEvent): void => {
        if (done || e.seq < next) return;
        next = e.seq + 1;
        call.write({ event: eventRecord(e) });
        if (!req.follow) return;
        if (this.#followEndsAt(req.workflowId, e)) finish();
      };
      call.on('cancelled', () => {
        done = true;
        unsubscribe?.();
      });
      const run = async (): Promise<void> => {
        await this.#ctx.auth.operator(call, 'viewer');
        if (req.workflowId === '') throw new ApiError(status.INVALID_ARGUMENT, 'the workflow id is required');
        if (req.follow) {
          // Subscribe before reading the backlog so nothing applied in between is missed.
          unsubscribe = this.#ctx.events.subscribe(req.workflowId, (e) => {
            queued.push(e);
            if (backlogSent && queued.length === 1) queueMicrotask(drain);
          });
        }
        await this.#read(false);
        const wf = this.#workflow(req.workflowId);
        for (;;) {
          const batch = this.#ctx.control.events(req.workflowId, next, eventBatch);
          for (const e of batch) send(e);
          if (batch.length < eventBatch) break;
        }
        backlogSent = true;
        drain();
        if (!req.follow) finish();
        else if (finishedForGood(this.#ctx.control.workflow(wf.id) ?? wf) && queued.length === 0) finish();
      };
      const drain = (): void => {
        while (queued.length > 0) {
          const e = queued.shift();
          if (e !== undefined) send(e);
        }
      };
      run().catch((err: unknown) => finish(err));
    };
  }

  /**
   * Whether a followed workflow's stream ends with `e`: the workflow has finished for good (an
   * alternate workflow that failed on one machine goes on to the next: its workflow.failed is not
   * the end) and `e` is its latest event. A workflow already collected ends at its final event.
   */
  #followEndsAt(workflowId: string, e: WorkflowEvent): boolean {
    const wf = this.#ctx.control.workflow(workflowId);
    if (wf === undefined) return isFinal(e);
    return finishedForGood(wf) && this.#ctx.control.events(workflowId, e.seq + 1, 1).length === 0;
  }

  /** Proposes an operator's command with who asked; a refusal by apply becomes the call's error. */
  async #apply(
    p: Proposal,
    command: ControlCommand,
  ): Promise<ControlResult & { type: Exclude<ControlResult['type'], 'error'> }> {
    p.proposing();
    const r = await this.#ctx.proposer.proposeControl({ ...command, audit: p.audit });
    if (r.type === 'error') throw new ApiError(controlErrorStatus(r.code), r.message);
    return r;
  }

  /**
   * Apply cannot see the membership, so the id is checked here: a member to drain; to undrain, a
   * member or an id still drained (a member removed while drained).
   */
  #checkDrainTarget(id: string, drained: boolean): void {
    const m = this.#ctx.node.membership();
    const member = [...m.voters, ...m.learners].some((x) => x.id === id);
    if (member || (!drained && this.#ctx.control.isDrained(id))) return;
    const ids = [...m.voters, ...m.learners].map((x) => x.id).join(', ');
    throw new ApiError(
      status.NOT_FOUND,
      `no member ${JSON.stringify(id)} in the cluster (members: ${ids}); \`slipway member list\` shows them`,
    );
  }

  /** The template rendered for a machine, one render at a time (a bad template is the caller's). */
  async #render(
    template: Template,
    hardware: Hardware,
    workflowId: string,
    hardwareMap: { readonly [k: string]: string },
  ): Promise<RenderedTemplate> {
    const c = this.#ctx.control;
    return this.#renders.run(() =>
      wrapInput(() => renderForMachine(c, template, hardware, workflowId, hardwareMap)),
    );
  }

  /** workflow create: for the machine named, or (--selector) for one the state allocates. */
  async #createWorkflow(req: WorkflowCreateRequest, p: Proposal): Promise<WorkflowCreateResponse> {
    const selector = req.selector ?? '';
    const policy = failurePolicy(req);
    if (selector !== '') {
      if (req.hardwareId !== '')
        throw new ApiError(status.INVALID_ARGUMENT, 'name the machine or give a selector, not both');
      const wf = await this.#allocateWorkflow(req, selector, policy, p);
      return { workflow: workflowRecord(wf, (id) => this.#ctx.control.workflow(id)) };
    }
    if (policy !== undefined) {
      throw new ApiError(
        status.INVALID_ARGUMENT,
        `on_failure ${req.onFailure ?? ''} needs a selector instead of a named machine: the machines to try are those it matches`,
      );
    }
    await this.#read(false);
    const hardware = this.#hardware(req.hardwareId);
    const template = this.#template(req.template);
    const id = randomUUID();
    const spec = await this.#render(template, hardware, id, req.hardwareMap);
    const wf = expectType(
      await this.#apply(p, {
        type: 'workflow.create',
        id,
        template: template.name,
        templateVersion: template.version,
        hardwareId: hardware.id,
        hardwareMap: req.hardwareMap,
        spec,
        ...(req.netboot ? { netboot: true } : {}),
      }),
      'workflow',
    ).workflow;
    return { workflow: workflowRecord(wf) };
  }

  /**
   * workflow create --selector (docs/decisions/0030-allocation-at-apply.md): offers the state the
   * first machines (by id) that are ready and match, each with the template rendered for it; the
   * state allocates the first still ready when the command applies. An offer overtaken by other
   * allocations is made again, a few times, from the state as it then is.
   */
  async #allocateWorkflow(
    req: WorkflowCreateRequest,
    text: string,
    policy: FailurePolicy | undefined,
    p: Proposal,
  ): Promise<Workflow> {
    const c = this.#ctx.control;
    const selector = selectorArgument(text);
    for (let round = 1; ; round++) {
      await this.#read(false);
      if (c.clusterVersion < stateVersionFleet) {
        throw new ApiError(
          status.FAILED_PRECONDITION,
          versionRefusal('--selector', stateVersionFleet, c.clusterVersion),
        );
      }
      const template = this.#template(req.template);
      const fleet = c.hardwareList();
      const id = randomUUID();
      const candidates = await offerMachines({
        fleet,
        selector,
        template,
        workflowId: id,
        hardwareMap: req.hardwareMap,
        render: (t, hw, wfId, map) => this.#render(t, hw, wfId, map),
      });
      if (candidates.length === 0) {
        throw new ApiError(
          status.FAILED_PRECONDITION,
          noMachineMessage(formatSelector(selector), tallyOf(selector, fleet)),
        );
      }
      if (policy?.race === true && candidates.length === 1)
        throw new ApiError(status.FAILED_PRECONDITION, raceNeedsTwoMessage(formatSelector(selector)));
      p.proposing();
      const r = await this.#ctx.proposer.proposeControl({
        type: 'workflow.allocate',
        id,
        template: template.name,
        templateVersion: template.version,
        selector: formatSelector(selector),
        hardwareMap: req.hardwareMap,
        candidates,
        ...(req.netboot ? { netboot: true } : {}),
        ...(policy === undefined ? {} : { alternateAttempts: policy.attempts }),
        ...(policy?.race === true ? { race: true } : {}),
        audit: p.audit,
      });
      if (r.type === 'error' && r.code === 'E_VERSION' && round < allocationRoundsMax) continue;
      if (r.type === 'error') throw new ApiError(controlErrorStatus(r.code), r.message);
      return expectType(r, 'workflow').workflow;
    }
  }

  async #read(local: boolean): Promise<void> {
    if (!local) await this.#ctx.node.linearizableRead();
  }

  #hardware(id: string): Hardware {
    const hw = this.#ctx.control.hardware(id);
    if (hw === undefined) throw new ApiError(status.NOT_FOUND, `hardware "${id}" not found`);
    return hw;
  }

  #template(name: string): Template {
    const t = this.#ctx.control.template(name);
    if (t === undefined) throw new ApiError(status.NOT_FOUND, `template "${name}" not found`);
    return t;
  }

  #workflow(id: string): Workflow {
    const wf = this.#ctx.control.workflow(id);
    if (wf === undefined) throw new ApiError(status.NOT_FOUND, `workflow "${id}" not found`);
    return wf;
  }
}

const finalEvents = new Set<string>([
  'workflow.succeeded',
  'workflow.failed',
  'workflow.timeout',
  'workflow.cancelled',
]);

/** Ended, and not about to move to another machine under its alternate policy. */
function finishedForGood(wf: Workflow): boolean {
  return isTerminal(wf.state) && !awaitsAlternate(wf);
}

/** A follow stream ends with the workflow; a retry would start a new follow. */
function isFinal(e: WorkflowEvent): boolean {
  return finalEvents.has(e.type);
}

function expectType<T extends ControlResult['type']>(r: ControlResult, type: T): ControlResult & { type: T } {
  if (r.type !== type) throw new ApiError(status.INTERNAL, `unexpected result ${r.type}, wanted ${type}`);
  return r as ControlResult & { type: T };
}

/** The id a hardware document names, for the trail of a call refused before it was parsed. */
function documentId(documentJson: string): string {
  const doc: unknown = JSON.parse(documentJson);
  return typeof doc === 'object' && doc !== null && 'id' in doc && typeof doc.id === 'string' ? doc.id : '';
}

/** Input errors from parsing and rendering become INVALID_ARGUMENT with their message. */
function wrapInput<T>(f: () => T): T {
  try {
    return f();
  } catch (err: unknown) {
    if (err instanceof TemplateError || err instanceof Error)
      throw new ApiError(status.INVALID_ARGUMENT, err.message);
    throw err;
  }
}

function jsonBytes(json: string): number {
  return Buffer.byteLength(json, 'utf8');
}

/** A pool's failure policy from its request: alternate by default; anything else is refused. */
function poolFailurePolicy(
  onFailure: string,
  attempts: number | undefined,
): { onFailure?: PoolRetryPolicy; attempts?: number } {
  if (onFailure !== '' && !(poolFailurePolicies as readonly string[]).includes(onFailure)) {
    throw new ApiError(
      status.INVALID_ARGUMENT,
      `on_failure must be ${poolFailurePolicies.join(', ')} or empty, got ${JSON.stringify(onFailure.slice(0, 40))}`,
    );
  }
  const policy: { onFailure?: PoolRetryPolicy } =
    onFailure === 'retry' || onFailure === 'race' ? { onFailure } : {};
  return attempts === undefined ? policy : { ...policy, attempts };
}
