/**
 * Settings of how each CLI is confined: the bubblewrap sandbox, its egress
 * and API credential policy, or an operator's launcher in its place. One
 * group of settings.ts's schema, kept apart to keep each file small.
 */
import { z } from 'zod'
import { DEFAULT_API_PATHS, apiPathProblem } from '../sandbox/api-paths.js'
import { parseDestinations } from '../sandbox/destinations.js'
import { defaulted, documented, optional } from './setting-docs.js'
import { commaList, flag, int } from './setting-rules.js'

/** Environment variable → rule, default and meaning. */
export const sandboxSettings = {
  SANDBOX: defaulted(z.enum(['bwrap', 'none']), 'bwrap',
    'how each CLI is confined when `CLAUDE_LAUNCHER` is unset: `bwrap` (bubblewrap + egress proxy; `bwrap` and `socat` checked at start) or `none`'),
  ALLOW_UNSANDBOXED: defaulted(flag(), 'false', 'lets `SANDBOX=none` start although the gateway serves several tenants (or JWTs) or `HOST` is not loopback'),
  SANDBOX_EGRESS: documented(z.string().optional().transform((v, ctx) => {
    if (v === undefined) return null
    try {
      return parseDestinations(v)
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `${(err as Error).message}; expected comma-separated host[:port]` })
      return null
    }
  }), {
    unset: 'host:port of `ANTHROPIC_BASE_URL`, else `api.anthropic.com:443`',
    about: '`host[:port]` list: the only destinations a sandboxed CLI reaches (through the proxy)'
  }),
  SANDBOX_CREDENTIALS: defaulted(z.enum(['proxy', 'env']), 'proxy',
    'where a sandboxed CLI\'s `ANTHROPIC_API_KEY` / `ANTHROPIC_AUTH_TOKEN` is: `proxy` (held by its egress proxy, which adds it to each API request; the CLI sees a placeholder) or `env` (in its environment, readable by its tools)'),
  SANDBOX_API_PATHS: defaulted(commaList().superRefine((items, ctx) => {
    for (const problem of items.map(apiPathProblem)) if (problem !== null) ctx.addIssue({ code: 'custom', message: problem })
  }), DEFAULT_API_PATHS.join(','),
  'API paths a sandboxed CLI may call with the credential its proxy holds (`*`: one segment); others get 403, so one tenant\'s tools cannot reach the key\'s Files or Batches (HEAD passes on any path)'),
  SANDBOX_EGRESS_CONNECTIONS_PER_TENANT: defaulted(int(1), 256,
    'connections a tenant\'s sandboxes may hold through their egress proxies at once, all its sessions together (each tunnel or request counts in and out); past it the proxy answers 503, so no tenant holds the descriptors the others need'),
  CLAUDE_LAUNCHER: optional(z.string().min(1), '(none)',
    'command wrapping each CLI instead of `SANDBOX`: `<launcher> <workspace> <config dir> -- <cli> <args…>`; it is then responsible for isolation')
}
