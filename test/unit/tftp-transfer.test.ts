// Goal: the pure read-transfer state machine negotiates options as RFC 2347/2348/2349/7440
// require, sends windows, never answers a duplicate ACK with data, backs off and gives up on
// silence, wraps block numbers, and ends quietly on ERROR 8.
// Method: drive ReadTransfer directly with hand-written event sequences and a fake clock
// (nowMs values), then a fast-check property that runs whole transfers through a simulated
// lossy, duplicating network against a model RFC 7440 client and compares the bytes received.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { TftpErrorCode, type RequestPacket, type TftpPacket } from '../../src/boot/tftp/packet.js';
import {
  ReadTransfer,
  negotiateOptions,
  type Outgoing,
  type TransferStep,
} from '../../src/boot/tftp/transfer.js';
import { TRANSFER_LIMITS_DEFAULT, type TransferLimits } from '../../src/boot/tftp/limits.js';
import { Prng } from '../../src/platform/prng.js';

const limits = (overrides: Partial<TransferLimits> = {}): TransferLimits => ({
  ...TRANSFER_LIMITS_DEFAULT,
  ...overrides,
});

const rrq = (options: Record<string, string> = {}): RequestPacket => ({
  type: 'rrq',
  filename: 'ipxe.efi',
  mode: 'octet',
  options: new Map(Object.entries(options)),
});

const ack = (block: number): TftpPacket => ({ type: 'ack', block });

/** DATA sends as [wireBlock, offset, length] triples, for compact assertions. */
function data(step: TransferStep): [number, number, number][] {
  return step.send.flatMap((o: Outgoing) => (o.kind === 'data' ? [[o.block, o.offset, o.length]] : []));
}

function controls(step: TransferStep): TftpPacket[] {
  return step.send.flatMap((o: Outgoing) => (o.kind === 'packet' ? [o.packet] : []));
}

function oackOptions(step: TransferStep): Record<string, string> {
  const [packet] = controls(step);
  assert.equal(packet?.type, 'oack', 'expected an OACK');
  return packet.type === 'oack' ? Object.fromEntries(packet.options) : {};
}

void test('negotiation: blksize is clamped to the server maximum and ignored below 8', () => {
  const cases: [string, string | undefined][] = [
    ['512', '512'],
    ['1468', '1468'],
    ['2000', '1468'],
    ['65464', '1468'],
    ['100000', '1468'],
    ['8', '8'],
    ['7', undefined],
    ['0', undefined],
  ];
  for (const [requested, granted] of cases) {
    const settings = negotiateOptions(new Map([['blksize', requested]]), 100, limits());
    assert.equal(settings.accepted.get('blksize'), granted, `blksize ${requested}`);
    assert.equal(settings.blockSize, granted === undefined ? 512 : Number(granted));
  }
  const large = negotiateOptions(new Map([['blksize', '9000']]), 100, limits({ blockSizeMax: 8192 }));
  assert.equal(large.blockSize, 8192, 'a configured maximum is honoured');
});

void test('negotiation: windowsize is clamped to the server maximum and ignored at 0', () => {
  assert.equal(negotiateOptions(new Map([['windowsize', '8']]), 1, limits()).windowSize, 8);
  assert.equal(negotiateOptions(new Map([['windowsize', '64']]), 1, limits()).windowSize, 16);
  assert.equal(
    negotiateOptions(new Map([['windowsize', '70000']]), 1, limits()).accepted.get('windowsize'),
    '16',
  );
  assert.equal(
    negotiateOptions(new Map([['windowsize', '64']]), 1, limits({ windowSizeMax: 4 })).windowSize,
    4,
  );
  const zero = negotiateOptions(new Map([['windowsize', '0']]), 1, limits());
  assert.equal(zero.windowSize, 1);
  assert.equal(zero.accepted.has('windowsize'), false);
});

void test('negotiation: tsize 0 is answered with the file size; other tsize values are ignored', () => {
  assert.equal(negotiateOptions(new Map([['tsize', '0']]), 850528, limits()).accepted.get('tsize'), '850528');
  assert.equal(negotiateOptions(new Map([['tsize', '0']]), 0, limits()).accepted.get('tsize'), '0');
  assert.equal(negotiateOptions(new Map([['tsize', '12']]), 850528, limits()).accepted.has('tsize'), false);
});

