// A member's id, as `slipway server --id` names it: the one form the node's configuration, the
// member and drain commands, the replicated state and the CLI's offline tools all accept.

/** The longest member id, in bytes (ASCII). */
export const memberIdBytesMax = 63;

/** 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit. */
export const memberIdPattern = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

/** The form, in the words every refusal uses. */
export const memberIdForm = "1-63 letters, digits, '.', '_' or '-'";

export function isMemberId(id: string): boolean {
  return memberIdPattern.test(id);
}

/** What is wrong with a member id, or undefined. */
export function memberIdProblem(id: string): string | undefined {
  return isMemberId(id) ? undefined : `member id ${JSON.stringify(id.slice(0, 80))} must be ${memberIdForm}`;
}
