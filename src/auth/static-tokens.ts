/**
 * Bearer tokens from GATEWAY_TOKENS (token → tenant). Every configured token
 * is compared in constant time, so neither a match nor its position leaks
 * through timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto'

export interface Authenticator {
  /** The tenant a token belongs to, or null. */
  authenticate: (token: string) => Promise<string | null>
  /**
   * Changes whenever the credentials behind it are replaced (LiveCredentials):
   * read before authenticating a connection, it tells whether a reload came
   * before the connection was listed. Absent: they never change.
   */
  readonly generation?: number
}

export class StaticTokens implements Authenticator {
  readonly #entries: Array<{ digest: Buffer, tenant: string }>

  constructor (tokens: Map<string, string>) {
    this.#entries = [...tokens].map(([token, tenant]) => ({ digest: digest(token), tenant }))
  }

  async authenticate (token: string): Promise<string | null> {
    const candidate = digest(token)
    let tenant: string | null = null
    for (const entry of this.#entries) {
      // No early exit: every entry is compared whatever matched.
      if (timingSafeEqual(entry.digest, candidate)) tenant = entry.tenant
    }
    return tenant
  }
}

function digest (token: string): Buffer {
  return createHash('sha256').update(token).digest()
}

/** The token of an `Authorization: Bearer <token>` header, or null. */
export function bearerToken (header: string | undefined): string | null {
  if (header === undefined) return null
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
  return match === null ? null : (match[1] as string)
}
