// What to do about the VIP, decided from what is observed: whether this node should hold it
// (the leader with a live quorum) and whether the interface has it. Pure: time comes in as a
// number, and the driver (lb/vip-manager.ts) runs the actions and reports failures.
//
// Neighbours learn a moved VIP only from gratuitous ARP (the kernel sends none on `ip addr
// add`), and a neighbour ignores an update that comes within its locktime (1 s by default) of
// the last one, so the announcement is repeated a few seconds later, as keepalived does.

export type VipAction = 'add' | 'delete' | 'announce';

export interface VipHolderOptions {
  /** After taking the VIP, announce it again at these delays (ms). */
  readonly reannounceAfterMs: readonly number[];
  /** After a failed `add`, wait this long before trying again (ms). */
  readonly retryAfterMs: number;
}

export const defaultVipHolderOptions: VipHolderOptions = {
  reannounceAfterMs: [2000, 5000],
  retryAfterMs: 1000,
};

export class VipHolder {
  readonly #opts: VipHolderOptions;
  /** When the pending re-announcements are due, earliest first. */
  #reannounceAt: number[] = [];
  #quietUntil = 0;

  constructor(opts: VipHolderOptions = defaultVipHolderOptions) {
    this.#opts = opts;
  }

  /** The actions due now, in order. */
  step(now: number, shouldHold: boolean, present: boolean): VipAction[] {
    if (!shouldHold) {
      // Letting go is never held back: two holders is the worse failure.
      this.#reannounceAt = [];
      return present ? ['delete'] : [];
    }
    if (!present) {
      if (now < this.#quietUntil) return [];
      this.#reannounceAt = this.#opts.reannounceAfterMs.map((ms) => now + ms);
      return ['add', 'announce'];
    }
    const due = this.#reannounceAt.filter((at) => at <= now);
    if (due.length === 0) return [];
    this.#reannounceAt = this.#reannounceAt.filter((at) => at > now);
    return ['announce'];
  }

  /**
   * The interface's carrier came back while it has the VIP: the announcements sent while it had
   * none went nowhere, so announce now and at the usual delays after.
   */
  linkBack(now: number): void {
    this.#reannounceAt = [now, ...this.#opts.reannounceAfterMs.map((ms) => now + ms)];
  }

  /** Taking the VIP failed: no new attempt until the retry delay has passed. */
  addFailed(now: number): void {
    this.#quietUntil = now + this.#opts.retryAfterMs;
  }
}
