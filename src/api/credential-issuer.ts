// Hands a booted machine its per-boot worker credential (POST /credential on the boot HTTP
// server, where the machine's real source address is seen). The claim is checked against this
// node's state before anything is proposed, so a forged claim costs no Raft write; the state
// machine checks it again when it applies credential.issue (src/state/control/credentials.ts).
// The credential is random, sealed to the key the machine sent, and only its SHA-256 is
// replicated.
import { randomBytes } from 'node:crypto';
import { isIPv4 } from 'node:net';
import type { Logger } from 'pino';
import { checkClaim, credentialTtlSMax } from '../state/control/credentials.js';
import {
  decideInventoryClaim,
  discoveredHardwareId,
  type DiscoveryView,
} from '../state/control/discovery.js';
import type { ControlState } from '../state/control/control-state.js';
import type { ControlErrorCode } from '../state/control/commands.js';
import { normalizeMac } from '../platform/addresses.js';
import { isPublicKey, seal, type SealedBox } from '../platform/sealed-box.js';
import { sha256Hex } from './auth.js';
import type { Proposer } from './proposer.js';

/** Beyond the workflow's own timeout, so a credential outlives the last action's report. */
const credentialGraceS = 600;
const workerIdBytesMax = 128;

export interface CredentialGrant {
  /** Empty for an inventory boot's credential, which serves no workflow. */
  readonly workflowId: string;
  /** An inventory boot's: the machine it is bound to. */
  readonly hardwareId?: string;
  readonly expiresMs: number;
  readonly sealed: SealedBox;
}

/** What the HTTP server answers: a status and a JSON body. */
export interface ClaimAnswer {
  readonly status: number;
  readonly body: CredentialGrant | { readonly error: string };
}

export interface CredentialIssuerContext {
  readonly control: ControlState;
  readonly proposer: Proposer;
  readonly logger: Logger;
  /**
   * `slipway server --discovery`: an inventory boot from a MAC no machine has enrols a new
   * machine (docs/decisions/0029-discovery.md). Without it such a claim is refused here.
   */
  readonly discovery?: boolean;
}

/** How long an inventory boot's credential lives: collecting and reporting take minutes. */
const inventoryCredentialTtlS = 3600;

const statusOf: Record<ControlErrorCode, number> = {
  E_INVALID: 403,
  E_NOT_FOUND: 404,
  E_CONFLICT: 409,
  E_EXISTS: 409,
  E_VERSION: 409,
  E_STALE_ATTEMPT: 409,
  E_NOT_DUE: 409,
};

export class CredentialIssuer {
  readonly #ctx: CredentialIssuerContext;

  constructor(ctx: CredentialIssuerContext) {
    this.#ctx = ctx;
  }

