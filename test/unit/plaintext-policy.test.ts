// Goal: plaintext stays on loopback. Which hosts count as loopback, and the server configuration
// that --insecure refuses (any API, raft or peer address beyond loopback) unless
// --insecure-allow-network is given, which in turn is refused without --insecure.
// Method: the pure predicates and validateServerConfig on literal configurations.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validateServerConfig } from '../../src/node/config.js';
import {
  isLoopbackAddress,
  isLoopbackHost,
  plaintextSecretRefusal,
} from '../../src/platform/plaintext-policy.js';

test('loopback hosts: 127.0.0.0/8, ::1 and localhost; nothing else', () => {
  for (const host of ['127.0.0.1', '127.9.8.7', 'localhost', 'LocalHost', '::1', '[::1]', '::ffff:127.0.0.1'])
    assert.equal(isLoopbackHost(host), true, host);
  for (const host of [
    '0.0.0.0',
    '10.0.0.1',
    '128.0.0.1',
    '::',
    '[::]',
    'example.com',
    'localhost.example',
    '',
  ])
    assert.equal(isLoopbackHost(host), false, host);
  assert.equal(isLoopbackAddress('127.0.0.1:7001'), true);
  assert.equal(isLoopbackAddress('[::1]:7001'), true);
  assert.equal(isLoopbackAddress('0.0.0.0:7001'), false);
  assert.equal(isLoopbackAddress('not an address'), false);
});

test('a secret may go in plaintext only when every server is loopback', () => {
  assert.equal(plaintextSecretRefusal(['127.0.0.1:7001', 'localhost:7002'], 'the token'), undefined);
  const refusal = plaintextSecretRefusal(['127.0.0.1:7001', '10.0.0.2:7001'], 'the token');
  assert.match(refusal ?? '', /refusing to send the token in plaintext to 10\.0\.0\.2:7001/);
  assert.match(refusal ?? '', /--ca FILE/);
  assert.match(refusal ?? '', /--insecure-allow-network/);
});

const insecure = (over: Record<string, unknown>): Record<string, unknown> => ({
  id: 'n1',
  dataDir: '/var/lib/slipway',
  raftAddr: '127.0.0.1:7000',
  apiAddr: '127.0.0.1:7001',
  peers: [{ id: 'n1', addr: '127.0.0.1:7000' }],
  insecure: true,
  ...over,
});

test('--insecure accepts loopback and refuses any API, raft or peer address beyond it', () => {
  assert.equal(validateServerConfig(insecure({})).insecure, true);
  const refused: [Record<string, unknown>, RegExp][] = [
    [{ apiAddr: '0.0.0.0:7001' }, /apiAddr: 0\.0\.0\.0:7001 is not a loopback address/],
    [
      { raftAddr: '10.0.0.1:7000', peers: [{ id: 'n1', addr: '10.0.0.1:7000' }] },
      /raftAddr: 10\.0\.0\.1:7000/,
    ],
    [
      {
        peers: [
          { id: 'n1', addr: '127.0.0.1:7000' },
          { id: 'n2', addr: '10.0.0.2:7000' },
        ],
      },
      /peers\.1: 10\.0\.0\.2:7000 is not a loopback address/,
    ],
  ];
  for (const [over, message] of refused) {
    assert.throws(() => validateServerConfig(insecure(over)), message);
    assert.throws(() => validateServerConfig(insecure(over)), /--insecure-allow-network/);
    const allowed = validateServerConfig(insecure({ ...over, insecureAllowNetwork: true }));
    assert.equal(allowed.insecureAllowNetwork, true);
  }
});

test('an address that does not parse gets its own error, not "not a loopback address"', () => {
  const over = {
    apiAddr: '127.0.0.1:0',
    raftAddr: '127.0.0.1:0',
    peers: [{ id: 'n1', addr: '127.0.0.1:0' }],
  };
  assert.throws(
    () => validateServerConfig(insecure(over)),
    (err: Error) => {
      assert.match(err.message, /apiAddr: must be HOST:PORT with a port 1-65535/);
      assert.doesNotMatch(err.message, /loopback/);
      return true;
    },
  );
});

test('--insecure-allow-network without --insecure is refused', () => {
  const withTls = insecure({ insecure: false, tlsDir: '/etc/slipway/pki', insecureAllowNetwork: true });
  assert.throws(
    () => validateServerConfig(withTls),
    /insecureAllowNetwork: --insecure-allow-network goes with --insecure/,
  );
});
