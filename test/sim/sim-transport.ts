// The Transport contract (src/raft/transport/transport.ts) over the SimNetwork, for the real
// RaftNode under simulation. Messages are dropped, duplicated, delayed or cut by the network; a
// cut link sometimes breaks the stream, which the node hears through takeUnreachable. Snapshots
// travel whole after a transfer time and may be lost; the sender hears how it went.
import type { Member, Message, NodeId } from '../../src/raft/core/types.js';
import type { Snapshot } from '../../src/raft/storage/log-store.js';
import type { Transport, TransportHandlers } from '../../src/raft/transport/transport.js';
import type { Prng } from '../../src/platform/prng.js';
import type { SimNetwork } from './network.js';
import type { Scheduler } from './scheduler.js';
import type { SimProcess } from './sim-process.js';

/** Where a node's current incarnation listens; the transports look each other up here. */
export type SimSwitchboard = Map<NodeId, SimTransport>;

export interface SimTransportEnv {
  readonly sched: Scheduler;
  readonly net: SimNetwork;
  readonly rng: Prng;
  readonly board: SimSwitchboard;
  readonly snapLossP: number;
  /** Every message sent, for the monitor. */
  onSend?(m: Message): void;
}

export class SimTransport implements Transport {
  readonly id: NodeId;
  readonly proc: SimProcess;
  private readonly env: SimTransportEnv;
  private handlers: TransportHandlers | null = null;
  private unreachable = new Set<NodeId>();

  constructor(id: NodeId, proc: SimProcess, env: SimTransportEnv) {
    this.id = id;
    this.proc = proc;
    this.env = env;
  }

  start(handlers: TransportHandlers): Promise<void> {
    this.handlers = handlers;
    this.env.board.set(this.id, this);
    return Promise.resolve();
  }

  setPeers(_peers: readonly Member[]): void {
    // Every node is reachable by id through the switchboard.
  }

  send(msgs: readonly Message[]): void {
    const { net, rng, board } = this.env;
    for (const m of msgs) {
      this.env.onSend?.(m);
      const delivered = net.send(this.id, m.to, () => {
        const target = board.get(m.to);
        if (target !== undefined) target.proc.guard(() => target.handlers?.onMessage(m))();
      });
      if (!delivered && rng.chance(0.2)) this.unreachable.add(m.to);
    }
  }

  sendSnapshot(to: NodeId, snapshot: Snapshot): Promise<void> {
    const { sched, net, rng, board, snapLossP } = this.env;
    const lost = rng.chance(snapLossP);
    const transfer = rng.uniform(2, 20) + snapshot.data.length / 200;
    return new Promise((resolve, reject) => {
      sched.after(transfer, () => {
        const target = board.get(to);
        const ok =
          !lost &&
          this.proc.alive &&
          target !== undefined &&
          target.proc.alive &&
          sched.now >= target.proc.pausedUntil &&
          net.linkUp(this.id, to) &&
          net.linkUp(to, this.id);
        const answer = this.proc.guard(() => {
          if (ok) resolve();
          else reject(new Error(`snapshot stream to ${to} broke`));
        });
        if (!ok || target?.handlers == null) {
          sched.after(rng.uniform(20, 100), answer);
          return;
        }
        target.handlers.onSnapshot(this.id, snapshot).then(
          () => sched.after(net.delay(), answer),
          () => sched.after(net.delay(), answer),
        );
      });
    });
  }

  takeUnreachable(): NodeId[] {
    const ids = [...this.unreachable];
    this.unreachable = new Set();
    return ids;
  }

  stop(): Promise<void> {
    if (this.env.board.get(this.id) === this) this.env.board.delete(this.id);
    return Promise.resolve();
  }
}
