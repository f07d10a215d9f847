import { Command, CommanderError } from 'commander';
import { MemgateError } from '../core/errors';
import { registerAuditCommands } from '../audit/command';
import { registerExportCommands } from './commands/export';
import { registerImpossibleCommands } from './commands/impossible';
import { registerNightlyCommands } from './commands/nightly';
import { registerKeyCommands } from './commands/keys';
import { registerMcpCommands } from './commands/mcp';
import { registerMemoryCommands } from './commands/memory';
import { registerPolicyCommands } from './commands/policy';
import { registerServeCommands } from './commands/serve';
import { registerStackCommands } from './commands/stack';
import { registerVerifyCommands } from './commands/verify';
import { registerWorkerCommands } from './commands/worker';
import { registerWindowCommands } from './commands/window';

/** `memgate`: the operators' command line. Exit code 2 for bad input or configuration, 1 otherwise. */
export function buildProgram(): Command {
  const program = new Command('memgate')
    .description('memory service for long-horizon LLM agents')
    .exitOverride();
  registerWorkerCommands(program);
  registerMemoryCommands(program);
  registerStackCommands(program);
  registerAuditCommands(program);
  registerImpossibleCommands(program);
  registerWindowCommands(program);
  registerNightlyCommands(program);
  registerVerifyCommands(program);
  registerExportCommands(program);
  registerPolicyCommands(program);
  registerKeyCommands(program);
  registerServeCommands(program);
  registerMcpCommands(program);
  return program;
}

export async function main(argv: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv);
    // A command whose answer is "no" (verify) sets the exit code rather than throwing.
    return Number(process.exitCode ?? 0);
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    if (err instanceof MemgateError) {
      console.error(`error [${err.type}]: ${err.message}`);
      return err.type === 'InvalidInput' || err.type === 'InvalidConfig' ? 2 : 1;
    }
    console.error(err);
    return 1;
  }
}

if (require.main === module) {
  void main(process.argv).then((code) => process.exit(code));
}
