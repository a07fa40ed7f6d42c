// How the raft transport's gRPC channels and server are set up: keepalive, message sizes and
// reconnect backoff. Their credentials (TLS between nodes) are src/platform/peer-tls.ts's.
import type { ChannelOptions } from '@grpc/grpc-js';
import {
  keepaliveIntervalMs,
  keepaliveTimeoutMs,
  reconnectBackoffMsMax,
  reconnectBackoffMsMin,
} from './limits.js';

/** Both ends notice a dead peer within about keepalive interval + timeout (~2 s). */
function keepalive(): ChannelOptions {
  return {
    'grpc.keepalive_time_ms': keepaliveIntervalMs,
    'grpc.keepalive_timeout_ms': keepaliveTimeoutMs,
    'grpc.keepalive_permit_without_calls': 1,
  };
}

function messageSize(maxMessageBytes: number): ChannelOptions {
  return {
    'grpc.max_send_message_length': maxMessageBytes,
    'grpc.max_receive_message_length': maxMessageBytes,
  };
}

export function peerChannelOptions(maxMessageBytes: number): ChannelOptions {
  return {
    ...keepalive(),
    ...messageSize(maxMessageBytes),
    // grpc's own reconnect backoff grows to minutes by default; a restarted peer must be
    // reachable again within our reconnect cap.
    'grpc.initial_reconnect_backoff_ms': reconnectBackoffMsMin * 2,
    'grpc.max_reconnect_backoff_ms': reconnectBackoffMsMax,
    // One connection per transport instance, not shared process-wide: a node's links fail and
    // recover on their own, also when several nodes run in one process (tests, local cluster).
    'grpc.use_local_subchannel_pool': 1,
  };
}

/**
 * For the unary calls one node makes to another (a forwarded write, a Status): grpc's default
 * reconnect backoff starts at a second and grows to minutes, so after a peer restarted (a
 * leader stopped, then started again) the first forwards to it waited out that backoff, and
 * a graceful handover back to it took a second or more. A restarted peer is dialled again
 * within our reconnect cap instead.
 */
export function peerCallOptions(): ChannelOptions {
  return {
    'grpc.initial_reconnect_backoff_ms': reconnectBackoffMsMin * 2,
    'grpc.max_reconnect_backoff_ms': reconnectBackoffMsMax,
  };
}

export function peerServerOptions(maxMessageBytes: number): ChannelOptions {
  return { ...keepalive(), ...messageSize(maxMessageBytes) };
}

/**
 * For a long-lived stream to a peer (a follower's forwarding stream, src/api/proposer.ts): as
 * peerCallOptions, with the links' keepalive, so that a connection that died silently fails the
 * stream within about two seconds instead of holding every request on it until its deadline.
 */
export function peerStreamCallOptions(): ChannelOptions {
  return { ...peerCallOptions(), ...keepalive() };
}
