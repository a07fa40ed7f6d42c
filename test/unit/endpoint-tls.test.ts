// Goal: the TLS credentials of an xds:/// channel (src/platform/endpoint-tls.ts) verify each node
// against the cluster CA and against the address dialed: a node whose certificate names its
// address is served (the calls' authority, "slipway", is in no certificate), the same certificate
// at an address it does not name is refused, as is a certificate of another CA; the call
// credentials given with them are still sent. (test/integration/xds-tls.test.ts shows the same
// through xds:///slipway, whose channel name grpc-js would otherwise check.)
// Method: real grpc-js servers with TLS on 127.0.0.1 and 127.0.0.2 (grpc.health.v1, whose
// handler records the metadata it got), certificates from `slipway bootstrap`'s code
// (src/platform/pki.ts), a second bootstrap for a foreign CA.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { CallCredentials, credentials, Metadata, Server, ServerCredentials, status } from '@grpc/grpc-js';
import type { ChannelCredentials, ServiceError } from '@grpc/grpc-js';
import { HealthCheckResponse_ServingStatus, HealthClient, HealthService } from '../../src/gen/health.js';
import type { HealthServer } from '../../src/gen/health.js';
import { bootstrapPki } from '../../src/platform/pki.js';
import { EndpointTlsCredentials } from '../../src/platform/endpoint-tls.js';

const dir = mkdtempSync(join(tmpdir(), 'slipway-endpoint-tls-'));
const servers: Server[] = [];
let ca: Buffer;
let otherCa: Buffer;
const seen: string[] = [];

async function serve(host: string, cert: Buffer, key: Buffer): Promise<string> {
  const server = new Server();
  const health: HealthServer = {
    check: (call, cb) => {
      seen.push(String(call.metadata.get('authorization')[0] ?? ''));
      cb(null, { status: HealthCheckResponse_ServingStatus.SERVING });
    },
    watch: (call) => call.end(),
  };
  server.addService(HealthService, health);
  servers.push(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(
      `${host}:0`,
      ServerCredentials.createSsl(null, [{ cert_chain: cert, private_key: key }], false),
      (err, p) => (err === null ? resolve(p) : reject(err)),
    ),
  );
  return `${host}:${port}`;
}

/** The code of one Check through `creds`, to `addr` under the channel name "slipway". */
function check(addr: string, creds: ChannelCredentials): Promise<{ code: number; details: string }> {
  // ipv4: dials the address given; the authority (what grpc-js would check) is "slipway".
  const client = new HealthClient(`ipv4:${addr}`, creds, { 'grpc.default_authority': 'slipway' });
  return new Promise((resolve) => {
    client.check(
      { service: '' },
      new Metadata(),
      { deadline: Date.now() + 5000 },
      (err: ServiceError | null) => {
        client.close();
        resolve(err === null ? { code: status.OK, details: '' } : { code: err.code, details: err.details });
      },
    );
  });
}

let atOwnAddress: string;
let atOtherAddress: string;

before(async () => {
  const pki = await bootstrapPki(join(dir, 'pki'), [{ id: 'n1', hosts: [] }]);
  const other = await bootstrapPki(join(dir, 'other'), [{ id: 'n1', hosts: [] }]);
  ca = readFileSync(pki.caCert);
  otherCa = readFileSync(other.caCert);
  const cert = readFileSync(pki.nodes[0]!.cert);
  const key = readFileSync(pki.nodes[0]!.key);
  // The certificate names 127.0.0.1 and localhost (bootstrap's defaults), not 127.0.0.2.
  atOwnAddress = await serve('127.0.0.1', cert, key);
  atOtherAddress = await serve('127.0.0.2', cert, key);
});

after(() => {
  for (const s of servers) s.forceShutdown();
  rmSync(dir, { recursive: true, force: true });
});

test('a node whose certificate names the address dialed is served, whatever the channel is called', async () => {
  assert.deepEqual(await check(atOwnAddress, new EndpointTlsCredentials(ca)), {
    code: status.OK,
    details: '',
  });
});

test('the same certificate at an address it does not name is refused', async () => {
  const r = await check(atOtherAddress, new EndpointTlsCredentials(ca));
  assert.equal(r.code, status.UNAVAILABLE);
  assert.match(r.details, /127\.0\.0\.2 is not in the cert's list/);
});

test('a certificate of another CA is refused', async () => {
  const r = await check(atOwnAddress, new EndpointTlsCredentials(otherCa));
  assert.equal(r.code, status.UNAVAILABLE);
  assert.match(r.details, /certificate/);
});

test('call credentials composed with them are sent', async () => {
  const bearer = CallCredentials.createFromMetadataGenerator((_o, cb) => {
    const md = new Metadata();
    md.set('authorization', 'Bearer t0ken');
    cb(null, md);
  });
  const creds = credentials.combineChannelCredentials(new EndpointTlsCredentials(ca), bearer);
  seen.length = 0;
  assert.equal((await check(atOwnAddress, creds)).code, status.OK);
  assert.deepEqual(seen, ['Bearer t0ken']);
});
