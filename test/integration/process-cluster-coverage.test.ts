// Goal: test/support/process-cluster.ts loses no coverage unawares. Its nodes run without
// coverage unless a test turns it on, since a SIGKILLed process writes none; a node stopped
// gracefully, or one that exits by itself, would have written some, so ProcessCluster refuses
// the first and fails destroy() for the second.
// Method: real `slipway server` processes; the env a node got is read from /proc.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { ProcessCluster } from '../support/process-cluster.js';

/** The NODE_V8_COVERAGE a running process got, or undefined when its env lacks it. */
function coverageVariable(pid: number): string | undefined {
  const line = readFileSync(`/proc/${pid}/environ`, 'utf8')
    .split('\0')
    .find((v) => v.startsWith('NODE_V8_COVERAGE='));
  return line?.slice('NODE_V8_COVERAGE='.length);
}

test('a node without coverage collects none, and is not stopped gracefully', async () => {
  const cluster = new ProcessCluster(1);
  try {
    cluster.startAll();
    const node = cluster.nodes[0]!;
    await cluster.waitForLeader();
    // Empty: Node would hand an absent NODE_V8_COVERAGE down from the test process under c8.
    assert.equal(coverageVariable(node.proc!.pid!), '');
    await assert.rejects(cluster.kill(node, 'SIGTERM'), /n1 is stopped with SIGTERM.*runs without coverage/);
    assert.notEqual(node.proc, null, 'the refused stop left the node running');
    cluster.coverage = true;
    await cluster.kill(node);
    cluster.start(node);
    assert.equal(coverageVariable(node.proc!.pid!), process.env['NODE_V8_COVERAGE']);
    await cluster.waitForLeader();
    await cluster.kill(node, 'SIGTERM');
  } finally {
    await cluster.destroy();
  }
});

test('destroy() names a node that exited by itself while running without coverage', async () => {
  // A flag the node refuses: it exits 2 at its start.
  const cluster = new ProcessCluster(1, ['--no-such-flag']);
  const node = cluster.nodes[0]!;
  cluster.start(node);
  const proc = node.proc!;
  const code = await new Promise<number | null>((resolve) => {
    if (proc.exitCode !== null) resolve(proc.exitCode);
    else proc.once('exit', (c) => resolve(c));
  });
  assert.equal(code, 2);
  node.proc = null;
  await assert.rejects(
    cluster.destroy(),
    /nodes exited by themselves while running without coverage.*n1 \(exit 2\)/,
  );
});
