// Prometheus metrics of one node, served at /metrics. Control-plane figures come from applied
// events, so every node reports the cluster's workflows; worker connections and raft indexes
// are this node's own.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { RaftNode } from '../raft/node.js';
import type { ForwardingStats } from '../api/proposer.js';
import type { ControlState } from '../state/control/control-state.js';
import type { WorkflowEvent, WorkflowState } from '../model/records.js';
import { workflowStates } from '../model/records.js';
import { machineStates, type MachineState } from '../model/machine-lifecycle.js';
import type { BootServiceStates } from '../boot/service-state.js';

const durationBuckets = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

export interface MetricsSources {
  readonly node: RaftNode;
  readonly control: ControlState;
  readonly connectedWorkers: () => number;
  /** Commands this node forwarded to a leader, and the calls that carried them. */
  readonly forwarding?: () => ForwardingStats;
  /** Whether this node's interface has the VIP, when it manages one. */
  readonly vipHeld?: () => boolean;
  /** Finished workflows this node wrote to its --workflow-archive. */
  readonly archivedWorkflows?: () => number;
  /** Whether this node is drained (node-drain.ts). */
  readonly drained?: () => boolean;
  /** The configured boot services' states (empty until they start). */
  readonly bootStates?: () => BootServiceStates;
}

export class NodeMetrics {
  readonly registry = new Registry();
  readonly #actionDuration: Histogram;
  readonly #workflowDuration: Histogram;
  readonly #finished: Counter<'result'>;
  readonly #timeouts: Counter<'kind'>;
  readonly #retries: Counter;
  readonly #collected: Counter;
  readonly #control: ControlState;

  constructor(src: MetricsSources) {
    this.#control = src.control;
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    registerWorkflowGauges(src.control, registers);
    registerMachineGauge(src.control, registers);
    this.#finished = new Counter({
      name: 'slipway_workflows_finished_total',
      help: 'Workflows that reached a final state since this node started, by result',
      labelNames: ['result'] as const,
      registers,
    });
    this.#actionDuration = new Histogram({
      name: 'slipway_action_duration_seconds',
      help: 'Duration of finished action attempts (start to result), by the leader-stamped times',
      labelNames: ['result'] as const,
      buckets: durationBuckets,
      registers,
    });
    this.#workflowDuration = new Histogram({
      name: 'slipway_workflow_duration_seconds',
      help: 'Duration of finished workflows (first start to final state)',
      labelNames: ['result'] as const,
      buckets: durationBuckets,
      registers,
    });
    this.#timeouts = new Counter({
      name: 'slipway_timeouts_total',
      help: 'Deadlines that passed: kind action or workflow',
      labelNames: ['kind'] as const,
      registers,
    });
    this.#retries = new Counter({
      name: 'slipway_action_retries_total',
      help: 'Action retries scheduled after a failed or timed-out attempt',
      registers,
    });
    this.#collected = new Counter({
      name: 'slipway_workflows_collected_total',
      help: 'Finished workflows removed from the replicated state past the retention, since this node started',
      registers,
    });
    registerNodeGauges(src, registers);
    const forwarding = src.forwarding;
    if (forwarding !== undefined) registerForwardingCounters(forwarding, registers);
    registerRaftGauges(src.node, registers);
    const bootStates = src.bootStates;
    if (bootStates !== undefined) registerBootGauge(bootStates, registers);
  }

  /** Called when an applied workflow.gc removed `count` workflows (from apply: quick). */
  collected(count: number): void {
    this.#collected.inc(count);
  }

  /** Called for each applied event (from apply: quick, never throws). */
  observe(e: WorkflowEvent): void {
    switch (e.type) {
      case 'action.succeeded':
      case 'action.failed':
      case 'action.timeout': {
        const st = this.#control.workflow(e.workflowId)?.actions[e.actionIndex ?? -1];
        if (st?.startedMs !== undefined) {
          const result = e.type.slice('action.'.length);
          this.#actionDuration.observe({ result }, Math.max(0, e.stampMs - st.startedMs) / 1000);
        }
        if (e.type === 'action.timeout') this.#timeouts.inc({ kind: 'action' });
        return;
      }
      case 'action.retry-scheduled':
        this.#retries.inc();
        return;
      case 'workflow.succeeded':
      case 'workflow.failed':
      case 'workflow.timeout':
      case 'workflow.cancelled': {
        const result = e.type.slice('workflow.'.length);
        this.#finished.inc({ result });
        if (e.type === 'workflow.timeout') this.#timeouts.inc({ kind: 'workflow' });
        const started = this.#control.workflow(e.workflowId)?.startedMs;
        if (started !== undefined)
          this.#workflowDuration.observe({ result }, Math.max(0, e.stampMs - started) / 1000);
        return;
      }
      default:
        return;
    }
  }

  /** Serves GET /metrics on `addr` (HOST:PORT). */
  async listen(addr: string): Promise<Server> {
    const idx = addr.lastIndexOf(':');
    const host = addr.slice(0, idx).replace(/^\[|\]$/g, '');
    const port = Number(addr.slice(idx + 1));
    const server = createServer((req, res) => {
      if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: metrics are at /metrics\n');
        return;
      }
      this.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': this.registry.contentType }).end(text),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err) => reject(new Error(`cannot serve metrics on ${addr}: ${err.message}`)));
      server.listen(port, host, () => resolve());
    });
    return server;
  }
}