void test('negotiation: timeout is echoed unchanged within 1..255 s and ignored outside', () => {
  const ok = negotiateOptions(new Map([['timeout', '3']]), 1, limits());
  assert.equal(ok.accepted.get('timeout'), '3');
  assert.equal(ok.timeoutMs, 3000);
  for (const bad of ['0', '256']) {
    const settings = negotiateOptions(new Map([['timeout', bad]]), 1, limits({ timeoutMs: 700 }));
    assert.equal(settings.accepted.has('timeout'), false, `timeout ${bad}`);
    assert.equal(settings.timeoutMs, 700);
  }
});

void test('negotiation: unknown options are left out; accepted ones keep the request order', () => {
  const settings = negotiateOptions(
    new Map([
      ['windowsize', '4'],
      ['rollover', '0'],
      ['tsize', '0'],
      ['blksize', '1024'],
    ]),
    5,
    limits(),
  );
  assert.deepEqual([...settings.accepted.keys()], ['windowsize', 'tsize', 'blksize']);
});

void test('without options the transfer starts with DATA 1 at 512 bytes and arms the default timer', () => {
  const transfer = new ReadTransfer(limits());
  const step = transfer.start(rrq(), 1000, 50);
  assert.deepEqual(data(step), [[1, 0, 512]]);
  assert.equal(controls(step).length, 0);
  assert.equal(step.nextTimerAtMs, 1050);
  assert.equal(step.done, null);
});

void test('only unknown options: no OACK, DATA 1 straight away', () => {
  const step = new ReadTransfer(limits()).start(rrq({ rollover: '0', tsize: '7' }), 10, 0);
  assert.deepEqual(data(step), [[1, 0, 10]]);
  assert.equal(controls(step).length, 0);
});

void test('with accepted options an OACK goes first; only ACK 0 starts the data', () => {
  const transfer = new ReadTransfer(limits());
  const start = transfer.start(rrq({ blksize: '2000', tsize: '0', timeout: '2' }), 3000, 0);
  assert.deepEqual(oackOptions(start), { blksize: '1468', tsize: '3000', timeout: '2' });
  assert.equal(data(start).length, 0);
  assert.equal(start.nextTimerAtMs, 2000, 'the negotiated timeout drives the timer');
  assert.deepEqual(data(transfer.onPacket(ack(1), 10)), [], 'ACK 1 cannot acknowledge an OACK');
  const first = transfer.onPacket(ack(0), 20);
  assert.deepEqual(data(first), [[1, 0, 1468]]);
  assert.equal(first.nextTimerAtMs, 2020);
});

void test('a lost OACK is retransmitted by the timer, not by a duplicate request', () => {
  const transfer = new ReadTransfer(limits());
  transfer.start(rrq({ tsize: '0' }), 99, 0);
  assert.deepEqual(transfer.onTimer(999).send, [], 'an early timer call changes nothing');
  assert.deepEqual(oackOptions(transfer.onTimer(1000)), { tsize: '99' });
});

void test('windows: sends windowsize blocks, slides on the last ACK and on an earlier one', () => {
  const transfer = new ReadTransfer(limits());
  const size = 512 * 9 + 100; // ten blocks, the last one 100 bytes
  transfer.start(rrq({ windowsize: '4' }), size, 0);
  assert.deepEqual(data(transfer.onPacket(ack(0), 1)), [
    [1, 0, 512],
    [2, 512, 512],
    [3, 1024, 512],
    [4, 1536, 512],
  ]);
  assert.deepEqual(
    data(transfer.onPacket(ack(4), 2)).map(([b]) => b),
    [5, 6, 7, 8],
  );
  // Block 7 was lost: the client acknowledges 6, and the next window starts at 7 (RFC 7440 §4).
  assert.deepEqual(data(transfer.onPacket(ack(6), 3)), [
    [7, 3072, 512],
    [8, 3584, 512],
    [9, 4096, 512],
    [10, 4608, 100],
  ]);
  const end = transfer.onPacket(ack(10), 4);
  assert.equal(end.done, 'completed');
  assert.equal(end.error, null);
  assert.equal(end.nextTimerAtMs, null);
});

