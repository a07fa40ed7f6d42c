// Goal: every member's API address is answered by any node: recorded ones as they are, this
// node's own from its configuration, the rest asked of the member once and kept; a member that
// does not answer is not asked again on every call, and keeps the address it last named.
// Method: MemberAddresses with a scripted `ask` and a test clock.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MemberAddresses } from '../../src/api/member-addresses.js';
import type { Member } from '../../src/raft/core/types.js';

const n1: Member = { id: 'n1', addr: '10.0.0.1:7001', apiAddr: '' };
const n2: Member = { id: 'n2', addr: '10.0.0.2:7001', apiAddr: '' };
const n3: Member = { id: 'n3', addr: '10.0.0.3:7001', apiAddr: '10.0.0.3:7000' };

function harness(answers: Map<string, string | Error>) {
  let now = 0;
  const asked: string[] = [];
  const addresses = new MemberAddresses({
    self: { id: 'n1', apiAddr: '10.0.0.1:7000' },
    ask: (m) => {
      asked.push(m.id);
      const a = answers.get(m.id);
      return a instanceof Error ? Promise.reject(a) : Promise.resolve(a);
    },
    now: () => now,
  });
  return { addresses, asked, advance: (ms: number) => (now += ms) };
}

describe('member API addresses', () => {
  test('recorded, own and learned addresses; each member asked once while its answer holds', async () => {
    const h = harness(new Map([['n2', '10.0.0.2:7000']]));
    const members = await h.addresses.filled([n1, n2, n3]);
    assert.deepEqual(
      members.map((m) => m.apiAddr),
      ['10.0.0.1:7000', '10.0.0.2:7000', '10.0.0.3:7000'],
    );
    await Promise.all([h.addresses.filled([n2]), h.addresses.filled([n2])]);
    assert.deepEqual(h.asked, ['n2'], 'only the member with no recorded address, once');
    h.advance(60_001);
    await h.addresses.filled([n2]);
    assert.deepEqual(h.asked, ['n2', 'n2'], 'asked again once the learned address is old');
  });

  test('concurrent asks share one question', async () => {
    const h = harness(new Map([['n2', '10.0.0.2:7000']]));
    const [a, b] = await Promise.all([h.addresses.apiAddrOf(n2), h.addresses.apiAddrOf(n2)]);
    assert.equal(a, '10.0.0.2:7000');
    assert.equal(b, a);
    assert.equal(h.asked.length, 1);
  });

  test('a member that stops answering keeps its last address and is asked again only after a pause', async () => {
    const answers = new Map<string, string | Error>([['n2', '10.0.0.2:7000']]);
    const h = harness(answers);
    assert.equal(await h.addresses.apiAddrOf(n2), '10.0.0.2:7000');
    answers.set('n2', new Error('deadline exceeded'));
    h.advance(60_001);
    assert.equal(await h.addresses.apiAddrOf(n2), '10.0.0.2:7000', 'the last address it named');
    assert.equal(await h.addresses.apiAddrOf(n2), '10.0.0.2:7000');
    assert.equal(h.asked.length, 2, 'not asked again within the pause');
    h.advance(5_001);
    await h.addresses.apiAddrOf(n2);
    assert.equal(h.asked.length, 3);
  });

  test('a member never heard from has no address, and an empty answer is no address', async () => {
    const h = harness(new Map<string, string | Error>([['n2', new Error('unavailable')]]));
    assert.equal(await h.addresses.apiAddrOf(n2), '');
    const h2 = harness(new Map());
    assert.equal(await h2.addresses.apiAddrOf(n2), '');
  });
});
