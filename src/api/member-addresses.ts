// Every member's API address, whichever node is asked. The replicated membership holds a member's
// API address when `member add --api-addr` recorded it, but each initial member's bootstrap entry
// holds only its own, so through a balancer `member list` and `cluster status` would see a
// different address missing on every call. The missing ones are asked of the member itself, over
// its raft address (its Status names its own API address), and kept for a while: an API address
// changes only when its node restarts. A member that does not answer is asked again after a
// shorter pause, not on every call, so a dead member does not slow every list, and keeps the
// address it last named, so `cluster status` can say which address stopped answering. The node's
// xDS prober asks for the voters' addresses from the start, so they are known before one dies.
import type { Member } from '../raft/core/types.js';

/** How long a learned address is used before the member is asked again. */
const learnedForMs = 60_000;
/** How long a member that did not answer is left unasked. */
const unansweredForMs = 5_000;

interface Learned {
  readonly apiAddr: string;
  readonly until: number;
}

export interface MemberAddressesOptions {
  /** This node: its own address needs no asking. */
  readonly self: { readonly id: string; readonly apiAddr: string };
  /** Asks `member` (over its raft address) for the API address it serves on. */
  readonly ask: (member: Member) => Promise<string | undefined>;
  readonly now?: () => number;
}

export class MemberAddresses {
  readonly #o: MemberAddressesOptions;
  readonly #learned = new Map<string, Learned>();
  readonly #asking = new Map<string, Promise<string>>();

  constructor(o: MemberAddressesOptions) {
    this.#o = o;
  }

  /** `members` with every API address this node has or can learn now; "" where none answered. */
  async filled(members: readonly Member[]): Promise<Member[]> {
    return Promise.all(
      members.map(async (m) => (m.apiAddr !== '' ? m : { ...m, apiAddr: await this.apiAddrOf(m) })),
    );
  }

  /** The API address of `member`: recorded, learned, or asked now ("" when it does not answer). */
  async apiAddrOf(member: Member): Promise<string> {
    if (member.apiAddr !== '') return member.apiAddr;
    if (member.id === this.#o.self.id) return this.#o.self.apiAddr;
    const key = `${member.id}@${member.addr}`;
    const now = this.#now();
    const known = this.#learned.get(key);
    if (known !== undefined && known.until > now) return known.apiAddr;
    const pending = this.#asking.get(key);
    if (pending !== undefined) return pending;
    const asking = this.#o.ask(member).then(
      (apiAddr) => this.#keep(key, apiAddr ?? ''),
      () => this.#keep(key, ''),
    );
    this.#asking.set(key, asking);
    return asking;
  }

  #keep(key: string, answer: string): string {
    this.#asking.delete(key);
    const apiAddr = answer === '' ? (this.#learned.get(key)?.apiAddr ?? '') : answer;
    this.#learned.set(key, {
      apiAddr,
      until: this.#now() + (answer === '' ? unansweredForMs : learnedForMs),
    });
    return apiAddr;
  }

  #now(): number {
    return (this.#o.now ?? Date.now)();
  }
}