void test('duplicate, stale and future ACKs send nothing and keep the timer (no Sorcerer’s Apprentice)', () => {
  const transfer = new ReadTransfer(limits());
  transfer.start(rrq({ windowsize: '2' }), 512 * 10, 0);
  transfer.onPacket(ack(0), 0);
  const progress = transfer.onPacket(ack(2), 100);
  assert.deepEqual(
    data(progress).map(([b]) => b),
    [3, 4],
  );
  for (const block of [2, 2, 1, 0, 5, 9, 65535]) {
    const step = transfer.onPacket(ack(block), 200);
    assert.deepEqual(step.send, [], `ACK ${block}`);
    assert.equal(step.nextTimerAtMs, progress.nextTimerAtMs, `ACK ${block} must not move the timer`);
  }
  assert.deepEqual(
    data(transfer.onPacket(ack(4), 300)).map(([b]) => b),
    [5, 6],
    'the transfer still advances afterwards',
  );
});

void test('timeouts back off exponentially up to the cap, then the transfer gives up', () => {
  const transfer = new ReadTransfer(limits({ timeoutMs: 1000, timeoutMaxMs: 8000, retriesMax: 5 }));
  let step = transfer.start(rrq({ windowsize: '2' }), 4000, 0);
  step = transfer.onPacket(ack(0), 0);
  const intervals: number[] = [];
  let now = 0;
  for (let retry = 1; retry <= 5; retry++) {
    const at = step.nextTimerAtMs;
    assert.ok(at !== null);
    intervals.push(at - now);
    now = at;
    step = transfer.onTimer(now);
    assert.deepEqual(
      data(step).map(([b]) => b),
      [1, 2],
      `retry ${retry} resends the whole window`,
    );
  }
  const last = step.nextTimerAtMs;
  assert.ok(last !== null);
  intervals.push(last - now);
  assert.deepEqual(intervals, [1000, 2000, 4000, 8000, 8000, 8000]);
  const gaveUp = transfer.onTimer(last);
  assert.equal(gaveUp.done, 'failed');
  assert.deepEqual(gaveUp.error, { reason: 'timedOut', retries: 5 });
  assert.deepEqual(gaveUp.send, []);
  assert.equal(gaveUp.nextTimerAtMs, null);
  assert.deepEqual(transfer.onPacket(ack(2), last + 1).send, [], 'an ended transfer ignores late ACKs');
});

void test('progress resets the backoff', () => {
  const transfer = new ReadTransfer(limits({ timeoutMs: 100, timeoutMaxMs: 1000 }));
  transfer.start(rrq(), 2000, 0);
  assert.equal(transfer.onTimer(100).nextTimerAtMs, 300);
  assert.equal(transfer.onTimer(300).nextTimerAtMs, 700);
  assert.equal(transfer.onPacket(ack(1), 710).nextTimerAtMs, 810);
});

void test('a size that is an exact multiple of blksize ends with an empty block', () => {
  const transfer = new ReadTransfer(limits());
  assert.deepEqual(data(transfer.start(rrq(), 1024, 0)), [[1, 0, 512]]);
  assert.deepEqual(data(transfer.onPacket(ack(1), 1)), [[2, 512, 512]]);
  assert.deepEqual(data(transfer.onPacket(ack(2), 2)), [[3, 1024, 0]]);
  assert.equal(transfer.onPacket(ack(3), 3).done, 'completed');
});

void test('an empty file is one empty block', () => {
  const transfer = new ReadTransfer(limits());
  assert.deepEqual(data(transfer.start(rrq(), 0, 0)), [[1, 0, 0]]);
  assert.equal(transfer.onPacket(ack(1), 1).done, 'completed');
});

void test('block numbers wrap from 65535 to 0 and offsets keep counting (blksize 8)', () => {
  const size = 8 * 70_000 + 3; // 70 001 blocks
  const transfer = new ReadTransfer(limits({ windowSizeMax: 64 }));
  let step = transfer.start(rrq({ blksize: '8', windowsize: '64' }), size, 0);
  step = transfer.onPacket(ack(0), 0);
  let expectedOffset = 0;
  let absolute = 0;
  let wrapped = false;
  while (step.done === null) {
    const sent = data(step);
    assert.ok(sent.length > 0 && sent.length <= 64);
    for (const [block, offset, length] of sent) {
      absolute += 1;
      assert.equal(block, absolute % 65536);
      assert.equal(offset, expectedOffset);
      expectedOffset += length;
      if (absolute === 65536) wrapped = block === 0;
    }
    step = transfer.onPacket(ack(sent.at(-1)![0]), absolute);
  }
  assert.equal(step.done, 'completed');
  assert.equal(absolute, 70_001);
  assert.equal(expectedOffset, size);
  assert.ok(wrapped, 'block 65536 went out as block 0');
});

