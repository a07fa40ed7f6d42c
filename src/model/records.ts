// The provisioning domain's records: hardware, templates, workflows and their events, leases,
// power jobs, artifacts, tokens. Plain JSON-shaped data that the replicated state holds and the
// workflow rules, services and CLI read; this folder imports nothing else in src but platform,
// so state and workflow can both depend on it without depending on each other.
// Times are milliseconds since the epoch, always taken from a leader-stamped command.
import type { Inventory } from './inventory.js';
import type { Labels, MachineLifecycle } from './machine-lifecycle.js';

export type Arch = 'x86_64' | 'arm64';

export interface IpAssignment {
  /** Dotted IPv4 address reserved for this interface. */
  readonly address: string;
  /** Prefix length (0-32); the netmask derives from it. */
  readonly prefix: number;
}

export interface NetworkInterface {
  /** Lower-case, colon-separated: aa:bb:cc:dd:ee:ff. Unique across all hardware. */
  readonly mac: string;
  readonly ip?: IpAssignment;
  readonly gateway?: string;
  readonly dns: readonly string[];
  readonly hostname?: string;
  /** DHCP lease time in seconds. */
  readonly leaseTimeS: number;
  readonly vlan?: number;
}

export interface Netboot {
  /** Answer this machine's PXE requests. Turned off when a workflow on it succeeds. */
  readonly allowPXE: boolean;
  /** Run workflows on this machine's worker. */
  readonly allowWorkflow: boolean;
  /** A custom iPXE script served instead of the generated one. */
  readonly ipxeScript?: string;
  /** A URL the generated script chains to instead of booting the default kernel. */
  readonly ipxeUrl?: string;
}

export interface BmcRef {
  /** ipmi://HOST:PORT (src/power/bmc-address.ts); the port is 623 unless given. */
  readonly address: string;
  readonly username?: string;
  /** The name of a secret held outside the replicated state. */
  readonly secretRef?: string;
  /**
   * The BMC password, in the replicated state so that whichever node leads can act on the
   * BMC. Never leaves through the API (src/api/control-messages.ts strips it) nor into logs.
   */
  readonly password?: string;
}

export type JsonValue =
  string | number | boolean | null | readonly JsonValue[] | { readonly [k: string]: JsonValue };

export interface Hardware {
  readonly id: string;
  readonly interfaces: readonly NetworkInterface[];
  readonly arch: Arch;
  readonly uefi: boolean;
  readonly netboot: Netboot;
  readonly metadata: { readonly [k: string]: JsonValue };
  readonly bmc?: BmcRef;
  /**
   * SHA-256 (hex) of the machine's static worker token, for an agent run outside the boot OS
   * (`slipway worker --token`). The token itself is never stored: `hardware token` mints a new
   * one, shows it once and replaces this digest.
   */
  readonly workerTokenSha256: string;
  readonly createdMs: number;
  readonly updatedMs: number;
  /** Bumped by every change; compare-and-set target for updates. */
  readonly version: number;
  /**
   * Where the machine is in its life (docs/decisions/0028-machine-lifecycle.md): kept from state
   * version 3 on, for every machine; absent below it.
   */
  readonly lifecycle?: MachineLifecycle;
  /** Set by `slipway hardware label` (state version 3); absent when there are none. */
  readonly labels?: Labels;
  /**
   * The inventory the machine last reported in inventory mode (docs/decisions/0029-discovery.md):
   * what templates and selectors read. Absent until it has reported one (state version 3).
   */
  readonly inventory?: Inventory;
  /**
   * The per-boot credential of the machine's inventory boot, while it has one to report with:
   * claimed by the boot OS in inventory mode, used up by the report (state version 3).
   */
  readonly inspection?: WorkerCredential;
  /**
   * SHA-256 of the inventory-boot credential the stored inventory was reported with: the same
   * report sent again (its answer lost) is answered as recorded, not refused (state version 3).
   */
  readonly reportedWith?: string;
}

/** Hardware as the operator describes it; the state adds token, times, version, lifecycle and labels. */
export type HardwareInput = Omit<
  Hardware,
  | 'workerTokenSha256'
  | 'createdMs'
  | 'updatedMs'
  | 'version'
  | 'lifecycle'
  | 'labels'
  | 'inventory'
  | 'inspection'
  | 'reportedWith'
