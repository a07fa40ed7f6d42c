// Goal: the state digest of Status costs at most one encoding per applied index on a node, and
// never more than one at a time: concurrent asks share one, later asks at an unmoved index reuse
// its result, an ask while an older index is being encoded waits for it, a failed encoding is
// not kept, and what the caller takes is taken at the index the digest covers.
// Method: a real ReplicatedState, written through encoded commands, behind a seam that counts
// captures and can hold an encoding until the test releases it. The digest is checked against
// the SHA-256 of the store's own snapshot encoding.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { StateDigests, type DigestSource } from '../../src/api/state-digest.js';
import { ReplicatedState } from '../../src/state/replicated-state.js';
import { encodeCommand } from '../../src/state/store-command.js';
import { waitFor } from '../support/wait.js';

const noPause = (): Promise<void> => Promise.resolve();

/** A store with `puts` keys written, at applied index `puts`. */
function storeWith(puts: number): { store: ReplicatedState; put: (key: string) => void } {
  const store = new ReplicatedState();
  let index = 0;
  const put = (key: string): void => {
    index += 1;
    const value = new TextEncoder().encode(`v-${key}`);
    store.apply(index, encodeCommand({ type: 'put', stampMs: 1000 + index, ns: 'kv', key, value }));
  };
  for (let i = 0; i < puts; i++) put(`k${i}`);
  return { store, put };
}

async function expectedDigest(store: ReplicatedState): Promise<string> {
  const bytes = await store.captureSnapshot().encode(noPause);
  return createHash('sha256').update(bytes).digest('hex');
}

/** The store behind a seam: counts captures; with `hold`, each encoding waits for `release`. */
function seam(store: ReplicatedState, opts: { hold?: boolean; fail?: boolean } = {}) {
  const held: (() => void)[] = [];
  let captures = 0;
  const source: DigestSource = {
    get appliedIndex() {
      return store.appliedIndex;
    },
    captureSnapshot() {
      captures++;
      const capture = store.captureSnapshot();
      return {
        appliedIndex: capture.appliedIndex,
        encode: async (pause) => {
          if (opts.hold === true) await new Promise<void>((resolve) => held.push(resolve));
          if (opts.fail === true) throw new Error('the disk is on fire');
          return capture.encode(pause);
        },
      };
    },
  };
  return {
    source,
    captures: () => captures,
    release: () => {
      for (const r of held.splice(0)) r();
    },
    holding: () => held.length,
  };
}

test('concurrent asks at one applied index share one encoding, with the right digest', async () => {
  const { store } = storeWith(50);
  const s = seam(store, { hold: true });
  const digests = new StateDigests(s.source, noPause);
  const asks = Array.from({ length: 5 }, () => digests.current(() => store.appliedIndex));
  s.release();
  const answers = await Promise.all(asks);
  assert.equal(s.captures(), 1, 'one encoding for five asks');
  assert.equal(digests.computations, 1);
  const want = await expectedDigest(store);
  for (const a of answers) assert.deepEqual(a, { taken: 50, digest: want });
});

test('a later ask reuses the digest until the applied index moves, then computes once more', async () => {
  const { store, put } = storeWith(3);
  const s = seam(store);
  const digests = new StateDigests(s.source, noPause);
  const first = await digests.current(() => store.appliedIndex);
  const again = await digests.current(() => store.appliedIndex);
  assert.deepEqual(again, first);
  assert.equal(s.captures(), 1);
  put('moved');
  const moved = await digests.current(() => store.appliedIndex);
  assert.equal(s.captures(), 2);
  assert.equal(moved.taken, 4);
  assert.notEqual(moved.digest, first.digest);
  assert.equal(moved.digest, await expectedDigest(store));
});

test('an ask while an older index is encoded waits for it: never two encodings at once', async () => {
  const { store, put } = storeWith(3);
  const s = seam(store, { hold: true });
  const digests = new StateDigests(s.source, noPause);
  const old = digests.current(() => store.appliedIndex);
  put('during');
  const newer = [digests.current(() => store.appliedIndex), digests.current(() => store.appliedIndex)];
  // Both newer asks wait behind the running encoding: still one capture, one encoding held.
  await Promise.resolve();
  assert.equal(s.captures(), 1);
  assert.equal(s.holding(), 1);
  s.release();
  assert.equal((await old).taken, 3);
  // The waiting asks share the one encoding of index 4.
  await waitFor('the waiting asks to start their encoding', () => s.holding() === 1, 2000, 1);
  assert.equal(s.captures(), 2);
  s.release();
  const answers = await Promise.all(newer);
  const want = await expectedDigest(store);
  for (const a of answers) assert.deepEqual(a, { taken: 4, digest: want });
  assert.equal(digests.computations, 2);
});

test('a failed encoding reaches its askers and is not kept', async () => {
  const { store } = storeWith(2);
  const s = seam(store, { fail: true });
  const digests = new StateDigests(s.source, noPause);
  await assert.rejects(
    digests.current(() => 0),
    /the disk is on fire/,
  );
  await assert.rejects(
    digests.current(() => 0),
    /the disk is on fire/,
  );
  assert.equal(s.captures(), 2, 'the second ask tried again');
});
