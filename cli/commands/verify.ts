import type { Command } from 'commander';
import { z } from 'zod';
import type { VerifyReport } from '../../store/verify';
import { printJson, withClient } from './context';
import { parseOptions, switchFlag } from './options';

export const verifyOptions = z.object({ agent: z.string().optional(), json: switchFlag });

function printReport(report: VerifyReport): void {
  const { ids, tombstones } = report.checked;
  console.log(
    `${report.ok ? 'ok' : 'FAILED'}: ${report.agents} agent(s), ${ids} ids, ${tombstones} tombstones checked; ${report.findings.length} finding(s)`,
  );
  for (const f of report.findings) console.log(`${f.check}\t${f.agentId}\t${f.id}\t${f.detail}`);
}

export function registerVerifyCommands(program: Command): void {
  program
    .command('verify')
    .description(
      'check the store: every id in hot, in cold or behind a tombstone, none in both tiers, no erased content left, every stand-in standing; exits 1 naming the ids when anything fails',
    )
    .option('-a, --agent <agentId>', 'one agent (default: every registered agent)')
    .option('--json', 'print the report as JSON')
    .action(async (raw: Record<string, unknown>, command: Command) => {
      const o = parseOptions(verifyOptions, raw, command);
      const report = await withClient((c) => c.verify(o.agent !== undefined ? { agentId: o.agent } : {}));
      if (o.json) printJson(report);
      else printReport(report);
      // A failed check is the command's answer, not an error: exit 1 after printing it.
      if (!report.ok) process.exitCode = 1;
    });
}
