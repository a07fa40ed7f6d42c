// The simulated network between nodes. Every message goes through here and may be dropped,
// duplicated, delayed (which reorders it against later messages) or cut by a partition.
// Partitions are sets of blocked directed links, so asymmetric partitions (A reaches B but
// B does not reach A) and bridges (one node linked to two halves that cannot talk) are just
// particular sets. A link is checked when a message is sent and again when it arrives.
import type { Prng } from '../../src/platform/prng.js';
import type { Scheduler } from './scheduler.js';

export interface NetFaults {
  /** Probability that a message is lost. */
  dropP: number;
  /** Probability that a message is delivered twice. */
  dupP: number;
  delayMinMs: number;
  delayMaxMs: number;
  /** Probability of a much longer delay, which reorders the message behind later ones. */
  longDelayP: number;
  longDelayMaxMs: number;
}

export interface NetStats {
  sent: number;
  dropped: number;
  cut: number;
  duplicated: number;
}

export class SimNetwork {
  faults: NetFaults;
  readonly stats: NetStats = { sent: 0, dropped: 0, cut: 0, duplicated: 0 };
  private readonly blocked = new Set<string>();
  private readonly sched: Scheduler;
  private readonly rng: Prng;

  constructor(sched: Scheduler, rng: Prng, faults: NetFaults) {
    this.sched = sched;
    this.rng = rng;
    this.faults = faults;
  }

  linkUp(from: string, to: string): boolean {
    return !this.blocked.has(`${from}>${to}`);
  }

  /**
   * Sends one message: `deliver` runs at the receiver's arrival time, once or (duplicated)
   * twice, or never. Returns false when the link is cut at send time, so the sender can tell
   * its transport that the peer is unreachable.
   */
  send(from: string, to: string, deliver: () => void): boolean {
    this.stats.sent++;
    if (!this.linkUp(from, to)) {
      this.stats.cut++;
      return false;
    }
    const f = this.faults;
    if (this.rng.chance(f.dropP)) {
      this.stats.dropped++;
      return true;
    }
    const copies = this.rng.chance(f.dupP) ? 2 : 1;
    if (copies === 2) this.stats.duplicated++;
    for (let i = 0; i < copies; i++) {
      this.sched.after(this.delay(), () => {
        if (this.linkUp(from, to)) deliver();
        else this.stats.cut++;
      });
    }
    return true;
  }

  /** A one-way delay drawn from the current fault settings. */
  delay(): number {
    const f = this.faults;
    if (this.rng.chance(f.longDelayP)) return this.rng.uniform(f.delayMaxMs, f.longDelayMaxMs);
    return this.rng.uniform(f.delayMinMs, f.delayMaxMs);
  }

  heal(): void {
    this.blocked.clear();
  }

  /** Cuts the directed link from → to only. */
  cut(from: string, to: string): void {
    if (from !== to) this.blocked.add(`${from}>${to}`);
  }

  /** Cuts every link between the two groups, in both directions. */
  split(a: readonly string[], b: readonly string[]): void {
    for (const x of a) {
      for (const y of b) {
        this.cut(x, y);
        this.cut(y, x);
      }
    }
  }

  /** The blocked links, for traces. */
  describe(): string {
    return this.blocked.size === 0 ? 'healed' : [...this.blocked].sort().join(' ');
  }

  get partitioned(): boolean {
    return this.blocked.size > 0;
  }
}
