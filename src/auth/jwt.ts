/**
 * JWT bearer tokens, verified with `jose` (HS256 with JWT_SECRET, or an
 * asymmetric algorithm with the PEM public key in JWT_PUBLIC_KEY). The tenant
 * comes from a configurable claim. `jose` rather than hand-written code:
 * signature, algorithm pinning and time-claim checks are easy to get wrong.
 */
import { type CryptoKey, type JWTVerifyOptions, importSPKI, jwtVerify } from 'jose'
import type { Authenticator } from './static-tokens.js'

export interface JwtOptions {
  secret?: string | undefined
  publicKey?: string | undefined
  tenantClaim: string
  issuer?: string | undefined
  audience?: string | undefined
}

const ASYMMETRIC = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA']
/** A tenant names folders (workspace, CLI config): `.` and `..` would point at a parent, so they are refused. */
const TENANT = /^(?!\.\.?$)[A-Za-z0-9._-]{1,64}$/

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
    const verify: JWTVerifyOptions = { issuer: this.#o.issuer, audience: this.#o.audience, requiredClaims: ['exp'] }
    for (const { key, algorithms } of await this.#keys) {
      try {
        const { payload } = await jwtVerify(token, key, { ...verify, algorithms })
        const tenant = payload[this.#o.tenantClaim]
        return typeof tenant === 'string' && TENANT.test(tenant) ? tenant : null
      } catch {
        // wrong key or invalid token: try the next key
      }
    }
    return null
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