void test('ERROR 8 from the client (EDK2 after reading tsize) ends the transfer quietly', () => {
  const transfer = new ReadTransfer(limits());
  transfer.start(rrq({ tsize: '0', blksize: '1468' }), 850528, 0);
  const end = transfer.onPacket({ type: 'error', code: TftpErrorCode.optionsDeclined, message: 'abort' }, 5);
  assert.deepEqual(end, { send: [], done: 'optionsDeclined', error: null, nextTimerAtMs: null });
  assert.deepEqual(transfer.onTimer(10_000).send, [], 'no retransmission after it ended');
});

void test('any other client ERROR fails the transfer without a reply', () => {
  const transfer = new ReadTransfer(limits());
  transfer.start(rrq(), 5000, 0);
  const end = transfer.onPacket({ type: 'error', code: TftpErrorCode.diskFull, message: 'disk full' }, 5);
  assert.equal(end.done, 'failed');
  assert.deepEqual(end.error, { reason: 'clientError', code: 3, message: 'disk full' });
  assert.deepEqual(end.send, []);
});

void test('a non-ACK packet is answered with ERROR 4 and leaves the transfer untouched', () => {
  const transfer = new ReadTransfer(limits());
  const start = transfer.start(rrq(), 1000, 0);
  const reply = transfer.onPacket({ type: 'data', block: 1, data: new Uint8Array(3) }, 5);
  const [packet] = controls(reply);
  assert.equal(packet?.type, 'error');
  assert.equal(packet.type === 'error' ? packet.code : -1, TftpErrorCode.illegalOperation);
  assert.equal(reply.done, null);
  assert.equal(reply.nextTimerAtMs, start.nextTimerAtMs);
  assert.deepEqual(data(transfer.onPacket(ack(1), 6)), [[2, 512, 488]]);
});

void test('invalid limits are refused at construction', () => {
  assert.throws(() => new ReadTransfer(limits({ blockSizeMax: 7 })), /blockSizeMax/);
  assert.throws(() => new ReadTransfer(limits({ windowSizeMax: 0 })), /windowSizeMax/);
  assert.throws(() => new ReadTransfer(limits({ timeoutMaxMs: 10, timeoutMs: 100 })), /timeoutMaxMs/);
});

// ---- Whole transfers over a simulated lossy network -------------------------------------

interface Scenario {
  readonly fileSize: number;
  readonly blockSize: number;
  readonly windowSize: number;
  readonly lossRate: number;
  readonly duplicateRate: number;
  readonly seed: number;
}

interface Flight {
  readonly atMs: number;
  readonly to: 'client' | 'server';
  readonly packet: TftpPacket;
}

/**
 * Runs one transfer to its end. The client follows RFC 7440: it ACKs after windowsize
 * in-order blocks, on the final block, and on any unexpected block (the last in-order one);
 * when it hears nothing for a while it repeats its last ACK.
 */