>;

export interface Template {
  readonly name: string;
  /** The YAML text as the operator gave it (placeholders unrendered). */
  readonly source: string;
  readonly createdMs: number;
  readonly updatedMs: number;
  readonly version: number;
}

/** The states of a workflow and of each of its actions, in the order a run moves through them. */
export const workflowStates = ['PENDING', 'RUNNING', 'SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED'] as const;
export type WorkflowState = (typeof workflowStates)[number];
export type ActionState = WorkflowState;

const terminalStates: ReadonlySet<WorkflowState> = new Set(['SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED']);

/** True once a workflow (or action) has finished: nothing moves it on but a retry. */
export function isTerminal(state: WorkflowState): boolean {
  return terminalStates.has(state);
}

/**
 * Actions the worker agent runs itself, in its own code (src/worker/actions/), with neither a
 * process nor a container: a template names one with `action:` or a Tinkerbell hub image.
 */
export const builtinActions = [
  'image2disk',
  'writefile',
  'cexec',
  'archive2disk',
  'reboot',
  'poweroff',
  'kexec',
  'qemuimg2disk',
  'rootio',
  'syslinux',
  'oci2disk',
  'grub2disk',
] as const;
export type BuiltinAction = (typeof builtinActions)[number];

/** An action as the rendered template gives it: what to run and its limits. */
export interface ActionSpec {
  readonly name: string;
  /** A container image; when absent, `command` runs as a process on the worker. */
  readonly image?: string;
  /** argv[0..]: the executable then its first arguments. */
  readonly command: readonly string[];
  /** Appended to `command`. */
  readonly args: readonly string[];
  readonly env: { readonly [k: string]: string };
  readonly volumes: readonly string[];
  readonly timeoutS: number;
  /** Extra attempts after the first fails or times out. */
  readonly retries: number;
  /** Run by the agent itself, configured by `env`; `image` and `command` are then not run. */
  readonly builtin?: BuiltinAction;
}

export interface TaskSpec {
  readonly name: string;
  /** The hardware id whose worker runs this task's actions. */
  readonly worker: string;
  readonly env: { readonly [k: string]: string };
  readonly volumes: readonly string[];
  readonly actions: readonly ActionSpec[];
}

/** A rendered template: what a workflow copies in at creation, so template edits never reach it. */
export interface RenderedTemplate {
  readonly version: string;
  readonly name: string;
  readonly globalTimeoutS: number;
  readonly tasks: readonly TaskSpec[];
}

/**
 * The status of one action position. Records in the state are immutable: every change makes a
 * new object, so a status or workflow a caller holds never changes under it.
 */
export interface ActionStatus {
  readonly state: ActionState;
  /** The current (or last) attempt number; 0 before the first start. Never reused. */
  readonly attempt: number;
  /**
   * Attempts made before the last workflow.retry (absent: none). The retry budget counts only
   * this run's attempts, attempt - attemptsBefore, while attempt numbers keep growing.
   */
  readonly attemptsBefore?: number;
  readonly startedMs?: number;
  readonly stoppedMs?: number;
  /** Absolute deadline of the running attempt. */
  readonly deadlineMs?: number;
  /** A retry waits until this time before it may start. */
  readonly notBeforeMs?: number;
  readonly exitStatus?: number;
  readonly message?: string;
  readonly outputTail?: string;
  /** The worker (hardware id) that ran the current attempt. */
  readonly workerId?: string;
}