/**
 * Each configured boot service's state, one series per state with 1 for the current one (as
 * kube-state-metrics does), so `slipway_boot_service_state{state="serving"} == 0` alerts.
 */
function registerBootGauge(states: () => BootServiceStates, registers: Registry[]): void {
  new Gauge({
    name: 'slipway_boot_service_state',
    help: 'Boot services (dhcp, tftp, http) by state: 1 for the state each is in (serving, waiting, failed)',
    labelNames: ['service', 'state'] as const,
    registers,
    collect() {
      this.reset();
      for (const s of states().values()) {
        for (const state of ['serving', 'waiting', 'failed'] as const)
          this.set({ service: s.name, state }, s.status.state === state ? 1 : 0);
      }
    },
  });
}

/** The workflows in the replicated state: how many in each state, and the share that succeeded. */
function registerWorkflowGauges(control: ControlState, registers: Registry[]): void {
  new Gauge({
    name: 'slipway_workflows',
    help: 'Workflows in the replicated state, by state',
    labelNames: ['state'] as const,
    registers,
    collect() {
      const counts = new Map<WorkflowState, number>(workflowStates.map((s) => [s, 0]));
      for (const wf of control.workflows()) counts.set(wf.state, (counts.get(wf.state) ?? 0) + 1);
      for (const [state, n] of counts) this.set({ state }, n);
    },
  });
  new Gauge({
    name: 'slipway_provisioning_success_ratio',
    help: 'Share of finished workflows in the replicated state that succeeded',
    registers,
    collect() {
      let done = 0;
      let ok = 0;
      for (const wf of control.workflows()) {
        if (wf.state === 'PENDING' || wf.state === 'RUNNING') continue;
        done++;
        if (wf.state === 'SUCCESS') ok++;
      }
      this.set(done === 0 ? 0 : ok / done);
    },
  });
}

/** The machines in each lifecycle state (docs/decisions/0028; none before state version 3). */
function registerMachineGauge(control: ControlState, registers: Registry[]): void {
  new Gauge({
    name: 'slipway_machines',
    help: 'Machines in the replicated state, by lifecycle state (from cluster state version 3)',
    labelNames: ['state'] as const,
    registers,
    collect() {
      const counts = new Map<MachineState, number>(machineStates.map((s) => [s, 0]));
      for (const hw of control.hardwareList()) {
        const state = hw.lifecycle?.state;
        if (state !== undefined) counts.set(state, (counts.get(state) ?? 0) + 1);
      }
      for (const [state, n] of counts) this.set({ state }, n);
    },
  });
}

/** This node's own figures: its archive, the VIP, whether drained, its workers' streams. */
function registerNodeGauges(src: MetricsSources, registers: Registry[]): void {
  const archivedWorkflows = src.archivedWorkflows;
  if (archivedWorkflows !== undefined) {
    let reported = 0;
    new Counter({
      name: 'slipway_workflows_archived_total',
      help: 'Finished workflows this node wrote to its --workflow-archive while leading',
      registers,
      collect() {
        const now = archivedWorkflows();
        this.inc(now - reported);
        reported = now;
      },
    });
  }
  const vipHeld = src.vipHeld;
  if (vipHeld !== undefined) {
    new Gauge({
      name: 'slipway_vip_held',
      help: '1 while this node holds the VIP on its interface (--vip-interface), else 0',
      registers,
      collect() {
        this.set(vipHeld() ? 1 : 0);
      },
    });
  }
  const drained = src.drained;
  if (drained !== undefined) {
    new Gauge({
      name: 'slipway_node_drained',
      help: '1 while this node is drained (slipway node drain, or stopping), else 0',
      registers,
      collect() {
        this.set(drained() ? 1 : 0);
      },
    });
  }
  new Gauge({
    name: 'slipway_connected_workers',
    help: 'Worker agents with a live stream on this node',
    registers,
    collect() {
      this.set(src.connectedWorkers());
    },
  });
}

/** Commands this node forwarded to the leader, and the calls that carried them. */
function registerForwardingCounters(forwarding: () => ForwardingStats, registers: Registry[]): void {
  // The proposer keeps the totals; each scrape adds what is new since the last one.
  const totalCounter = (name: string, help: string, pick: (f: ForwardingStats) => number): void => {
    let reported = 0;
    new Counter({
      name,
      help,
      registers,
      collect() {
        const now = pick(forwarding());
        this.inc(now - reported);
        reported = now;
      },
    });
  };
  totalCounter(
    'slipway_forwarded_commands_total',
    'Commands this node forwarded to the leader',
    (f) => f.commands,
  );
  totalCounter(
    'slipway_forward_calls_total',
    'Requests to the leader that carried forwarded commands (a batch on the forwarding stream, or a call, counts once)',
    (f) => f.calls,
  );
}

/** This node's raft term, indexes and role. */
function registerRaftGauges(node: RaftNode, registers: Registry[]): void {
  const raftGauge = (
    name: string,
    help: string,
    pick: (s: ReturnType<RaftNode['status']>) => number,
  ): void => {
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(pick(node.status()));
      },
    });
  };
  raftGauge('slipway_raft_term', 'Current raft term on this node', (s) => s.term);
  raftGauge('slipway_raft_commit_index', 'Highest log index known committed on this node', (s) => s.commit);
  raftGauge(
    'slipway_raft_applied_index',
    'Highest log index applied to the state machine here',
    (s) => s.appliedToStateMachine,
  );
  raftGauge('slipway_raft_is_leader', '1 when this node is the leader', (s) => (s.role === 'leader' ? 1 : 0));
}
