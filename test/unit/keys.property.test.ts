import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ForbiddenError } from '../../core/errors';
import { agentInScope, assertInScope, parseKey } from '../../core/keys';

/** The meaning of a pattern, said another way: `*` is any run, everything else itself. */
function reference(pattern: string, id: string): boolean {
  const source = pattern
    .split('*')
    .map((part) => part.replace(/[.:-]/g, (c) => `\\${c}`))
    .join('.*');
  return new RegExp(`^${source}$`).test(id);
}

const small = fc.string({ unit: fc.constantFrom('a', 'b', '-', '.'), maxLength: 8 });
const pattern = fc.string({ unit: fc.constantFrom('a', 'b', '-', '.', '*'), maxLength: 8 });

describe('agentInScope (fast-check)', () => {
  it('agrees with the glob meaning of the pattern', () => {
    fc.assert(fc.property(pattern, small, (p, id) => agentInScope(p, id) === reference(p, id)));
  });

  it('an id is covered by itself, by * and by any pattern made of it with stars inserted', () => {
    fc.assert(
      fc.property(small, fc.array(fc.nat(8)), (id, cuts) => {
        let p = id;
        for (const at of [...cuts].sort((a, b) => b - a)) p = `${p.slice(0, at)}*${p.slice(at)}`;
        return agentInScope(id, id) && agentInScope('*', id) && agentInScope(p, id);
      }),
    );
  });
});

describe('assertInScope', () => {
  const scope = { keyId: 'k00000000000', agents: 'team-a-*' };
  it('passes an id the pattern covers, refuses another and a call over every agent', () => {
    expect(() => assertInScope(scope, 'team-a-7')).not.toThrow();
    expect(() => assertInScope(scope, 'team-b-7')).toThrow(ForbiddenError);
    expect(() => assertInScope(scope, undefined)).toThrow(ForbiddenError);
    expect(() => assertInScope({ ...scope, agents: '*' }, undefined)).not.toThrow();
  });

  it('reads keys of the one form only', () => {
    expect(parseKey(`mg_0123456789ab_${'x'.repeat(43)}`)).toEqual({
      keyId: '0123456789ab',
      secret: 'x'.repeat(43),
    });
    expect(parseKey('mg_0123456789ab_short')).toBeUndefined();
    expect(parseKey(`Bearer mg_0123456789ab_${'x'.repeat(43)}`)).toBeUndefined();
  });
});
