// Parsing flag values that several commands share. A bad value is a UsageError: exit 2 with a
// message naming the flag and what it must be.
import { UsageError } from './output.js';

/** A whole number (digits only). */
export function wholeNumber(text: string, flag: string): number {
  if (!/^\d+$/.test(text)) throw new UsageError(`${flag} must be a whole number, got "${text}"`);
  return Number(text);
}

/** `n1=127.0.0.1:7011,n2=127.0.0.1:7012` as ids and addresses; the addresses are checked later. */
export function idAddressList(text: string, flag: string): { id: string; addr: string }[] {
  return text
    .split(',')
    .filter((item) => item.trim() !== '')
    .map((item) => {
      const eq = item.indexOf('=');
      if (eq <= 0) throw new UsageError(`${flag}: "${item}" must be ID=HOST:PORT`);
      return { id: item.slice(0, eq).trim(), addr: item.slice(eq + 1).trim() };
    });
}
