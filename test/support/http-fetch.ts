// One HTTP request for tests, with its whole body: what a boot client sees (status, headers,
// bytes), without fetch's transparent handling of ranges and encodings.
import http from 'node:http';

export interface HttpReply {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
}

export function httpRequest(
  host: string,
  port: number,
  target: string,
  options: { readonly method?: string; readonly headers?: http.OutgoingHttpHeaders } = {},
): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host, port, path: target, method: options.method ?? 'GET', headers: options.headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}
