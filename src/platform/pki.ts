// The cluster's own certificate authority, made by `slipway bootstrap`: one CA, one certificate
// per node (server and client use, for TLS on the API and mutual TLS between nodes; CN=ID names
// the node, as the raft address's identity check reads it), and the first admin token. The CA's
// key goes in a directory of its own, apart from every node's: a node that holds it could mint
// any other node's certificate, so a node refuses to start with it in its --tls-dir. ECDSA P-256 keys through WebCrypto; @peculiar/x509 writes the certificates
// (Node can parse X.509 but not issue it). The library needs the reflect-metadata polyfill, so
// both load only when a CA is made, not with every CLI command.
import { randomBytes, webcrypto } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import type { PeerTls } from './peer-tls.js';

const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const dayMs = 86_400_000;

export interface NodeIdentity {
  readonly id: string;
  /** Host names and IP addresses the node is reached at (SANs); localhost and 127.0.0.1 are added. */
  readonly hosts: readonly string[];
}

/**
 * The layout under the bootstrap directory OUT:
 *   OUT/ca/ca.crt, OUT/ca/ca.key     the CA (keep ca.key offline)
 *   OUT/admin.token                  the first admin token, for the operator
 *   OUT/NODE/                        what node NODE needs (its --tls-dir): ca.crt, NODE.crt,
 *                                    NODE.key, NODE.pem (both, for HAProxy) and admin.token
 */
export interface PkiFiles {
  readonly dir: string;
  readonly caCert: string;
  readonly caKey: string;
  readonly adminToken: string;
  readonly nodes: readonly { id: string; dir: string; cert: string; key: string; pem: string }[];
}

/** The CA's own directory under a bootstrap directory. */
export function caDirOf(dir: string): string {
  return join(dir, 'ca');
}

async function pemKey(key: webcrypto.CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN PRIVATE KEY-----\n${lines.join('\n')}\n-----END PRIVATE KEY-----\n`;
}

function writeSecret(path: string, text: string): void {
  writeFileSync(path, text, { mode: 0o600 });
  chmodSync(path, 0o600);
}

function serial(): string {
  // Positive: the top bit clear.
  const b = randomBytes(16);
  b[0] = (b[0] ?? 0) & 0x7f;
  return b.toString('hex');
}

/**
 * Writes the CA, each node's directory and the admin token into `dir` (layout: PkiFiles).
 * Refuses to overwrite an existing CA: a second bootstrap would split the cluster's trust.
 */
export async function bootstrapPki(
  dir: string,
  nodes: readonly NodeIdentity[],
  validDays = 3650,
): Promise<PkiFiles> {
  const caDir = caDirOf(dir);
  // ca.key directly in `dir` is where bootstraps before the CA had its own directory put it.
  if (existsSync(join(caDir, 'ca.key')) || existsSync(join(dir, 'ca.key'))) {
    throw new Error(`${dir} already holds a cluster CA (ca.key); use another directory or remove it first`);
  }
  mkdirSync(caDir, { recursive: true, mode: 0o700 });
  await import('reflect-metadata');
  const x509 = await import('@peculiar/x509');
  const crypto = webcrypto;
  x509.cryptoProvider.set(crypto);
  const notBefore = new Date(Date.now() - 60_000);
  const notAfter = new Date(Date.now() + validDays * dayMs);
  const caKeys = await crypto.subtle.generateKey(algorithm, true, ['sign', 'verify']);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: 'CN=Slipway cluster CA',
    notBefore,
    notAfter,
    signingAlgorithm: algorithm,
    keys: caKeys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });
  const caPem = ca.toString('pem') + '\n';
  const caCert = join(caDir, 'ca.crt');
  const caKey = join(caDir, 'ca.key');
  writeFileSync(caCert, caPem);
  writeSecret(caKey, await pemKey(caKeys.privateKey));
  const adminTokenText = `${randomBytes(32).toString('base64url')}\n`;
  const adminToken = join(dir, 'admin.token');
  writeSecret(adminToken, adminTokenText);
  const issued: PkiFiles['nodes'][number][] = [];
  for (const node of nodes) {
    const keys = await crypto.subtle.generateKey(algorithm, true, ['sign', 'verify']);
    const hosts = [...new Set(['localhost', '127.0.0.1', ...node.hosts])];
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: serial(),
      subject: `CN=${node.id}`,
      issuer: ca.subject,
      notBefore,
      notAfter,
      signingAlgorithm: algorithm,
      publicKey: keys.publicKey,
      signingKey: caKeys.privateKey,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(
          x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment,
          true,
        ),
        new x509.ExtendedKeyUsageExtension([
          x509.ExtendedKeyUsage.serverAuth,
          x509.ExtendedKeyUsage.clientAuth,
        ]),
        new x509.SubjectAlternativeNameExtension(
          hosts.map((h) => ({ type: isIP(h) === 0 ? ('dns' as const) : ('ip' as const), value: h })),
        ),
        await x509.AuthorityKeyIdentifierExtension.create(caKeys.publicKey),
      ],
    });
    const nodeDir = join(dir, node.id);
    mkdirSync(nodeDir, { recursive: true, mode: 0o700 });
    const certPath = join(nodeDir, `${node.id}.crt`);
    const keyPath = join(nodeDir, `${node.id}.key`);
    const certPem = cert.toString('pem') + '\n';
    const keyPem = await pemKey(keys.privateKey);
    writeFileSync(join(nodeDir, 'ca.crt'), caPem);
    writeFileSync(certPath, certPem);
    writeSecret(keyPath, keyPem);
    // Certificate and key in one file, as HAProxy reads them (`slipway balancer config --tls-dir`).
    const pemPath = join(nodeDir, `${node.id}.pem`);
    writeSecret(pemPath, certPem + keyPem);
    // The node accepts the bootstrap admin token from its own directory.
    writeSecret(join(nodeDir, 'admin.token'), adminTokenText);
    issued.push({ id: node.id, dir: nodeDir, cert: certPath, key: keyPath, pem: pemPath });
  }
  return { dir, caCert, caKey, adminToken, nodes: issued };
}

/** A node's TLS material from a bootstrap directory. */
export function loadNodeTls(dir: string, id: string): PeerTls {
  if (existsSync(join(dir, 'ca.key'))) {
    throw new Error(
      `${dir} holds the cluster CA's private key (ca.key): anyone who can read this node's files could ` +
        'issue a certificate for any node. Move ca.key off the node (`slipway bootstrap` keeps it in ' +
        'OUT/ca/; give each node only OUT/ID/) and start again.',
    );
  }
  const read = (name: string): Buffer => {
    const path = join(dir, name);
    try {
      return readFileSync(path);
    } catch (err) {
      throw new Error(`cannot read ${path}: ${(err as Error).message} (made by \`slipway bootstrap\`)`);
    }
  };
  return { ca: read('ca.crt'), cert: read(`${id}.crt`), key: read(`${id}.key`) };
}
