// Simulated clients. Each issues one operation at a time (put, get, cas or delete on a few
// shared keys) to whichever node it believes is the leader, over a lossy link, and records
// what it saw for the linearizability checker:
// - an answer: the operation took effect between this attempt's call and the answer;
// - a definite refusal (not leader, backpressure, a different entry committed at the
//   proposal's index, a read that could not be confirmed): the attempt did nothing, so the
//   client retries elsewhere and records only the attempt that answered;
// - no answer before the timeout: the outcome is unknown (ret = Infinity) and the client moves
//   on to a new operation; the old one may still take effect at any later time.
import type { Op } from '../support/linearizability.js';
import type { KvCommand } from './kv.js';
import type { ClientRequest, ClientResponse, SimNode } from './node.js';
import type { Prng } from '../../src/platform/prng.js';
import type { Scheduler } from './scheduler.js';

export interface ClientEnv {
  readonly sched: Scheduler;
  readonly rng: Prng;
  /** Nodes a client may contact (members it has heard of). */
  contactable(): readonly SimNode[];
  /** Sends a request over the client link; the reply comes back the same way, or not at all. */
  call(node: SimNode, req: ClientRequest, onReply: (r: ClientResponse) => void): void;
  readonly history: Op[];
  readonly stats: ClientStats;
  trace(line: string): void;
}

export interface ClientStats {
  ok: number;
  unknown: number;
  refused: number;
  gaveUp: number;
}

export interface ClientConfig {
  readonly keys: readonly string[];
  readonly thinkMaxMs: number;
  readonly timeoutMs: number;
  /** Attempts after definite refusals before the client gives the operation up. */
  readonly retriesMax: number;
}

type Pending =
  | { readonly kind: 'put'; readonly key: string; readonly value: string }
  | { readonly kind: 'get'; readonly key: string }
  | {
      readonly kind: 'cas';
      readonly key: string;
      readonly expected: string | undefined;
      readonly value: string;
    }
  | { readonly kind: 'delete'; readonly key: string };

export class SimClient {
  readonly id: number;
  private readonly env: ClientEnv;
  private readonly cfg: ClientConfig;
  private leaderGuess = '';
  private seq = 0;
  private attempt = 0;
  /** The last value this client saw per key: cas expects it, so cas sometimes succeeds. */
  private readonly seen = new Map<string, string | undefined>();
  private stopAt = Infinity;
  busy = false;

  constructor(env: ClientEnv, id: number, cfg: ClientConfig) {
    this.env = env;
    this.id = id;
    this.cfg = cfg;
  }

  start(stopAt: number): void {
    this.stopAt = stopAt;
    this.env.sched.after(this.env.rng.uniform(0, this.cfg.thinkMaxMs), () => this.next());
  }

  private next(): void {
    if (this.env.sched.now >= this.stopAt) return;
    const { rng } = this.env;
    const key = rng.pick(this.cfg.keys);
    const value = `c${this.id}.${++this.seq}`;
    const r = rng.float();
    let op: Pending;
    if (r < 0.4) op = { kind: 'put', key, value };
    else if (r < 0.75) op = { kind: 'get', key };
    else if (r < 0.93) op = { kind: 'cas', key, expected: this.seen.get(key), value };
    else op = { kind: 'delete', key };
    this.busy = true;
    this.send(op, 0);
  }

  private send(op: Pending, tries: number): void {
    const { env } = this;
    const nodes = env.contactable();
    // Mostly the believed leader; sometimes any node, so that followers serve reads (ReadIndex
    // forwarding) and clients with different beliefs about the leader overlap.
    const guess = env.rng.chance(0.8) ? nodes.find((n) => n.id === this.leaderGuess) : undefined;
    const target = guess ?? env.rng.pick(nodes);
    const attempt = ++this.attempt;
    const call = env.sched.now;
    const req: ClientRequest =
      op.kind === 'get' ? { kind: 'get', key: op.key } : { kind: 'write', cmd: this.command(op, attempt) };
    let done = false;
    env.call(target, req, (resp) => {
      if (done) return;
      done = true;
      this.onReply(op, tries, call, target.id, resp);
    });
    env.sched.after(this.cfg.timeoutMs, () => {
      if (done) return;
      done = true;
      this.leaderGuess = '';
      if (op.kind === 'get') {
        env.stats.unknown++;
      } else {
        env.stats.unknown++;
        env.history.push(this.record(op, call, Infinity, undefined));
      }
      env.trace(`client ${this.id} ${op.kind} ${op.key} via ${target.id}: timeout`);
      this.finish();
    });
  }

  private onReply(op: Pending, tries: number, call: number, via: string, resp: ClientResponse): void {
    const { env } = this;
    if (!resp.ok) {
      env.stats.refused++;
      this.leaderGuess = resp.leader !== '' && resp.leader !== via ? resp.leader : '';
      if (tries + 1 >= this.cfg.retriesMax || env.sched.now >= this.stopAt) {
        env.stats.gaveUp++;
        this.finish();
        return;
      }
      env.sched.after(env.rng.uniform(1, 10), () => this.send(op, tries + 1));
      return;
    }
    this.leaderGuess = via;
    const ret = env.sched.now;
    const result = resp.result;
    env.stats.ok++;
    if ('value' in result) {
      this.seen.set(op.key, result.value);
      env.history.push(this.record(op, call, ret, { value: result.value }));
    } else if ('found' in result) {
      this.seen.set(op.key, undefined);
      env.history.push(this.record(op, call, ret, { found: result.found }));
    } else {
      if (op.kind === 'put' || (op.kind === 'cas' && result.ok)) this.seen.set(op.key, op.value);
      env.history.push(this.record(op, call, ret, { ok: result.ok }));
    }
    env.trace(`client ${this.id} ${op.kind} ${op.key} via ${via}: ${JSON.stringify(result)}`);
    this.finish();
  }

  private finish(): void {
    this.busy = false;
    this.env.sched.after(this.env.rng.uniform(0, this.cfg.thinkMaxMs), () => this.next());
  }

  private command(op: Exclude<Pending, { kind: 'get' }>, attempt: number): KvCommand {
    const id = `c${this.id}.a${attempt}`;
    switch (op.kind) {
      case 'put':
        return { op: 'put', id, key: op.key, value: op.value };
      case 'cas':
        return { op: 'cas', id, key: op.key, expected: op.expected ?? null, value: op.value };
      case 'delete':
        return { op: 'delete', id, key: op.key };
    }
  }

  /** One history record; output undefined means the outcome is unknown. */
  private record(
    op: Pending,
    call: number,
    ret: number,
    output: { value: string | undefined } | { found: boolean } | { ok: boolean } | undefined,
  ): Op {
    const base = { client: this.id, key: op.key, call, ret };
    switch (op.kind) {
      case 'get':
        return {
          ...base,
          kind: 'get',
          input: undefined,
          output: output !== undefined && 'value' in output ? { value: output.value } : undefined,
        };
      case 'put':
        return {
          ...base,
          kind: 'put',
          input: { value: op.value },
          output: output === undefined ? undefined : { ok: true },
        };
      case 'cas':
        return {
          ...base,
          kind: 'cas',
          input: { expected: op.expected, value: op.value },
          output: output !== undefined && 'ok' in output ? { ok: output.ok } : undefined,
        };
      case 'delete':
        return {
          ...base,
          kind: 'delete',
          input: undefined,
          output: output !== undefined && 'found' in output ? { found: output.found } : undefined,
        };
    }
  }
}
