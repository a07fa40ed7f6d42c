// A small seeded PRNG for the simulation, the fuzzers and the benchmarks: sfc32 (Chris
// Doty-Humphrey's "small fast counting" generator) seeded through splitmix32. Everything random
// in a simulated run comes from one of these, so a run reproduces exactly from its seed. Streams
// are forked by label so that, for example, adding a client does not shift the network's choices.
// It satisfies the raft core's Random by shape, so this module depends on nothing.

function splitmix32(state: number): [number, number] {
  const s = (state + 0x9e3779b9) | 0;
  let z = s;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  z ^= z >>> 16;
  return [s, z >>> 0];
}

/** FNV-1a over a string: stable 32-bit labels for forking streams. */
function hashLabel(label: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < label.length; i++) {
    h ^= label.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export class Prng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    let s = seed >>> 0 || 0x2545f491;
    let v: number;
    [s, v] = splitmix32(s);
    this.a = v;
    [s, v] = splitmix32(s);
    this.b = v;
    [s, v] = splitmix32(s);
    this.c = v;
    [, v] = splitmix32(s);
    this.d = v;
    // Mix the state before the first output, as sfc32's reference does.
    for (let i = 0; i < 12; i++) this.next();
  }

  /** A uniformly distributed unsigned 32-bit integer. */
  next(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** A float in [0, 1). */
  float(): number {
    return this.next() / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    if (!(n > 0)) throw new RangeError(`int(n) needs n > 0, got ${n}`);
    return Math.floor(this.float() * n);
  }

  /** An integer in [lo, hi]. */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  /** A float in [lo, hi). */
  uniform(lo: number, hi: number): number {
    return lo + this.float() * (hi - lo);
  }

  chance(p: number): boolean {
    return this.float() < p;
  }

  pick<T>(xs: readonly T[]): T {
    if (xs.length === 0) throw new RangeError('pick from an empty list');
    return xs[this.int(xs.length)]!;
  }

  /** A new shuffled copy (Fisher-Yates). */
  shuffled<T>(xs: readonly T[]): T[] {
    const out = [...xs];
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const t = out[i]!;
      out[i] = out[j]!;
      out[j] = t;
    }
    return out;
  }

  /** An exponentially distributed delay with the given mean. */
  exp(mean: number): number {
    return -Math.log(1 - this.float()) * mean;
  }

  /** An independent stream derived from this one's current state and a label. */
  fork(label: string): Prng {
    return new Prng((this.a ^ Math.imul(hashLabel(label), 0x9e3779b1) ^ this.d) >>> 0);
  }

  /** A stream that depends only on a seed and a label, never on what was drawn before. */
  static derive(seed: number, label: string): Prng {
    return new Prng((Math.imul(seed >>> 0, 0x9e3779b1) ^ hashLabel(label)) >>> 0);
  }
}
