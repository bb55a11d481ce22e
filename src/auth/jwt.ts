/**
 * JWT bearer tokens, verified with `jose` (HS256 with JWT_SECRET, or an
 * asymmetric algorithm with the PEM public key in JWT_PUBLIC_KEY). The tenant
 * comes from a configurable claim. `jose` rather than hand-written code:
 * signature, algorithm pinning and time-claim checks are easy to get wrong.
 */
import { type CryptoKey, type JWTVerifyOptions, decodeJwt, importSPKI, jwtVerify } from 'jose'
import type { Authenticator } from './static-tokens.js'
import { isTenantName } from './tenant-name.js'

export interface JwtOptions {
  secret?: string | undefined
  publicKey?: string | undefined
  tenantClaim: string
  issuer?: string | undefined
  audience?: string | undefined
  /** JWT_MAX_TTL_SECONDS: the longest lifetime accepted (exp − iat, or exp − now without iat). */
  maxTtlSeconds?: number | undefined
  /**
   * How far ahead of this clock an issuer's may run (default 0): its `nbf`
   * is its own now, so without it a token used at once is refused until
   * this clock catches up. `exp` gets no such grace (checked to the second).
   */
  clockToleranceSeconds?: number | undefined
}

const ASYMMETRIC = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA']

export class JwtAuthenticator implements Authenticator {
  readonly #o: JwtOptions
  readonly #keys: Promise<Array<{ key: CryptoKey | Uint8Array, algorithms: string[] }>>

  constructor (options: JwtOptions) {
    this.#o = options
    this.#keys = (async () => {
      const keys: Array<{ key: CryptoKey | Uint8Array, algorithms: string[] }> = []
      if (options.secret !== undefined) keys.push({ key: new TextEncoder().encode(options.secret), algorithms: ['HS256', 'HS384', 'HS512'] })
      if (options.publicKey !== undefined) {
        let imported = 0
        for (const alg of ASYMMETRIC) {
          // The PEM fits some algorithms only; keep those it imports under.
          const key = await importSPKI(options.publicKey, alg).catch(() => null)
          if (key !== null) { keys.push({ key, algorithms: [alg] }); imported++ }
        }
        if (imported === 0) throw new Error('JWT_PUBLIC_KEY is not a usable SPKI PEM public key')
      }
      return keys
    })()
  }

  async authenticate (token: string): Promise<string | null> {
    if (token.split('.').length !== 3) return null
    const verify: JWTVerifyOptions = { issuer: this.#o.issuer, audience: this.#o.audience, requiredClaims: ['exp'], clockTolerance: this.#o.clockToleranceSeconds ?? 0 }
    for (const { key, algorithms } of await this.#keys) {
      try {
        const { payload } = await jwtVerify(token, key, { ...verify, algorithms })
        const exp = payload.exp as number
        if (exp <= Math.floor(Date.now() / 1000)) return null // the tolerance is for nbf only
        if (!this.#lifetimeOk(exp, payload.iat)) return null
        const tenant = payload[this.#o.tenantClaim]
        return typeof tenant === 'string' && isTenantName(tenant) ? tenant : null
      } catch {
        // wrong key or invalid token: try the next key
      }
    }
    return null
  }

  /**
   * A leaked token is good until it expires, so issuers must not mint long
   * ones. Measured from iat, or from now when iat is missing or in the future
   * (a future iat would make a long token look short).
   */
  #lifetimeOk (exp: number, iat: number | undefined): boolean {
    const max = this.#o.maxTtlSeconds
    if (max === undefined) return true
    const now = Math.floor(Date.now() / 1000)
    const from = iat === undefined ? now : Math.min(iat, now)
    return exp - from <= max
  }
}

/** Tries each authenticator in turn. */
export class AnyOf implements Authenticator {
  readonly #all: Authenticator[]
  constructor (all: Authenticator[]) { this.#all = all }
  async authenticate (token: string): Promise<string | null> {
    for (const a of this.#all) {
      const tenant = await a.authenticate(token)
      if (tenant !== null) return tenant
    }
    return null
  }
}

/**
 * When a JWT expires (its `exp`, in ms since the epoch), read without
 * checking it: for a credential the authenticator has just taken. Null for
 * anything that is not a JWT with a numeric `exp` (a static token).
 */
export function jwtExpiresAt (token: string): number | null {
  if (token.split('.').length !== 3) return null
  try {
    const { exp } = decodeJwt(token)
    return typeof exp === 'number' && Number.isFinite(exp) ? exp * 1000 : null
  } catch {
    return null
  }
}
