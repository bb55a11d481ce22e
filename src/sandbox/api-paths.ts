/**
 * SANDBOX_API_PATHS: which API paths a sandboxed CLI may call with the
 * credential its egress proxy holds. One operator key usually serves every
 * tenant, and the key opens all of its workspace: the Files API's uploads,
 * message batches, and whatever else the workspace holds. Passed on path by
 * path, any tenant's tool could list and read what another tenant's session
 * uploaded. The CLI itself needs only the Messages API (and token counting,
 * and the model list); HEAD requests (its reachability check) carry no body
 * either way and pass on any path.
 */

/** What the CLI calls on ANTHROPIC_BASE_URL (2.1.x): messages, token counting, the model list. */
export const DEFAULT_API_PATHS = ['/v1/messages', '/v1/messages/count_tokens', '/v1/models', '/v1/models/*']

/** One path segment a `*` stands for: no `%` (an encoded `/` or `..` could mean another path upstream), no dot segment. */
const SEGMENT = /^(?!\.\.?$)[A-Za-z0-9._:~-]+$/

/** A pattern is an absolute path whose segments are literal or `*`. */
const PATTERN = /^(\/([A-Za-z0-9._:~-]+|\*))+$/

/** The problem with `pattern` as a SANDBOX_API_PATHS entry, or null. */
export function apiPathProblem (pattern: string): string | null {
  return PATTERN.test(pattern) && !pattern.split('/').some((s) => s === '.' || s === '..')
    ? null
    : `${pattern}: expected a path such as /v1/messages, each segment literal or *`
}

/**
 * The path the request goes to, as the API would resolve it (dot segments,
 * `%2e%2e` included, resolved as WHATWG URLs do; the query kept), or null
 * when neither the method nor the path is allowed. `path` is the request
 * target relative to the API's base (origin form: `/v1/messages?beta=true`).
 */
export function allowedApiPath (method: string, path: string, patterns: readonly string[]): string | null {
  let url: URL
  try {
    url = new URL(path, 'http://api.invalid')
  } catch {
    return null
  }
  const resolved = url.pathname + url.search
  if (method === 'HEAD') return resolved
  const segments = url.pathname.replace(/\/+$/, '').split('/')
  const matches = patterns.some((pattern) => {
    const want = pattern.split('/')
    return want.length === segments.length && want.every((w, i) => w === '*' ? SEGMENT.test(segments[i] as string) : w === segments[i])
  })
  return matches ? resolved : null
}
