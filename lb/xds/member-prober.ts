// Probes every voter's API with a grpc.health.v1 Check (service "", the node as a whole) every
// interval, as HAProxy and Envoy check the nodes, and tells the xDS server when the membership or
// a member's health changed (lb/xds/member-health.ts counts the results). The membership is read
// at each round, so `slipway member add|remove` shows within one interval.
import type { ChannelCredentials } from '@grpc/grpc-js';
import { Metadata } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { HealthCheckTiming } from '../../src/model/balancer-spec.js';
import { HealthCheckResponse_ServingStatus, HealthClient } from '../../src/gen/health.js';
import { MemberHealthTracker, type ProbeResult } from './member-health.js';
import type { XdsMember } from './resources.js';

export interface ProbedMember {
  readonly id: string;
  /** Its raft address. */
  readonly addr: string;
  /** Its API address; "" when this node's membership does not have it (see apiAddrOf). */
  readonly apiAddr: string;
}

export interface MemberProberOptions {
  /** The members to serve (the voters), read at each round. */
  readonly members: () => readonly ProbedMember[];
  readonly credentials: ChannelCredentials;
  readonly timing: HealthCheckTiming;
  readonly logger: Logger;
  /** Called after a round that changed the membership or a member's health. */
  readonly onChange: (members: readonly XdsMember[]) => void;
  /**
   * Asks a member for its own API address. The initial members are known by their raft
   * addresses only (`--peers`), so each node's membership has no API address for the others.
   */
  readonly apiAddrOf?: (member: ProbedMember) => Promise<string | undefined>;
}

export class MemberProber {
  readonly #o: MemberProberOptions;
  readonly #tracker: MemberHealthTracker;
  readonly #clients = new Map<string, HealthClient>();
  #timer: NodeJS.Timeout | undefined;
  #running = false;
  #stopped = false;
  #last = '';
  /** API addresses learned from the members themselves, by `id@raft address`. */
  readonly #learned = new Map<string, string>();

  constructor(opts: MemberProberOptions) {
    this.#o = opts;
    this.#tracker = new MemberHealthTracker(opts.timing);
  }

  /** The members with their health as last probed (UNHEALTHY until probes find them serving). */
  current(): XdsMember[] {
    return this.#members().map((m) => ({ id: m.id, apiAddr: m.apiAddr, health: this.#tracker.health(m.id) }));
  }

  /** The members whose API address is known, from the membership or learned from them. */
  #members(): ProbedMember[] {
    return this.#o.members().flatMap((m) => {
      const apiAddr = m.apiAddr !== '' ? m.apiAddr : this.#learned.get(`${m.id}@${m.addr}`);
      return apiAddr === undefined ? [] : [{ ...m, apiAddr }];
    });
  }

  /** Starts the rounds (idempotent). */
  start(): void {
    if (this.#running || this.#stopped) return;
    this.#running = true;
    this.#last = JSON.stringify(this.current());
    const round = (): void => {
      this.#round()
        .catch((err: unknown) => this.#o.logger.error({ err }, 'probing the members failed'))
        .finally(() => {
          if (!this.#stopped) this.#timer = setTimeout(round, this.#o.timing.intervalMs);
        });
    };
    round();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    for (const c of this.#clients.values()) c.close();
    this.#clients.clear();
  }

  async #round(): Promise<void> {
    await this.#learnApiAddrs();
    const members = this.#members();
    const ids = new Set(members.map((m) => m.id));
    this.#tracker.retain(ids);
    for (const [addr, client] of this.#clients) {
      if (!members.some((m) => m.apiAddr === addr)) {
        client.close();
        this.#clients.delete(addr);
      }
    }
    const results = await Promise.all(members.map(async (m) => [m, await this.#probe(m.apiAddr)] as const));
    if (this.#stopped) return;
    for (const [m, result] of results) {
      if (this.#tracker.observe(m.id, result)) {
        this.#o.logger.info(
          { member: m.id, apiAddr: m.apiAddr, health: this.#tracker.health(m.id) },
          'member health changed',
        );
      }
    }
    const now = this.current();
    const key = JSON.stringify(now);
    if (key !== this.#last) {
      this.#last = key;
      this.#o.onChange(now);
    }
  }

  async #learnApiAddrs(): Promise<void> {
    const ask = this.#o.apiAddrOf;
    if (ask === undefined) return;
    const unknown = this.#o
      .members()
      .filter((m) => m.apiAddr === '' && !this.#learned.has(`${m.id}@${m.addr}`));
    await Promise.all(
      unknown.map(async (m) => {
        const apiAddr = await ask(m).catch(() => undefined);
        if (apiAddr !== undefined && apiAddr !== '') this.#learned.set(`${m.id}@${m.addr}`, apiAddr);
      }),
    );
  }

  #probe(apiAddr: string): Promise<ProbeResult> {
    let client = this.#clients.get(apiAddr);
    if (client === undefined) {
      client = new HealthClient(apiAddr, this.#o.credentials);
      this.#clients.set(apiAddr, client);
    }
    const deadline = Date.now() + Math.min(1000, this.#o.timing.intervalMs);
    return new Promise((resolve) => {
      client.check({ service: '' }, new Metadata(), { deadline }, (err, res) => {
        if (err !== null) resolve('unreachable');
        else resolve(res.status === HealthCheckResponse_ServingStatus.SERVING ? 'serving' : 'not-serving');
      });
    });
  }
}
