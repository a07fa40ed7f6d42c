// Every bound of the raft peer transport in one place, so capacity can be reasoned about.

/** Snapshot data travels in pieces of this size on the InstallSnapshot stream. */
export const snapshotChunkBytes = 1 << 20;

/** Room for a chunk's metadata and protobuf framing on top of its data. */
export const messageHeadroomBytes = 64 << 10;

/**
 * Default gRPC message size limit, both directions. It fits a snapshot chunk and an append of
 * raft's default maxMsgBytes (1 MiB), with room for one oversized entry that goes out alone.
 */
export const messageBytesMaxDefault = 4 << 20;

/** A received snapshot larger than this is refused instead of exhausting memory. */
export const snapshotBytesMax = 1 << 30;

/** Bulk lane (appends and snapshot notices) per peer: beyond either bound the oldest are dropped. */
export const bulkQueueBytesMax = 8 << 20;
export const bulkQueueMessagesMax = 4096;

/** Priority lane per peer; its messages are small, and a stale heartbeat is worthless anyway. */
export const priorityQueueMessagesMax = 1024;

/**
 * Envelopes handed to grpc-js but not yet flushed to the connection. Keeping this at one means
 * everything else waits in our queue, where a heartbeat can still overtake queued appends.
 */
export const writesInFlightMax = 1;

/** Reconnect backoff after a stream fails: doubles from the minimum, jittered, capped. */
export const reconnectBackoffMsMin = 50;
export const reconnectBackoffMsMax = 1000;

/** A stream not acknowledged by the peer within this long counts as failed. */
export const streamOpenTimeoutMs = 2000;

/** HTTP/2 keepalive: a ping every second, and a peer silent for a second more is dead. */
export const keepaliveIntervalMs = 1000;
export const keepaliveTimeoutMs = 1000;
