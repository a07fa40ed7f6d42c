// The cluster's own certificate authority, made by `slipway bootstrap`: one CA, one certificate
// per node (server and client use, for TLS on the API and mutual TLS between nodes), and the
// first admin token. ECDSA P-256 keys through WebCrypto; @peculiar/x509 writes the certificates
// (Node can parse X.509 but not issue it). The library needs the reflect-metadata polyfill, so
// both load only when a CA is made, not with every CLI command.
import { randomBytes, webcrypto } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';

const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const dayMs = 86_400_000;

export interface NodeIdentity {
  readonly id: string;
  /** Host names and IP addresses the node is reached at (SANs); localhost and 127.0.0.1 are added. */
  readonly hosts: readonly string[];
}

export interface PkiFiles {
  readonly dir: string;
  readonly caCert: string;
  readonly adminToken: string;
  readonly nodes: readonly { id: string; cert: string; key: string; pem: string }[];
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
 * Writes ca.crt, ca.key, NODE.crt and NODE.key for each node, and admin.token into `dir`.
 * Refuses to overwrite an existing CA: a second bootstrap would split the cluster's trust.
 */
export async function bootstrapPki(
  dir: string,
  nodes: readonly NodeIdentity[],
  validDays = 3650,
): Promise<PkiFiles> {
  if (existsSync(join(dir, 'ca.key'))) {
    throw new Error(`${dir} already holds a cluster CA (ca.key); use another directory or remove it first`);
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
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
  writeFileSync(join(dir, 'ca.crt'), ca.toString('pem') + '\n');
  writeSecret(join(dir, 'ca.key'), await pemKey(caKeys.privateKey));
  const issued: { id: string; cert: string; key: string; pem: string }[] = [];
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
    const certPath = join(dir, `${node.id}.crt`);
    const keyPath = join(dir, `${node.id}.key`);
    const certPem = cert.toString('pem') + '\n';
    const keyPem = await pemKey(keys.privateKey);
    writeFileSync(certPath, certPem);
    writeSecret(keyPath, keyPem);
    // Certificate and key in one file, as HAProxy reads them (`slipway balancer config --tls-dir`).
    const pemPath = join(dir, `${node.id}.pem`);
    writeSecret(pemPath, certPem + keyPem);
    issued.push({ id: node.id, cert: certPath, key: keyPath, pem: pemPath });
  }
  const adminToken = join(dir, 'admin.token');
  writeSecret(adminToken, `${randomBytes(32).toString('base64url')}\n`);
  return { dir, caCert: join(dir, 'ca.crt'), adminToken, nodes: issued };
}

/** A node's TLS material from a bootstrap directory. */
export interface NodeTls {
  readonly ca: Buffer;
  readonly cert: Buffer;
  readonly key: Buffer;
}

export function loadNodeTls(dir: string, id: string): NodeTls {
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
