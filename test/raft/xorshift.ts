// A tiny seeded PRNG (xorshift32) so that randomized election timeouts in scenario tests are
// reproducible: the same seed and node id always give the same sequence.
import type { Random } from '../../src/raft/core/types.js';

export class Xorshift implements Random {
  private state: number;

  constructor(seed: number) {
    // xorshift has a fixed point at zero; any other 32-bit state is fine.
    this.state = seed >>> 0 || 0x9e3779b9;
  }

  next(): number {
    let x = this.state;
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    this.state = x;
    return x;
  }

  /** A number in [0, 1), for rates and jitter. */
  fraction(): number {
    return this.next() / 0x1_0000_0000;
  }

  int(n: number): number {
    if (!Number.isInteger(n) || n <= 0) throw new Error(`Xorshift.int: bad bound ${n}`);
    return this.next() % n;
  }
}
