/**
 * Name resolution for connections a sandbox asked for: a `lookup` for
 * net.connect / http.request that drops the addresses no allowlisted *name*
 * may lead to (loopback, unspecified, link-local with the cloud metadata
 * address, AWS's IPv6 metadata address; IPv4-mapped forms too). Whoever
 * controls an allowed name's DNS could otherwise point it, or rebind it
 * between lookups, at the gateway's own ports or Redis. The address checked
 * is the one connected to. IP literals are never looked up, so an operator
 * who means loopback lists `127.0.0.1:…` (or `localhost`, which the proxy
 * does not pass here).
 */
import dns, { type LookupAddress, type LookupOptions } from 'node:dns'
import { BlockList, type LookupFunction } from 'node:net'

/** The code of the error a name gets when every address it has is one of those. */
export const ADDRESS_NOT_ALLOWED = 'EADDRNOTALLOWED'

const NEVER = new BlockList()
NEVER.addSubnet('0.0.0.0', 8, 'ipv4')
NEVER.addSubnet('127.0.0.0', 8, 'ipv4')
NEVER.addSubnet('169.254.0.0', 16, 'ipv4')
NEVER.addAddress('::', 'ipv6')
NEVER.addAddress('::1', 'ipv6')
NEVER.addSubnet('fe80::', 10, 'ipv6')
NEVER.addAddress('fd00:ec2::254', 'ipv6')

/** Whether a sandbox may never be connected to `address` through a name. */
export function neverThroughName (address: string, family: number): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped !== null) return NEVER.check(mapped[1] as string, 'ipv4')
  return NEVER.check(address, family === 6 ? 'ipv6' : 'ipv4')
}

type AllCallback = (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void
type OneCallback = (err: NodeJS.ErrnoException | null, address: string, family: number) => void

export const guardedLookup: LookupFunction = (hostname: string, options: LookupOptions, callback: OneCallback | AllCallback) => {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    const usable = err === null ? addresses.filter((a) => !neverThroughName(a.address, a.family)) : []
    const failure = err ?? (usable.length > 0
      ? null
      : Object.assign(new Error(`${hostname} resolves only to addresses a sandbox may not reach`), { code: ADDRESS_NOT_ALLOWED }))
    if (options.all === true) (callback as AllCallback)(failure, failure === null ? usable : [])
    else (callback as OneCallback)(failure, usable[0]?.address ?? '', usable[0]?.family ?? 0)
  })
}
