// Failed authentications per source address, as token buckets: an address may fail
// `failuresMax` times at once, and earns one more failure every windowMs / failuresMax. An
// address with none left is refused before its token is looked at, so a flood of bad tokens
// costs neither hashing nor the linearizable read an unknown token triggers, and the node
// keeps serving everyone else (docs/decisions/0011-security.md, Limits).
//
// Memory is bounded: at most addressesMax addresses are tracked, the least recently failed
// evicted first. An attacker with many addresses can evict its own entries or others', which
// only gives an address a fresh bucket; it can never block an address that did not fail.
import assert from 'node:assert/strict';

/** Addresses tracked at once; about 100 bytes each. */
export const authFailureAddressesMax = 10_000;

export interface AuthFailureLimits {
  /** Failures an address may make in a burst (ServerConfig.authFailuresMax). */
  readonly failuresMax: number;
  /** The time in which an address earns back failuresMax failures (ServerConfig.authFailureWindowS). */
  readonly windowMs: number;
  readonly addressesMax?: number;
}

interface Bucket {
  /** Failures the address may still make, fractional while refilling. */
  failuresLeft: number;
  atMs: number;
}

export class AuthFailureLimiter {
  readonly #limits: Required<AuthFailureLimits>;
  readonly #nowMs: () => number;
  /** In order of the latest failure: the first is evicted first. */
  readonly #buckets = new Map<string, Bucket>();

  constructor(limits: AuthFailureLimits, nowMs: () => number = Date.now) {
    assert.ok(limits.failuresMax >= 1 && limits.windowMs > 0);
    this.#limits = { addressesMax: authFailureAddressesMax, ...limits };
    assert.ok(this.#limits.addressesMax >= 1);
    this.#nowMs = nowMs;
  }

  get limits(): Required<AuthFailureLimits> {
    return this.#limits;
  }

  /** Addresses tracked now. */
  get size(): number {
    return this.#buckets.size;
  }

  /** Milliseconds until `address` may try again; 0 when it may now. */
  blockedForMs(address: string): number {
    const bucket = this.#buckets.get(address);
    if (bucket === undefined) return 0;
    const left = this.#refill(bucket);
    if (left >= 1) return 0;
    return Math.ceil(((1 - left) * this.#limits.windowMs) / this.#limits.failuresMax);
  }

  /** Counts a failed authentication from `address`. */
  failed(address: string): void {
    const now = this.#nowMs();
    const bucket = this.#buckets.get(address);
    if (bucket !== undefined) {
      const left = this.#refill(bucket);
      this.#buckets.delete(address);
      this.#buckets.set(address, { failuresLeft: Math.max(0, left - 1), atMs: now });
      return;
    }
    for (const oldest of this.#buckets.keys()) {
      if (this.#buckets.size < this.#limits.addressesMax) break;
      this.#buckets.delete(oldest);
    }
    this.#buckets.set(address, { failuresLeft: this.#limits.failuresMax - 1, atMs: now });
    assert.ok(this.#buckets.size <= this.#limits.addressesMax);
  }

  #refill(bucket: Bucket): number {
    const elapsedMs = Math.max(0, this.#nowMs() - bucket.atMs);
    const earned = (elapsedMs * this.#limits.failuresMax) / this.#limits.windowMs;
    return Math.min(this.#limits.failuresMax, bucket.failuresLeft + earned);
  }
}

/**
 * The source address of a call's peer as grpc-js reports it (`ADDRESS:PORT`, IPv6 without
 * brackets): the port is dropped, since every new connection has another.
 */
export function sourceAddress(peer: string): string {
  const m = /^(.+):\d+$/.exec(peer);
  return m?.[1] ?? peer;
}
