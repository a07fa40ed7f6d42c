// A secret sealed for one recipient: X25519 key agreement, HKDF-SHA256 and AES-256-GCM.
//
// A booted machine claims its worker credential over the boot network's plain HTTP (the only
// service it can reach before it has a credential, and the one that sees its real source
// address). It sends a fresh public key with the claim; the node seals the credential to it.
// Someone who only listens on the wire learns nothing; the threat model
// (docs/decisions/0011-security.md) says what an active attacker can do.
import {
  createCipheriv,
  createDecipheriv,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  randomBytes,
  type KeyObject,
} from 'node:crypto';

const info = Buffer.from('slipway worker credential v1');
const nonceBytes = 12;
const tagBytes = 16;

export interface SealedBox {
  /** The sender's ephemeral public key, raw X25519, base64url. */
  readonly publicKey: string;
  readonly nonce: string;
  /** Ciphertext then the GCM tag, base64url. */
  readonly ciphertext: string;
}

export interface OpeningKey {
  /** Raw X25519 public key, base64url: what the recipient sends to the sealer. */
  readonly publicKey: string;
  /** The private half (PKCS#8 PEM), to keep beside a claim that may have to be made again. */
  readonly privateKeyPem: string;
  open(box: SealedBox): Buffer;
}

/** A fresh key pair for one claim, or the one kept from an earlier try (`privateKeyPem`). */
export function openingKey(privateKeyPem?: string): OpeningKey {
  const privateKey =
    privateKeyPem === undefined
      ? generateKeyPairSync('x25519').privateKey
      : createPrivateKey({ key: privateKeyPem, format: 'pem' });
  if (privateKey.asymmetricKeyType !== 'x25519') throw new Error('the kept claim key is not an X25519 key');
  const publicKey = createPublicKey(privateKey);
  return {
    publicKey: rawPublicKey(publicKey),
    privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    open: (box) => {
      const key = sharedKey(privateKey, importPublicKey(box.publicKey), box.nonce);
      const sealed = Buffer.from(box.ciphertext, 'base64url');
      if (sealed.length < tagBytes) throw new Error('the sealed box is too short');
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(box.nonce, 'base64url'));
      decipher.setAuthTag(sealed.subarray(sealed.length - tagBytes));
      return Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - tagBytes)), decipher.final()]);
    },
  };
}

/** Seals `secret` for the holder of `recipientPublicKey` (raw X25519, base64url). Throws on a bad key. */
export function seal(secret: Uint8Array, recipientPublicKey: string): SealedBox {
  const recipient = importPublicKey(recipientPublicKey);
  const { publicKey, privateKey } = generateKeyPairSync('x25519');
  const nonce = randomBytes(nonceBytes).toString('base64url');
  const key = sharedKey(privateKey, recipient, nonce);
  const cipher = createCipheriv('aes-256-gcm', key, Buffer.from(nonce, 'base64url'));
  const body = Buffer.concat([cipher.update(secret), cipher.final(), cipher.getAuthTag()]);
  return { publicKey: rawPublicKey(publicKey), nonce, ciphertext: body.toString('base64url') };
}

/** Whether `text` is a raw X25519 public key in base64url (32 bytes). */
export function isPublicKey(text: string): boolean {
  return /^[A-Za-z0-9_-]{43}$/.test(text) && Buffer.from(text, 'base64url').length === 32;
}

function sharedKey(privateKey: KeyObject, publicKey: KeyObject, nonce: string): Buffer {
  const secret = diffieHellman({ privateKey, publicKey });
  return Buffer.from(hkdfSync('sha256', secret, Buffer.from(nonce, 'base64url'), info, 32));
}

function rawPublicKey(key: KeyObject): string {
  const jwk = key.export({ format: 'jwk' });
  if (typeof jwk.x !== 'string') throw new Error('X25519 key without its x coordinate');
  return jwk.x;
}

function importPublicKey(text: string): KeyObject {
  if (!isPublicKey(text)) throw new Error('not a raw X25519 public key (32 bytes, base64url)');
  return createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: text }, format: 'jwk' });
}
