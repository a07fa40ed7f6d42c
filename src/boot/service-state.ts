// What each boot service of a node is doing: serving, waiting (for an interface, its carrier or
// an address, with the reason) or failed (a bind refused, with the reason; tried again). The
// node reports it in Status (`cluster status`), grpc.health.v1 and metrics, and hands
// leadership away while a configured service is not serving (docs/decisions/0032).
import type { Logger } from 'pino';

export const bootServiceNames = ['dhcp', 'tftp', 'http'] as const;
export type BootServiceName = (typeof bootServiceNames)[number];

export type BootServiceStatus =
  | { readonly state: 'serving' }
  | { readonly state: 'waiting'; readonly reason: string }
  | { readonly state: 'failed'; readonly reason: string };

export const serving: BootServiceStatus = { state: 'serving' };

/** The status in words: "serving", "waiting: REASON", "failed: REASON". */
export function describeStatus(status: BootServiceStatus): string {
  return status.state === 'serving' ? 'serving' : `${status.state}: ${status.reason}`;
}

function sameStatus(a: BootServiceStatus, b: BootServiceStatus): boolean {
  return describeStatus(a) === describeStatus(b);
}

/** One service's status; logs each change once (never a repeat of the same state and reason). */
export class BootServiceState {
  readonly name: BootServiceName;
  readonly #logger: Logger;
  #status: BootServiceStatus;
  readonly #listeners = new Set<(status: BootServiceStatus) => void>();

  constructor(name: BootServiceName, logger: Logger, initial: BootServiceStatus) {
    this.name = name;
    this.#logger = logger;
    this.#status = initial;
  }

  get status(): BootServiceStatus {
    return this.#status;
  }

  set(status: BootServiceStatus): void {
    if (sameStatus(this.#status, status)) return;
    this.#status = status;
    const service = this.name;
    if (status.state === 'serving') this.#logger.info({ service }, `${service.toUpperCase()} serving`);
    else if (status.state === 'waiting')
      this.#logger.warn({ service, reason: status.reason }, `${service.toUpperCase()} waiting`);
    else
      this.#logger.error({ service, reason: status.reason }, `${service.toUpperCase()} failed; trying again`);
    for (const listener of [...this.#listeners]) listener(status);
  }

  /** Called after every change; returns the unsubscribe. */
  onChange(listener: (status: BootServiceStatus) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }
}

/** The configured boot services' states, in the order of bootServiceNames. */
export type BootServiceStates = ReadonlyMap<BootServiceName, BootServiceState>;

/** True when every configured service serves (and so when none is configured). */
export function allServing(states: BootServiceStates): boolean {
  return [...states.values()].every((s) => s.status.state === 'serving');
}

/**
 * A bounded exponential back-off for retries of a bind: first, doubled each time, capped at max;
 * reset() after a success.
 */
export class Backoff {
  readonly #firstMs: number;
  readonly #maxMs: number;
  #nextMs: number;

  constructor(firstMs = 250, maxMs = 10_000) {
    this.#firstMs = firstMs;
    this.#maxMs = maxMs;
    this.#nextMs = firstMs;
  }

  next(): number {
    const ms = this.#nextMs;
    this.#nextMs = Math.min(this.#nextMs * 2, this.#maxMs);
    return ms;
  }

  reset(): void {
    this.#nextMs = this.#firstMs;
  }
}
