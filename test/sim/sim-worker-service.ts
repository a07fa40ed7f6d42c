// The production WorkerService (src/api/worker-service.ts) on a simulated server incarnation, on
// its process clock: it proposes through the local RaftNode when it leads, else forwards to the
// leader over the simulated network (no answer within the forward's timeout is UNAVAILABLE, as
// a lost forward is); its authenticator takes the worker id the stream names; its catch-up is the
// node's linearizable read; the state's workflow and hardware changes wake its sessions, as
// src/node/start-node.ts routes them.
import { status } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { Applied } from '../../src/api/proposer.js';
import { ApiError } from '../../src/api/errors.js';
import { WorkerService } from '../../src/api/worker-service.js';
import type { RaftNode } from '../../src/raft/node.js';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import type { ReplicatedState } from '../../src/state/replicated-state.js';
import { decodeResult, encodeCommand } from '../../src/state/store-command.js';
import type { SimNetwork } from './network.js';
import type { AgentTarget } from './sim-agent.js';
import type { SimProcess } from './sim-process.js';

/** The defect ackBeforeCommit: a result is acknowledged as soon as it is proposed. */
export type WorkerServiceBug = 'ackBeforeCommit';

export interface WorkerServiceEnv {
  readonly net: SimNetwork;
  readonly logger: Logger;
  /** The server `id`'s current incarnation, if it is up and started. */
  server(id: string): { readonly proc: SimProcess; readonly node: RaftNode } | undefined;
  readonly forwardTimeoutMs: number;
  readonly bug: WorkerServiceBug | undefined;
}

function controlResult(bytes: Uint8Array): ControlResult {
  const res = decodeResult(bytes);
  if (res.type !== 'control') throw new ApiError(status.INTERNAL, `a control command answered ${res.type}`);
  return res.result;
}

/** Starts the worker service of one server incarnation; the agents connect through the target. */
export function startWorkerService(
  id: string,
  proc: SimProcess,
  node: RaftNode,
  kv: ReplicatedState,
  env: WorkerServiceEnv,
): AgentTarget {
  const proposeOn = (on: RaftNode, command: ControlCommand): Promise<Uint8Array> =>
    on.propose(encodeCommand({ type: 'control', stampMs: Math.floor(proc.clock.now()), command }));
  /** Through the leader this node knows of, over the network, answered or timed out. */
  const forward = (command: ControlCommand): Promise<ControlResult> =>
    new Promise((resolve, reject) => {
      const leaderId = node.softState().leader;
      const leader = env.server(leaderId);
      const unavailable = (why: string): void => {
        reject(new ApiError(status.UNAVAILABLE, why));
      };
      if (leader === undefined) {
        unavailable('no leader known');
        return;
      }
      const cancel = proc.clock.after(env.forwardTimeoutMs, () => {
        unavailable('the forward to the leader timed out');
      });
      const answer = (settle: () => void): void => {
        env.net.send(
          leaderId,
          id,
          proc.guard(() => {
            cancel();
            settle();
          }),
        );
      };
      const sent = env.net.send(
        id,
        leaderId,
        leader.proc.guard(() => {
          proposeOn(leader.node, command).then(
            (bytes) => {
              answer(() => {
                try {
                  resolve(controlResult(bytes));
                } catch (err) {
                  reject(err);
                }
              });
            },
            (err: unknown) => {
              answer(() => {
                reject(err);
              });
            },
          );
        }),
      );
      if (!sent) {
        cancel();
        unavailable('the leader is unreachable');
      }
    });
  const propose = async (command: ControlCommand): Promise<ControlResult> => {
    await Promise.resolve(); // a refusal thrown at once becomes a rejection, as over the wire
    if (node.softState().role === 'leader') return controlResult(await proposeOn(node, command));
    return forward(command);
  };
  const proposeControlApplied = async (command: ControlCommand): Promise<Applied<ControlResult>> => {
    if (env.bug === 'ackBeforeCommit' && command.type === 'attempt.result') {
      propose(command).catch(() => undefined);
      return { result: { type: 'duplicate' } as unknown as ControlResult, resultAtMs: 0 };
    }
    return { result: await propose(command), resultAtMs: 0 };
  };
  const service = new WorkerService({
    control: kv.control,
    proposer: { proposeControl: propose, proposeControlApplied },
    auth: {
      worker: (call) => Promise.resolve({ workerId: String(call.metadata.get('x-worker-id')[0]) }),
    },
    logger: env.logger,
    catchUp: async () => {
      await node.linearizableRead();
    },
    sessionsPerWorkerMax: 4,
    clock: proc.clock,
  });
  kv.control.changes.subscribe((change) => {
    if (change.kind === 'workflow') service.workflowChanged(change.workflow);
    else if (change.kind === 'hardware') service.hardwareChanged(change.id);
    else if (change.kind === 'restore') service.restored();
  });
  const connect = service.handlers().connect;
  return {
    id,
    proc,
    accept: (stream) => {
      connect(stream.asGrpc());
    },
  };
}
