// Goal: chooseRange serves one satisfiable byte range as a part, answers a well-formed range
// past the end as unsatisfiable, and falls back to the whole file whenever RFC 9110 lets a
// server ignore the header (bad syntax, other units, several ranges, a stale If-Range).
// Method: a table of Range headers against a 1000-byte file, plus the edge cases of an empty
// file and validators.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { chooseRange, type RangeChoice, type RangeRequest } from '../../src/boot/http/range.js';

const base: RangeRequest = {
  range: undefined,
  ifRange: undefined,
  size: 1000,
  etag: '"abc"',
  lastModified: 'Tue, 01 Jul 2025 10:00:00 GMT',
};

const choose = (range: string | undefined, extra: Partial<RangeRequest> = {}): RangeChoice =>
  chooseRange({ ...base, range, ...extra });

const part = (start: number, end: number): RangeChoice => ({ kind: 'part', start, end });
const whole: RangeChoice = { kind: 'whole' };
const unsatisfiable: RangeChoice = { kind: 'unsatisfiable' };

describe('chooseRange', () => {
  it('serves single ranges, clamping the end to the file', () => {
    const table: [string, RangeChoice][] = [
      ['bytes=0-99', part(0, 99)],
      ['bytes=100-', part(100, 999)],
      ['bytes=-10', part(990, 999)],
      ['bytes=-5000', part(0, 999)],
      ['bytes=990-5000', part(990, 999)],
      ['bytes=999-999', part(999, 999)],
      [' Bytes = 5 - 9 ', part(5, 9)],
    ];
    for (const [header, expected] of table) assert.deepEqual(choose(header), expected, header);
  });

  it('answers ranges that start past the end, and empty suffixes, as unsatisfiable', () => {
    for (const header of ['bytes=1000-', 'bytes=1000-2000', 'bytes=-0']) {
      assert.deepEqual(choose(header), unsatisfiable, header);
    }
    assert.deepEqual(choose('bytes=0-0', { size: 0 }), unsatisfiable);
    assert.deepEqual(choose('bytes=-1', { size: 0 }), unsatisfiable);
  });

  it('ignores what a server may ignore and sends the whole file', () => {
    for (const header of [
      undefined,
      'items=0-9',
      'bytes=0-9,20-29',
      'bytes=9-0',
      'bytes=a-b',
      'bytes=-',
      'bytes=1-2-3',
      'bytes 0-9',
      'bytes=0x10-',
    ]) {
      assert.deepEqual(choose(header), whole, String(header));
    }
  });

  it('honours If-Range only when it matches the current ETag or Last-Modified', () => {
    assert.deepEqual(choose('bytes=0-9', { ifRange: '"abc"' }), part(0, 9));
    assert.deepEqual(choose('bytes=0-9', { ifRange: base.lastModified }), part(0, 9));
    assert.deepEqual(choose('bytes=0-9', { ifRange: '"old"' }), whole);
  });
});
