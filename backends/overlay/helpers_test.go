package overlay

import "context"

var bg = context.Background()
