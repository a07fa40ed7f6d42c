// The IPMI driver: Debian's ipmitool over IPMI v2.0 (RMCP+, `-I lanplus`), one process per
// operation (see docs/decisions/0015-power-control.md for why not our own RMCP+ client).
//
// The password goes through the environment (`-E` reads IPMI_PASSWORD), never argv: a
// process's arguments are readable by every user in /proc/PID/cmdline, its environment only by
// its owner. Every call is bounded (ipmitool's own retries, then a kill), and failures are
// classified so the operator learns whether to check the network, the credentials or the BMC.
import { execFile } from 'node:child_process';
import { findExecutable } from '../platform/executable.js';
import type { PowerState } from '../model/records.js';

export interface BmcTarget {
  readonly host: string;
  readonly port: number;
  readonly username?: string | undefined;
  readonly password?: string | undefined;
}

export type BootDevice = 'pxe' | 'disk';

/** unreachable: no answer (network, address, port); credentials: the BMC refused the login. */
export type PowerErrorKind = 'unreachable' | 'credentials' | 'refused' | 'other';

export class PowerDriverError extends Error {
  readonly kind: PowerErrorKind;
  constructor(kind: PowerErrorKind, message: string) {
    super(message);
    this.name = 'PowerDriverError';
    this.kind = kind;
  }
}

/** What the power executor needs from a BMC; tests substitute their own. */
export interface PowerDriver {
  status(target: BmcTarget): Promise<PowerState>;
  powerOn(target: BmcTarget): Promise<void>;
  powerOff(target: BmcTarget): Promise<void>;
  /** The device of the next boot; `efi` asks the firmware for its UEFI path (options=efiboot). */
  bootDevice(target: BmcTarget, device: BootDevice, efi: boolean): Promise<void>;
}

export interface IpmitoolOptions {
  /** The ipmitool executable; found on PATH (then /usr/bin) when absent. */
  readonly binary?: string;
  /**
   * RMCP+ cipher suite. 3 (HMAC-SHA1, HMAC-SHA1-96, AES-CBC-128) is what every IPMI 2.0 BMC
   * and OpenIPMI's simulator offer; ipmitool's own default (17, SHA-256) is refused by older
   * BMCs, and asking which suites a BMC has costs a 10 s timeout on some of them.
   */
  readonly cipherSuite?: number;
  /** The bound on one ipmitool run, including its retries. */
  readonly timeoutMs?: number;
  /** ipmitool's per-request timeout (-N, seconds) and retries (-R). */
  readonly requestTimeoutS?: number;
  readonly retries?: number;
}

const timeoutMsDefault = 15_000;

export class IpmitoolDriver implements PowerDriver {
  readonly #binary: string;
  readonly #cipherSuite: number;
  readonly #timeoutMs: number;
  readonly #requestTimeoutS: number;
  readonly #retries: number;

  constructor(options: IpmitoolOptions = {}) {
    this.#binary = options.binary ?? findExecutable('ipmitool', ['/usr/bin/ipmitool']) ?? 'ipmitool';
    this.#cipherSuite = options.cipherSuite ?? 3;
    this.#timeoutMs = options.timeoutMs ?? timeoutMsDefault;
    this.#requestTimeoutS = options.requestTimeoutS ?? 1;
    this.#retries = options.retries ?? 2;
  }

  async status(target: BmcTarget): Promise<PowerState> {
    const out = await this.#run(target, ['chassis', 'power', 'status']);
    const state = /Chassis Power is (on|off)/i.exec(out)?.[1]?.toLowerCase();
    if (state === 'on' || state === 'off') return state;
    throw new PowerDriverError('other', `the BMC answered power status with "${firstLine(out)}"`);
  }

  async powerOn(target: BmcTarget): Promise<void> {
    await this.#run(target, ['chassis', 'power', 'on']);
  }

  async powerOff(target: BmcTarget): Promise<void> {
    await this.#run(target, ['chassis', 'power', 'off']);
  }

