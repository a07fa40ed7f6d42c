// Goal: `slipway bootstrap --node` takes ID=HOST[,HOST...] and nothing else: each host an IP
// address or a DNS name, a port refused with the host to give instead, a node without addresses
// refused with an example naming the VIP, and a stray word refused rather than made a node.
// Method: the parser on its own, and the real CLI for the stray word.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { parseNodeSpec } from '../../src/cli/commands/bootstrap.js';
import { runSlipway } from '../support/process-cluster.js';

const dir = mkdtempSync(join(tmpdir(), 'slipway-bootstrap-node-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('a node with IP addresses (v4 and v6) and DNS names', () => {
  assert.deepEqual(parseNodeSpec('n1=10.0.0.1,10.0.0.100,prov1.example,fd00::1'), {
    id: 'n1',
    hosts: ['10.0.0.1', '10.0.0.100', 'prov1.example', 'fd00::1'],
  });
  assert.deepEqual(parseNodeSpec('node-2.a=prov2.example.'), { id: 'node-2.a', hosts: ['prov2.example.'] });
});

test('what is refused, and what the refusal says', () => {
  const refusals: [string, RegExp][] = [
    ['n1', /name the addresses node n1 is reached at, and the VIP: n1=10\.0\.0\.1,10\.0\.0\.100/],
    ['n1=', /name the addresses node n1 is reached at/],
    [
      'n1=10.0.0.1:7001',
      /"10\.0\.0\.1:7001" has a port: a certificate names hosts, not ports; give 10\.0\.0\.1$/,
    ],
    ['n1=prov1.example:7001', /has a port.*give prov1\.example$/],
    ['n1=not_a_host!!', /"not_a_host!!" is neither an IP address nor a DNS name/],
    ['n1=10.0.0.1,,10.0.0.2', /an empty address/],
    ['n1=-bad.example', /neither an IP address nor a DNS name/],
    ['=10.0.0.1', /"" is not a valid node id/],
    ['n 1=10.0.0.1', /"n 1" is not a valid node id/],
  ];
  for (const [spec, message] of refusals) assert.throws(() => parseNodeSpec(spec), message, spec);
});

test('a stray word after --node is refused, not made a node; nothing is written', async () => {
  const pki = join(dir, 'pki');
  const r = await runSlipway(['bootstrap', '--dir', pki, '--node', 'n1=10.0.0.1', 'extra']);
  assert.equal(r.code, 2, r.stdout);
  assert.match(r.stderr, /too many arguments/);
  const again = await runSlipway(['bootstrap', '--dir', pki, '--node', 'n1=10.0.0.1', '--node', 'n2']);
  assert.equal(again.code, 2);
  assert.match(again.stderr, /--node n2: name the addresses/);
  const made = await runSlipway([
    'bootstrap',
    '--dir',
    pki,
    '--node',
    'n1=10.0.0.1,10.0.0.100',
    '--node',
    'n2=10.0.0.2',
  ]);
  assert.equal(made.code, 0, made.stderr);
  assert.match(made.stdout, /node n2: /);
});
