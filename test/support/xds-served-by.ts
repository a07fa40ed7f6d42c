// A proxyless gRPC client in its own process, for test/integration/xds.test.ts: through
// `xds:///slipway` (src/platform/xds-target.ts, @grpc/grpc-js-xds) it sends one Kv.Status per
// worker id with that id in x-worker-id, and prints which node answered each, as JSON
// {"w-0": "n2", ...} (a call that failed prints its error instead). Its own process because
// grpc-js-xds holds the process open, and a test file's process must end.
// Usage: node --import tsx test/support/xds-served-by.ts XDS_SERVERS ID...
import { credentials, Metadata } from '@grpc/grpc-js';
import { stickyHeader } from '../../src/model/balancer-spec.js';
import { KvClient } from '../../src/gen/kv.js';
import { enableXds } from '../../src/platform/xds-target.js';

const [xdsServers = '', ...ids] = process.argv.slice(2);
await enableXds(xdsServers.split(','), 'xds-served-by');
const kv = new KvClient('xds:///slipway', credentials.createInsecure());
const served: Record<string, string> = {};
for (const id of ids) {
  const md = new Metadata();
  md.set(stickyHeader, id);
  served[id] = await new Promise<string>((resolve) => {
    kv.status({}, md, { deadline: Date.now() + 20_000 }, (err, res) =>
      resolve(err === null ? res.id : `error: ${err.message}`),
    );
  });
}
kv.close();
process.stdout.write(`${JSON.stringify(served)}\n`, () => process.exit(0));
