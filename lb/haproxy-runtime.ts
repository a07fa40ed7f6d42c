// HAProxy's runtime API over its UNIX socket (`stats socket PATH level admin`): one command per
// connection, as HAProxy's non-interactive mode expects; it answers and closes.
import { connect } from 'node:net';

const answerTimeoutMsDefault = 5000;
/** No runtime API answer the follower asks for comes near this; a longer one is not HAProxy's. */
const answerBytesMax = 4 * 1024 * 1024;

/** The socket is missing or refused, HAProxy did not answer, or it refused a command. */
export class HaproxyRuntimeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HaproxyRuntimeError';
  }
}

/** Sends one command and resolves to HAProxy's answer, without its trailing blank lines. */
export function runtimeCommand(
  socketPath: string,
  command: string,
  timeoutMs = answerTimeoutMsDefault,
): Promise<string> {
  if (/[\n;]/.test(command)) {
    // Either would start another command on the same line.
    return Promise.reject(
      new HaproxyRuntimeError(`refusing a runtime command with a newline or ';': ${command}`),
    );
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    const socket = connect(socketPath);
    const fail = (message: string): void => {
      socket.destroy();
      reject(new HaproxyRuntimeError(message));
    };
    socket.setTimeout(timeoutMs, () =>
      fail(`HAProxy did not answer "${command}" on ${socketPath} within ${timeoutMs} ms`),
    );
    // Written without a half-close: HAProxy answers, then closes the connection itself.
    socket.once('connect', () => socket.write(`${command}\n`));
    socket.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > answerBytesMax)
        fail(`the answer to "${command}" on ${socketPath} passed ${answerBytesMax} bytes`);
      else chunks.push(chunk);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => fail(socketProblem(socketPath, err)));
    socket.once('close', () => resolve(Buffer.concat(chunks).toString('utf8').replace(/\n+$/, '')));
  });
}

/** What went wrong with the socket, and how to fix it. */
function socketProblem(path: string, err: NodeJS.ErrnoException): string {
  const fix =
    'HAProxy needs "stats socket PATH level admin" in its global section ' +
    '(`slipway balancer config --haproxy-socket PATH` renders it)';
  switch (err.code) {
    case 'ENOENT':
      return `no HAProxy runtime socket at ${path}: is HAProxy running? ${fix}`;
    case 'ECONNREFUSED':
      return `nothing answers on ${path}: HAProxy is not running (a stale socket file), or not with this socket`;
    case 'EACCES':
      return `no permission to use ${path}: run as a user in the socket's group, or as root`;
    case 'ENOTSOCK':
      return `${path} is not a socket: ${fix}`;
    default:
      return `cannot use the HAProxy runtime socket ${path}: ${err.message}`;
  }
}
