/**
 * claude-remote's own settings, from the environment: where the gateway is
 * and the token to use. Everything else in the environment (the Agent SDK's
 * CLAUDE_CODE_ENTRYPOINT and friends) belongs to the CLI the gateway runs,
 * which gets its environment from the gateway, so it is not read here.
 */
import { UsageError } from './argv.js'
import { RemoteToken, readTokenFile, tokenProblem } from './remote-token.js'

export interface RemoteEnv {
  /** Base URL of the gateway, without a trailing slash. */
  httpUrl: string
  /** The same, ws:// or wss://. */
  wsUrl: string
  token: RemoteToken
}

export function readRemoteEnv (env: NodeJS.ProcessEnv): RemoteEnv {
  const raw = env.CLAUDE_REMOTE_URL
  if (raw === undefined || raw === '') throw new UsageError('CLAUDE_REMOTE_URL is not set (the gateway\'s http(s)://host:port)')
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new UsageError(`CLAUDE_REMOTE_URL ${JSON.stringify(raw)} is not a URL`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError('CLAUDE_REMOTE_URL must start with http:// or https://')
  if (url.username !== '' || url.password !== '') throw new UsageError('CLAUDE_REMOTE_URL must not carry credentials: use CLAUDE_REMOTE_TOKEN')
  const base = `${url.origin}${url.pathname.replace(/\/+$/, '')}`
  const token = readToken(env)
  return { httpUrl: base, wsUrl: base.replace(/^http/, 'ws'), token }
}

function readToken (env: NodeJS.ProcessEnv): RemoteToken {
  const direct = env.CLAUDE_REMOTE_TOKEN
  const file = env.CLAUDE_REMOTE_TOKEN_FILE
  if (direct !== undefined && direct !== '' && file !== undefined && file !== '') {
    throw new UsageError('set CLAUDE_REMOTE_TOKEN or CLAUDE_REMOTE_TOKEN_FILE, not both')
  }
  let token = direct
  if (file !== undefined && file !== '') {
    try {
      token = readTokenFile(file)
    } catch (err) {
      throw new UsageError(`CLAUDE_REMOTE_TOKEN_FILE ${JSON.stringify(file)} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
    }
  }
  if (token === undefined || token === '') throw new UsageError('CLAUDE_REMOTE_TOKEN (or CLAUDE_REMOTE_TOKEN_FILE) is not set')
  const problem = tokenProblem(token)
  if (problem !== null) throw new UsageError(problem)
  return new RemoteToken(token, file !== undefined && file !== '' ? file : null)
}
