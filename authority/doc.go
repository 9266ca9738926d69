// Package authority is the host's Filesystem Authority: a registry of named
// roots and the grants made over them.
//
// It is the one place direct file access (a grant's Dir) and process execution
// (Run: a sandbox on the subject's grants) get their authority from.
// A host registers its roots once ([Authority.Register]). A subject is an agent
// run, an extension or an automation. When one needs files, the host grants it
// a Dir over one root, or a directory within it ([Authority.Grant]). The grant
// has an access list, a reason, a source and optionally an expiry, and the
// authority keeps its record. Records can be listed ([Authority.Grants],
// [Authority.ListAll], [Authority.SubjectGrants], [Authority.Lookup]). They can be
// serialized to JSON for sandbox wrappers, which bind roots read-only or
// read-write from them. They can be revoked ([Authority.Revoke],
// [Authority.RevokeSubject], [Authority.Unregister]).
//
//	a := authority.New(authority.WithAudit(trail), authority.WithPolicy(hostRules))
//	_ = a.Register("workspace:conv1", physicalBackend)
//	ws, g, err := a.Grant(ctx, authority.GrantRequest{
//		Subject: authority.Subject{Kind: authority.KindAgentRun, ID: "conv1/run7"},
//		Root:    "workspace:conv1",
//		Access:  []authority.Access{authority.List, authority.Metadata, authority.Read, authority.Write},
//		Reason:  "apply model edit",
//		Source:  authority.SourceConversation,
//		TTL:     time.Hour,
//	})
//	// hand ws to the agent; a.Revoke(g.ID) when the run ends
//
// # Root kinds
//
// [Authority.RegisterRoot] registers a root of a kind: workspace,
// extension-storage, artifact, temp, knowledge, downloads or secret. Grants over
// it then follow the kind's [KindSpec], documented on each kind constant and
// listed by [DefaultKindSpecs]:
//
//	kind               owner                  who may be granted it     default access           never    listed  sandbox  cleanup
//	workspace          workspace runtime      anyone                    list metadata read       -        yes     yes      host
//	extension-storage  extension host         its extension (and core)  all but archive, watch   -        yes     yes      host
//	artifact           artifacts / export     anyone                    list metadata read arch. -        yes     yes      host
//	temp               CreateTempWorkspace    its owner                 all                      -        yes     yes      authority
//	knowledge          knowledge extension    core, automation, agent   explicit list only       -        yes     yes      host
//	                                          run, extension; sources
//	                                          user-approval, manifest,
//	                                          core
//	downloads          browser/import flows   anyone                    list metadata read arch. -        yes     yes      host
//	secret             secrets surfaces       sources user-approval     explicit list only       list     no      no       host
//	                                          and core                                           watch
//	                                                                                             archive
//
// "Listed" is [Authority.ListRoots]: a secret root is granted by name only,
// never discovered. "Sandbox" is whether Run and [Authority.GrantSetFor] may
// bind it; a secret root never is. Roots registered with Register have no kind
// and no kind rule.
//
// # Persistence
//
// [Open] keeps the grant records in a JSON file, rewritten atomically at every
// change before the call returns. After a restart, revoked and expired grants
// stay ended. Active grants whose expiry passed meanwhile are recorded as
// expired. An active grant gets its Dir back with [Authority.Restore] once its
// root is registered again. It keeps its id, so its audit trail continues.
//
// # Temporary workspaces
//
// [Authority.CreateTempWorkspace] makes a private scratch root: memory or a
// SQLite file, each with a quota, or a 0700 host directory. It grants the root
// to its owner and returns a [TempWorkspace] whose Close removes it. [ReapTemp]
// removes the host directories a crashed owner left. A flock held for the
// workspace's life tells live from dead.
//
// # Sandboxes on grants
//
// Run runs a command in the sandbox (materialize/sandbox, bubblewrap by
// default) with exactly the subject's grants. Run, its types and the sandbox
// are Linux-only: other systems build the rest of the package without them. Read grants are checked out
// through their Dir and bound read-only. Writable grants are bound read-write
// and synced back through their Dir after the command exits. The sync-back runs
// under the grant's id, with audit.Event.Tag naming the run and its wrappers. A
// grant revoked or expired during the run refuses its sync-back.
// [Authority.GrantSetFor] and [ParseGrantSet] serialize a subject's grants for an
// external wrapper.
//
// # What a grant guarantees
//
//   - Confinement: the Dir is a pinned Sub of the directory the grant's Path
//     leads to within the root. The guest cannot name anything outside it (".."
//     and symlinks stop at it), as for any dir.Dir.
//   - A grant is decided where it leads. Path is resolved to its canonical place,
//     through any symlink (such as one committed in a cloned project). It is
//     decided there by the host-wide policy and hooks ([WithGitGuard]) when it is
//     granted. Every later decision and audit event names canonical paths beneath
//     it ([Grant].Resolved). A symlink put at Path later does not move the grant.
//     Restore refuses a Path that now leads elsewhere.
//   - The access list is enforced on every call, including the paths composite
//     calls touch inside. RemoveAll needs Delete for every path; Copy needs Read
//     on its source. Each policy operation needs one [Access] (see [Required]). A
//     grant without Write, Delete or Move gives a read-only Dir.
//   - The host-wide policy ([WithPolicy]) is consulted after the grant's own
//     checks, and can only refuse more.
//   - Expiry is exact at every call, without timers: each decision compares the
//     authority's clock with the grant's expiry. The first call that finds the
//     grant expired is refused (fs_permission_denied, rule "grant:<id>:expired").
//     It also revokes the grant, so every later call, and Handles opened before,
//     fail with revoked. With the default clock a timer also revokes the grant at
//     its expiry. With [WithClock], [Authority.Sweep] (or any listing) does.
//   - Revoke and RevokeSubject are immediate for every call that starts after
//     they return (the dir.Control's revocation). Errors are revoked.
//   - Every call through a grant's Dir leaves one audit.Event in the authority's
//     sink. It holds the subject ("kind:id") and the grant's id (Event.Grant). A
//     refusal by the grant names its rule ("grant:<id>:access" or
//     "grant:<id>:expired").
//   - Records hold root names, never host paths.
//
// # What it does not do
//
//   - It does not authenticate subjects: the host asserts who a subject is.
//   - Without Open, records live in memory for the Authority's life
//     ([Authority.Prune] forgets ended ones). Roots are never persisted: the host
//     registers them at each start.
//   - Archive and Watch are purposes, not operations. They are required on top
//     of the per-call access for the calls archive.ExtractDirFile, CreateFromDir
//     and Dir.Watch make (dir.Purpose). So a grant with Write but not Archive can
//     still write the same files one by one.
//   - A [TempPhysical] workspace's quota is an account the workspace keeps of what
//     passes through it. A process writing its host directory directly (not
//     through the Dir) is not charged, and directories are not charged.
//   - The access list is checked per policy operation, and an Open is one
//     operation. A Handle opened for writing (os.O_RDWR, which needs Write) can
//     also read the file. Append or Open for writing need only Write. A grant
//     with Write but not Read can therefore read back files it may write.
//   - The grant confines by directory (Path), not by pattern. Patterns are the
//     host-wide policy's, decided on the paths as written and where they lead,
//     as in package dir.
//   - It does not merge or deduplicate grants. Two grants to one subject are two
//     Dirs, each revocable on its own.
//   - Calls already running when a grant is revoked or expires may finish, as with
//     any dir.Control.
//
// Host-API errors wrap [fs.ErrInvalid] (a malformed request), [fs.ErrNotExist]
// (an unknown root or grant) or [fs.ErrExist] (a root registered twice). Errors
// resolving a grant's Path are [*vfs.Error] values. An [Authority] is safe for
// concurrent use.
package authority