export interface Workflow {
  readonly id: string;
  readonly template: string;
  readonly hardwareId: string;
  /** Template variables beyond the hardware's own data, e.g. device_1 → a MAC. */
  readonly hardwareMap: { readonly [k: string]: string };
  readonly spec: RenderedTemplate;
  readonly state: WorkflowState;
  readonly createdMs: number;
  readonly startedMs?: number;
  readonly finishedMs?: number;
  /** startedMs + globalTimeoutS: the whole workflow times out at this absolute time. */
  readonly deadlineMs?: number;
  /** Flat list, task by task, action by action (see actionPositions in src/workflow/rules.ts). */
  readonly actions: readonly ActionStatus[];
  readonly message?: string;
  /**
   * Started by netbooting the machine through its BMC (a power job made with the workflow);
   * a success then sets the machine's next boot to its disk (another power job).
   */
  readonly netboot?: boolean;
  /**
   * The selector that allocated the machine (`workflow create --selector`), as canonical text;
   * absent when the operator named the machine (docs/decisions/0030-allocation-at-apply.md).
   */
  readonly selector?: string;
  /**
   * The alternate failure policy (`--on-failure alternate --attempts N`, with a selector): when the
   * workflow fails or times out on its machine, the leader re-allocates it on another ready
   * machine the selector matches, never one tried before, up to `attempts` machines.
   */
  readonly alternate?: AlternatePolicy;
  /**
   * The race failure policy (`--on-failure race`, docs/decisions/0037-race-and-accept-rule.md): the
   * request runs as two lanes, this workflow and its rival, each on its own machine; the first to
   * succeed wins and the other is cancelled and its machine released. Each lane also has the
   * alternate policy, sharing the request's budget of machines.
   */
  readonly race?: RaceLane;
  /**
   * A release workflow (a pool's release template, docs/decisions/0036): it takes its machine
   * from releasing to ready when it succeeds, to failed when it does not.
   */
  readonly release?: true;
  /**
   * Worker id → the per-boot credential that worker claimed for this workflow (see
   * src/state/control/credentials.ts). Only its SHA-256 is kept; it is valid while the workflow
   * is active and until expiresMs.
   */
  readonly credentials?: { readonly [workerId: string]: WorkerCredential };
}

/** Where a workflow's alternate policy stands. */
export interface AlternatePolicy {
  /** At most this many machines, the first included. */
  readonly attempts: number;
  /** The machines the workflow ran on, in order; the last is its current one. */
  readonly tried: readonly string[];
  /** Set when the policy stopped (no machine left, or attempts used up): why. */
  readonly gaveUp?: string;
}

/** One lane of a race: which request it runs for, its rival, and (on the request) the outcome. */
export interface RaceLane {
  /** The request's workflow id: the first lane's, the one the operator was given. */
  readonly request: string;
  /** The other lane's workflow id. */
  readonly rival: string;
  /** On the request's lane: every machine either lane took, in order. */
  readonly tried?: readonly string[];
  /** On the request's lane, once a lane succeeded: that lane's workflow id. */
  readonly winner?: string;
  /** On a lane cancelled because its rival succeeded first: the rival's workflow id. */
  readonly lostTo?: string;
}

/** A worker's credential for one workflow, claimed once per boot by the machine itself. */
export interface WorkerCredential {
  readonly sha256: string;
  /** The MAC and address the claim came from, checked against the reservation or lease. */
  readonly mac: string;
  readonly ip: string;
  readonly issuedMs: number;
  readonly expiresMs: number;
  /** SHA-256 of the claimant's public key: that claimant may claim again (a lost answer). */
  readonly claimKey?: string;
}

export type EventType =
  | 'workflow.created'
  | 'workflow.running'
  | 'workflow.succeeded'
  | 'workflow.failed'
  | 'workflow.timeout'
  | 'workflow.cancelled'
  | 'workflow.retried'
  | 'workflow.alternate'
  | 'workflow.race'
  | 'action.started'
  | 'action.succeeded'
  | 'action.failed'
  | 'action.timeout'
  | 'action.cancelled'
  | 'action.retry-scheduled'
  | 'credential.issued'
  | 'credential.refused';

/** One entry of the changefeed. `seq` is global, dense and the same on every node. */
export interface WorkflowEvent {
  readonly seq: number;
  readonly workflowId: string;
  readonly type: EventType;
  readonly stampMs: number;
  readonly task?: string;
  readonly action?: string;
  /** Index of the action in the workflow's flat list. */
  readonly actionIndex?: number;
  readonly attempt?: number;
  readonly exitStatus?: number;
  readonly message?: string;
  readonly outputTail?: string;
}

export type Role = 'admin' | 'operator' | 'viewer';

/** An operator credential. Only the SHA-256 of the token is replicated. */
export interface OperatorToken {
  readonly name: string;
  readonly role: Role;
  readonly sha256: string;
  readonly createdMs: number;
}

/**
 * A dynamic DHCP lease: an address from a pool held by one MAC until `expiresMs`, or an address
 * a client declined (another host answers on it), kept out of use until `expiresMs`. A lease
 * outlives its expiry in the state, so a returning client gets its old address back while no
 * one else has taken it.
 */
