// Each member's health as a node's probes find it (lb/xds/member-prober.ts), with the fall/rise
// counts of the balancer's health check (src/model/balancer-spec.ts): `fall` misses in a row take a
// member out, `rise` passes in a row bring it back, so one lost probe changes nothing.
// A member that answers NOT_SERVING (no leader, shutting down, drained) is DRAINING: alive, but
// to get no new calls; one that does not answer is UNHEALTHY. Both leave every client's ring.
// A member not yet probed is UNHEALTHY until `rise` probes pass: a member just added, or a node
// just started, is not routed to before it serves (a client would otherwise pick it, fail to
// connect, and fall through to another node than the ring's next choice once it serves). Pure.
import type { HealthCheckTiming } from '../../src/model/balancer-spec.js';
import type { MemberHealth } from './resources.js';

/** What one grpc.health.v1 Check of a member's API found. */
export type ProbeResult = 'serving' | 'not-serving' | 'unreachable';

interface Tally {
  health: MemberHealth;
  /** Consecutive results on the other side of `health` (misses while in, passes while out). */
  streak: number;
}

export class MemberHealthTracker {
  readonly #timing: Pick<HealthCheckTiming, 'fall' | 'rise'>;
  readonly #tallies = new Map<string, Tally>();

  constructor(timing: Pick<HealthCheckTiming, 'fall' | 'rise'>) {
    this.#timing = timing;
  }

  health(id: string): MemberHealth {
    return this.#tallies.get(id)?.health ?? 'UNHEALTHY';
  }

  /** Records one probe of `id`; returns whether its health changed. */
  observe(id: string, result: ProbeResult): boolean {
    const tally = this.#tallies.get(id) ?? { health: 'UNHEALTHY', streak: 0 };
    this.#tallies.set(id, tally);
    const before = tally.health;
    if (result === 'serving') {
      if (tally.health === 'HEALTHY') tally.streak = 0;
      else if (++tally.streak >= this.#timing.rise) {
        tally.health = 'HEALTHY';
        tally.streak = 0;
      }
    } else {
      const bad: MemberHealth = result === 'not-serving' ? 'DRAINING' : 'UNHEALTHY';
      if (tally.health !== 'HEALTHY') {
        // Already out: say why it is out now, and restart the count back in.
        tally.health = bad;
        tally.streak = 0;
      } else if (++tally.streak >= this.#timing.fall) {
        tally.health = bad;
        tally.streak = 0;
      }
    }
    return tally.health !== before;
  }

  /** Forgets members no longer in the membership (a member added again starts afresh). */
  retain(ids: ReadonlySet<string>): void {
    for (const id of [...this.#tallies.keys()]) if (!ids.has(id)) this.#tallies.delete(id);
  }
}
