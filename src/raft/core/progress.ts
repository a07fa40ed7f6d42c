// The leader's view of one follower's replication (etcd's Progress): what it has, what to
// send next, and how much may be in flight before waiting for acknowledgements.

export type ProgressState = 'probe' | 'replicate' | 'snapshot';

interface Inflight {
  readonly lastIndex: number;
  readonly bytes: number;
}

export class Progress {
  match = 0;
  next: number;
  state: ProgressState = 'probe';
  /** In probe state: an append is outstanding; wait for its answer or the next heartbeat. */
  probeSent = false;
  /** In snapshot state: the index of the snapshot being sent. */
  pendingSnapshot = 0;
  /** Heard from since the last check-quorum round. */
  recentActive = false;
  /** The newest read-confirmation round this follower acknowledged in the current term. */
  ackedReadRound = 0;
  readonly isLearner: boolean;
  #inflights: Inflight[] = [];
  #inflightBytes = 0;

  constructor(next: number, isLearner: boolean) {
    this.next = next;
    this.isLearner = isLearner;
  }

  becomeProbe(): void {
    // From snapshot state the follower has at least the snapshot; resume after it.
    this.next =
      this.state === 'snapshot' ? Math.max(this.match + 1, this.pendingSnapshot + 1) : this.match + 1;
    this.state = 'probe';
    this.probeSent = false;
    this.pendingSnapshot = 0;
    this.#resetInflights();
  }

  becomeReplicate(): void {
    this.state = 'replicate';
    this.next = this.match + 1;
    this.pendingSnapshot = 0;
    this.#resetInflights();
  }

  /**
   * Pipelined from `next` before any acknowledgement (a leader that was handed its office, whose
   * followers hold its log): match stays unknown (0) until the first answer.
   */
  replicateOptimistically(): void {
    this.state = 'replicate';
    this.pendingSnapshot = 0;
    this.#resetInflights();
  }

  becomeSnapshot(index: number): void {
    this.state = 'snapshot';
    this.pendingSnapshot = index;
    this.#resetInflights();
  }

  /** Returns true if the follower's match advanced. */
  maybeUpdate(index: number): boolean {
    const updated = index > this.match;
    if (updated) {
      this.match = index;
      this.probeSent = false;
    }
    this.next = Math.max(this.next, index + 1);
    return updated;
  }

  /**
   * A rejection: step back (from replicate, into probe). Returns false for a stale rejection
   * that changes nothing.
   */
  maybeDecrTo(rejected: number, nextProbe: number): boolean {
    if (this.state === 'replicate') {
      if (rejected <= this.match) return false;
      // Back to before the rejected append, and to the follower's hint when it is further back:
      // not to match + 1, which is still 0 after an optimistic start (the whole log again).
      const next = Math.max(this.match + 1, Math.min(rejected, nextProbe + 1));
      this.becomeProbe();
      this.next = next;
      return true;
    }
    if (this.next - 1 !== rejected) return false;
    this.next = Math.max(Math.min(rejected, nextProbe + 1), this.match + 1);
    this.probeSent = false;
    return true;
  }

  /** Record an append sent in replicate state, or mark the probe as sent. */
  sentEntries(lastIndex: number, bytes: number): void {
    if (this.state === 'replicate') {
      this.#inflights.push({ lastIndex, bytes });
      this.#inflightBytes += bytes;
      this.next = lastIndex + 1;
    } else if (this.state === 'probe') {
      this.probeSent = true;
    }
  }

  /** Free in-flight slots acknowledged up to index. */
  freeTo(index: number): void {
    let n = 0;
    while (n < this.#inflights.length && this.#inflights[n]!.lastIndex <= index) {
      this.#inflightBytes -= this.#inflights[n]!.bytes;
      n++;
    }
    if (n > 0) this.#inflights.splice(0, n);
  }

  /**
   * Frees the oldest in-flight slot. If every append in a full window is lost, no ack ever
   * frees a slot and replication to that follower would stall for good; a heartbeat answer
   * calls this so that one append per heartbeat still goes out (etcd's Inflights.FreeFirstOne),
   * exposing the gap (test/raft/testdata/replication-window-stall.txt).
   */
  freeFirstOne(): void {
    const first = this.#inflights.shift();
    if (first !== undefined) this.#inflightBytes -= first.bytes;
  }

  isPaused(maxMsgs: number, maxBytes: number): boolean {
    switch (this.state) {
      case 'probe':
        return this.probeSent;
      case 'replicate':
        return this.#inflights.length >= maxMsgs || this.#inflightBytes >= maxBytes;
      case 'snapshot':
        return true;
    }
  }

  #resetInflights(): void {
    this.#inflights = [];
    this.#inflightBytes = 0;
  }
}