  async bootDevice(target: BmcTarget, device: BootDevice, efi: boolean): Promise<void> {
    const args = ['chassis', 'bootdev', device === 'pxe' ? 'pxe' : 'disk'];
    if (efi) args.push('options=efiboot');
    await this.#run(target, args);
  }

  /** Runs one ipmitool command; its stdout, or a classified PowerDriverError. */
  #run(target: BmcTarget, command: readonly string[]): Promise<string> {
    const args = [
      '-I',
      'lanplus',
      '-C',
      String(this.#cipherSuite),
      '-H',
      target.host,
      '-p',
      String(target.port),
      '-N',
      String(this.#requestTimeoutS),
      '-R',
      String(this.#retries),
      // -v makes ipmitool say why a session failed (RAKP 2 HMAC invalid: the password).
      '-v',
      ...(target.username === undefined ? [] : ['-U', target.username]),
      '-E',
      ...command,
    ];
    const env: NodeJS.ProcessEnv = {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      IPMI_PASSWORD: target.password ?? '',
    };
    const where = `BMC ${target.host}:${String(target.port)}`;
    return new Promise((resolve, reject) => {
      execFile(
        this.#binary,
        args,
        { env, timeout: this.#timeoutMs, killSignal: 'SIGKILL', maxBuffer: 1024 * 1024 },
        (err, stdout, stderr) => {
          const output = scrub(`${stdout}\n${stderr}`, target.password);
          if (err === null) {
            // ipmitool exits 0 when a boot parameter was refused; its stderr says so.
            const refusal = /^.*failed:.*$/im.exec(stderr);
            if (refusal !== null) {
              reject(
                new PowerDriverError(
                  'refused',
                  `${where} refused ${command.join(' ')}: ${scrub(refusal[0], target.password).trim()}`,
                ),
              );
            } else resolve(stdout);
            return;
          }
          reject(classify(err, output, where, command, this.#timeoutMs, this.#binary));
        },
      );
    });
  }
}

function classify(
  err: { readonly code?: string | number | null | undefined; readonly killed?: boolean | undefined },
  output: string,
  where: string,
  command: readonly string[],
  timeoutMs: number,
  binary: string,
): PowerDriverError {
  if (err.code === 'ENOENT') {
    return new PowerDriverError(
      'other',
      `cannot run ${binary}: it is not installed; install Debian's ipmitool (apt-get install ipmitool)`,
    );
  }
  if (err.killed === true) {
    return new PowerDriverError(
      'unreachable',
      `${where} did not answer within ${String(timeoutMs)} ms; check the address, the port and that the BMC is on the network`,
    );
  }
  if (/RAKP 2 HMAC is invalid|unauthorized name|invalid user ?name|password/i.test(output)) {
    return new PowerDriverError(
      'credentials',
      `${where} refused the login: wrong user name or password; fix the BMC credentials of this hardware (--bmc-credentials-file)`,
    );
  }
  if (/privilege|insufficient/i.test(output)) {
    return new PowerDriverError(
      'credentials',
      `${where}: the user may not ${command.join(' ')}; give it the operator or administrator privilege on the BMC`,
    );
  }
  if (
    /Get Auth Capabilities error|No response|Connection refused|Error issuing Get Channel Authentication/i.test(
      output,
    )
  ) {
    return new PowerDriverError(
      'unreachable',
      `${where} did not answer; check the address, the port and that the BMC is on the network`,
    );
  }
  if (/authentication algorithm|cipher suite/i.test(output)) {
    return new PowerDriverError('other', `${where} does not offer RMCP+ cipher suite 3: ${lastLine(output)}`);
  }
  return new PowerDriverError('other', `${where}: ipmitool ${command.join(' ')} failed: ${lastLine(output)}`);
}

/** Output with any occurrence of the password blanked, in case a tool ever echoes it. */
function scrub(text: string, password: string | undefined): string {
  return password === undefined || password === '' ? text : text.split(password).join('***');
}

function firstLine(text: string): string {
  return text.trim().split('\n')[0]?.slice(0, 200) ?? '';
}

function lastLine(text: string): string {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  return (lines.at(-1) ?? 'no output').slice(0, 300);
}
