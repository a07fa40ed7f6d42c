// Goal: lb/haproxy.ts renders a configuration HAProxy 2.6 accepts, with the routing the
// balancer promises (h2c in and out, a consistent hash on x-worker-id, grpc health checks,
// retries to another node only for failed connections, long stream timeouts), and refuses bad
// input naming the field.
// Method: the output for 3 nodes is compared with a golden file (UPDATE_GOLDEN=1 rewrites it;
// review the diff) and with the lines each promise rests on; then the real `haproxy -c` checks
// it, and must refuse a broken file with its own words. Bad specs are a table of input and the
// error each must give.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import type { BalancerSpec } from '../../src/model/balancer-spec.js';
import { BalancerSpecError } from '../../src/model/balancer-spec.js';
import { haproxyServerId, renderHaproxyConfig } from '../../lb/haproxy.js';
import { checkHaproxyConfig, findHaproxy, HaproxyError } from '../../lb/haproxy-process.js';

const golden = new URL('./testdata/lb-haproxy-3-nodes.cfg', import.meta.url);
const update = process.env['UPDATE_GOLDEN'] === '1';
const dir = mkdtempSync(join(tmpdir(), 'slipway-lb-unit-'));

const threeNodes: BalancerSpec = {
  listenAddr: '127.0.0.1:7000',
  nodes: [
    { id: 'n1', apiAddr: '127.0.0.1:7001' },
    { id: 'n2', apiAddr: '127.0.0.1:7002' },
    { id: 'n3', apiAddr: '127.0.0.1:7003' },
  ],
  statsAddr: '127.0.0.1:7090',
};

after(() => rmSync(dir, { recursive: true, force: true }));

/** The installed haproxy; the suite fails rather than skips without it (.ci/run installs it). */
function haproxy(): string {
  const bin = findHaproxy();
  assert.ok(bin !== undefined, 'haproxy is not installed: apt-get install haproxy');
  return bin;
}

