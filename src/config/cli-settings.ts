/**
 * Settings of what each CLI is and gets: the binary and its extra flags,
 * the data and workspace directories, its API credentials and environment,
 * and how it is started and stopped. One group of settings.ts's schema,
 * kept apart to keep each file small.
 */
import { z } from 'zod'
import { defaulted, optional } from './setting-docs.js'
import { commaList, flag, ms } from './setting-rules.js'
import { tenantKeysOrProblem } from './values.js'

/** Environment variable → rule, default and meaning. */
export const cliSettings = {
  DATA_DIR: defaulted(z.string().min(1), './data', 'gateway data (workspaces, pid files, the store secret, CLI config dirs)'),
  CLAUDE_BIN: optional(z.string().min(1), 'the `@anthropic-ai/claude-code` dependency\'s binary, else `claude` on PATH', 'the CLI to spawn'),
  CLAUDE_ARGS_EXTRA: defaulted(z.string().transform((v) => v.split(/\s+/).filter((a) => a !== '')), '', 'operator-only extra CLI flags, space separated'),
  WORKSPACE_ROOT: optional(z.string().min(1), '`$DATA_DIR/workspaces`', 'sessions run in `<root>/<tenant>/<cwd or session id>`; must not hold `DATA_DIR`'),
  ANTHROPIC_API_KEY: optional(z.string(), '(none)',
    'the CLI\'s Anthropic API key (from `_FILE`, it is in no process\'s environment); in the sandbox only the CLI\'s egress proxy holds it (`SANDBOX_CREDENTIALS`)', true),
  ANTHROPIC_AUTH_TOKEN: optional(z.string(), '(none)', 'a bearer token for the CLI instead of a key (an LLM gateway\'s), held like the key', true),
  TENANT_API_KEYS: optional(z.string().transform((v, ctx) => {
    const keys = tenantKeysOrProblem(v)
    if (typeof keys !== 'string') return keys
    ctx.addIssue({ code: 'custom', message: keys })
    return z.NEVER
  }), '(none: every tenant\'s CLI gets `ANTHROPIC_API_KEY`)',
  '`tenant=key,tenant2=key2`: a tenant\'s own Anthropic API key for its CLIs, in place of `ANTHROPIC_API_KEY` / `ANTHROPIC_AUTH_TOKEN` (held like them): its usage, rate limits and Files stay in its own workspace', true),
  CLI_ENV_ALLOW: defaulted(commaList(), '',
    'extra variables for the CLI besides the documented list: names, or prefixes ending in `_` or `*` (e.g. `AWS_,GOOGLE_` for Bedrock/Vertex)'),
  CLI_SPAWN: defaulted(z.enum(['helper', 'direct']), 'helper',
    'how CLIs are started: `helper` (a small process forked at start starts each one and hands its pipes over, so a start never holds the gateway\'s event loop) or `direct` (spawn() from the gateway, which forks it: the event loop waits longer the more memory the gateway has)'),
  CLI_STOP_TIMEOUT_MS: defaulted(ms(0), 3_000, 'each stop step (stdin closed, SIGTERM) waits this long before the next'),
  TENANT_CONFIG_DIRS: defaulted(flag(), 'true', 'each tenant\'s CLI config dir is `$DATA_DIR/claude-config/<tenant>` (`CLAUDE_CONFIG_DIR`); always on in the sandbox')
}
