// Goal: failed authentications are limited per source address, in bounded memory, and a flood
// of bad calls from one address never refuses a good call from another.
// Method: AuthFailureLimiter on an injected clock; then an Authenticator (auth on, empty state)
// driven with fake calls whose peers differ, counting the linearizable reads it asks for.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Metadata, status } from '@grpc/grpc-js';
import { AuthFailureLimiter, sourceAddress } from '../../src/api/auth-failure-limiter.js';
import { Authenticator, sha256Hex, type AuthCall } from '../../src/api/auth.js';
import { ApiError } from '../../src/api/errors.js';
import { ControlState } from '../../src/state/control/control-state.js';

function clock(): { nowMs: () => number; advance: (ms: number) => void } {
  let now = 1_000_000;
  return { nowMs: () => now, advance: (ms) => (now += ms) };
}

describe('AuthFailureLimiter', () => {
  it('refuses an address after failuresMax failures and earns one back per window / failuresMax', () => {
    const t = clock();
    const limiter = new AuthFailureLimiter({ failuresMax: 3, windowMs: 30_000 }, t.nowMs);
    for (let i = 0; i < 3; i++) {
      assert.equal(limiter.blockedForMs('10.0.0.1'), 0);
      limiter.failed('10.0.0.1');
    }
    assert.equal(limiter.blockedForMs('10.0.0.1'), 10_000);
    assert.equal(limiter.blockedForMs('10.0.0.2'), 0, 'another address is unaffected');
    t.advance(9_999);
    assert.ok(limiter.blockedForMs('10.0.0.1') > 0);
    t.advance(1);
    assert.equal(limiter.blockedForMs('10.0.0.1'), 0);
    limiter.failed('10.0.0.1');
    assert.equal(limiter.blockedForMs('10.0.0.1'), 10_000, 'one failure earned, one spent');
    t.advance(60_000);
    assert.equal(limiter.blockedForMs('10.0.0.1'), 0);
  });

  it('tracks at most addressesMax addresses, evicting the least recently failed', () => {
    const t = clock();
    const limiter = new AuthFailureLimiter({ failuresMax: 1, windowMs: 60_000, addressesMax: 3 }, t.nowMs);
    for (const a of ['a', 'b', 'c']) limiter.failed(a);
    limiter.failed('a');
    limiter.failed('d');
    assert.equal(limiter.size, 3);
    assert.equal(limiter.blockedForMs('b'), 0, 'b failed least recently and was evicted');
    for (const a of ['a', 'c', 'd']) assert.ok(limiter.blockedForMs(a) > 0, `${a} is still tracked`);
    for (let i = 0; i < 1000; i++) limiter.failed(`x${String(i)}`);
    assert.equal(limiter.size, 3);
  });

  it('reads the source address from a grpc-js peer', () => {
    assert.equal(sourceAddress('192.0.2.7:51234'), '192.0.2.7');
    assert.equal(sourceAddress('::ffff:127.0.0.1:40000'), '::ffff:127.0.0.1');
    assert.equal(sourceAddress('2001:db8::1:443'), '2001:db8::1');
  });
});

describe('Authenticator with failure limits', () => {
  const adminToken = 'a-bootstrap-admin-token';

  function call(peer: string, token: string): AuthCall {
    const metadata = new Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    return { metadata, getPeer: () => peer };
  }

  it('refuses a flooding address unchecked while another address is served', async () => {
    const t = clock();
    let reads = 0;
    const auth = new Authenticator(
      new ControlState(),
      {
        enabled: true,
        bootstrapAdminSha256: sha256Hex(adminToken),
        failures: new AuthFailureLimiter({ failuresMax: 5, windowMs: 60_000 }, t.nowMs),
      },
      () => {
        reads++;
        return Promise.resolve();
      },
    );
    const codeOf = (p: Promise<unknown>): Promise<number | undefined> =>
      p.then(
        () => undefined,
        (e: unknown) => (e instanceof ApiError ? e.code : -1),
      );
    for (let i = 0; i < 5; i++)
      assert.equal(
        await codeOf(auth.operator(call('198.51.100.9:1000', 'forged'), 'viewer')),
        status.UNAUTHENTICATED,
      );
    assert.equal(reads, 5, 'each unknown token was looked up after a linearizable read');
    for (let i = 0; i < 100; i++) {
      const code = await codeOf(auth.operator(call(`198.51.100.9:${String(2000 + i)}`, 'forged'), 'viewer'));
      assert.equal(code, status.RESOURCE_EXHAUSTED);
    }
    assert.equal(reads, 5, 'refused calls cost no read');
    const refused = await auth.operator(call('198.51.100.9:1', adminToken), 'admin').catch((e: unknown) => e);
    assert.ok(refused instanceof ApiError);
    assert.match(refused.message, /too many failed authentications from 198\.51\.100\.9 .*authFailuresMax/);
    const good = await auth.operator(call('203.0.113.4:1', adminToken), 'admin');
    assert.equal(good.role, 'admin');
    const workerMd = new Metadata();
    workerMd.set('x-worker-id', 'hw-1');
    workerMd.set('authorization', 'Bearer nope');
    const worker = auth.worker({ metadata: workerMd, getPeer: () => '198.51.100.9:3' });
    assert.equal(await codeOf(worker), status.RESOURCE_EXHAUSTED, 'worker streams are limited too');
    t.advance(12_000);
    assert.equal((await auth.operator(call('198.51.100.9:1', adminToken), 'admin')).role, 'admin');
  });

  it('counts a call without a token as a failure', async () => {
    const auth = new Authenticator(
      new ControlState(),
      {
        enabled: true,
        bootstrapAdminSha256: sha256Hex(adminToken),
        failures: new AuthFailureLimiter({ failuresMax: 1, windowMs: 60_000 }),
      },
      () => Promise.resolve(),
    );
    const md = new Metadata();
    await assert.rejects(auth.operator({ metadata: md, getPeer: () => '192.0.2.1:5' }, 'viewer'));
    await assert.rejects(
      auth.operator(call('192.0.2.1:6', adminToken), 'viewer'),
      (e: unknown) => e instanceof ApiError && e.code === status.RESOURCE_EXHAUSTED,
    );
  });
});
