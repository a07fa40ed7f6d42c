// Goal: prove that secrets never reach a log line: BMC passwords, worker tokens, operator tokens
// and the authorization header are replaced wherever a logged object carries them.
// Method: a pino logger built as createLogger builds it, writing to a buffer instead of stderr.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { secretPaths } from '../../src/platform/logger.js';

describe('log redaction', () => {
  it('replaces every secret field, at any of the depths commands and records carry them', () => {
    let text = '';
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        text += chunk.toString('utf8');
        done();
      },
    });
    const logger = pino({ redact: { paths: [...secretPaths], censor: '[redacted]' } }, sink);
    logger.info(
      {
        command: { hardware: { bmc: { password: 'pw-1' } }, workerToken: 'wt-1' },
        password: 'pw-2',
        token: 'tok-1',
        res: { token: 'tok-2' },
        metadata: { authorization: 'Bearer tok-3' },
        audit: {
          user: 'alice',
          role: 'operator',
          address: 'ipv4:127.0.0.1:1',
          method: 'Control/TokenCreate',
        },
      },
      'a line',
    );
    for (const secret of ['pw-1', 'pw-2', 'wt-1', 'tok-1', 'tok-2', 'tok-3'])
      assert.ok(!text.includes(secret), secret);
    assert.match(text, /"user":"alice"/);
  });
});
