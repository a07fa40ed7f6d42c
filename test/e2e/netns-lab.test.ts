// Goal: the lab isolates and cleans up after itself: namespaces carry the lab's unique id,
// two namespaces joined by a veth pair reach each other and nothing else, and destroy() ends
// every process inside (including one that daemonized away from its parent) and deletes every
// namespace, so a failed test leaves nothing behind.
// Method: a real lab; ping across the veth; a backgrounded sleep started through `sh -c ... &`
// (its PID read from its output) stands in for a forking daemon; after destroy() the test
// checks `ip netns list` and signals 0 to the PIDs.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { labNamespaces, labPrefix } from '../../cluster/netns-lab.js';
import { NetnsLab, requireCommands } from '../support/netns.js';

const run = promisify(execFile);

/** Running (a zombie waiting for a reaper counts as gone). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

describe('netns lab', () => {
  it('connects its namespaces, then removes them and every process inside', async () => {
    await requireCommands({ ip: 'iproute2', busybox: 'busybox-static', sleep: 'coreutils' });
    const lab = await NetnsLab.create();
    let pids: number[] = [];
    try {
      assert.match(lab.id, new RegExp(`^${labPrefix}[0-9a-f]{6}$`));
      const a = await lab.addNamespace('a');
      const b = await lab.addNamespace('b');
      assert.deepEqual((await labNamespaces(lab.id)).sort(), [a, b].sort());
      await lab.connect(
        { ns: a, ifname: 'v0', addresses: ['10.77.9.1/24'] },
        { ns: b, ifname: 'v0', addresses: ['10.77.9.2/24'] },
      );
      const ping = await lab.run(a, ['busybox', 'ping', '-c', '1', '-W', '5', '10.77.9.2']);
      assert.equal(ping.code, 0, ping.stdout + ping.stderr);
      // Only the lab's own link: no default route out of the namespace.
      const routes = await lab.check(a, ['ip', '-4', 'route', 'show']);
      assert.doesNotMatch(routes, /default/);

      const direct = lab.spawn(b, ['sleep', '600']);
      const forked = await lab.check(b, ['sh', '-c', 'sleep 600 >/dev/null 2>&1 & echo $!']);
      pids = [direct.pid ?? -1, Number(forked.trim())];
      assert.ok(
        pids.every((pid) => pid > 0 && alive(pid)),
        `started ${pids.join(', ')}`,
      );
    } finally {
      await lab.destroy();
    }
    assert.deepEqual(await labNamespaces(lab.id), []);
    const { stdout } = await run('ip', ['netns', 'list']);
    assert.doesNotMatch(stdout, new RegExp(lab.id));
    // SIGKILL is delivered at once, but the orphan's exit is only visible once it is scheduled.
    const deadline = Date.now() + 5000;
    while (pids.some(alive) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(pids.filter(alive), []);
  });
});
