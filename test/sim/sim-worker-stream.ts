// A worker stream under simulation: the two ends of one Worker/Connect call between a simulated
// agent (sim-agent.ts) and the production WorkerService on a simulated server. The server's end
// stands in for grpc-js's ServerDuplexStream as the service uses it (write, end, on/emit of
// data/end/error/cancelled/close, getPeer, metadata, cancelled). Messages go one way each on
// simulated time, in order (one HTTP/2 stream), with the network's delays; a lost message breaks
// the stream (TCP gives up, keepalive ends it), as does either end's process dying: the agent
// hears of a dead server at its next write, the server of a dead agent after a delay.
import { EventEmitter } from 'node:events';
import { Metadata, status, type ServerDuplexStream } from '@grpc/grpc-js';
import type { ConnectRequest, ConnectResponse } from '../../src/gen/worker.js';
import type { Prng } from '../../src/platform/prng.js';
import type { SimNetwork } from './network.js';
import type { Scheduler } from './scheduler.js';
import type { SimProcess } from './sim-process.js';

/** What the agent's end is told. */
export interface AgentEnd {
  onData(msg: ConnectResponse): void;
  /** The stream is over: ended by the server, or broken (`why`). */
  onClosed(why: string, code: number): void;
}

export interface StreamEnv {
  readonly sched: Scheduler;
  readonly net: SimNetwork;
  readonly rng: Prng;
}

/** The server's end: what WorkerService.handlers().connect is given. */
export class SimServerStream extends EventEmitter {
  readonly metadata = new Metadata();
  cancelled = false;
  readonly #link: SimWorkerLink;

  constructor(link: SimWorkerLink, workerId: string) {
    super();
    this.#link = link;
    this.metadata.set('x-worker-id', workerId);
  }

  getPeer(): string {
    return `${this.#link.machine}:0`;
  }

  write(msg: ConnectResponse): boolean {
    this.#link.toAgent(msg);
    return true;
  }

  end(): void {
    this.#link.close('the node ended the stream', status.OK);
  }

  /** The service emits 'error' to end the call with a status: grpc-js sends it to the agent. */
  override emit(event: string | symbol, ...args: unknown[]): boolean {
    // An 'error' with no listener (a call refused before the service listens) only ends the call.
    const had = event === 'error' && this.listenerCount('error') === 0 ? false : super.emit(event, ...args);
    if (event === 'error') {
      const err = args[0] as { code?: number; details?: string; message?: string } | undefined;
      this.#link.close(err?.details ?? err?.message ?? 'error', err?.code ?? status.UNKNOWN);
    }
    return had;
  }

  asGrpc(): ServerDuplexStream<ConnectRequest, ConnectResponse> {
    return this as unknown as ServerDuplexStream<ConnectRequest, ConnectResponse>;
  }
}

/** One call: the agent writes through it; the server's end is `server`. */
export class SimWorkerLink {
  readonly machine: string;
  readonly serverId: string;
  readonly server: SimServerStream;
  open = true;
  readonly #env: StreamEnv;
  readonly #agent: AgentEnd;
  /** The server process that took the call: the stream dies with it. */
  readonly #proc: SimProcess;
  /** Arrival times so far in each direction: a stream delivers in order. */
  #toServerAt = 0;
  #toAgentAt = 0;

  /** Opens the call: `accept` gets the server's end when the call reaches the server process. */
  constructor(
    env: StreamEnv,
    machine: string,
    serverId: string,
    proc: SimProcess,
    agent: AgentEnd,
    accept: (stream: SimServerStream) => void,
  ) {
    this.#env = env;
    this.machine = machine;
    this.serverId = serverId;
    this.#proc = proc;
    this.#agent = agent;
    this.server = new SimServerStream(this, machine);
    this.#toServerAt = env.sched.now + env.net.delay();
    env.sched.at(
      this.#toServerAt,
      proc.guard(() => {
        if (this.open) accept(this.server);
      }),
    );
  }

  /** The agent writes a message; the server's end emits it on arrival. */
  toServer(msg: ConnectRequest): void {
    if (!this.open) return;
    if (!this.#proc.alive) {
      this.#break('the node is gone');
      return;
    }
    const at = this.#arrival('server');
    if (at === null) return;
    this.#toServerAt = at;
    this.#env.sched.at(
      at,
      this.#proc.guard(() => {
        if (this.open) this.server.emit('data', msg);
      }),
    );
  }

  toAgent(msg: ConnectResponse): void {
    if (!this.open) return;
    const at = this.#arrival('agent');
    if (at === null) return;
    this.#toAgentAt = at;
    this.#env.sched.at(at, () => {
      if (this.open) this.#agent.onData(msg);
    });
  }

  /** The server ends the call (after what it wrote has arrived). */
  close(why: string, code: number): void {
    if (!this.open) return;
    const at = Math.max(this.#toAgentAt, this.#env.sched.now + this.#env.net.delay());
    this.open = false;
    this.#env.sched.at(at, () => {
      this.#agent.onClosed(why, code);
    });
  }

  /** The agent goes away (it stopped or crashed): the server notices a little later. */
  cancel(): void {
    if (!this.open) return;
    this.open = false;
    this.#env.sched.after(
      this.#env.net.delay(),
      this.#proc.guard(() => {
        this.server.cancelled = true;
        this.server.emit('cancelled');
      }),
    );
  }

  /** When a message sent now arrives, or null when it is lost (the stream breaks). */
  #arrival(to: 'server' | 'agent'): number | null {
    const { net, rng, sched } = this.#env;
    if (rng.chance(net.faults.dropP / 4)) {
      this.#break('the connection broke');
      return null;
    }
    const last = to === 'server' ? this.#toServerAt : this.#toAgentAt;
    return Math.max(last, sched.now + net.delay());
  }

  /** Both ends hear that the connection is gone. */
  #break(why: string): void {
    this.open = false;
    const { net, sched } = this.#env;
    sched.after(net.delay(), () => {
      this.#agent.onClosed(why, status.UNAVAILABLE);
    });
    sched.after(
      net.delay(),
      this.#proc.guard(() => {
        this.server.cancelled = true;
        this.server.emit('cancelled');
      }),
    );
  }
}
