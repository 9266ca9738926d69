package dir

import "github.com/capfs/capfs/vfs"

// BackendWithVerbatimLinks is d.Backend() storing symlink targets verbatim, as the
// SPI does, so the whole conformance suite (whose seeds include escaping links)
// can run over the view.
func BackendWithVerbatimLinks(d *Dir) vfs.Backend {
	return &backendView{d: d, verbatimLinks: true}
}
