// Goal: Slipway installs like a product on a clean Debian 13: `npm run package` builds a .deb
// that apt installs with its dependencies (Debian's own Node.js among them), puts `slipway` on
// PATH, creates the service user, and ships systemd units and a default configuration with which
// the node starts as its unit says (as the slipway user, with only the unit's capabilities) and
// answers `slipway cluster status`.
// Method: debootstrap a minimal Debian 13 (trixie) root from Debian's archive, install the .deb
// into it with apt, then start the node inside that root (chroot) in a network namespace of its
// own, from the installed unit's ExecStart, User, Group and AmbientCapabilities: systemd does
// not run on this machine, so the unit's settings are applied by hand with util-linux's setpriv
// (the unit file is read from the installed root, so a change to it is what is tested).
// The fresh debootstrap result is kept as a tarball in the user's cache for a week (as pbuilder
// keeps its base.tgz), and apt's downloaded packages beside it, so later runs unpack the same
// clean root instead of fetching and configuring it again; nothing else is ever written to them.
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { waitFor } from '../support/wait.js';

const run = promisify(execFile);
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const mirror = process.env['SLIPWAY_DEBIAN_MIRROR'] ?? 'http://deb.debian.org/debian';
const version = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string })
  .version;
const netns = `slw-pkg-${String(process.pid)}`;

const work = mkdtempSync(join(tmpdir(), 'slipway-package-'));
const root = join(work, 'trixie');
const cache = join(process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'slipway');
const mirrorKey = createHash('sha256').update(mirror).digest('hex').slice(0, 12);
/** The clean root as debootstrap left it, per mirror; refreshed after a week. */
const baseTarball = join(cache, `debian-trixie-minbase-${mirrorKey}.tar`);
const baseMaxAgeMs = 7 * 24 * 3600_000;
/** apt's downloaded packages, bound into the root while apt runs. */
const aptArchives = join(cache, `debian-trixie-apt-archives-${mirrorKey}`);
let procMounted = false;
let archivesMounted = false;
let node: ChildProcess | undefined;

/** Runs a command inside the installed root, in the test's network namespace. */
function inRoot(args: readonly string[], timeoutMs = 60_000): Promise<{ stdout: string; stderr: string }> {
  return run('ip', ['netns', 'exec', netns, 'chroot', root, ...args], { timeout: timeoutMs });
}

/** The [Service] settings of an installed unit, by key (the last one given wins, as in systemd). */
function serviceSettings(unitText: string): Map<string, string> {
  const settings = new Map<string, string>();
  let inService = false;
  for (const raw of unitText.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('[')) inService = line === '[Service]';
    const eq = line.indexOf('=');
    if (!inService || line.startsWith('#') || eq <= 0) continue;
    settings.set(line.slice(0, eq), line.slice(eq + 1));
  }
  return settings;
}

