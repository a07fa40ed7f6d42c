// The worker agent in inventory mode (docs/decisions/0029-discovery.md): the boot OS booted the
// machine to say what it is. The agent claims its inventory-boot credential, collects the
// inventory (src/worker/inventory.ts), opens a worker stream with it, says hello, sends the report
// and waits for the cluster's answer: recorded (under the machine's id, which is a known
// machine's when the cluster recognised it by its fingerprint), or refused with why. A node that
// cannot be reached or that drops the stream is passed over for the next, until the deadline.
import { setTimeout as sleep } from 'node:timers/promises';
import { credentials, Metadata } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { ConnectResponse, InventoryAck } from '../gen/worker.js';
import { WorkerClient } from '../gen/worker.js';
import type { Inventory } from '../model/inventory.js';
import { EndpointTlsCredentials } from '../platform/endpoint-tls.js';
import { isXdsTarget } from '../platform/xds-target.js';
import type { CredentialSource } from './credential-claim.js';

export interface InventoryReportOptions {
  readonly workerId: string;
  readonly servers: readonly string[];
  readonly credential: CredentialSource;
  readonly ca?: Buffer | undefined;
  readonly inventory: Inventory;
  readonly logger: Logger;
  /** Give up after this long (default 10 minutes). */
  readonly deadlineMs?: number;
  readonly retryMs?: number;
}

/** The cluster's answer to the report. */
export interface ReportAnswer {
  readonly accepted: boolean;
  readonly hardwareId: string;
  readonly message: string;
}

const agentVersion = 'slipway-inventory/1';

/** Sends the report until a node answers it; throws once the deadline passes without an answer. */
export async function reportInventory(o: InventoryReportOptions): Promise<ReportAnswer> {
  const stopAt = Date.now() + (o.deadlineMs ?? 600_000);
  const creds =
    o.ca === undefined
      ? credentials.createInsecure()
      : o.servers.some(isXdsTarget)
        ? new EndpointTlsCredentials(o.ca)
        : credentials.createSsl(o.ca);
  const clients = o.servers.map((s) => new WorkerClient(s, creds));
  try {
    for (let attempt = 0; ; attempt++) {
      const client = clients[attempt % clients.length];
      if (client === undefined) throw new Error('inventory mode needs at least one server');
      const left = stopAt - Date.now();
      if (left <= 0) throw new Error('no node answered the inventory report before the deadline');
      const signal = AbortSignal.timeout(left);
      try {
        const token = await o.credential.current(signal);
        const answer = await sendOnce(client, o, token, Math.min(left, 30_000));
        if (answer.refusedCredential) await o.credential.invalidate();
        else return answer.ack;
      } catch (err) {
        o.logger.warn({ err: (err as Error).message }, 'inventory report not answered; trying again');
      }
      await sleep(o.retryMs ?? 1000);
    }
  } finally {
    for (const c of clients) c.close();
  }
}

/** One stream: hello, the report, and its answer (or why there was none). */
function sendOnce(
  client: WorkerClient,
  o: InventoryReportOptions,
  token: string,
  timeoutMs: number,
): Promise<{ readonly ack: ReportAnswer; readonly refusedCredential: boolean }> {
  const md = new Metadata();
  md.set('x-worker-id', o.workerId);
  md.set('authorization', `Bearer ${token}`);
  return new Promise((resolve, reject) => {
    const stream = client.connect(md, { deadline: Date.now() + timeoutMs });
    let done = false;
    const finish = (fn: () => void): void => {
      if (done) return;
      done = true;
      stream.cancel();
      fn();
    };
    stream.on('data', (msg: ConnectResponse) => {
      if (msg.kind?.$case !== 'inventoryAck') return;
      const ack: InventoryAck = msg.kind.value;
      finish(() => resolve({ ack, refusedCredential: false }));
    });
    stream.on('error', (err: Error & { code?: number }) => {
      // UNAUTHENTICATED (16): the credential is gone (expired, replaced by a later boot's claim).
      if (err.code === 16)
        finish(() =>
          resolve({
            ack: { accepted: false, hardwareId: '', message: err.message },
            refusedCredential: true,
          }),
        );
      else finish(() => reject(err));
    });
    stream.on('end', () => finish(() => reject(new Error('the node ended the stream without an answer'))));
    stream.write({ kind: { $case: 'hello', value: { pendingResults: [], agentVersion } } });
    stream.write({ kind: { $case: 'inventory', value: { inventoryJson: JSON.stringify(o.inventory) } } });
  });
}
