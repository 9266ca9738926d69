package dir

// IsReadOnly reports whether no write through d can ever succeed: d was made with
// ReadOnly (or derives from a Dir that was), or its backend is read-only. It does
// not consider the host's write lock (Control.SetWritable), which can be lifted,
// nor revocation. It touches no storage and is not audited. Servers use it to
// offer a read-only grant no writing tools at all.
func (d *Dir) IsReadOnly() bool {
	return d.s.ro || d.s.b.Features().ReadOnly
}