before(async () => {
  const built = await run('bash', [join(repoRoot, 'packaging/build-deb.sh'), join(work, 'out')], {
    cwd: repoRoot,
    timeout: 600_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  const deb = built.stdout.trim().split('\n').at(-1) ?? '';
  assert.ok(deb.endsWith(`slipway_${version}_amd64.deb`) && existsSync(deb), built.stdout);
  await cleanRoot();
  await run('cp', [deb, join(root, 'tmp', 'slipway.deb')]);
  mkdirSync(join(aptArchives, 'partial'), { recursive: true });
  await run('mount', ['--bind', aptArchives, join(root, 'var/cache/apt/archives')]);
  archivesMounted = true;
  await run('mount', ['-t', 'proc', 'proc', join(root, 'proc')]);
  procMounted = true;
  await run('ip', ['netns', 'add', netns]);
  await run('ip', ['netns', 'exec', netns, 'ip', 'link', 'set', 'lo', 'up']);
});

/** A minimal Debian 13 at `root`: unpacked from the cached debootstrap result, or made (and cached). */
async function cleanRoot(): Promise<void> {
  const fresh = existsSync(baseTarball) && Date.now() - statSync(baseTarball).mtimeMs < baseMaxAgeMs;
  if (fresh) {
    mkdirSync(root);
    await run('tar', ['-xpf', baseTarball, '-C', root, '--numeric-owner'], { timeout: 300_000 });
    return;
  }
  await run('debootstrap', ['--variant=minbase', 'trixie', root, mirror], {
    timeout: 900_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  mkdirSync(cache, { recursive: true });
  const partial = `${baseTarball}.partial`;
  await run('tar', ['-cpf', partial, '-C', root, '--numeric-owner', '.'], { timeout: 300_000 });
  renameSync(partial, baseTarball);
}

after(async () => {
  if (node?.pid !== undefined && node.exitCode === null) node.kill('SIGKILL');
  if (procMounted) await run('umount', ['--lazy', join(root, 'proc')]).catch(() => undefined);
  if (archivesMounted)
    await run('umount', ['--lazy', join(root, 'var/cache/apt/archives')]).catch(() => undefined);
  await run('ip', ['netns', 'del', netns]).catch(() => undefined);
  rmSync(work, { recursive: true, force: true });
});

describe('the Debian package on a clean Debian 13', { timeout: 1_800_000 }, () => {
  it('installs with apt: slipway on PATH, the service user, the units and the configuration', async () => {
    await run(
      'chroot',
      [
        root,
        'sh',
        '-c',
        'apt-get update -qq && apt-get install -y -qq --no-install-recommends /tmp/slipway.deb',
      ],
      {
        timeout: 900_000,
        env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
        maxBuffer: 64 * 1024 * 1024,
      },
    );
    const printed = await inRoot(['slipway', '--version']);
    assert.equal(printed.stdout.trim(), version);
    const user = await inRoot(['getent', 'passwd', 'slipway']);
    assert.match(user.stdout, /^slipway:x:\d+:\d+:[^:]*:\/var\/lib\/slipway:/);
    for (const file of [
      'usr/lib/systemd/system/slipway.service',
      'usr/lib/systemd/system/slipway-balancer-follow.service',
      'etc/slipway/server.yaml',
      'etc/default/slipway-balancer-follow',
      'usr/share/man/man1/slipway.1.gz',
    ])
      assert.ok(existsSync(join(root, file)), file);
    // The shipped configuration is valid as it stands.
    const effective = await inRoot([
      'slipway',
      'server',
      '--config',
      '/etc/slipway/server.yaml',
      '--print-config',
    ]);
    assert.match(effective.stdout, /^data-dir: \/var\/lib\/slipway$/m);
  });

  it('starts from its unit as the slipway user with only the unit capabilities, answers cluster status, stops on SIGTERM', async () => {
    const unit = serviceSettings(readFileSync(join(root, 'usr/lib/systemd/system/slipway.service'), 'utf8'));
    const capabilities = (unit.get('AmbientCapabilities') ?? '')
      .split(/\s+/)
      .filter((c) => c !== '')
      .map((c) => `+${c.replace(/^CAP_/, '').toLowerCase()}`)
      .join(',');
    assert.equal(capabilities, '+net_bind_service,+net_admin,+net_raw');
    const execStart = (unit.get('ExecStart') ?? '').split(/\s+/);
    assert.equal(execStart[0], '/usr/bin/slipway');
    node = spawn(
      'ip',
      [
        ...['netns', 'exec', netns, 'chroot', root, 'setpriv'],
        `--reuid=${unit.get('User') ?? ''}`,
        `--regid=${unit.get('Group') ?? ''}`,
        '--init-groups',
        `--inh-caps=${capabilities}`,
        `--ambient-caps=${capabilities}`,
        ...execStart,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    node.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    let status = '';
    await waitFor(
      'the packaged node to answer cluster status as leader',
      async () => {
        const r = await inRoot(
          ['slipway', '--server', '127.0.0.1:7001', '-o', 'json', 'cluster', 'status'],
          20_000,
        ).catch(() => undefined);
        status = r?.stdout ?? '';
        return /"role":\s*"leader"/.test(status);
      },
      120_000,
      500,
    );
    assert.match(status, /"node":\s*"n1"/);
    // The node runs as the service user with exactly the unit's capabilities (bits 10, 12, 13).
    const procStatus = readFileSync(`/proc/${String(node.pid)}/status`, 'utf8');
    const uid = (await inRoot(['id', '-u', 'slipway'])).stdout.trim();
    assert.match(procStatus, new RegExp(`^Uid:\\s+${uid}\\s+${uid}\\s+${uid}\\s+${uid}$`, 'm'));
    assert.match(procStatus, /^CapAmb:\s+0000000000003400$/m);
    assert.match(procStatus, /^CapEff:\s+0000000000003400$/m);
    const exited = new Promise<number | null>((resolve) => node?.once('exit', (code) => resolve(code)));
    node.kill('SIGTERM');
    assert.equal(await exited, 0, stderr);
  });
});
