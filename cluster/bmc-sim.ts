// A real BMC for tests and the machine lab (`slipway lab up`): OpenIPMI's ipmi_sim (Debian openipmi) serving IPMI v2.0 (RMCP+) on a
// UDP port of 127.0.0.1, in front of a tiny QEMU VM (TCG, 128 MiB, no disk) that its power
// commands start and stop: power on/off/cycle act on the real VM process.
//
// What ipmi_sim needs, found here (openipmi 2.0.33, ipmitool 1.8.19):
//   - RMCP+ (lanplus) needs a `guid` in the LAN section; a user line with a password and the
//     admin privilege; and a cipher suite the simulator knows: it offers suites 0-14 only, so
//     ipmitool's default 17 fails, and asking for the list times out after 10 s. The driver
//     asks for suite 3 (src/power/ipmitool.ts).
//   - ipmi_sim only opens its port while its stdin is open (-n never does): stdin is a pipe
//     kept open until stop().
//   - The boot device: with `startcmd`, ipmi_sim manages the VM process itself but has nowhere
//     to keep a boot device: `chassis bootdev` is answered "Invalid data field in request" (and
//     ipmitool still exits 0). With `chassis_control PROG`, ipmi_sim hands power *and* boot
//     device to PROG (`PROG get power`, `PROG set boot pxe`, ...), and startcmd is no longer
//     used. So mode 'startcmd' is the plain simulator (bootdev refused), and mode
//     'chassis-control' has our script keep the boot device in a file and start QEMU with
//     `-boot n` (pxe) or `-boot c` (disk, the default), honouring `chassis bootdev`.
//   - The VM reaches its BMC through a KCS system interface (QEMU's ipmi-bmc-extern on the
//     chardev ipmi_sim serves, and isa-ipmi-kcs, announced in ACPI and SMBIOS type 38): Linux's
//     ipmi_si and ipmi_devintf give the guest /dev/ipmi0, and `ipmitool lan print` there reads
//     the LAN settings that `lan` gives (docs/operations.md, "Discovery in the lab").
// Every process is stopped by PID (never by name): ipmi_sim by its ChildProcess, the VM by the
// PID its start script wrote.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createSocket } from 'node:dgram';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { commandLine } from '../src/platform/recorded-process.js';
import { findExecutable } from '../src/platform/executable.js';

export type IpmiSimMode = 'startcmd' | 'chassis-control';

export interface IpmiSimOptions {
  readonly mode?: IpmiSimMode;
  readonly username?: string;
  readonly password?: string;
  /** Run ipmi_sim (and so its VM) in this network namespace; its LAN address is `host`. */
  readonly netns?: string;
  /** The LAN address ipmi_sim serves on. Default 127.0.0.1. */
  readonly host?: string;
  /** The LAN port. Default: a free UDP port on 127.0.0.1 (623 is the usual one in a namespace). */
  readonly port?: number;
  /** QEMU's machine: memory, disks, NICs, firmware, console. Default a 128 MiB VM with nothing. */
  readonly vm?: string;
  /** QEMU's -boot value for each boot device. Default n and c. */
  readonly bootOrder?: { readonly pxe: string; readonly disk: string };
  /** Whether the BMC answers; default an ipmitool status from this process. */
  readonly probe?: (sim: IpmiSim) => Promise<boolean>;
  /** How long each of the two starts waits for the probe to pass; default 20 s. */
  readonly answerWithinMs?: number;
  /**
   * The LAN settings the BMC reports (`ipmitool lan print`): its IPv4 address and MAC. Default
   * none: ipmi_sim then answers 0.0.0.0, as an unconfigured BMC does.
   */
  readonly lan?: { readonly address: string; readonly mac: string };
  /**
   * What the caller can tell about a BMC that never answered (e.g. the prober's neighbour
   * table), added to the error beside what the simulator's process and sockets show.
   */
  readonly diagnose?: () => Promise<string>;
}

/** The Debian packages the harness needs, by the executable each provides. */
const needed: readonly (readonly [string, string])[] = [
  ['ipmi_sim', 'openipmi'],
  ['ipmitool', 'ipmitool'],
  ['qemu-system-x86_64', 'qemu-system-x86'],
];

/** A reason to skip when a tool is missing (install with apt-get), else undefined. */
export function ipmiSimMissing(): string | undefined {
  const missing = needed.filter(
    ([exe]) => findExecutable(exe, [`/usr/bin/${exe}`, `/usr/sbin/${exe}`]) === undefined,
  );
  if (missing.length === 0) return undefined;
  return `missing ${missing.map(([exe]) => exe).join(', ')}: apt-get install ${missing.map(([, pkg]) => pkg).join(' ')}`;
}

