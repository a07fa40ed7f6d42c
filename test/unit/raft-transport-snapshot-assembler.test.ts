// Goal: a received snapshot reaches the driver only when it is whole, contiguous, addressed to
// this node, from one sender, and matches its CRC-32; anything else is refused with a code the
// transport maps to a gRPC status, and a message saying what was wrong.
// Method: feed SnapshotAssembler hand-made chunk sequences, valid and broken one way each.
import assert from 'node:assert/strict';
import { crc32 } from 'node:zlib';
import { describe, it } from 'node:test';
import type { SnapshotChunk } from '../../src/gen/raft.js';
import { snapshotMetaToWire } from '../../src/raft/transport/codec.js';
import {
  SnapshotAssembler,
  SnapshotTransferError,
  type SnapshotRefusal,
} from '../../src/raft/transport/snapshot-assembler.js';

const meta = {
  index: 50,
  term: 4,
  membership: { voters: [{ id: 'a', addr: 'h:1', apiAddr: '' }], learners: [] },
};

/** The chunks a correct sender would produce for `data` in pieces of `size`. */
function chunksOf(data: Buffer, size: number): SnapshotChunk[] {
  const chunks: SnapshotChunk[] = [];
  for (let offset = 0; offset === 0 || offset < data.byteLength; offset += size) {
    const done = offset + size >= data.byteLength;
    chunks.push({
      from: 'a',
      to: 'b',
      offset,
      data: data.subarray(offset, offset + size),
      done,
      crc32: done ? crc32(data) : 0,
      ...(offset === 0 ? { meta: snapshotMetaToWire(meta) } : {}),
    });
  }
  return chunks;
}

function feed(chunks: readonly SnapshotChunk[], bytesMax = 1 << 20) {
  const assembler = new SnapshotAssembler('b', bytesMax);
  let result = null;
  for (const c of chunks) result = assembler.add(c);
  return result;
}

function refusedWith(code: SnapshotRefusal, message: RegExp) {
  return (err: unknown) =>
    err instanceof SnapshotTransferError && err.code === code && message.test(err.message);
}

const data = Buffer.from(Array.from({ length: 1000 }, (_, i) => (i * 7) % 251));

void describe('raft transport snapshot assembler', () => {
  void it('reassembles a snapshot from its chunks', () => {
    const chunks = chunksOf(data, 300);
    assert.equal(chunks.length, 4);
    const assembler = new SnapshotAssembler('b', 1 << 20);
    const partial = chunks.slice(0, -1).map((c) => assembler.add(c));
    assert.deepEqual(partial, [null, null, null]);
    const whole = assembler.add(chunks.at(-1)!);
    assert.equal(whole?.from, 'a');
    assert.deepEqual(whole.snapshot.meta, meta);
    assert.ok(Buffer.from(whole.snapshot.data).equals(data));
  });

  void it('accepts an empty snapshot in one chunk', () => {
    const whole = feed(chunksOf(Buffer.alloc(0), 300));
    assert.equal(whole?.snapshot.data.byteLength, 0);
  });

  void it('refuses data that does not match the CRC', () => {
    const chunks = chunksOf(Buffer.from(data), 300);
    chunks[1]!.data[3] = chunks[1]!.data[3]! ^ 1;
    assert.throws(() => feed(chunks), refusedWith('E_CHECKSUM', /CRC-32 mismatch/));
  });

  void it('refuses a gap between chunks', () => {
    const chunks = chunksOf(data, 300);
    assert.throws(
      () => feed([chunks[0]!, chunks[2]!]),
      refusedWith('E_BAD_CHUNK', /offset 600 does not follow the 300 bytes/),
    );
  });

  void it('refuses a first chunk without metadata', () => {
    const [first] = chunksOf(data, 300);
    const { meta: _meta, ...withoutMeta } = first!;
    assert.throws(
      () => feed([withoutMeta]),
      refusedWith('E_BAD_CHUNK', /first chunk must carry the snapshot metadata/),
    );
  });

  void it('refuses invalid metadata, naming the field', () => {
    const [first] = chunksOf(data, 300);
    assert.throws(
      () => feed([{ ...first!, meta: { index: 1, term: 1 } }]),
      refusedWith('E_BAD_CHUNK', /invalid snapshot metadata: meta\.membership is missing/),
    );
  });

  void it('refuses chunks addressed to another node or switching sender', () => {
    const chunks = chunksOf(data, 300);
    assert.throws(() => feed([{ ...chunks[0]!, to: 'c' }]), refusedWith('E_BAD_CHUNK', /addressed to 'c'/));
    assert.throws(
      () => feed([chunks[0]!, { ...chunks[1]!, from: 'x' }]),
      refusedWith('E_BAD_CHUNK', /from 'x' inside a transfer from 'a'/),
    );
  });

  void it('refuses a chunk after the last one', () => {
    const chunks = chunksOf(data, 300);
    assert.throws(() => feed([...chunks, chunks.at(-1)!]), refusedWith('E_BAD_CHUNK', /after the last one/));
  });

  void it('refuses a snapshot beyond the size limit', () => {
    assert.throws(
      () => feed(chunksOf(data, 300), 500),
      refusedWith('E_TOO_LARGE', /exceeds the 500-byte limit/),
    );
  });
});
