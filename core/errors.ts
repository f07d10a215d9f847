/**
 * Every error memgate raises is a MemgateError with a stable `type` a caller can switch on.
 * The same `type` travels through Temporal as the ApplicationFailure type, so a client can
 * turn a failed Update back into the class it started as (see client/errors.ts).
 */
export abstract class MemgateError extends Error {
  abstract readonly type: MemgateErrorType;
  /** Whether retrying the same call could succeed (Temporal treats false as non-retryable). */
  readonly retryable: boolean = false;
  readonly details: Record<string, unknown>;

  constructor(message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = new.target.name;
    this.details = details;
  }
}

/** The closed list of error types: every failure a caller sees has one of them. */
export const MEMGATE_ERROR_TYPES = [
  'InvalidInput',
  'InvalidConfig',
  'EvictionBoundaryError',
  'RehydrationBlocked',
  'NotFound',
  'Conflict',
  'StackUnavailable',
  'ModelError',
  'Unauthenticated',
  'Forbidden',
  'RateLimited',
  'QuotaExceeded',
] as const;
export type MemgateErrorType = (typeof MEMGATE_ERROR_TYPES)[number];

export function isMemgateErrorType(type: unknown): type is MemgateErrorType {
  return (MEMGATE_ERROR_TYPES as readonly unknown[]).includes(type);
}

export interface Issue {
  /** Dotted path of the offending field, e.g. `entries.2.salience`. */
  path: string;
  message: string;
}

/** Input rejected at a boundary (Update validator, client call, CLI). Nothing was written. */
export class InvalidInputError extends MemgateError {
  readonly type = 'InvalidInput' as const;
  readonly issues: Issue[];
  constructor(message: string, issues: Issue[] = []) {
    super(
      issues.length
        ? `${message}: ${issues.map((i) => `${i.path || '(root)'}: ${i.message}`).join('; ')}`
        : message,
      {
        issues,
      },
    );
    this.issues = issues;
  }
}

/** A configuration value is missing or malformed; names the variable and what is allowed. */
export class InvalidConfigError extends MemgateError {
  readonly type = 'InvalidConfig' as const;
  constructor(
    readonly variable: string,
    readonly allowed: string,
    received: unknown,
  ) {
    super(`${variable}=${JSON.stringify(received)} is invalid: ${allowed}`, { variable, allowed, received });
  }
}

/**
 * The eviction policy cannot tell dormant from dead (reclaimFloor >= gateThreshold), or
 * evicting this entry would let consumers silently substitute stale facts
 * (docs/nightly.md, Nightly reflective consolidation).
 */
export class EvictionBoundaryError extends MemgateError {
  readonly type = 'EvictionBoundaryError' as const;
}

export class NotFoundError extends MemgateError {
  readonly type = 'NotFound' as const;
}

/** The operation conflicts with current state (e.g. unpinning a segment that is not pinned). */
export class ConflictError extends MemgateError {
  readonly type = 'Conflict' as const;
}

/** A server the command needs (Temporal, MongoDB protocol) cannot be reached or obtained. */
export class StackUnavailableError extends MemgateError {
  readonly type = 'StackUnavailable' as const;
  override readonly retryable = true;
}

/**
 * A model endpoint failed or answered outside its JSON schema. Retryable when another try
 * could succeed (timeouts, rate limits, server errors, malformed output); Temporal retries it.
 */
export class ModelError extends MemgateError {
  readonly type = 'ModelError' as const;
  override readonly retryable: boolean;
  constructor(message: string, retryable: boolean, details: Record<string, unknown> = {}) {
    super(message, details);
    this.retryable = retryable;
  }
}

/** A call to a server (HTTP, MCP) without a live API key: missing, malformed, unknown or revoked. */
export class UnauthenticatedError extends MemgateError {
  readonly type = 'Unauthenticated' as const;
}

/** A call whose key does not cover the agent (or session) it names; nothing was read or changed. */
export class ForbiddenError extends MemgateError {
  readonly type = 'Forbidden' as const;
}

/**
 * A call over its key's share of a server (MEMGATE_HTTP_RATE_LIMIT): refused before anything
 * was read, so one caller cannot slow the others. `details.retryAfterMs` says when to try again.
 */
export class RateLimitedError extends MemgateError {
  readonly type = 'RateLimited' as const;
  override readonly retryable = true;
}

/**
 * A call its key's quota refuses (MEMGATE_KEY_MAX_AGENTS, MEMGATE_KEY_MAX_WINDOWS): nothing was
 * written. Not retryable as it stands: the key holds its quota until it gives something back.
 */
export class QuotaExceededError extends MemgateError {
  readonly type = 'QuotaExceeded' as const;
}