/** A free UDP port on 127.0.0.1 (bound, read, released). */
async function freeUdpPort(): Promise<number> {
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const { port } = socket.address();
  await new Promise<void>((resolve) => socket.close(() => resolve()));
  return port;
}

/** A free TCP port on 127.0.0.1, for the VM's chardev link to ipmi_sim. */
async function freeTcpPort(): Promise<number> {
  const { createServer } = await import('node:net');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export class IpmiSim {
  readonly host: string;
  readonly port: number;
  readonly username: string;
  readonly password: string;
  readonly mode: IpmiSimMode;
  readonly dir: string;
  readonly #proc: ChildProcess;

  private constructor(fields: {
    host: string;
    port: number;
    username: string;
    password: string;
    mode: IpmiSimMode;
    dir: string;
    proc: ChildProcess;
  }) {
    this.host = fields.host;
    this.port = fields.port;
    this.username = fields.username;
    this.password = fields.password;
    this.mode = fields.mode;
    this.dir = fields.dir;
    this.#proc = fields.proc;
  }

  /** ipmi:// address for hardware documents. */
  get address(): string {
    return `ipmi://${this.host}:${String(this.port)}`;
  }

  static async start(options: IpmiSimOptions = {}): Promise<IpmiSim> {
    const mode = options.mode ?? 'startcmd';
    const username = options.username ?? 'admin';
    const password = options.password ?? 'sim-Secret-7';
    const dir = mkdtempSync(join(tmpdir(), 'slipway-ipmisim-'));
    const state = join(dir, 'state');
    mkdirSync(state);
    const host = options.host ?? '127.0.0.1';
    const port = options.port ?? (await freeUdpPort());
    const vmPort = await freeTcpPort();
    const script = join(dir, 'vm.sh');
    writeFileSync(script, vmScript(dir, vmPort, options.vm, options.bootOrder));
    chmodSync(script, 0o755);
    const power =
      mode === 'startcmd'
        ? [`  startcmd "${script} start"`, '  startnow false', '  poweroff_wait 2', '  kill_wait 2']
        : [`  chassis_control "${script} control 0x20"`];
    writeFileSync(
      join(dir, 'lan.conf'),
      [
        'name "slipway-sim"',
        'set_working_mc 0x20',
        '  startlan 1',
        `    addr ${host} ${String(port)}`,
        '    priv_limit admin',
        '    allowed_auths_callback none md2 md5 straight',
        '    allowed_auths_user none md2 md5 straight',
        '    allowed_auths_operator none md2 md5 straight',
        '    allowed_auths_admin none md2 md5 straight',
        // RMCP+ needs a GUID: without one ipmi_sim answers IPMI 1.5 sessions only.
        '    guid a123456789abcdefa123456789abcdef',
        ...(options.lan === undefined
          ? []
          : [`    lan_config_program "${lanScript(dir, options.lan)} eth0"`]),
        '  endlan',
        `  serial 15 127.0.0.1 ${String(vmPort)} codec VM`,
        ...power,
        `  user 2 true "${username}" "${password}" admin 10 none md2 md5 straight`,
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(dir, 'sim.emu'),
      [
        'mc_setbmc 0x20',
        'mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr',
        'sel_enable 0x20 1000 0x0a',
        'mc_enable 0x20',
        '',
      ].join('\n'),
    );
    const simArgs = ['ipmi_sim', '-c', join(dir, 'lan.conf'), '-f', join(dir, 'sim.emu'), '-s', state];
    // `ip netns exec` execs ipmi_sim in place: the PID stays the simulator's.
    const argv = options.netns === undefined ? simArgs : ['ip', 'netns', 'exec', options.netns, ...simArgs];
    // What ipmi_sim prints goes to a file, so that a BMC that never answers says why.
    const logFile = join(dir, 'ipmi_sim.log');
    const probe = options.probe ?? ((s: IpmiSim): Promise<boolean> => s.#answers());
    // On a loaded machine (the suite's QEMU tests beside it) a simulator has been seen to take
    // over 15 s to answer, and now and then not to answer on its LAN port at all; a second
    // simulator on the same configuration then does. So: two starts, 20 s each.
    for (let start = 1; ; start++) {
      const log = openSync(logFile, 'a');
      const proc = spawn(argv[0]!, argv.slice(1), {
        // stdin stays an open pipe: ipmi_sim does not open its LAN port without it.
        stdio: ['pipe', log, log],
        cwd: dir,
      });
      closeSync(log);
      const sim = new IpmiSim({ host, port, username, password, mode, dir, proc });
      try {
        await waitFor(
          'ipmi_sim to answer on its LAN port',
          () => {
            if (proc.exitCode !== null) throw new Error(`ipmi_sim exited with ${String(proc.exitCode)}`);
            return probe(sim);
          },
          options.answerWithinMs ?? 20_000,
          100,
        );
        return sim;
      } catch (err) {
        const said = existsSync(logFile) ? readFileSync(logFile, 'utf8').trim().slice(-2000) : '';
        const again = start < 2 && proc.exitCode === null;
        // Read before stop(): the process and its socket are what a silent BMC is about.
        const seen = again ? '' : await silenceSeen(proc.pid, port, options.netns, options.diagnose);
        await sim.stop({ keepDir: again });
        if (again) continue;
        if (!(err instanceof Error)) throw err;
        const message =
          `${err.message} (started ${start} times); ipmi_sim printed: ${said === '' ? 'nothing' : said}` +
          `; seen: ${seen}`;
        throw new Error(message, { cause: err });
      }
    }
  }

  /** Whether the BMC answers an RMCP ping-sized request: a real ipmitool status. */
  async #answers(): Promise<boolean> {
    if (this.#proc.exitCode !== null) throw new Error(`ipmi_sim exited with ${String(this.#proc.exitCode)}`);
    const { IpmitoolDriver } = await import('../src/power/index.js');
    try {
      await new IpmitoolDriver({ timeoutMs: 3000, retries: 0 }).status(this.target());
      return true;
    } catch {
      return false;
    }
  }

  target(password = this.password): { host: string; port: number; username: string; password: string } {
    return { host: this.host, port: this.port, username: this.username, password };
  }

  /** The PID of the running VM (QEMU), or undefined when it is off. */
  vmPid(): number | undefined {
    const file = join(this.dir, 'vm.pid');
    if (!existsSync(file)) return undefined;
    const pid = Number(readFileSync(file, 'utf8').trim());
    const argv = Number.isInteger(pid) && pid > 0 ? commandLine(pid) : undefined;
    return argv?.some((a) => a.includes('qemu-system')) === true ? pid : undefined;
  }

  /** The running VM's boot order (QEMU's -boot value), or undefined when it is off. */
  vmBootOrder(): string | undefined {
    const pid = this.vmPid();
    const argv = pid === undefined ? undefined : commandLine(pid);
    if (argv === undefined) return undefined;
    const i = argv.indexOf('-boot');
    return i < 0 ? undefined : argv[i + 1];
  }

  /** Stops the VM (by its PID) and ipmi_sim (by its ChildProcess), and removes the directory. */
  async stop(o: { keepDir?: boolean } = {}): Promise<void> {
    const vm = this.vmPid();
    if (this.#proc.exitCode === null && this.#proc.signalCode === null) {
      const exited = new Promise<void>((resolve) => this.#proc.once('exit', () => resolve()));
      this.#proc.stdin?.end();
      this.#proc.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 3000))]);
      if (this.#proc.exitCode === null && this.#proc.signalCode === null) this.#proc.kill('SIGKILL');
    }
    if (vm !== undefined) {
      try {
        process.kill(vm, 'SIGKILL');
      } catch {
        // already gone
      }
      await waitFor('the VM to exit', () => this.vmPid() === undefined, 5000, 50);
    }
    // SLIPWAY_KEEP_IPMISIM=1 keeps lan.conf, vm.sh and the VM logs for a look after a failure.
    if (o.keepDir !== true && process.env['SLIPWAY_KEEP_IPMISIM'] === undefined) {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}

/**
 * The VM's script: `vm.sh start` (ipmi_sim's startcmd: becomes QEMU), or `vm.sh control
 * DEVICE get|set ...` (ipmi_sim's chassis_control: power and boot device, QEMU in the
 * background). QEMU's output goes to files, never to the pipe ipmi_sim reads PROG's answer from.
 */
/**
 * ipmi_sim asks this program for the LAN settings that live outside the BMC proper
 * (`PROG DEVICE get ip_addr mac_addr ...`), one "name:value" line each.
 */
function lanScript(dir: string, lan: { readonly address: string; readonly mac: string }): string {
  const script = join(dir, 'lan.sh');
  const values: Record<string, string> = {
    ip_addr_src: 'static',
    ip_addr: lan.address,
    mac_addr: lan.mac,
    subnet_mask: '255.255.255.0',
    default_gw_ip_addr: '0.0.0.0',
    default_gw_mac_addr: '00:00:00:00:00:00',
    backup_gw_ip_addr: '0.0.0.0',
    backup_gw_mac_addr: '00:00:00:00:00:00',
  };
  const cases = Object.entries(values).map(([name, value]) => `    ${name}) echo "${name}:${value}" ;;`);
  const body = [
    '#!/bin/sh',
    '[ "$2" = get ] || exit 0',
    'shift 2',
    'for p in "$@"; do',
    '  case $p in',
    ...cases,
    '  esac',
    'done',
    '',
  ];
  writeFileSync(script, body.join('\n'));
  chmodSync(script, 0o755);
  return script;
}

function vmScript(
  dir: string,
  vmPort: number,
  vm = `-m 128 -net none -serial file:${dir}/serial.log`,
  bootOrder = { pxe: 'n', disk: 'c' },
): string {
  const qemu = [
    'qemu-system-x86_64 -accel tcg -display none -monitor none',
    vm,
    `-chardev socket,id=ipmi0,host=127.0.0.1,port=${String(vmPort)},reconnect=10`,
    '-device ipmi-bmc-extern,id=bmc0,chardev=ipmi0 -device isa-ipmi-kcs,bmc=bmc0',
  ].join(' ');
  return `#!/bin/sh
dir=${dir}
boot() { if [ "$(cat "$dir/bootdev" 2>/dev/null)" = pxe ]; then echo ${bootOrder.pxe}; else echo ${bootOrder.disk}; fi; }
running() { [ -f "$dir/vm.pid" ] && grep -q qemu "/proc/$(cat "$dir/vm.pid")/cmdline" 2>/dev/null; }
case "$1" in
start)
  echo $$ > "$dir/vm.pid"
  exec ${qemu} -boot "$(boot)" </dev/null >>"$dir/qemu.log" 2>&1
  ;;
control)
  shift 2
  op=$1; shift
  while [ $# -gt 0 ]; do
    parm=$1; shift
    if [ "$op" = get ]; then
      case $parm in
      power) if running; then echo power:1; else echo power:0; fi ;;
      boot) if [ "$(boot)" = ${bootOrder.pxe} ]; then echo boot:pxe; else echo boot:default; fi ;;
      *) echo "Invalid parameter: $parm"; exit 1 ;;
      esac
    else
      val=$1; shift
      case $parm in
      power)
        if [ "$val" = 1 ]; then
          if ! running; then
            ${qemu} -boot "$(boot)" </dev/null >>"$dir/qemu.log" 2>&1 &
            echo $! > "$dir/vm.pid"
          fi
        elif running; then
          kill -9 "$(cat "$dir/vm.pid")"
        fi ;;
      boot) case $val in pxe) echo pxe > "$dir/bootdev" ;; *) echo disk > "$dir/bootdev" ;; esac ;;
      reset|identify) ;;
      *) echo "Invalid parameter: $parm"; exit 1 ;;
      esac
    fi
  done
  ;;
esac
`;
}

/**
 * What the kernel shows of a simulator that never answered: its process state and where it
 * waits, the UDP sockets on its port with their queues (bytes waiting unread mean it stopped
 * reading; none bound means it never opened the port), and whatever the caller adds.
 */
async function silenceSeen(
  pid: number | undefined,
  port: number,
  netns: string | undefined,
  diagnose: (() => Promise<string>) | undefined,
): Promise<string> {
  const read = (file: string): string => {
    try {
      return readFileSync(file, 'utf8').trim();
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  };
  const state = pid === undefined ? 'no pid' : (/^State:.*$/m.exec(read(`/proc/${pid}/status`))?.[0] ?? '?');
  const wchan = pid === undefined ? '' : read(`/proc/${pid}/wchan`);
  const ss = ['ss', '-uanp', `( sport = :${port} )`];
  const argv = netns === undefined ? ss : ['ip', 'netns', 'exec', netns, ...ss];
  const sockets = await new Promise<string>((resolve) => {
    execFile(argv[0]!, argv.slice(1), { timeout: 5000 }, (err, stdout) => {
      resolve(err === null ? stdout.trim() : err.message);
    });
  });
  const more = diagnose === undefined ? '' : await diagnose().catch((err: unknown) => String(err));
  return [`ipmi_sim ${state}, waiting in ${wchan}`, `sockets: ${sockets}`, more]
    .filter((l) => l !== '')
    .join('; ');
}

/** Polls `check` until it holds; fails naming `what` after `deadlineMs`. */
async function waitFor(
  what: string,
  check: () => boolean | Promise<boolean>,
  deadlineMs: number,
  everyMs: number,
): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
