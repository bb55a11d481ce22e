/**
 * TENANT_MEMORY_MAX_MB, TENANT_PIDS_MAX, TENANT_CPUS: one cgroup per tenant
 * on this node, `<parent>/cgw-<gateway pid>-tenant-<tenant>`, holding the
 * cgroups of all that tenant's CLIs, so the limits hold for them together.
 * Per-CLI limits alone let a tenant with MAX_SESSIONS_PER_TENANT CLIs take
 * that many times each limit; with these, one tenant's sessions meet their
 * own ceiling before they crowd out another tenant's.
 *
 * A tenant's cgroup is made when its first CLI starts and removed when its
 * last CLI's cgroup is gone: the counts are kept in this process only (it
 * alone makes cgroups named after its pid), and a leftover of a gateway that
 * is gone is removed by the next start's sweep (cli-cgroup.ts).
 */
import { join } from 'node:path'
import type { CgroupLimits, CgroupParents, Controller } from './cgroup-parents.js'
import { CliCgroup } from './cli-cgroup.js'

interface Tenant {
  group: CliCgroup
  /** Where its CLIs' cgroups go. */
  parents: CgroupParents
  /** Its CLIs whose cgroups exist (made and not yet removed). */
  clis: number
}

export interface TenantCgroupsOptions {
  /** Where the tenants' cgroups go (the prepared parent: CLI_CGROUP, else the gateway's own). */
  parents: CgroupParents
  /** What each tenant's CLIs may use together. */
  limits: CgroupLimits
  /** Controllers its CLIs' cgroups need (v2 enables them below each tenant's). */
  handDown: Controller[]
}

export class TenantCgroups {
  readonly #o: TenantCgroupsOptions
  readonly #tenants = new Map<string, Tenant>()

  constructor (options: TenantCgroupsOptions) {
    this.#o = options
  }

  /**
   * The parent for one more CLI cgroup of `tenant`: the tenant's cgroup,
   * made now when it has none. Each call is matched by one `release` once
   * that CLI's cgroup is removed. Throws when the kernel refuses.
   */
  acquire (tenant: string): CgroupParents {
    let entry = this.#tenants.get(tenant)
    if (entry === undefined) {
      // The gateway's pid first, as a CLI's cgroup: the sweep tells leftovers by it.
      const name = `cgw-${process.pid}-tenant-${tenant}`
      const group = CliCgroup.create(this.#o.parents, name, this.#o.limits, this.#o.handDown)
      const parents: CgroupParents = { version: this.#o.parents.version, dirs: new Map([...this.#o.parents.dirs].map(([c, dir]) => [c, join(dir, name)])) }
      entry = { group, parents, clis: 0 }
      this.#tenants.set(tenant, entry)
    }
    entry.clis++
    return entry.parents
  }

  /**
   * One CLI cgroup of `tenant` is gone. After its last, the tenant's cgroup
   * is removed; false when that could not be done (a CLI cgroup below it
   * could not be removed): it then stays, and serves the tenant's next CLI.
   */
  release (tenant: string): boolean {
    const entry = this.#tenants.get(tenant)
    if (entry === undefined || --entry.clis > 0) return true
    if (!entry.group.tryRemove()) return false
    this.#tenants.delete(tenant)
    return true
  }

  /** The tenant's cgroup folders while it has one (for logs and tests). */
  folders (tenant: string): string[] {
    return this.#tenants.get(tenant)?.group.folders ?? []
  }
}
