// Long-lived streams held through a balancer, for the tests that change the balancer under them
// (test/integration/lb-haproxy-follow.test.ts, lb-haproxy-reload.test.ts): WorkflowEvents
// follows sent with an x-worker-id, so each lands on the node that worker id hashes to, and a
// workflow's cancellation as the event every stream must still receive afterwards.
import assert from 'node:assert/strict';
import { Metadata } from '@grpc/grpc-js';
import type { ClientReadableStream } from '@grpc/grpc-js';
import { stickyHeader } from '../../src/model/balancer-spec.js';
import { runtimeCommand } from '../../lb/haproxy-runtime.js';
import type { ClusterClient } from '../../src/cli/client.js';
import type { ControlClient, WorkflowEventsResponse } from '../../src/gen/control.js';
import type { KvClient } from '../../src/gen/kv.js';
import { waitFor } from './wait.js';

/** A template whose one action never runs (its worker never connects): workflows stay open. */
export const waitingTemplateYaml = `version: "0.1"
name: waits
global_timeout: 600
tasks:
  - name: t
    worker: "{{ hardware.id }}"
    actions:
      - name: one
        command: ["true"]
        timeout: 600
`;

/** A WorkflowEvents follow through the balancer, and what became of it. */
export interface HeldStream {
  readonly worker: string;
  /** The node it was sent to. */
  readonly node: string;
  readonly call: ClientReadableStream<WorkflowEventsResponse>;
  readonly types: string[];
  /** Why it ended, once it did. */
  ended: string | undefined;
}

function withWorker(worker: string): Metadata {
  const md = new Metadata();
  md.set(stickyHeader, worker);
  return md;
}

/** Streams held through one balancer address; `close` cancels every one. */
export class BalancerStreams {
  readonly #kv: KvClient;
  readonly #control: ControlClient;
  readonly #admin: ClusterClient;
  readonly #held: HeldStream[] = [];

  /** kv and control talk to the balancer; admin to the nodes. */
  constructor(clients: { kv: KvClient; control: ControlClient; admin: ClusterClient }) {
    this.#kv = clients.kv;
    this.#control = clients.control;
    this.#admin = clients.admin;
  }

  /** The node that answers a Status call through the balancer with this worker id. */
  servedBy(worker: string): Promise<string> {
    return new Promise((resolve, reject) => {
      this.#kv.status({}, withWorker(worker), { deadline: Date.now() + 5000 }, (err, res) =>
        err === null ? resolve(res.id) : reject(err),
      );
    });
  }

  /** Opens a follow of `workflowId` as `worker` and waits for its first event (the backlog). */
  async hold(worker: string, workflowId: string): Promise<HeldStream> {
    const node = await this.servedBy(worker);
    const call = this.#control.workflowEvents({ workflowId, fromSeq: 0, follow: true }, withWorker(worker));
    const held: HeldStream = { worker, node, call, types: [], ended: undefined };
    call.on('data', (r: WorkflowEventsResponse) => held.types.push(r.event?.type ?? '?'));
    call.on('error', (err) => (held.ended ??= `error: ${err.message}`));
    call.on('end', () => (held.ended ??= 'end'));
    this.#held.push(held);
    await waitFor(`the stream of ${worker} to deliver its backlog`, () => held.types.length > 0, 10_000);
    return held;
  }

  /** Follows of `workflowId`, up to `perNode` on each node, until every one of `nodes` has one. */
  async onEveryNode(
    workflowId: string,
    prefix: string,
    nodes: readonly string[],
    perNode: number,
  ): Promise<HeldStream[]> {
    const held: HeldStream[] = [];
    for (let i = 0; i < 60 && !nodes.every((n) => held.some((h) => h.node === n)); i++) {
      const worker = `${prefix}-${i}`;
      const node = await this.servedBy(worker);
      if (held.filter((h) => h.node === node).length < perNode)
        held.push(await this.hold(worker, workflowId));
    }
    assert.deepEqual(
      [...new Set(held.map((h) => h.node))].sort(),
      [...nodes].sort(),
      'streams on every node',
    );
    return held;
  }

  /** A worker id of the first 60 `${prefix}-N` that the balancer sends to `node`, if any. */
  async workerOn(node: string, prefix: string): Promise<string | undefined> {
    for (let i = 0; i < 60; i++)
      if ((await this.servedBy(`${prefix}-${i}`)) === node) return `${prefix}-${i}`;
    return undefined;
  }

  /** A machine and a workflow of the waiting template on it. */
  async createWorkflow(hardwareId: string, mac: string, ip: string): Promise<string> {
    const hw = { id: hardwareId, interfaces: [{ mac, ip }] };
    await this.#admin.control('hardwareCreate', { documentJson: JSON.stringify(hw), replace: false });
    const created = await this.#admin.control('workflowCreate', {
      template: 'waits',
      hardwareId,
      hardwareMap: {},
      netboot: false,
    });
    const id = created.workflow?.id ?? '';
    assert.notEqual(id, '');
    return id;
  }

  /** None of `held` has ended. */
  assertOpen(held: readonly HeldStream[], step: string): void {
    const dropped = held
      .filter((h) => h.ended !== undefined)
      .map((h) => `${h.worker} on ${h.node}: ${h.ended}`);
    assert.deepEqual(dropped, [], `streams dropped ${step}`);
  }

  /** Cancels the workflow; every stream following it must receive that, and end with it. */
  async assertStillReceiving(held: readonly HeldStream[], workflowId: string): Promise<void> {
    await this.#admin.control('workflowCancel', { id: workflowId });
    await waitFor(
      'every stream opened before to receive the cancellation',
      () => held.every((h) => h.types.includes('workflow.cancelled')),
      10_000,
    );
    for (const h of held) assert.equal(h.ended ?? 'end', 'end', `${h.worker} on ${h.node}: ${h.ended}`);
  }

  close(): void {
    for (const h of this.#held) h.call.cancel();
  }
}

/** The servers HAProxy's runtime API (the process answering `socket`) lists in the backend. */
export async function listedServers(socket: string): Promise<string[]> {
  const state = await runtimeCommand(socket, 'show servers state slipway_nodes');
  return state
    .split('\n')
    .filter((l) => /^\d+ slipway_nodes /.test(l))
    .map((l) => l.split(' ')[3]!)
    .sort();
}
