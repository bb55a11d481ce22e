/**
 * What a tenant may be called, for static tokens and JWT claims alike: a
 * tenant names folders (its workspace, its CLI config), so `.` and `..`,
 * which would point at a parent, are refused with anything beyond
 * [A-Za-z0-9._-] and 64 characters.
 */
const TENANT_NAME = /^(?!\.\.?$)[A-Za-z0-9._-]{1,64}$/

export function isTenantName (name: string): boolean {
  return TENANT_NAME.test(name)
}