  /** `body` is the parsed JSON of the request; `remoteAddress` the socket's peer address. */
  async claim(body: unknown, remoteAddress: string): Promise<ClaimAnswer> {
    const request = parseClaim(body);
    if (typeof request === 'string') return refusal(400, request);
    const ip = remoteAddress.replace(/^::ffff:/, '');
    if (!isIPv4(ip))
      return refusal(403, `claims are accepted over IPv4 from the DHCP address; got ${remoteAddress}`);
    const claim = { workerId: request.workerId, mac: request.mac, ip };
    const log = this.#ctx.logger.child(claim);
    if (request.mode === 'inventory') return this.#claimInventory(request, claim, log);
    const checked = checkClaim(this.#ctx.control, claim, Date.now());
    if (!('workflow' in checked)) {
      log.warn({ reason: checked.message }, 'credential claim refused');
      return refusal(statusOf[checked.code], checked.message);
    }
    const credential = randomBytes(32).toString('base64url');
    const ttlS = Math.min(credentialTtlSMax, checked.workflow.spec.globalTimeoutS + credentialGraceS);
    const result = await this.#ctx.proposer.proposeControl({
      type: 'credential.issue',
      ...claim,
      sha256: sha256Hex(credential),
      ttlS,
      claimKey: sha256Hex(request.publicKey),
    });
    if (result.type === 'error') {
      log.warn({ code: result.code, reason: result.message }, 'credential claim refused');
      return refusal(statusOf[result.code], result.message);
    }
    if (result.type !== 'credential') return refusal(500, `unexpected answer ${result.type}`);
    log.info({ workflowId: result.workflowId }, 'credential issued');
    return {
      status: 200,
      body: {
        workflowId: result.workflowId,
        expiresMs: result.expiresMs,
        sealed: seal(Buffer.from(credential), request.publicKey),
      },
    };
  }

  /**
   * An inventory boot's claim (docs/decisions/0029-discovery.md): checked here against this
   * node's state first, then credential.inventory, which binds the credential to the machine or
   * enrols a new one for an unknown MAC (only with --discovery, and only under the id the boot
   * script gave it).
   */
  async #claimInventory(
    request: ClaimRequest,
    claim: { readonly workerId: string; readonly mac: string; readonly ip: string },
    log: Logger,
  ): Promise<ClaimAnswer> {
    const view = discoveryView(this.#ctx.control);
    const known = view.hardwareIdOfMac(claim.mac) !== undefined;
    if (!known && this.#ctx.discovery !== true) {
      return refusal(
        404,
        `no machine has MAC ${claim.mac}, and discovery is off on this node (slipway server --discovery)`,
      );
    }
    if (!known && claim.workerId !== discoveredHardwareId(claim.mac)) {
      return refusal(
        403,
        `a machine discovered from ${claim.mac} is named ${discoveredHardwareId(claim.mac)}, not ${claim.workerId}`,
      );
    }
    const credential = randomBytes(32).toString('base64url');
    const command = {
      ...claim,
      sha256: sha256Hex(credential),
      ttlS: inventoryCredentialTtlS,
      claimKey: sha256Hex(request.publicKey),
    };
    const checked = decideInventoryClaim(view, command, Date.now());
    if (checked.kind === 'refused') {
      log.warn({ reason: checked.message }, 'inventory credential claim refused');
      return refusal(statusOf[checked.code], checked.message);
    }
    const result = await this.#ctx.proposer.proposeControl({
      type: 'credential.inventory',
      ...command,
      // A discovered machine's own worker token: random, forgotten (`hardware token` mints one).
      workerTokenSha256: sha256Hex(randomBytes(32).toString('base64url')),
    });
    if (result.type === 'error') {
      log.warn({ code: result.code, reason: result.message }, 'inventory credential claim refused');
      return refusal(statusOf[result.code], result.message);
    }
    if (result.type !== 'hardware' || result.hardware.inspection === undefined) {
      return refusal(500, `unexpected answer ${result.type}`);
    }
    log.info(
      { hardwareId: result.hardware.id, state: result.hardware.lifecycle?.state },
      'inventory credential issued',
    );
    return {
      status: 200,
      body: {
        workflowId: '',
        hardwareId: result.hardware.id,
        expiresMs: result.hardware.inspection.expiresMs,
        sealed: seal(Buffer.from(credential), request.publicKey),
      },
    };
  }
}

/** A view of the node's applied state for the inventory claim's check (src/state/control/discovery.ts). */
function discoveryView(control: ControlState): DiscoveryView {
  return {
    hardware: (id) => control.hardware(id),
    hardwareIdOfMac: (mac) => control.hardwareByMac(mac)?.hardware.id,
    leaseOfMac: (mac) => control.leaseOfMac(mac),
    hardwareList: () => control.hardwareList(),
  };
}

interface ClaimRequest {
  readonly workerId: string;
  readonly mac: string;
  readonly publicKey: string;
  readonly mode?: 'inventory';
}

function parseClaim(body: unknown): ClaimRequest | string {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return 'the claim must be a JSON object {"workerId", "mac", "publicKey"}';
  }
  const fields = body as Record<string, unknown>;
  const { workerId, mac, publicKey, mode } = fields;
  if (mode !== undefined && mode !== 'inventory') return 'mode must be "inventory" or absent';
  if (typeof workerId !== 'string' || workerId === '' || Buffer.byteLength(workerId) > workerIdBytesMax) {
    return `workerId must be the machine's hardware id (1-${workerIdBytesMax} bytes)`;
  }
  const canonical = typeof mac === 'string' ? normalizeMac(mac) : undefined;
  if (canonical === undefined) return 'mac must be the MAC address of the interface the machine booted from';
  if (typeof publicKey !== 'string' || !isPublicKey(publicKey) || !agreesOn(publicKey)) {
    return 'publicKey must be a raw X25519 public key, base64url (32 bytes)';
  }
  return { workerId, mac: canonical, publicKey, ...(mode === 'inventory' ? { mode } : {}) };
}

/** Whether a key can be sealed to (a low-order point cannot): checked before the claim is spent. */
function agreesOn(publicKey: string): boolean {
  try {
    seal(Buffer.alloc(1), publicKey);
    return true;
  } catch {
    return false;
  }
}

function refusal(status: number, error: string): ClaimAnswer {
  return { status, body: { error } };
}