export interface Lease {
  /** Dotted IPv4 address; the key. */
  readonly ip: string;
  /** The holder, normalized like hardware MACs; empty for a declined address. */
  readonly mac: string;
  readonly state: 'bound' | 'declined';
  /** When the holder's claim ends (leader-stamped time plus the lease time). */
  readonly expiresMs: number;
  /** When this holder first got this address. */
  readonly grantedMs: number;
  readonly updatedMs: number;
}

/** One address the DHCP server wants committed before it ACKs. */
export interface LeaseGrant {
  readonly mac: string;
  readonly ip: string;
  readonly leaseTimeS: number;
}

/** What the state made of a grant: the lease, or why not. */
export type GrantOutcome =
  { readonly granted: true; readonly lease: Lease } | { readonly granted: false; readonly reason: string };

/** What an operator asks of a machine's BMC. */
export type PowerOp = 'on' | 'off' | 'cycle' | 'status' | 'netboot' | 'diskboot';
export const powerOps: readonly PowerOp[] = ['on', 'off', 'cycle', 'status', 'netboot', 'diskboot'];

/**
 * One idempotent BMC operation: doing it twice has the effect of doing it once, so a step a
 * dead leader may or may not have done is simply done again by the next one.
 */
export type PowerStep = 'on' | 'off' | 'status' | 'bootdev-pxe' | 'bootdev-disk';
export const powerSteps: readonly PowerStep[] = ['on', 'off', 'status', 'bootdev-pxe', 'bootdev-disk'];

export type PowerJobState = 'PENDING' | 'RUNNING' | 'SUCCEEDED' | 'FAILED';
export const powerJobStates: readonly PowerJobState[] = ['PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED'];

/** The chassis power as the BMC last reported it. */
export type PowerState = 'on' | 'off';

/**
 * A power job: steps run in order by the leader's power executor, one claim per attempt.
 * PENDING: the step at stepIndex waits for a claim (from notBeforeMs, after a failure).
 * RUNNING: claimedBy runs attempt `attempt` of that step until claimExpiresMs; a claim that
 * lapses (its leader died) may be taken over by the next leader as the following attempt.
 */
export interface PowerJob {
  readonly id: string;
  readonly hardwareId: string;
  readonly op: PowerOp;
  readonly steps: readonly PowerStep[];
  readonly state: PowerJobState;
  /** The step being run or next to run; steps.length once SUCCEEDED. */
  readonly stepIndex: number;
  /** Attempts of the current step so far (0 before its first claim). */
  readonly attempt: number;
  /** Attempts allowed per step, lapsed claims included. */
  readonly maxAttempts: number;
  readonly createdMs: number;
  readonly updatedMs: number;
  readonly finishedMs?: number;
  /** The node (raft id) holding the claim on the running attempt. */
  readonly claimedBy?: string;
  readonly claimExpiresMs?: number;
  /** A retry may be claimed from this time. */
  readonly notBeforeMs?: number;
  readonly powerState?: PowerState;
  /** The last step's outcome, or why the job failed. */
  readonly message?: string;
}

/**
 * A boot artifact registered in the replicated state: a name served by every node's HTTP boot
 * server (/artifacts/NAME, and /boot/NAME for the boot OS) and the digest of its content. Only
 * the digest travels through the log; each node keeps the bytes in its content store
 * (DATA_DIR/artifacts/sha256/HEX) and fetches them from a peer when it lacks them.
 */
export interface Artifact {
  /** One safe path segment, e.g. debian-12.raw.zst or vmlinuz-x86_64. Unique. */
  readonly name: string;
  /** SHA-256 of the content, 64 lower-case hexadecimal digits. */
  readonly sha256: string;
  /** The content's size in bytes. */
  readonly bytes: number;
  readonly createdMs: number;
  readonly updatedMs: number;
  /** Bumped by every change of digest; compare-and-set target for a replace. */
  readonly version: number;
}

/** Names one attempt of one action, as workers and the worker service report it. */
export interface AttemptName {
  readonly workflowId: string;
  readonly actionIndex: number;
  readonly attempt: number;
}

/** A map key for an attempt; JSON, so no workflow id can make two attempts collide. */
export function attemptKey(ref: AttemptName): string {
  return JSON.stringify([ref.workflowId, ref.actionIndex, ref.attempt]);
}
