// The DHCP server's view of the replicated leases on this node: reads from the applied control
// state, writes through the proposer. Grants that arrive while earlier ones are being committed
// wait and go together in one lease.grant command, so a burst of REQUESTs costs a few Raft
// entries instead of one each.
import type { LeaseLedger } from '../boot/dhcp/dynamic-leases.js';
import type { ControlCommand, ControlResult } from '../state/control/commands.js';
import type { ControlState } from '../state/control/control-state.js';
import type { GrantOutcome, LeaseGrant } from '../model/records.js';
import { leaseGrantsPerCommandMax } from '../model/limits.js';

/** lease.grant commands in flight at once; beyond it, grants queue for the next command. */
const grantCommandsInFlightMax = 4;
/** How long a declined address stays out of the pool (Kea's decline-probation-period). */
export const declineProbationSDefault = 24 * 3600;

interface Waiting {
  readonly grant: LeaseGrant;
  resolve(outcome: GrantOutcome): void;
  reject(error: unknown): void;
}

export class ReplicatedLeaseLedger implements LeaseLedger {
  readonly #control: ControlState;
  readonly #propose: (command: ControlCommand) => Promise<ControlResult>;
  readonly #probationS: number;
  #queue: Waiting[] = [];
  #inFlight = 0;

  constructor(
    control: ControlState,
    propose: (command: ControlCommand) => Promise<ControlResult>,
    declineProbationS = declineProbationSDefault,
  ) {
    this.#control = control;
    this.#propose = propose;
    this.#probationS = declineProbationS;
  }

  leaseOfMac(mac: string): ReturnType<ControlState['leaseOfMac']> {
    return this.#control.leaseOfMac(mac);
  }

  leaseAt(ip: string): ReturnType<ControlState['leaseAt']> {
    return this.#control.leaseAt(ip);
  }

  reservedFor(ip: string): string | undefined {
    return this.#control.reservedFor(ip);
  }

  grant(grant: LeaseGrant): Promise<GrantOutcome> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ grant, resolve, reject });
      this.#flush();
    });
  }

  async release(mac: string, ip: string): Promise<void> {
    await this.#proposeLease({ type: 'lease.release', mac, ip });
  }

  async decline(mac: string, ip: string): Promise<void> {
    await this.#proposeLease({ type: 'lease.decline', mac, ip, probationS: this.#probationS });
  }

  async #proposeLease(command: ControlCommand): Promise<void> {
    const result = await this.#propose(command);
    if (result.type === 'error') throw new Error(`${command.type} refused: ${result.message}`);
  }

  #flush(): void {
    while (this.#queue.length > 0 && this.#inFlight < grantCommandsInFlightMax) {
      const batch = this.#queue.splice(0, leaseGrantsPerCommandMax);
      this.#inFlight += 1;
      void this.#commit(batch).finally(() => {
        this.#inFlight -= 1;
        this.#flush();
      });
    }
  }

  async #commit(batch: readonly Waiting[]): Promise<void> {
    try {
      const result = await this.#propose({ type: 'lease.grant', grants: batch.map((w) => w.grant) });
      if (result.type !== 'grants' || result.outcomes.length !== batch.length) {
        const why = result.type === 'error' ? result.message : `unexpected result ${result.type}`;
        throw new Error(`lease.grant refused: ${why}`);
      }
      batch.forEach((w, i) => {
        const outcome = result.outcomes[i];
        if (outcome === undefined) w.reject(new Error('lease.grant returned too few outcomes'));
        else w.resolve(outcome);
      });
    } catch (error) {
      for (const w of batch) w.reject(error);
    }
  }
}