describe('the rendered configuration', () => {
  const text = renderHaproxyConfig(threeNodes);

  test('matches the golden file for 3 nodes', () => {
    if (update) writeFileSync(golden, text);
    assert.equal(text, readFileSync(golden, 'utf8'));
  });

  test('routes gRPC over h2c with a consistent hash on x-worker-id', () => {
    const lines = text.split('\n').map((l) => l.trim());
    for (const line of [
      'bind 127.0.0.1:7000 proto h2',
      'balance hdr(x-worker-id)',
      'hash-type consistent',
      'retries 2',
      'option redispatch 1',
      'timeout client 1h',
      'timeout server 1h',
      'timeout tunnel 1h',
      'bind 127.0.0.1:7090',
    ]) {
      assert.ok(lines.includes(line), `missing "${line}"`);
    }
    const servers = lines.filter((l) => l.startsWith('server '));
    assert.deepEqual(servers, [
      'server n1 127.0.0.1:7001 id 384068 proto h2 check inter 1000ms fall 2 rise 2 on-marked-down shutdown-sessions',
      'server n2 127.0.0.1:7002 id 385325 proto h2 check inter 1000ms fall 2 rise 2 on-marked-down shutdown-sessions',
      'server n3 127.0.0.1:7003 id 384906 proto h2 check inter 1000ms fall 2 rise 2 on-marked-down shutdown-sessions',
    ]);
    // The check sends a grpc.health.v1 Check and passes on SERVING (status 1) only.
    assert.match(text, /tcp-check send-binary 505249202a20485454502f322e30[0-9a-f]+/);
    assert.match(text, /tcp-check expect min-recv 0 binary 00000000020801 /);
  });

  test('has no status page unless asked, and takes the health check timing given', () => {
    const { statsAddr: _, ...noStats } = threeNodes;
    const plain = renderHaproxyConfig({ ...noStats, healthCheck: { intervalMs: 250, fall: 1, rise: 3 } });
    assert.doesNotMatch(plain, /stats/);
    assert.match(plain, /server n2 127\.0\.0\.1:7002 id 385325 proto h2 check inter 250ms fall 1 rise 3 /);
  });

  test('with TLS: the PEM served to clients, each node verified against the CA, checks over TLS too', () => {
    const tls = {
      certFile: '/pki/n1.crt',
      keyFile: '/pki/n1.key',
      pemFile: '/pki/n1.pem',
      caFile: '/pki/ca.crt',
    };
    const lines = renderHaproxyConfig({ ...threeNodes, tls })
      .split('\n')
      .map((l) => l.trim());
    assert.ok(lines.includes('bind 127.0.0.1:7000 ssl crt /pki/n1.pem alpn h2'));
    assert.ok(lines.includes('tcp-check connect ssl alpn h2'));
    assert.ok(
      lines.includes(
        'server n1 127.0.0.1:7001 id 384068 ssl verify required ca-file /pki/ca.crt alpn h2 check inter 1000ms fall 2 rise 2 on-marked-down shutdown-sessions',
      ),
    );
    assert.ok(!lines.some((l) => l.includes('proto h2')), 'no h2c anywhere');
  });

  test("a server's id comes from its member id alone, not from its place in the list", () => {
    const reversed = renderHaproxyConfig({ ...threeNodes, nodes: [...threeNodes.nodes].reverse() });
    const line = (t: string, id: string): string | undefined =>
      t.split('\n').find((l) => l.trim().startsWith(`server ${id} `));
    for (const id of ['n1', 'n2', 'n3']) assert.equal(line(reversed, id), line(text, id));
    assert.equal(haproxyServerId('n1'), 384068);
    for (const id of ['a', 'node-with-a-long-name', 'n64']) {
      const n = haproxyServerId(id);
      assert.ok(Number.isInteger(n) && n >= 1 && n < 2 ** 20, `${id} got ${n}`);
    }
  });

  test('no runtime socket unless asked; with one, an admin-level stats socket in global', async () => {
    assert.doesNotMatch(text, /global|stats socket/);
    const withSocket = renderHaproxyConfig({ ...threeNodes, runtimeSocket: join(dir, 'admin.sock') });
    const lines = withSocket.split('\n');
    assert.equal(lines[1], 'global');
    assert.equal(
      lines[2],
      `  stats socket ${join(dir, 'admin.sock')} mode 660 level admin expose-fd listeners`,
    );
    const file = join(dir, 'with-socket.cfg');
    writeFileSync(file, withSocket);
    await checkHaproxyConfig(haproxy(), file);
  });

  test('haproxy -c accepts it', async () => {
    const file = join(dir, 'three-nodes.cfg');
    writeFileSync(file, text);
    await checkHaproxyConfig(haproxy(), file);
  });

  test('haproxy -c accepts IPv6 and host names', async () => {
    const file = join(dir, 'v6.cfg');
    writeFileSync(
      file,
      renderHaproxyConfig({
        listenAddr: '[::1]:7000',
        nodes: [
          { id: 'a', apiAddr: '[::1]:7001' },
          { id: 'b', apiAddr: 'localhost:7002' },
        ],
      }),
    );
    await checkHaproxyConfig(haproxy(), file);
  });

  test('a file HAProxy refuses fails with its own message', async () => {
    const file = join(dir, 'broken.cfg');
    writeFileSync(file, text.replace('hash-type consistent', 'hash-type sideways'));
    await assert.rejects(checkHaproxyConfig(haproxy(), file), (err: unknown) => {
      assert.ok(err instanceof HaproxyError);
      assert.match(err.message, /broken\.cfg/);
      assert.match(err.message, /broken\.cfg:\d+\] : 'hash-type' only supports 'consistent'/);
      assert.doesNotMatch(err.message, /NOTICE/, 'only the complaints, not the banner');
      return true;
    });
  });
});

