// How a node's API authenticates, decided once at start from its configuration. Tokens follow
// TLS: a node with TLS always requires them, whether or not the bootstrap admin token is at hand,
// so deleting admin.token (to retire it once named users exist) never turns every caller into
// an admin. Only a plaintext node without a token file serves callers without tokens, and such a
// node listens on loopback unless told otherwise (server-config.ts).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { ServerConfig } from './config.js';
import { ConfigError } from './config.js';

/** Where the bootstrap admin token comes from, as the start log names it. */
export type TokenSource = 'admin-token-file' | 'tls-dir' | 'replicated-tokens-only' | 'none';

export interface AuthMode {
  /** Every API call needs a token. */
  readonly enabled: boolean;
  /** The bootstrap admin token's file, when there is one. */
  readonly adminTokenFile: string | undefined;
  /** Structured fields for the start log. */
  readonly logFields: { auth: 'tokens' | 'off'; tls: boolean; tokenSource: TokenSource };
}

/**
 * The auth mode of `cfg`. `freshDataDir`: the node has never stored a raft log, so its state
 * cannot hold operator tokens; with TLS it then needs the bootstrap token, or nobody could call it.
 */
export function authModeOf(cfg: ServerConfig, freshDataDir: boolean): AuthMode {
  const tls = cfg.tlsDir !== undefined;
  const inTlsDir = cfg.tlsDir === undefined ? undefined : join(cfg.tlsDir, 'admin.token');
  const adminTokenFile =
    cfg.adminTokenFile ?? (inTlsDir !== undefined && existsSync(inTlsDir) ? inTlsDir : undefined);
  const enabled = tls || adminTokenFile !== undefined;
  if (tls && adminTokenFile === undefined && freshDataDir && !cfg.join) {
    throw new ConfigError(
      `--tls-dir ${String(cfg.tlsDir)} holds no admin.token and no --admin-token-file is given: a new ` +
        'cluster would have no operator able to call it. Put the admin.token made by `slipway bootstrap` ' +
        'there, or pass --admin-token-file FILE (once named tokens exist, it may be removed).',
    );
  }
  const tokenSource: TokenSource =
    cfg.adminTokenFile !== undefined
      ? 'admin-token-file'
      : adminTokenFile !== undefined
        ? 'tls-dir'
        : enabled
          ? 'replicated-tokens-only'
          : 'none';
  return { enabled, adminTokenFile, logFields: { auth: enabled ? 'tokens' : 'off', tls, tokenSource } };
}