function simulate(s: Scenario): { content: Uint8Array; received: Uint8Array; step: TransferStep } {
  const rng = new Prng(s.seed);
  const random = (): number => rng.float();
  const content = Uint8Array.from({ length: s.fileSize }, (_, i) => (i * 31 + 7) & 0xff);
  const transfer = new ReadTransfer(
    limits({ retriesMax: 1000, timeoutMs: 100, timeoutMaxMs: 400, windowSizeMax: 16 }),
  );
  const flights: Flight[] = [];
  const chunks: Uint8Array[] = [];
  let nowMs = 0;
  let serverTimerAtMs: number | null = null;
  let lastStep: TransferStep | null = null;
  let previousAckToServer: number | null = null;
  // Client state.
  let expected = 1;
  let sinceAck = 0;
  let lastAck: number | null = null;
  let clientTimerAtMs: number | null = null;
  let finished = false;

  const transmit = (to: Flight['to'], packet: TftpPacket): void => {
    if (random() < s.lossRate) return;
    const atMs = nowMs + 1 + random() * 4; // jitter also reorders packets
    flights.push({ atMs, to, packet });
    if (random() < s.duplicateRate) flights.push({ atMs: atMs + random() * 4, to, packet });
  };
  const applyServer = (step: TransferStep): void => {
    lastStep = step;
    assert.ok(step.send.length <= s.windowSize || step.send.length === 1);
    for (const out of step.send) {
      transmit(
        'client',
        out.kind === 'data'
          ? { type: 'data', block: out.block, data: content.subarray(out.offset, out.offset + out.length) }
          : out.packet,
      );
    }
    serverTimerAtMs = step.nextTimerAtMs;
  };
  const clientAck = (block: number): void => {
    lastAck = block;
    sinceAck = 0;
    clientTimerAtMs = nowMs + 250;
    transmit('server', ack(block));
  };
  const onClient = (packet: TftpPacket): void => {
    if (packet.type === 'oack') {
      if (expected === 1) clientAck(0);
      return;
    }
    assert.equal(packet.type, 'data');
    if (packet.type !== 'data') return;
    if (finished) return clientAck(lastAck!); // dally: the final ACK may have been lost
    if (packet.block !== (expected & 0xffff)) return clientAck((expected - 1) & 0xffff);
    chunks.push(packet.data);
    expected += 1;
    sinceAck += 1;
    if (packet.data.length < s.blockSize) {
      finished = true;
      return clientAck(packet.block);
    }
    if (sinceAck === s.windowSize) clientAck(packet.block);
  };
  const onServer = (packet: TftpPacket): void => {
    const step = transfer.onPacket(packet, nowMs);
    if (packet.type === 'ack') {
      if (packet.block === previousAckToServer)
        assert.deepEqual(step.send, [], 'a duplicate ACK must send nothing');
      previousAckToServer = packet.block;
    }
    applyServer(step);
  };

  const options: Record<string, string> = { tsize: '0', blksize: String(s.blockSize) };
  if (s.windowSize > 1) options['windowsize'] = String(s.windowSize);
  applyServer(transfer.start(rrq(options), s.fileSize, 0));
  for (let events = 0; lastStep!.done === null; events++) {
    assert.ok(events < 200_000, 'the transfer must end');
    flights.sort((a, b) => a.atMs - b.atMs);
    const nextFlight = flights[0]?.atMs ?? Infinity;
    const next = Math.min(nextFlight, serverTimerAtMs ?? Infinity, clientTimerAtMs ?? Infinity);
    assert.ok(Number.isFinite(next), 'something must be pending');
    nowMs = next;
    if (next === nextFlight) {
      const flight = flights.shift()!;
      if (flight.to === 'client') onClient(flight.packet);
      else onServer(flight.packet);
    } else if (next === serverTimerAtMs) {
      applyServer(transfer.onTimer(nowMs));
    } else {
      clientTimerAtMs = null;
      if (lastAck !== null) clientAck(lastAck);
    }
  }
  const received = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    received.set(chunk, offset);
    offset += chunk.length;
  }
  return { content, received, step: lastStep! };
}

void test('property: over a lossy, duplicating, reordering network the client receives the exact file', () => {
  fc.assert(
    fc.property(
      fc.record({
        blockSize: fc.integer({ min: 8, max: 64 }),
        windowSize: fc.integer({ min: 1, max: 8 }),
        blocks: fc.integer({ min: 0, max: 40 }),
        tail: fc.integer({ min: 0, max: 63 }),
        lossRate: fc.double({ min: 0, max: 0.3, noNaN: true }),
        duplicateRate: fc.double({ min: 0, max: 0.3, noNaN: true }),
        seed: fc.integer(),
      }),
      ({ blocks, tail, ...rest }) => {
        const fileSize = blocks * rest.blockSize + (tail % rest.blockSize);
        const { content, received, step } = simulate({ ...rest, fileSize });
        assert.equal(step.done, 'completed');
        assert.deepEqual(received, content);
      },
    ),
    { numRuns: 150 },
  );
});
