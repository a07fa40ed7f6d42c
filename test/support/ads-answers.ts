// A bare ADS client for the xDS tests: subscribes to the four resource types at once and gives
// the first answer of each as raw bytes, for checking against Envoy's protos.
import { Client, Metadata, type ChannelCredentials } from '@grpc/grpc-js';
import { envoyListenKey, xdsTypeUrl } from '../../lb/xds/resources.js';
import { AggregatedDiscoveryServiceService, DiscoveryRequest } from '../../src/gen/xds.js';

/**
 * The four ADS answers the node at `apiAddr` gives a client that subscribes to `names`, as
 * Envoy does when `listen` is given (its listener address in the node metadata) and as a gRPC
 * client does without it.
 */
export async function adsAnswers(
  apiAddr: string,
  creds: ChannelCredentials,
  nodeId: string,
  names: string[],
  listen?: string,
): Promise<Buffer[]> {
  const client = new Client(apiAddr, creds);
  const identity = (b: Buffer): Buffer => b;
  const method = AggregatedDiscoveryServiceService.streamAggregatedResources;
  try {
    return await new Promise<Buffer[]>((resolve, reject) => {
      const call = client.makeBidiStreamRequest(method.path, identity, identity, new Metadata(), {
        deadline: Date.now() + 20_000,
      });
      const got: Buffer[] = [];
      call.on('data', (b: Buffer) => {
        got.push(b);
        if (got.length === 4) {
          call.cancel();
          resolve(got);
        }
      });
      call.on('error', (err: Error) => {
        if (got.length < 4) reject(err);
      });
      const node = {
        id: nodeId,
        metadata: { fields: listen === undefined ? {} : { [envoyListenKey]: { stringValue: listen } } },
      };
      for (const typeUrl of Object.values(xdsTypeUrl)) {
        const request = { versionInfo: '', node, resourceNames: names, typeUrl, responseNonce: '' };
        call.write(Buffer.from(DiscoveryRequest.encode(DiscoveryRequest.fromPartial(request)).finish()));
      }
    });
  } finally {
    client.close();
  }
}
