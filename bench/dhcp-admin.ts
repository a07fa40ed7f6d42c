// The DHCP benchmark's client for the cluster's API, run inside a lab namespace: Node cannot
// enter a network namespace in-process, and the nodes' API addresses exist only inside the lab.
// One process does what would otherwise take one `slipway` CLI start per machine.
//
//   node --import tsx bench/dhcp-admin.ts status   ADDR,ADDR,...   one JSON line per node
//   node --import tsx bench/dhcp-admin.ts register ADDR,ADDR,... FILE
//
// `register` creates (or replaces) every hardware document in FILE (a JSON array), then waits
// until every node has applied all of them, and prints one JSON line: created, elapsed_ms.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { ClusterClient } from '../src/cli/index.js';
import { allItems } from '../src/platform/pages.js';

/** One node's view, as `status` prints it. */
export interface NodeStatusLine {
  readonly addr: string;
  readonly id: string | null;
  readonly leader: string | null;
  readonly commit: number | null;
  readonly applied: number | null;
  readonly error: string | null;
}

const callTimeoutMs = 5000;
/** Hardware creates in flight at once. */
const registerConcurrency = 16;
/** Creates plus the wait for every node to apply them. */
const registerTimeoutMs = 120_000;
const appliedPollMs = 200;

async function status(addrs: readonly string[]): Promise<NodeStatusLine[]> {
  return Promise.all(
    addrs.map(async (addr): Promise<NodeStatusLine> => {
      const client = new ClusterClient([addr], callTimeoutMs);
      try {
        const s = await client.call('status', {});
        return { addr, id: s.id, leader: s.leader, commit: s.commit, applied: s.applied, error: null };
      } catch (err) {
        const error = err instanceof Error ? err.message : String(err);
        return { addr, id: null, leader: null, commit: null, applied: null, error };
      } finally {
        client.close();
      }
    }),
  );
}

async function register(addrs: readonly string[], file: string): Promise<void> {
  const documents = JSON.parse(readFileSync(file, 'utf8')) as unknown[];
  if (!Array.isArray(documents)) throw new Error(`${file} must hold a JSON array of hardware documents`);
  const startMs = Date.now();
  const deadlineMs = startMs + registerTimeoutMs;
  const client = new ClusterClient(addrs, callTimeoutMs);
  try {
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < documents.length && Date.now() < deadlineMs) {
        const document = documents[next++];
        await client.control('hardwareCreate', { documentJson: JSON.stringify(document), replace: true });
      }
    };
    await Promise.all(Array.from({ length: registerConcurrency }, worker));
    if (next < documents.length) throw new Error(`created only ${next} of ${documents.length} in time`);
  } finally {
    client.close();
  }
  // Every node, not just the leader: a new leader must answer from the same inventory.
  for (const addr of addrs) {
    const one = new ClusterClient([addr], callTimeoutMs);
    try {
      for (;;) {
        const listed = (await hardwareOf(one)).length;
        if (listed >= documents.length) break;
        if (Date.now() >= deadlineMs)
          throw new Error(`${addr} applied ${listed} of ${documents.length} machines`);
        await new Promise((resolve) => setTimeout(resolve, appliedPollMs));
      }
    } finally {
      one.close();
    }
  }
  process.stdout.write(
    `${JSON.stringify({ created: documents.length, elapsed_ms: Date.now() - startMs })}\n`,
  );
}

/** Every machine a node holds as applied there (a local read), each page of the list. */
export function hardwareOf(client: ClusterClient): Promise<string[]> {
  return allItems(
    (token) => client.control('hardwareList', { local: true, continue: token }),
    (page) => page.hardwareJson,
  );
}

async function main(argv: readonly string[]): Promise<void> {
  const [command, servers, file] = argv;
  const addrs = (servers ?? '').split(',').filter((s) => s !== '');
  if (command === 'status' && addrs.length > 0) {
    for (const line of await status(addrs)) process.stdout.write(`${JSON.stringify(line)}\n`);
  } else if (command === 'register' && addrs.length > 0 && file !== undefined) {
    await register(addrs, file);
  } else {
    process.stderr.write('usage: dhcp-admin.ts status ADDRS | register ADDRS FILE\n');
    process.exitCode = 2;
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`dhcp-admin: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  });
}
