// Bounds on everything the replicated state machine stores, so that one bad or hostile command
// cannot grow a replica's memory without limit. Changing a size limit is a format change:
// every node must agree, because a command one node accepts another must not refuse.

/** A namespace name, in UTF-8 bytes. */
export const namespaceBytesMax = 256;
/** A key, in UTF-8 bytes (etcd's default request limit is far larger; keys here are names). */
export const keyBytesMax = 4096;
/** A value, in bytes. Large artifacts belong on the HTTP boot service, not in the log. */
export const valueBytesMax = 1024 * 1024;
/** An error result's message, in UTF-8 bytes; messages quote keys only in shortened form. */
export const errorMessageBytesMax = 1024;
/** An encoded result: the largest is a put or delete returning the previous value. */
export const resultBytesMax = valueBytesMax + 1024;

/** How long a client session lives without a command, in leader-stamped milliseconds. */
export const sessionTtlMsDefault = 10 * 60 * 1000;
/** Live sessions; registering one more evicts the least recently active (dissertation §6.3). */
export const sessionsMaxDefault = 10_000;
/** Cached, unacknowledged results per session; a client that never acknowledges is refused. */
export const sessionResultsMaxDefault = 256;
