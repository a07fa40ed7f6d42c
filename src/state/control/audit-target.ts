// What an audit entry names as the target of a command: ids and names only. Secrets a command
// may carry (a hardware's BMC password and worker token, a token's hash, rendered specs with
// their environment) are never read here, so they cannot reach the trail.
import type { ControlCommand } from './commands.js';

export function auditTarget(command: ControlCommand): string {
  switch (command.type) {
    case 'hardware.put':
      return command.hardware.id;
    case 'hardware.delete':
    case 'hardware.setAllowPXE':
    case 'hardware.token':
    case 'workflow.cancel':
    case 'workflow.retry':
    case 'workflow.delete':
      return command.id;
    case 'hardware.lifecycle':
      return `${command.id} (${command.verb})`;
    case 'hardware.label':
      return `${command.id} (${[...Object.entries(command.set).map(([k, v]) => `${k}=${v}`), ...command.remove.map((k) => `${k}-`)].join(' ')})`;
    case 'hardware.expire':
      return command.id;
    case 'template.put':
    case 'template.delete':
    case 'artifact.put':
    case 'artifact.delete':
    case 'token.delete':
      return command.name;
    case 'token.put':
      return `${command.name} (${command.role})`;
    case 'workflow.create':
      return `${command.id} (template ${command.template}, hardware ${command.hardwareId})`;
    case 'workflow.alternate':
      return `${command.id} (${command.candidates.map((c) => c.hardwareId).join(' ')})`;
    case 'workflow.allocate':
      return `${command.id} (template ${command.template}, selector ${command.selector})`;
    case 'attempt.start':
    case 'attempt.result':
    case 'attempt.lost':
    case 'deadline.expire':
      return command.workflowId;
    case 'credential.issue':
    case 'credential.inventory':
      return command.workerId;
    case 'hardware.inventory':
      return command.id;
    case 'lease.grant':
      return command.grants.map((g) => g.ip).join(' ');
    case 'lease.release':
    case 'lease.decline':
      return command.ip;
    case 'power.request':
      return `${command.hardwareId} (${command.op})`;
    case 'power.claim':
    case 'power.step':
      return command.jobId;
    case 'audit.record':
      return command.target;
    case 'audit.retention':
      return `entries=${command.entries} days=${command.days}`;
    case 'cluster.version':
      return String(command.version);
    case 'workflow.retention':
      return `finishedMax=${command.finishedMax} finishedDays=${command.finishedDays}`;
    case 'hardware.quarantinePolicy':
      return `failures=${command.failures} windowS=${command.windowS}`;
    case 'hardware.acceptRule':
      return command.selector ?? '(cleared)';
    case 'workflow.gc':
      return command.workflows.map((w) => w.id).join(' ');
    case 'pool.create':
      return `${command.name} (template ${command.template}, selector ${command.selector}, size ${command.size})`;
    case 'pool.scale':
      return `${command.name} (size ${command.size})`;
    case 'pool.delete':
      return command.name;
    case 'pool.allocate':
      return `${command.pool} (workflow ${command.id}${command.race === true ? ', race' : command.retry === true ? ', retry' : ''}: ${command.candidates.map((c) => c.hardwareId).join(' ')})`;
    case 'pool.taint':
    case 'pool.resume':
      return command.name;
    case 'pool.reserve':
      return `${command.pool} (spare ${command.hardwareId})`;
    case 'pool.release':
      return `${command.pool} (${command.hardwareId}, ${command.why}${command.release === undefined ? '' : `, workflow ${command.release.id}`})`;
    case 'member.drain':
      return `${command.id} (${command.drained ? 'drain' : 'undrain'})`;
    case 'member.apiAddr':
      return `${command.id} (${command.apiAddr})`;
    default:
      return unreachable(command);
  }
}

function unreachable(x: never): never {
  throw new Error(`unreachable: ${JSON.stringify(x)}`);
}
