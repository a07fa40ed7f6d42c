// The boot OS's worker credential: claimed once per boot from the boot HTTP server (POST
// /credential, see src/api/credential-issuer.ts) and kept in a file on the boot OS's tmpfs, so a
// restarted agent goes on with it. The claim proves the machine by where it comes from (its MAC
// and the address Slipway's DHCP gave it); the answer is sealed to a key made for this claim.
// When a stream is refused for its credential (the workflow ended, a new one began), the agent
// drops it and claims again.
//
// Every try of a claim sends the same key (kept beside the credential file): a claim whose answer
// was lost, because the node died between committing it and replying, is then answered again
// with a fresh credential instead of being refused as a second claimant.
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { openingKey, type OpeningKey, type SealedBox } from '../platform/sealed-box.js';

export interface CredentialSource {
  /** The credential to present; claims one (waiting as long as needed) when none is held. */
  current(signal: AbortSignal): Promise<string>;
  /** The cluster refused the held credential: the next current() claims a new one. */
  invalidate(): Promise<void>;
}

export interface ClaimOptions {
  /** http://VIP:PORT/credential */
  readonly url: string;
  readonly workerId: string;
  readonly mac: string;
  /** Where the credential is kept across agent restarts (a tmpfs on the boot OS). */
  readonly file?: string;
  readonly logger: Logger;
  /** inventory: the credential of an inventory boot (docs/decisions/0029-discovery.md). */
  readonly mode?: 'inventory';
  readonly retryMinMs?: number;
  readonly retryMaxMs?: number;
}

interface ClaimAnswer {
  readonly workflowId?: unknown;
  readonly sealed?: unknown;
  readonly error?: unknown;
}

/** A claim refused for a reason worth telling the operator; the claim is tried again later. */
export class ClaimRefused extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = 'ClaimRefused';
    this.status = status;
  }
}

export class ClaimedCredential implements CredentialSource {
  readonly #o: ClaimOptions;
  #held: string | undefined;
  /** The key this claim is sealed to, the same for every try until a credential is held. */
  #key: OpeningKey | undefined;
  /** The file's removal after a refusal: a claim waits for it, so it never reads the old one. */
  #dropping: Promise<void> = Promise.resolve();

  constructor(options: ClaimOptions) {
    this.#o = options;
  }

  async current(signal: AbortSignal): Promise<string> {
    if (this.#held !== undefined) return this.#held;
    await this.#dropping;
    const kept = await this.#readKept();
    if (kept !== undefined) {
      this.#held = kept;
      return kept;
    }
    const min = this.#o.retryMinMs ?? 500;
    const max = this.#o.retryMaxMs ?? 5000;
    for (let failures = 0; ; failures++) {
      signal.throwIfAborted();
      try {
        const credential = await this.claimOnce(signal);
        await this.#keep(credential);
        this.#held = credential;
        await this.#forgetKey();
        return credential;
      } catch (err) {
        if (signal.aborted) throw err;
        const wait = Math.min(max, min * 2 ** Math.min(failures, 10));
        this.#o.logger.warn(
          { err: err instanceof Error ? err.message : String(err), retryMs: wait, url: this.#o.url },
          'credential claim failed',
        );
        await sleep(wait, undefined, { signal });
      }
    }
  }

  invalidate(): Promise<void> {
    this.#held = undefined;
    const file = this.#o.file;
    if (file !== undefined) this.#dropping = this.#dropping.then(() => rm(file, { force: true }));
    return this.#dropping;
  }

  /** One claim: the credential, or an error saying why not. */
  async claimOnce(signal?: AbortSignal): Promise<string> {
    const key = await this.#claimKey();
    const response = await fetch(this.#o.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        workerId: this.#o.workerId,
        mac: this.#o.mac,
        publicKey: key.publicKey,
        ...(this.#o.mode === undefined ? {} : { mode: this.#o.mode }),
      }),
      signal: signal ?? AbortSignal.timeout(10_000),
    });
    const answer = (await response.json().catch(() => ({}))) as ClaimAnswer;
    if (!response.ok) {
      const reason = typeof answer.error === 'string' ? answer.error : `HTTP ${response.status}`;
      throw new ClaimRefused(response.status, reason);
    }
    if (!isSealedBox(answer.sealed)) throw new Error('the claim answer holds no sealed credential');
    const credential = key.open(answer.sealed).toString('utf8');
    this.#o.logger.info(
      { workflowId: typeof answer.workflowId === 'string' ? answer.workflowId : undefined },
      'credential claimed',
    );
    return credential;
  }

  /** The key of the claim in progress: made once, kept on the tmpfs so a restarted agent reuses it. */
  async #claimKey(): Promise<OpeningKey> {
    if (this.#key !== undefined) return this.#key;
    const file = this.#keyFile();
    if (file !== undefined) {
      try {
        this.#key = openingKey(await readFile(file, 'utf8'));
        return this.#key;
      } catch {
        // None kept, or unreadable: a new key (a claim with it may be refused as a second one).
      }
    }
    const key = openingKey();
    if (file !== undefined) await writeFile(file, key.privateKeyPem, { mode: 0o600 });
    this.#key = key;
    return key;
  }

  /** Once a credential is held the key has done its job; the next claim (a new workflow) makes another. */
  async #forgetKey(): Promise<void> {
    this.#key = undefined;
    const file = this.#keyFile();
    if (file !== undefined) await rm(file, { force: true });
  }

  #keyFile(): string | undefined {
    return this.#o.file === undefined ? undefined : `${this.#o.file}.key`;
  }

  async #readKept(): Promise<string | undefined> {
    if (this.#o.file === undefined) return undefined;
    try {
      const text = (await readFile(this.#o.file, 'utf8')).trim();
      return text === '' ? undefined : text;
    } catch {
      return undefined;
    }
  }

  async #keep(credential: string): Promise<void> {
    if (this.#o.file === undefined) return;
    const partial = `${this.#o.file}.partial`;
    await writeFile(partial, credential, { mode: 0o600 });
    await rename(partial, this.#o.file);
  }
}

function isSealedBox(value: unknown): value is SealedBox {
  if (typeof value !== 'object' || value === null) return false;
  const box = value as Record<string, unknown>;
  return (
    typeof box['publicKey'] === 'string' &&
    typeof box['nonce'] === 'string' &&
    typeof box['ciphertext'] === 'string'
  );
}
