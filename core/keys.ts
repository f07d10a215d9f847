import { z } from 'zod';
import { ForbiddenError } from './errors';

/**
 * API keys and their scope (the HTTP and MCP servers check every call against it). A key is
 * `mg_<keyId>_<secret>`: the id names it in lists and revocations, the secret is stored only
 * as its SHA-256 digest. Its scope is a pattern over agent ids, where `*` stands for any run
 * of characters (`team-a-*`, `support-bot`, or `*` for every agent).
 */
export const agentPatternSchema = z
  .string()
  .regex(/^[A-Za-z0-9._:*-]{1,128}$/, 'an agent id pattern: 1-128 of A-Z a-z 0-9 . _ : - and * (any run)');

export const KEY_PREFIX = 'mg_';

/** `mg_<keyId>_<secret>` split into its parts, or undefined when the text is not a key. */
export function parseKey(text: string): { keyId: string; secret: string } | undefined {
  const m = /^mg_([a-z0-9]{12})_([A-Za-z0-9_-]{43})$/.exec(text);
  return m ? { keyId: m[1]!, secret: m[2]! } : undefined;
}

/**
 * Whether the pattern covers the agent id. Linear in both lengths (no backtracking over
 * user text): each `*` is matched lazily, and a mismatch resumes after the last `*` only.
 */
export function agentInScope(pattern: string, agentId: string): boolean {
  let p = 0;
  let a = 0;
  let star = -1;
  let resume = 0;
  while (a < agentId.length) {
    if (p < pattern.length && pattern[p] !== '*' && pattern[p] === agentId[a]) {
      p++;
      a++;
    } else if (p < pattern.length && pattern[p] === '*') {
      star = p++;
      resume = a;
    } else if (star >= 0) {
      p = star + 1;
      a = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === '*') p++;
  return p === pattern.length;
}

/** What a live key may act for, as the servers hold it for one call. */
export interface KeyScope {
  keyId: string;
  agents: string;
}

/**
 * Refuse, before anything is read or changed, a call that names an agent (or a window
 * session) outside the key's scope. A call over every agent (no id) needs a key for `*`.
 */
export function assertInScope(scope: KeyScope, id: string | undefined, what = 'agent'): void {
  if (id === undefined ? scope.agents === '*' : agentInScope(scope.agents, id)) return;
  throw new ForbiddenError(
    id === undefined
      ? `key ${scope.keyId} covers ${scope.agents}, not every ${what}`
      : `key ${scope.keyId} does not cover ${what} ${id}`,
    { keyId: scope.keyId, ...(id !== undefined && { [what === 'agent' ? 'agentId' : 'sessionId']: id }) },
  );
}
