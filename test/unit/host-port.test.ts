// Goal: one HOST:PORT rule for every address the product takes (flags, config, API requests,
// the balancer spec): names, IPv4 and bracketed IPv6 hosts with a port 1-65535, nothing else.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isHostPort, parseHostPort } from '../../src/platform/host-port.js';

test('HOST:PORT splits into its host and port', () => {
  assert.deepEqual(parseHostPort('127.0.0.1:7001'), { host: '127.0.0.1', port: 7001 });
  assert.deepEqual(parseHostPort('node-1.lab:65535'), { host: 'node-1.lab', port: 65_535 });
  assert.deepEqual(parseHostPort('[::1]:1'), { host: '[::1]', port: 1 });
  assert.deepEqual(parseHostPort('a:80'), { host: 'a', port: 80 });
  assert.deepEqual(parseHostPort('[::ffff:10.0.0.1]:67'), { host: '[::ffff:10.0.0.1]', port: 67 });
});

test('anything else is refused', () => {
  for (const bad of [
    '',
    '127.0.0.1',
    ':7001',
    '127.0.0.1:',
    '127.0.0.1:0',
    '127.0.0.1:65536',
    '127.0.0.1:123456',
    '::1:7001',
    '[::1]',
    'a b:7001',
    'host:7001 ',
    'host:-1',
    'http://host:7001',
    '-node:7001',
    'node.:7001',
  ]) {
    assert.equal(parseHostPort(bad), undefined, bad);
    assert.equal(isHostPort(bad), false, bad);
  }
});
