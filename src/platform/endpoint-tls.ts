// TLS to the nodes an xds:/// channel picks (docs/decisions/0024-xds.md): each node's
// certificate is verified against the cluster CA and against the address dialed, as a direct
// --server HOST:PORT is verified against HOST. grpc-js would check the channel's authority
// instead, "slipway" for xds:///slipway, which no node's certificate names; and overriding it with
// one name every node's certificate holds (localhost) would accept any node's certificate at any
// address. The endpoints come from the nodes' xDS server as IP addresses, and `slipway bootstrap`
// puts each node's addresses in its certificate, as direct use of the CLI already needs.
import { checkServerIdentity, connect, createSecureContext } from 'node:tls';
import type { SecureContext } from 'node:tls';
import type { Socket } from 'node:net';
import { CallCredentials, ChannelCredentials } from '@grpc/grpc-js';
import type { ChannelOptions, experimental } from '@grpc/grpc-js';

export class EndpointTlsCredentials extends ChannelCredentials {
  readonly #context: SecureContext;

  /** `ca`: the cluster CA (PEM). */
  constructor(ca: Buffer) {
    super();
    this.#context = createSecureContext({ ca });
  }

  _isSecure(): boolean {
    return true;
  }

  _equals(other: ChannelCredentials): boolean {
    return other === this;
  }

  _createSecureConnector(
    _target: experimental.GrpcUri,
    _options: ChannelOptions,
    callCredentials?: CallCredentials,
  ): experimental.SecureConnector {
    return {
      connect: (socket) => this.#handshake(socket),
      waitForReady: () => Promise.resolve(),
      getCallCredentials: () => callCredentials ?? CallCredentials.createEmpty(),
      destroy: () => undefined,
    };
  }

  #handshake(socket: Socket): Promise<experimental.SecureConnectResult> {
    const address = socket.remoteAddress;
    if (address === undefined) return Promise.reject(new Error('TLS to a node: its address is unknown'));
    return new Promise((resolve, reject) => {
      const tls = connect(
        {
          socket,
          secureContext: this.#context,
          ALPNProtocols: ['h2'],
          checkServerIdentity: (_name, cert) => checkServerIdentity(address, cert),
        },
        () => resolve({ socket: tls, secure: true }),
      );
      tls.on('error', reject);
    });
  }
}
