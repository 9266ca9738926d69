package fuseexport

import "github.com/capfs/capfs/backends/overlay"

// The copy-on-write layer moved to package [overlay]; these names keep
// callers building while they move to it.
type (
	// Overlay is [overlay.Overlay].
	Overlay = overlay.Overlay
	// Change is [overlay.Change].
	Change = overlay.Change
	// Base is [overlay.Base].
	Base = overlay.Base
)

// NewOverlay is [overlay.NewOverlay].
var NewOverlay = overlay.NewOverlay
