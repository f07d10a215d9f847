import type { Command } from 'commander';
import { CONFIG_SPECS } from '../../core/config';
import { policyDrift, policyOf } from '../../core/policy';
import { applyPolicy, storedPolicy } from '../../store/policy';
import { config, printJson, withClient } from './context';

/** The environment variable of each policy field that differs. */
const variables = (fields: (keyof typeof CONFIG_SPECS)[]) => fields.map((f) => CONFIG_SPECS[f].env);

export function registerPolicyCommands(program: Command): void {
  const policy = program
    .command('policy')
    .description(
      'the one stored policy every worker and client decides by (gate, half-life, capacity, watermarks, lossy opt-in, limits)',
    );
  policy
    .command('show', { isDefault: true })
    .description('print the stored policy, and which of this environment’s variables differ from it')
    .action(() =>
      withClient(async (c) => {
        const { version, ...stored } = (await storedPolicy(c.store))!;
        printJson({
          version,
          policy: stored,
          differsHere: variables(policyDrift(stored, policyOf(config()))),
        });
      }),
    );
  policy
    .command('apply')
    .description(
      'store the policy this environment’s variables give; nightly runs and agent write runs that start after it use it',
    )
    .action(() =>
      withClient(async (c) => {
        const before = c.policy;
        const { version, ...after } = await applyPolicy(c.store, policyOf(config()));
        printJson({ version, policy: after, changed: variables(policyDrift(before, after)) });
      }),
    );
}
