// Who is calling on the raft address. Mutual TLS proves only that the caller holds some
// certificate of the cluster CA; the certificate's CN names the node (`slipway bootstrap` writes
// CN=ID), and that node must be a current member and the sender the call claims to be. Without
// this check, any certificate the CA signed could append to the log, vote or propose as any
// node. Checked once per call, before a handler sees it, for every service served there (raft
// streams and snapshots, Kv forwards, Internal proposals and artifact reads).
import {
  Metadata,
  ServerInterceptingCall,
  status,
  type ServerInterceptingCallInterface,
  type ServerInterceptor,
} from '@grpc/grpc-js';
import type { PeerCertificate } from 'node:tls';
import type { Logger } from 'pino';
import type { NodeId } from '../core/types.js';
import { removedNoticeCode } from './removed-notice.js';

/** Metadata by which a call on the raft address names the node sending it. */
export const senderClaimKeys = ['x-raft-from', 'x-slipway-forwarded'] as const;

/** What grpc-js's getAuthContext() tells of a call's TLS peer (its type is not exported). */
export interface PeerAuth {
  readonly sslPeerCertificate?: PeerCertificate | undefined;
}

/** The node id a verified peer certificate names (its CN), if any. */
export function certifiedNodeId(auth: PeerAuth | null): NodeId | undefined {
  const cn: unknown = auth?.sslPeerCertificate?.subject.CN;
  return typeof cn === 'string' && cn !== '' ? cn : undefined;
}

/** Why a call must be refused, or undefined when its caller is the member it claims to be. */
export function identityRefusal(
  certified: NodeId | undefined,
  metadata: Metadata,
  isMember: (id: NodeId) => boolean,
): string | undefined {
  if (certified === undefined) return 'the peer certificate names no node (CN)';
  if (!isMember(certified)) return `the certificate of ${certified} names no member of this cluster`;
  for (const key of senderClaimKeys) {
    for (const claimed of metadata.get(key)) {
      const text = claimed.toString();
      if (text !== certified) return `the certificate of ${certified} cannot send as ${text} (${key})`;
    }
  }
  return undefined;
}

/**
 * Refuses, with PERMISSION_DENIED, every call whose peer certificate does not name a current
 * member, or names one other than the sender its metadata claims. Install it only on a server
 * with mutual TLS: without a certificate there is nothing to check.
 */
export function peerIdentityInterceptor(
  isMember: (id: NodeId) => boolean,
  logger: Logger,
  removedNotice: (id: NodeId) => string | undefined = () => undefined,
): ServerInterceptor {
  return (method, call: ServerInterceptingCallInterface) =>
    new ServerInterceptingCall(call, {
      start: (next) => {
        next({
          onReceiveMetadata: (metadata, pass) => {
            const certified = certifiedNodeId(call.getAuthContext());
            // A member this node removed is told so (removed-notice.ts), not only refused.
            const notice = certified === undefined ? undefined : removedNotice(certified);
            if (notice !== undefined) {
              logger.info({ method: method.path, certified }, `ended a call on the raft address: ${notice}`);
              call.sendStatus({ code: removedNoticeCode, details: notice, metadata: new Metadata() });
              return;
            }
            const refusal = identityRefusal(certified, metadata, isMember);
            if (refusal === undefined) {
              pass(metadata);
              return;
            }
            logger.warn(
              { method: method.path, peer: call.getPeer(), certified: certified ?? null },
              `refused a call on the raft address: ${refusal}`,
            );
            call.sendStatus({ code: status.PERMISSION_DENIED, details: refusal, metadata: new Metadata() });
          },
        });
      },
    });
}