describe('bad input', () => {
  const node = (id: string, apiAddr: string): { id: string; apiAddr: string } => ({ id, apiAddr });
  const cases: { name: string; spec: BalancerSpec; error: RegExp }[] = [
    {
      name: 'a listen address without a port',
      spec: { ...threeNodes, listenAddr: '127.0.0.1' },
      error: /listenAddr "127\.0\.0\.1" must be HOST:PORT/,
    },
    {
      name: 'a port out of range',
      spec: { ...threeNodes, listenAddr: '127.0.0.1:70000' },
      error: /listenAddr "127\.0\.0\.1:70000" must be HOST:PORT with a port 1-65535/,
    },
    { name: 'no nodes', spec: { listenAddr: '127.0.0.1:7000', nodes: [] }, error: /at least one node/ },
    {
      name: 'a TLS file whose path would break the configuration line',
      spec: {
        ...threeNodes,
        tls: {
          certFile: '/pki/n1.crt',
          keyFile: '/pki/n1.key',
          pemFile: '/pki/n1 x.pem',
          caFile: '/pki/ca.crt',
        },
      },
      error: /tls\.pemFile "\/pki\/n1 x\.pem" must be an absolute path/,
    },
    {
      name: 'a relative TLS path',
      spec: {
        ...threeNodes,
        tls: { certFile: '/pki/n1.crt', keyFile: '/pki/n1.key', pemFile: '/pki/n1.pem', caFile: 'ca.crt' },
      },
      error: /tls\.caFile "ca\.crt" must be an absolute path/,
    },
    {
      name: 'a node id HAProxy cannot take as a server name',
      spec: { ...threeNodes, nodes: [node('n 1', '127.0.0.1:7001')] },
      error: /nodes\[0\]\.id "n 1" must be 1-63 letters/,
    },
    {
      name: 'the same id twice',
      spec: { ...threeNodes, nodes: [node('n1', '127.0.0.1:7001'), node('n1', '127.0.0.1:7002')] },
      error: /nodes\[1\]\.id "n1" appears twice/,
    },
    {
      name: 'an API address with a space in it',
      spec: { ...threeNodes, nodes: [node('n1', '127.0.0.1 :7001')] },
      error: /nodes\[0\]\.apiAddr "127\.0\.0\.1 :7001" must be HOST:PORT/,
    },
    {
      name: 'two nodes on one address',
      spec: { ...threeNodes, nodes: [node('n1', '127.0.0.1:7001'), node('n2', '127.0.0.1:7001')] },
      error: /nodes\[1\]\.apiAddr "127\.0\.0\.1:7001" is already used by nodes\[0\]\.apiAddr/,
    },
    {
      name: 'a node on the listen address (a loop)',
      spec: { ...threeNodes, nodes: [node('n1', '127.0.0.1:7000')] },
      error: /nodes\[0\]\.apiAddr "127\.0\.0\.1:7000" is already used by listenAddr/,
    },
    {
      name: 'the status page on a node address',
      spec: { ...threeNodes, statsAddr: '127.0.0.1:7003' },
      error: /statsAddr "127\.0\.0\.1:7003" is already used by nodes\[2\]\.apiAddr/,
    },
    {
      name: 'two member ids that get the same server id (a hash collision)',
      spec: { ...threeNodes, nodes: [node('n2926', '127.0.0.1:7001'), node('n5940', '127.0.0.1:7002')] },
      error: /nodes "n2926" and "n5940" get the same HAProxy server id 910372; give one another member id/,
    },
    {
      name: 'a relative runtime socket path',
      spec: { ...threeNodes, runtimeSocket: 'haproxy.sock' },
      error: /runtimeSocket "haproxy\.sock" must be an absolute path of at most 90/,
    },
    {
      name: 'a runtime socket path too long for a UNIX socket',
      spec: { ...threeNodes, runtimeSocket: `/${'a'.repeat(95)}` },
      error: /runtimeSocket "\/a+" must be an absolute path of at most 90/,
    },
    {
      name: 'a check interval below 100 ms',
      spec: { ...threeNodes, healthCheck: { intervalMs: 10, fall: 2, rise: 2 } },
      error: /healthCheck\.intervalMs must be a whole number from 100 to 60000, got 10/,
    },
    {
      name: 'a fall of zero',
      spec: { ...threeNodes, healthCheck: { intervalMs: 1000, fall: 0, rise: 2 } },
      error: /healthCheck\.fall must be a whole number from 1 to 10, got 0/,
    },
  ];
  for (const c of cases) {
    test(`refuses ${c.name}`, () => {
      assert.throws(
        () => renderHaproxyConfig(c.spec),
        (err: unknown) => err instanceof BalancerSpecError && c.error.test(err.message),
      );
    });
  }
});
