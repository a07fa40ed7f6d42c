// Reading a built-in action's settings from its environment, with Tinkerbell's names. Each
// refusal names the setting, what it holds and what it should hold.
import { builtinSettingProblems, type BuiltinAction } from '../../workflow/builtin-actions.js';
import { ActionError } from './action.js';

export function requiredSetting(env: Readonly<Record<string, string>>, name: string): string {
  const value = env[name];
  if (value === undefined || value.trim() === '') {
    throw new ActionError(`${name} is not set; give it in the action's environment`);
  }
  return value;
}

export function optionalSetting(env: Readonly<Record<string, string>>, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value;
}

/**
 * A permission mode in octal: "0644", "644", "0o644". YAML reads an unquoted 0644 as the number
 * 644, which arrives here as "644" and still means 0644.
 */
export function modeSetting(env: Readonly<Record<string, string>>, name: string, fallback: number): number {
  const value = optionalSetting(env, name);
  if (value === undefined) return fallback;
  const digits = /^(?:0o)?([0-7]{1,4})$/i.exec(value.trim())?.[1];
  if (digits === undefined) {
    throw new ActionError(`${name}=${value} is not an octal permission mode such as 0644 (at most 07777)`);
  }
  return Number.parseInt(digits, 8);
}

/** A user or group id: a whole number, default 0. */
export function idSetting(env: Readonly<Record<string, string>>, name: string): number {
  const value = optionalSetting(env, name);
  if (value === undefined) return 0;
  if (!/^[0-9]{1,10}$/.test(value.trim()) || Number(value) > 0xfffffffe) {
    throw new ActionError(`${name}=${value} is not a numeric id (0 to 4294967294)`);
  }
  return Number(value);
}

/** The checks `template create` makes (builtin-actions.ts), made again on the machine. */
export function checkChoiceSettings(builtin: BuiltinAction, env: Readonly<Record<string, string>>): void {
  const problems = builtinSettingProblems(builtin, env);
  if (problems.length > 0) throw new ActionError(problems.join('; '));
}
